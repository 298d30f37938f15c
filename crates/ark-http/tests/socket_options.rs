//! The socket options an HTTP server builder sets reach the sockets it serves (read back
//! from the kernel; Linux).
#![cfg(target_os = "linux")]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ark_http::{HttpServer, Keepalive, Router};
use ark_testkit::socket_options_of;

/// One request on a new connection (so the server has accepted it); the connection.
fn served(server: &ark_http::HttpServerHandle) -> TcpStream {
    let mut stream = TcpStream::connect(server.local_addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = [0u8; 12];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    stream
}

#[test]
fn server_settings_reach_the_sockets_it_serves() {
    let router = || {
        Router::new().get("/", |_, res| {
            res.body("ok");
        })
    };
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .nodelay(false)
        .keepalive(Some(Keepalive {
            idle: Duration::from_secs(45),
            interval: Duration::from_secs(9),
            probes: 3,
        }))
        .socket_buffers(Some(96 * 1024), Some(160 * 1024))
        .start(router())
        .unwrap();
    let client = served(&server);
    let seen = socket_options_of(server.local_addr(), client.local_addr().unwrap()).unwrap();
    assert!(!seen.nodelay, "{seen:?}");
    assert_eq!(seen.keepalive, Some((45, 9, 3)), "{seen:?}");
    assert!(
        seen.send_buffer >= 96 * 1024 && seen.recv_buffer >= 160 * 1024,
        "{seen:?}"
    );
    drop(client);
    server.stop().wait().unwrap();

    let plain = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router())
        .unwrap();
    let client = served(&plain);
    let seen = socket_options_of(plain.local_addr(), client.local_addr().unwrap()).unwrap();
    assert!(
        seen.nodelay && seen.keepalive.is_none(),
        "the defaults: {seen:?}"
    );
    drop(client);
    plain.stop().wait().unwrap();
}
