//! With the `tracing` feature at DEBUG, 100,000 garbage datagrams write a bounded log: the
//! drop event is rate-limited (`ark_reactor::log_limited!`: 10 a second), and the lines
//! written count those left out — every datagram is accounted for, none logged per datagram.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use ark_rudp::{RudpHandler, RudpServer, RudpSession};

struct Quiet;

impl RudpHandler for Quiet {
    fn on_message(&mut self, _: &mut RudpSession<'_>, _: &[u8]) {}
}

#[test]
fn a_garbage_flood_writes_a_bounded_log_that_counts_every_datagram() {
    let log = ark_testkit::CapturedLog::install(tracing::Level::DEBUG);
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Quiet)
        .unwrap();
    let flood = UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    // Kind 0x00: no packet kind, refused by the handshake's parser.
    for _ in 0..100_000 {
        let _ = flood.send_to(&[0u8; 29], server.local_addr());
    }
    // What the server received (the kernel may drop some of a burst), once it stops growing.
    let received = || server.udp_stats().datagrams_in;
    let mut last = u64::MAX;
    while received() != last {
        last = received();
        std::thread::sleep(Duration::from_millis(200));
    }
    let seconds = started.elapsed().as_secs() + 1;
    // One more in a later interval: its line counts what the flood's interval left out.
    std::thread::sleep(Duration::from_millis(1100));
    flood.send_to(&[0u8; 29], server.local_addr()).unwrap();
    assert!(ark_testkit::wait_until(
        Duration::from_secs(10),
        || received() == last + 1
    ));
    server.stop().wait().unwrap();
    let dropped = log.lines_of("rudp handshake datagram dropped");
    assert!(
        dropped.lines <= 10 * (seconds + 2),
        "{dropped:?} for {} datagrams",
        last + 1
    );
    assert_eq!(dropped.events(), last + 1);
    let bytes = log.text().len();
    assert!(bytes < 64 * 1024, "{bytes} bytes of log");
}
