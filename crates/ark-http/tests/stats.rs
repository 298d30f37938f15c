//! A server's HTTP counters: answers by status class, routed requests by method, the
//! server's own refusals, and the latency histogram (every routed answer in one bucket).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use ark_http::{HttpServer, Router};

fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn answers_methods_refusals_and_latency_are_counted() {
    let router = Router::new()
        .get("/ok", |_, res| {
            res.body("ok");
        })
        .post("/made", |_, res| {
            res.status(201);
        })
        .get("/later", |_, res| {
            let responder = res.defer();
            std::thread::spawn(move || {
                responder.respond(|res| {
                    res.status(503);
                })
            });
        });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let addr = server.local_addr();
    // Three pipelined requests on one connection, then a 404, a POST, a deferred 503 and a
    // refusal (both Content-Length and Transfer-Encoding: 400).
    let pipelined = exchange(
        addr,
        b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\nHEAD /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /missing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(pipelined.matches("HTTP/1.1 ").count(), 3, "{pipelined}");
    exchange(
        addr,
        b"POST /made HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    exchange(
        addr,
        b"GET /later HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    exchange(addr, b"POST /made HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || server
        .stats()
        .answers
        == 6));
    let stats = server.stats();
    assert_eq!(
        (
            stats.status_2xx,
            stats.status_4xx,
            stats.status_5xx,
            stats.status_1xx + stats.status_3xx
        ),
        (3, 2, 1, 0),
        "{stats:?}"
    );
    assert_eq!(
        (
            stats.method_get,
            stats.method_head,
            stats.method_post,
            stats.method_other
        ),
        (3, 1, 1, 0),
        "the refused request was never routed: {stats:?}"
    );
    assert_eq!((stats.refused, stats.upgrades), (1, 0));
    let buckets = stats.latency_under_100us
        + stats.latency_under_1ms
        + stats.latency_under_10ms
        + stats.latency_under_100ms
        + stats.latency_under_1s
        + stats.latency_over_1s;
    assert_eq!(
        buckets, 5,
        "every routed answer, deferred included: {stats:?}"
    );
    assert_eq!(server.tcp_stats().sessions_total, 4);
    server.stop().wait().unwrap();
}
