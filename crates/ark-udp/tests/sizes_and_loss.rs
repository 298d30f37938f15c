//! Sizes, truncation, empty datagrams and loss accounting.

mod util;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use ark_udp::{
    DatagramError, MAX_PAYLOAD_V4, NetCounters, SendError, UdpClient, UdpHandler, UdpServer,
    UdpSession,
};
use util::Echo;

const TIMEOUT: Duration = Duration::from_secs(20);

/// Tries sizes at the IPv4 limit on open and reports the results.
struct Sizes(mpsc::Sender<(Result<(), SendError>, Result<(), SendError>)>);

impl UdpHandler for Sizes {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        let at_limit = session.send(&vec![1u8; MAX_PAYLOAD_V4]);
        let over = session.send(&vec![1u8; MAX_PAYLOAD_V4 + 1]);
        let _ = self.0.send((at_limit, over));
    }
    fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {}
}

#[test]
fn an_oversized_send_is_a_typed_error_and_the_maximum_arrives_whole() {
    let echo = Echo::default();
    let e = echo.clone();
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| e.clone())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = UdpClient::builder()
        .connect(server.local_addr(), Sizes(tx))
        .unwrap();
    let (at_limit, over) = rx.recv_timeout(TIMEOUT).unwrap();
    assert_eq!(at_limit, Ok(()));
    assert_eq!(
        over,
        Err(SendError::TooLarge {
            len: MAX_PAYLOAD_V4 + 1,
            max: MAX_PAYLOAD_V4
        })
    );
    assert!(ark_testkit::wait_until(TIMEOUT, || server.stats().bytes_in == MAX_PAYLOAD_V4 as u64));
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn truncated_datagrams_are_counted_and_not_delivered_and_empty_ones_echo() {
    for batching in [true, false] {
        let echo = Echo::default();
        let e = echo.clone();
        let server = UdpServer::builder()
            .bind("127.0.0.1:0")
            .max_datagram(1500)
            .batching(batching, 16)
            .start(move |_| e.clone())
            .unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(TIMEOUT)).unwrap();
        // Empty datagram: a valid message, echoed (and it opens the session).
        peer.send_to(&[], server.local_addr()).unwrap();
        let mut buf = [0u8; 4096];
        assert_eq!(peer.recv(&mut buf).unwrap(), 0, "empty datagram echoed");
        // 2,000 bytes into 1,500-byte slots: truncated, reported, not delivered.
        peer.send_to(&[9u8; 2000], server.local_addr()).unwrap();
        peer.send_to(b"after", server.local_addr()).unwrap();
        assert_eq!(
            peer.recv(&mut buf).unwrap(),
            5,
            "the next datagram is served"
        );
        assert_eq!(&buf[..5], b"after");
        // Counters are published at the end of the turn that sent the echo.
        assert!(ark_testkit::wait_until(TIMEOUT, || server
            .stats()
            .datagrams_sent
            == 2));
        let stats = server.stats();
        assert_eq!(stats.truncated, 1, "batching={batching}");
        assert_eq!(
            stats.datagrams_in, 2,
            "only the empty and the 5-byte datagrams delivered"
        );
        assert_eq!(
            *echo.errors.lock().unwrap(),
            vec![DatagramError::Truncated { max: 1500 }]
        );
        server.stop().wait().unwrap();
    }
}

/// Counts datagrams slowly, so that a burst overflows a small receive buffer.
#[derive(Clone)]
struct SlowCount(Arc<AtomicU64>);

impl UdpHandler for SlowCount {
    fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {
        self.0.fetch_add(1, Ordering::SeqCst);
        let until = std::time::Instant::now() + Duration::from_micros(20);
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

#[test]
fn a_burst_beyond_the_receive_buffer_is_accounted_for() {
    const SENT: u64 = 5_000;
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .socket_buffers(None, Some(4096))
        .start(move |_| SlowCount(c.clone()))
        .unwrap();
    let Some(before) = NetCounters::snapshot() else {
        // Absent off Linux's IO path, by contract (`None`, never zeros).
        assert_eq!(ark_reactor::IO_PATH, "portable", "Linux has /proc/net/snmp");
        return;
    };
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    for i in 0..SENT {
        let mut datagram = [0u8; 256];
        datagram[..8].copy_from_slice(&i.to_be_bytes());
        peer.send_to(&datagram, server.local_addr()).unwrap();
    }
    // Wait until the server has drained what it kept.
    let mut last = u64::MAX;
    while last != count.load(Ordering::SeqCst) {
        last = count.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(200));
    }
    let loss = NetCounters::snapshot().unwrap().since(&before);
    let delivered = count.load(Ordering::SeqCst);
    eprintln!(
        "burst: sent {SENT}, delivered {delivered}, RcvbufErrors +{}, InErrors +{} (receive buffer {:?})",
        loss.udp_rcvbuf_errors,
        loss.udp_in_errors,
        server.socket_buffers()
    );
    assert!(
        loss.udp_rcvbuf_errors > 0,
        "the burst overflowed the receive buffer"
    );
    assert_eq!(
        delivered + loss.udp_rcvbuf_errors,
        SENT,
        "every datagram is delivered or counted lost"
    );
    server.stop().wait().unwrap();
}
