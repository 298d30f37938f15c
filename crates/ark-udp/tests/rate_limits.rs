//! Rate limits on real loopback sockets: a limited peer beside an unlimited one on one server
//! (the unlimited one unaffected), a client whose paused reading goes on without a new
//! readiness event, and a server's group limits changed at run time. Rates are bounded
//! loosely (at most limit × elapsed + burst); the counters are exact.

mod util;

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_udp::{
    RateLimit, RateLimitError, RateLimits, UdpClient, UdpHandler, UdpServer, UdpSession,
    UdpSessionHandle,
};
use util::Pinger;

const TIMEOUT: Duration = Duration::from_secs(20);

/// At most `limit × elapsed + burst` bytes.
fn at_most(bytes: u64, limit: RateLimit, elapsed: Duration) -> bool {
    bytes as f64 <= limit.bytes_per_second as f64 * elapsed.as_secs_f64() + limit.burst as f64
}

/// Echoes; the session of `limited` gets `limits` as it opens. Every session's handle is kept
/// for the test to read its stats.
struct LimitedEcho {
    limited: SocketAddr,
    limits: RateLimits,
    handles: Arc<Mutex<HashMap<SocketAddr, UdpSessionHandle>>>,
}

impl UdpHandler for LimitedEcho {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        if session.peer_addr() == self.limited {
            session.set_rate_limits(self.limits);
        }
        let handle = session.handle();
        self.handles
            .lock()
            .unwrap()
            .insert(session.peer_addr(), handle);
    }
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        let _ = session.send(datagram);
    }
}

