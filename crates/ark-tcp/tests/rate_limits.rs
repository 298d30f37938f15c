//! Rate limits of a session (`TcpConfig::rate_limits`, `TcpSession::set_rate_limits`, a
//! server's group limits): deterministic on the sans-IO core (`Simulator`, simulated time) —
//! bytes per simulated second within 2 % of the limit plus one burst, bursts bounded by the
//! bucket, reads paused without a busy loop —, and over sockets through ark-link's relay, a
//! limited session beside an unlimited one.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_frame::Raw;
use ark_tcp::{RateLimit, RateLimits, Simulator, TcpConfig, TcpHandler, TcpServer, TcpSession};

const RATE: u64 = 100_000;

/// Queues `total` raw bytes on open; counts what it receives.
#[derive(Default)]
struct Pump {
    total: usize,
    received: u64,
}

impl TcpHandler for Pump {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        if self.total > 0 {
            session.send_raw(&vec![7u8; self.total]).unwrap();
        }
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, message: &[u8]) {
        self.received += message.len() as u64;
    }
}

fn config(limits: RateLimits) -> TcpConfig {
    TcpConfig {
        rate_limits: limits,
        idle_timeout: None,
        write_stall_timeout: None,
        ..TcpConfig::default()
    }
}

fn within(moved: u64, limit: RateLimit, seconds: u64, what: &str) {
    let expected = limit.bytes_per_second * seconds + limit.burst;
    let off = (moved as f64 - expected as f64).abs() / expected as f64;
    assert!(
        off < 0.02,
        "{what}: {moved} bytes in {seconds} simulated s, expected {expected} (off {:.2} %)",
        off * 100.0
    );
}

#[test]
fn a_write_limit_sends_its_rate_per_simulated_second() {
    let limit = RateLimit::new(RATE);
    let limits = RateLimits {
        write: Some(limit),
        read: None,
    };
    let pump = Pump {
        total: 4 * 1024 * 1024,
        received: 0,
    };
    let mut sim = Simulator::new(pump, Raw::new(), config(limits));
    let mut sent = sim.peer_read().len() as u64;
    // The first instant: no more than the bucket's burst.
    assert_eq!(sent, limit.burst);
    for _ in 0..100 {
        sim.advance(Duration::from_millis(100));
        sent += sim.peer_read().len() as u64;
    }
    within(sent, limit, 10, "written");
}

#[test]
fn a_read_limit_reads_its_rate_per_simulated_second_and_pauses_between() {
    let limit = RateLimit::new(RATE);
    let limits = RateLimits {
        read: Some(limit),
        write: None,
    };
    let mut sim = Simulator::new(Pump::default(), Raw::new(), config(limits));
    sim.peer_send(&vec![1u8; 4 * 1024 * 1024]);
    assert_eq!(sim.handler().received, limit.burst);
    assert!(!sim.is_reading(), "paused on a spent budget");
    // Paused until tokens come back: a deadline, not a loop.
    let next = sim.next_deadline().expect("a deadline to read again");
    assert!(next > sim.now());
    for _ in 0..100 {
        sim.advance(Duration::from_millis(100));
    }
    within(sim.handler().received, limit, 10, "read");
}

#[test]
fn limits_set_from_a_handle_apply_from_the_next_turn() {
    let mut sim = Simulator::new(
        Pump {
            total: 4 * 1024 * 1024,
            received: 0,
        },
        Raw::new(),
        config(RateLimits {
            write: Some(RateLimit::new(RATE)),
            read: None,
        }),
    );
    sim.peer_read();
    let faster = RateLimit::new(4 * RATE);
    sim.handle().set_rate_limits(RateLimits {
        write: Some(faster),
        read: None,
    });
    sim.poll_handles();
    let mut sent = sim.peer_read().len() as u64;
    for _ in 0..50 {
        sim.advance(Duration::from_millis(100));
        sent += sim.peer_read().len() as u64;
    }
    // Five seconds at the new rate (the burst the old bucket had left was spent).
    let expected = faster.bytes_per_second * 5;
    let off = (sent as f64 - expected as f64).abs() / expected as f64;
    assert!(off < 0.02, "{sent} bytes, expected {expected}");
    let stats = sim.handle().stats();
    assert!(stats.bytes_out_per_second > 0);
    assert!(stats.queue_delay.is_some_and(|d| d > Duration::ZERO));
}

