//! The socket options a TCP builder sets reach the sockets it serves and connects (read back
//! from the kernel; Linux).
#![cfg(target_os = "linux")]

use std::net::TcpStream;
use std::time::Duration;

use ark_tcp::{Keepalive, TcpClient, TcpHandler, TcpServer, TcpSession};
use ark_testkit::socket_options_of;

struct Quiet;

impl TcpHandler for Quiet {
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
}

const KEEPALIVE: Keepalive = Keepalive {
    idle: Duration::from_secs(30),
    interval: Duration::from_secs(5),
    probes: 6,
};

#[test]
fn server_and_client_settings_reach_their_sockets() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .nodelay(false)
        .keepalive(Some(KEEPALIVE))
        .socket_buffers(Some(96 * 1024), Some(160 * 1024))
        .start(|_| Quiet)
        .unwrap();
    let client = TcpStream::connect(server.local_addr()).unwrap();
    let mut seen = None;
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        seen = socket_options_of(server.local_addr(), client.local_addr().unwrap());
        seen.is_some()
    }));
    let seen = seen.unwrap();
    assert!(!seen.nodelay, "{seen:?}");
    assert_eq!(seen.keepalive, Some((30, 5, 6)), "{seen:?}");
    assert!(
        seen.send_buffer >= 96 * 1024 && seen.recv_buffer >= 160 * 1024,
        "{seen:?}"
    );

    let connected = TcpClient::builder()
        .keepalive(Some(KEEPALIVE))
        .socket_buffers(None, Some(150 * 1024))
        .connect(server.local_addr(), Quiet)
        .unwrap();
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || server
        .stats()
        .sessions_open
        == 2));
    let theirs: Vec<_> = server.sessions().iter().map(|s| s.peer_addr()).collect();
    let mine = theirs
        .into_iter()
        .find(|a| *a != client.local_addr().unwrap())
        .unwrap();
    let seen = socket_options_of(mine, server.local_addr()).unwrap();
    assert!(seen.nodelay, "the default: {seen:?}");
    assert_eq!(seen.keepalive, Some((30, 5, 6)), "{seen:?}");
    assert!(seen.recv_buffer >= 150 * 1024, "{seen:?}");
    drop(client);
    connected.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
