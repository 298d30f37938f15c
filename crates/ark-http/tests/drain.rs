//! An HTTP server's drain (`HttpServerHandle::drain`): an idle kept-alive connection closes at
//! once, a request under way is finished and its answer says `connection: close`, an upgrade
//! asked for in the drain gets 503, nothing is cut. Clients are std sockets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;

use ark_http::{HttpServer, Router, StopReport};

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Everything until the server's end of stream.
fn rest(stream: &mut TcpStream) -> String {
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn a_drain_finishes_the_request_under_way_closes_the_idle_and_cuts_nothing() {
    let (asked, slow_asked) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let released = std::sync::Mutex::new(Some(released));
    let router = Router::new()
        .get("/fast", |_, res| {
            res.body("fast");
        })
        .get("/slow", move |_, res| {
            // Answered from another thread once the test says so.
            let responder = res.defer();
            let released = released.lock().unwrap().take().unwrap();
            std::thread::spawn(move || {
                released.recv_timeout(Duration::from_secs(10)).unwrap();
                responder.respond(|res| {
                    res.body("slow");
                });
            });
            asked.send(()).unwrap();
        });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let addr = server.local_addr();
    // Kept alive and idle after one answer.
    let mut idle = connect(addr);
    idle.write_all(b"GET /fast HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut first = [0; 512];
    let n = idle.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).ends_with("fast"));
    // A request whose answer the handler will give late: under way when the drain begins.
    let mut busy = connect(addr);
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    slow_asked.recv_timeout(Duration::from_secs(10)).unwrap();
    let draining = server.drain(Duration::from_secs(10));
    // The idle connection closes at once, with nothing more sent.
    assert_eq!(rest(&mut idle), "");
    drop(idle);
    release.send(()).unwrap();
    let answer = rest(&mut busy);
    // As a client does after an answer that closes (the server's close waits for our end).
    drop(busy);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("connection: close\r\n"), "{answer}");
    assert!(answer.ends_with("slow"), "{answer}");
    assert_eq!(draining.report().unwrap(), StopReport::default());
    assert!(TcpStream::connect(addr).is_err(), "connected after a drain");
}