#[test]
fn a_limited_peer_beside_an_unlimited_one_leaves_the_unlimited_one_unaffected() {
    let read = RateLimit::new(50_000).with_burst(5_000);
    let write = RateLimit::new(20_000).with_burst(5_000);
    let blaster = UdpSocket::bind("127.0.0.1:0").unwrap();
    blaster
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let handles = Arc::new(Mutex::new(HashMap::new()));
    let (limited, kept) = (blaster.local_addr().unwrap(), handles.clone());
    let limits = RateLimits {
        read: Some(read),
        write: Some(write),
    };
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .max_datagram(2048)
        .start(move |_| LimitedEcho {
            limited,
            limits,
            handles: kept.clone(),
        })
        .unwrap();
    let started = Instant::now();
    // The unlimited peer: 2,000 echoes of 1,000 bytes, 16 in flight, alongside.
    let (done, finished) = mpsc::channel();
    let client = UdpClient::builder()
        .max_datagram(2048)
        .connect(server.local_addr(), Pinger::new(2_000, 16, 1_000, done))
        .unwrap();
    // The limited peer: 500 datagrams of 1,000 bytes in about 0.5 s (1 MB/s, 20 × its read
    // limit; 5 at a time, so the server's receive buffer never fills and the unlimited
    // peer's datagrams are not lost), then its echoes are read.
    let (mut echoes, payload) = (0u64, [9u8; 1_000]);
    let mut buf = [0u8; 2048];
    for i in 0..500 {
        blaster.send_to(&payload, server.local_addr()).unwrap();
        if i % 5 == 4 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_eq!(finished.recv_timeout(TIMEOUT).unwrap(), 2_000);
    while blaster.recv(&mut buf).is_ok() {
        echoes += 1;
    }
    let elapsed = started.elapsed();
    let handle = |peer| handles.lock().unwrap()[&peer].clone();
    let stats = |peer| handle(peer).stats().wait().unwrap().unwrap();
    let (slow, fast) = (stats(limited), stats(client.local_addr()));
    // The limited peer: reads cut to its limit, the rest dropped and counted.
    assert!(
        at_most(slow.bytes_in, read, elapsed),
        "{slow:?} in {elapsed:?}"
    );
    assert!(slow.rate_dropped > 0, "{slow:?}");
    assert!(slow.datagrams_in + slow.rate_dropped <= 500);
    assert!(at_most(echoes * 1_000, write, elapsed), "{echoes} echoes");
    assert!(at_most(slow.bytes_out, write, elapsed), "{slow:?}");
    assert!(slow.rate_delayed > 0, "{slow:?}");
    assert_eq!(slow.rate_limits, limits);
    // The unlimited peer: every echo, nothing dropped or delayed.
    assert_eq!((fast.datagrams_in, fast.datagrams_out), (2_000, 2_000));
    assert_eq!((fast.rate_dropped, fast.rate_delayed), (0, 0));
    assert_eq!(fast.send_wait_bytes, 0);
    let totals = server.stats();
    assert_eq!(totals.rate_dropped, slow.rate_dropped);
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

/// Sends `count` datagrams of 1,000 bytes at once when a datagram arrives.
struct Burst(usize);

impl UdpHandler for Burst {
    fn on_message(&mut self, session: &mut UdpSession<'_>, _: &[u8]) {
        for _ in 0..self.0 {
            session.send(&[4u8; 1_000]).unwrap();
        }
    }
}

/// Asks for a burst, then counts what arrives.
struct Receiver(mpsc::Sender<Instant>);

impl UdpHandler for Receiver {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        session.send(b"go").unwrap();
    }
    fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {
        let _ = self.0.send(Instant::now());
    }
}

/// A client limited to 30,000 bytes a second (3,000 at once) asks for 30 datagrams of 1,000
/// bytes, which arrive at once: it delivers them over about 0.9 s. Only the timer that ends
/// each pause can go on: the datagrams are all there (in the socket, or with GRO in the
/// receive batch), so no readiness event comes.
fn paused_client_reads_again(gro: bool, batching: bool) {
    let count = 30;
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| Burst(count))
        .unwrap();
    let read = RateLimit::new(30_000).with_burst(3_000);
    let (arrived, arrivals) = mpsc::channel();
    let started = Instant::now();
    let client = UdpClient::builder()
        .offload(true, gro)
        .batching(batching, 8)
        .rate_limits(RateLimits {
            read: Some(read),
            write: None,
        })
        .connect(server.local_addr(), Receiver(arrived))
        .unwrap();
    let mut last = started;
    for i in 0..count {
        last = arrivals
            .recv_timeout(TIMEOUT)
            .unwrap_or_else(|e| panic!("gro {gro}: datagram {i} of {count}: {e}"));
    }
    let took = last - started;
    // 27,000 bytes past the burst at 30,000 a second: 0.9 s.
    let least = Duration::from_millis(850);
    assert!(took >= least, "gro {gro}: {count} datagrams in {took:?}");
    let stats = client.session().unwrap().stats().wait().unwrap().unwrap();
    assert_eq!((stats.datagrams_in, stats.bytes_in), (30, 30_000));
    assert!(stats.read_pauses >= 5, "gro {gro}: {stats:?}");
    assert_eq!(stats.rate_dropped, 0);
    assert!(ark_testkit::wait_until(TIMEOUT, || client
        .stats()
        .read_pauses
        == stats.read_pauses));
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_paused_client_reads_again_when_its_allowance_is_back_without_a_new_readiness_event() {
    for (gro, batching) in [(true, true), (false, true), (false, false)] {
        paused_client_reads_again(gro, batching);
    }
}

#[test]
fn a_servers_group_limits_change_at_run_time_where_it_has_them() {
    let group = RateLimits {
        read: Some(RateLimit::new(1_000_000)),
        write: None,
    };
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .group_rate_limits(group)
        .start(|_| util::Echo::default())
        .unwrap();
    assert_eq!(
        server.set_group_rate_limits(RateLimits::both(10_000)),
        Err(RateLimitError::NoGroupLimit { direction: "write" })
    );
    // Lowered to 2,000 bytes a second with 2,000 at once: of 10 datagrams of 1,000 bytes
    // sent at once, 2 get through.
    let lowered = RateLimit::new(2_000).with_burst(2_000);
    server
        .set_group_rate_limits(RateLimits {
            read: Some(lowered),
            write: None,
        })
        .unwrap();
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    for _ in 0..10 {
        peer.send_to(&[1u8; 1_000], server.local_addr()).unwrap();
    }
    let mut buf = [0u8; 2048];
    peer.recv(&mut buf).unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || {
        let s = server.stats();
        s.datagrams_in + s.rate_dropped == 10
    }));
    let stats = server.stats();
    let elapsed = started.elapsed();
    assert!(at_most(stats.bytes_in, lowered, elapsed), "{stats:?}");
    assert!(stats.datagrams_in >= 2, "{stats:?}");
    server.stop().wait().unwrap();
}