#[test]
fn limits_lifted_from_a_handle_let_everything_queued_go_at_the_next_turn() {
    let total = 1024 * 1024;
    let limits = RateLimits {
        write: Some(RateLimit::new(RATE)),
        read: Some(RateLimit::new(RATE)),
    };
    let mut sim = Simulator::new(Pump { total, received: 0 }, Raw::new(), config(limits));
    let mut sent = sim.peer_read().len();
    sim.advance(Duration::from_millis(100));
    sent += sim.peer_read().len();
    assert!(sent < total / 4, "limited: {sent} bytes");
    // The peer's bytes wait in the socket, unread beyond the budget.
    sim.peer_send(&vec![3u8; 256 * 1024]);
    assert!(
        sim.unconsumed() > 128 * 1024,
        "reading waits for the budget"
    );
    sim.handle().set_rate_limits(RateLimits::default());
    sim.poll_handles();
    sent += sim.peer_read().len();
    assert_eq!(sent, total, "everything queued went once lifted");
    assert_eq!(sim.unconsumed(), 0, "everything the peer sent was read");
    assert_eq!(sim.handler().received, 256 * 1024);
}

/// Echoes raw bytes; with `limits`, under them from its open.
struct Echo {
    received: Arc<AtomicU64>,
    limits: Option<RateLimits>,
}

impl TcpHandler for Echo {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        if let Some(limits) = self.limits {
            session.set_rate_limits(limits);
        }
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, bytes: &[u8]) {
        self.received
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let _ = session.send_raw(bytes);
    }
}

/// Writes as fast as the server takes them for `for_`, reading its echoes meanwhile; returns
/// the bytes echoed within that time.
fn blast(addr: std::net::SocketAddr, for_: Duration) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let stream = TcpStream::connect(addr).unwrap();
        let until = Instant::now() + for_;
        let mut reader = stream.try_clone().unwrap();
        reader
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let counting = std::thread::spawn(move || {
            let (mut buf, mut got) = (vec![0u8; 64 * 1024], 0u64);
            while Instant::now() < until {
                if let Ok(n) = reader.read(&mut buf) {
                    got += n as u64;
                }
            }
            got
        });
        let mut writer = stream;
        writer
            .set_write_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let chunk = vec![3u8; 16 * 1024];
        while Instant::now() < until {
            let _ = writer.write(&chunk);
        }
        counting.join().unwrap()
    })
}

#[test]
fn through_a_relay_a_limited_session_keeps_its_rate_beside_an_unlimited_one() {
    let limit = RateLimit::new(RATE);
    let limits = RateLimits {
        read: Some(limit),
        write: Some(limit),
    };
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    // The first session accepted is limited (both ways, from its open), the second is not.
    let accepted = AtomicU64::new(0);
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .framing(Raw::new())
        .start(move |_| Echo {
            received: r.clone(),
            limits: (accepted.fetch_add(1, Ordering::SeqCst) == 0).then_some(limits),
        })
        .unwrap();
    let link = ark_link::LinkConfig {
        delay: Duration::from_millis(2),
        ..ark_link::LinkConfig::default()
    };
    let relay = ark_link::TcpRelay::start(server.local_addr(), link.clone(), link).unwrap();
    let seconds = 2;
    let limited = blast(relay.local_addr(), Duration::from_secs(seconds));
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || server
        .sessions()
        .len()
        == 1));
    let unlimited = blast(relay.local_addr(), Duration::from_secs(seconds));
    let (limited, unlimited) = (limited.join().unwrap(), unlimited.join().unwrap());
    eprintln!("echoed in {seconds} s: limited {limited} bytes, unlimited {unlimited} bytes");
    // The session's two buckets hold it to the rate (and a burst) from its first byte; 20 ms
    // of the rate for the skew between the client's clock and the session's.
    let most = limit.bytes_per_second * seconds + limit.burst + limit.bytes_per_second / 50;
    assert!(
        limited <= most,
        "the limited session echoed {limited} bytes"
    );
    assert!(
        unlimited > 4 * most,
        "the unlimited one echoed {unlimited} bytes beside it"
    );
    relay.stop();
    server.stop().wait().unwrap();
}
