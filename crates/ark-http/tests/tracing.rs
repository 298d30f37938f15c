//! With the `tracing` feature and a subscriber: the events of a session's life (its span,
//! open, close with the reason), of a request the server refuses, and of a handler's panic
//! (logged with its message, only its session closed).

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
fn a_session_its_close_a_refusal_and_a_panic_are_traced() {
    let log = ark_testkit::CapturedLog::install(tracing::Level::INFO);

    let router = Router::new()
        .get("/ok", |_, res| {
            res.body("ok");
        })
        .get("/panic", |_, _| panic!("route bug 42"));
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let addr = server.local_addr();
    assert!(
        exchange(
            addr,
            b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .starts_with("HTTP/1.1 200")
    );
    let refused = exchange(
        addr,
        b"GET /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    let _ = exchange(addr, b"GET /panic HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        exchange(
            addr,
            b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .starts_with("HTTP/1.1 200"),
        "the others go on"
    );
    server.stop().wait().unwrap();

    let text = log.text();
    let lines: Vec<&str> = text.lines().collect();
    let count = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    // Every line of a session carries its span: `tcp_session{id=.. peer=127.0.0.1:.. side="server"}`.
    assert_eq!(count("tcp session opened"), 4, "{text}");
    assert!(
        lines
            .iter()
            .filter(|l| l.contains("tcp session opened"))
            .all(|l| l.contains("tcp_session{id=") && l.contains("peer=127.0.0.1:")),
        "{text}"
    );
    // The server closes each connection after its `connection: close` answer (or refusal).
    assert_eq!(count("reason=closed locally after flushing"), 3, "{text}");
    assert_eq!(count("http request refused"), 1, "{text}");
    assert!(text.contains("status=400"), "{text}");
    assert!(
        text.contains("a handler panicked") && text.contains("route bug 42"),
        "{text}"
    );
    let panicked = lines
        .iter()
        .find(|l| l.contains("reason=the handler panicked"));
    assert!(
        panicked.is_some_and(|l| l.contains("WARN") && l.contains("id=2")),
        "{text}"
    );
}
