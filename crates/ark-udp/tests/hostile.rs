//! Hostile UDP peers: a flood of new source addresses must not lock new peers out of a full
//! session table, nor evict a peer that keeps talking.

mod util;

use std::net::UdpSocket;
use std::time::Duration;

use ark_udp::{CloseReason, UdpServer};
use util::Echo;

fn peer() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    socket
}

/// Sends `payload` from `socket` and waits for its echo.
fn round_trip(socket: &UdpSocket, server: std::net::SocketAddr, payload: &[u8]) {
    socket.send_to(payload, server).unwrap();
    let mut buf = [0u8; 64];
    let (n, from) = socket.recv_from(&mut buf).expect("an echo");
    assert_eq!((&buf[..n], from), (payload, server));
}

#[test]
fn a_full_session_table_evicts_silent_sessions_instead_of_locking_out_new_peers() {
    const TABLE: usize = 16;
    let echo = Echo::default();
    let closes = echo.closes.clone();
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .max_sessions(TABLE)
        .session_expiry(None)
        .start(move |_| echo.clone())
        .unwrap();
    let addr = server.local_addr();
    let regular = peer();
    round_trip(&regular, addr, b"hello");
    // A flood of one-shot peers (spoofed addresses, in effect): 10 times the table.
    let mut flood = Vec::new();
    for i in 0..10 * TABLE {
        let one_shot = peer();
        round_trip(&one_shot, addr, b"flood");
        flood.push(one_shot);
        // The regular peer keeps talking: every 4 new addresses, one datagram.
        if i % 4 == 0 {
            round_trip(&regular, addr, b"still here");
        }
    }
    // A brand-new peer is served, not turned away.
    let newcomer = peer();
    round_trip(&newcomer, addr, b"new");
    let stats = server.stats();
    assert_eq!(stats.sessions_rejected, 0);
    assert_eq!(stats.sessions_opened, 1 + 10 * TABLE as u64 + 1);
    assert_eq!(stats.sessions_evicted, stats.sessions_opened - TABLE as u64);
    // The regular peer's session was never evicted: had it been, its next datagram would
    // have opened another, and the count of opened sessions above would be higher.
    // Evictions are reported to the evicted sessions' handlers.
    let evicted = closes
        .lock()
        .unwrap()
        .iter()
        .filter(|c| **c == CloseReason::Evicted)
        .count();
    assert_eq!(evicted as u64, stats.sessions_evicted);
    server.stop().wait().unwrap();
}
