//! Zero allocations per request on the server for a small GET answered from a static route,
//! counted by a global allocator across every thread. Its own test binary, with one test.

use std::io::{Read, Write};
use std::net::TcpStream;

use ark_http::{HttpServer, Router};

#[global_allocator]
static GLOBAL: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;

const WARMUP: usize = 500;
const MEASURED: usize = 5_000;

/// One keep-alive GET and its whole answer, read into `buf` (nothing allocated).
fn get(stream: &mut TcpStream, buf: &mut [u8]) -> bool {
    stream
        .write_all(b"GET /hello HTTP/1.1\r\nHost: bench\r\n\r\n")
        .unwrap();
    let mut got = 0;
    while !buf[..got].ends_with(b"\r\n\r\nhello, world") {
        match stream.read(&mut buf[got..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got += n,
        }
    }
    buf[..got].starts_with(b"HTTP/1.1 200 OK\r\n")
}

#[test]
fn a_small_get_from_a_static_route_allocates_nothing_on_the_server() {
    let router = Router::new().get("/hello", |_, res| {
        res.header("content-type", "text/plain")
            .body("hello, world");
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let mut stream = TcpStream::connect(server.local_addr()).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut buf = vec![0u8; 4096];
    for _ in 0..WARMUP {
        assert!(get(&mut stream, &mut buf));
    }
    let before = ark_testkit::allocations();
    for _ in 0..MEASURED {
        assert!(get(&mut stream, &mut buf));
    }
    let allocations = ark_testkit::allocations() - before;
    assert_eq!(
        allocations, 0,
        "{allocations} allocations for {MEASURED} GET requests"
    );
    drop(stream);
    server.stop().wait().unwrap();
}
