//! Rate limits. Deterministic, on the sans-IO pair (a client and a server `Connection` over
//! simulated links on a fake clock): a write-limited sender moves its limit, and a
//! read-limited receiver holds its sender to its limit through the window, within 2 % each
//! simulated second; bursts are bounded by the bucket; a group's bucket is shared by two
//! sessions of one server; a slow (rate-limited) reader is not taken for a zero-window peer.
//! On real sockets: a limited session beside an unlimited one on one server.

mod util;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use ark_rudp::{
    ClientProtection, Delivery, Event, Fec, RateGroup, RateLimit, RateLimitError, RateLimits,
    RudpClient, RudpConfig, RudpHandler, RudpServer, RudpSession, RudpSessionHandle, RudpStats,
    ServerProtection,
};
use util::{Flow, Side, Sim, link};

/// Simulated seconds measured.
const SECONDS: u64 = 10;

fn config(limits: RateLimits) -> RudpConfig {
    let mut config = util::sim_config(Fec::Off);
    config.rate_limits = limits;
    config
}

fn writes(limit: RateLimit) -> RateLimits {
    RateLimits {
        write: Some(limit),
        read: None,
    }
}

fn reads(limit: RateLimit) -> RateLimits {
    RateLimits {
        read: Some(limit),
        write: None,
    }
}

/// A pair with `configs` (client, server) over a clean 10 ms link each way, its clock
/// starting at `start`, connected. Plaintext: the per-second figures below were set with
/// 1,233-byte datagrams; an encrypted session (1,241 bytes) is checked over the whole span
/// (`an_encrypted_read_limited_receiver_...`): a read limit grants its window in whole
/// datagrams, and which second a datagram falls in moves a second's count by up to 2.4 %.
fn pair_at(start: Instant, configs: (RudpConfig, RudpConfig), seed: u64) -> Sim {
    pair_protected(start, configs, seed, false)
}

fn pair_protected(
    start: Instant,
    configs: (RudpConfig, RudpConfig),
    seed: u64,
    encrypted: bool,
) -> Sim {
    let delay = Duration::from_millis(10);
    let links = (link(seed, delay), link(seed + 1, delay));
    let nonce = 0x5A7E_0000 ^ seed;
    let mut sim = if encrypted {
        Sim::new_at(start, configs, nonce, links)
    } else {
        let plain = (ClientProtection::Plaintext, ServerProtection::Plaintext);
        Sim::protected(start, configs, nonce, links, plain)
    };
    sim.run(Duration::from_secs(5), 10_000, |sim| {
        sim.client_events.contains(&Event::Connected) && sim.server.is_some()
    });
    sim
}

fn pair(configs: (RudpConfig, RudpConfig), seed: u64) -> Sim {
    pair_at(Instant::now(), configs, seed)
}

/// A byte counter read at the first turn at or past each whole simulated second from `t0`
/// (with the time it was read at).
struct Seconds {
    t0: Instant,
    samples: Vec<(Duration, u64)>,
}

impl Seconds {
    fn new(t0: Instant, bytes: u64) -> Seconds {
        Seconds {
            t0,
            samples: vec![(Duration::ZERO, bytes)],
        }
    }

    fn see(&mut self, now: Instant, bytes: u64) {
        let next = Duration::from_secs(self.samples.len() as u64);
        if now >= self.t0 + next {
            self.samples.push((now - self.t0, bytes));
        }
    }

    fn done(&self, seconds: u64) -> bool {
        self.samples.len() as u64 > seconds
    }

    /// Checks each second against `rate` × its length (the first plus `burst`: the bucket
    /// full at the start), and the whole span against rate × time + burst, within 2 %.
    /// Returns the worst deviation.
    fn check(&self, label: &str, rate: u64, burst: u64) -> f64 {
        let mut worst: f64 = 0.0;
        let mut line = String::new();
        for pair in self.samples.windows(2) {
            let ((t1, b1), (t2, b2)) = (pair[0], pair[1]);
            let extra = if t1.is_zero() { burst } else { 0 };
            let want = rate as f64 * (t2 - t1).as_secs_f64() + extra as f64;
            let got = (b2 - b1) as f64;
            let off = (got - want) / want;
            worst = worst.max(off.abs());
            line += &format!(" {got:.0} ({:+.2} %)", off * 100.0);
            assert!(
                off.abs() < 0.02,
                "{label}: {got} bytes in {:?} from {t1:?}, want {want:.0}",
                t2 - t1
            );
        }
        let (t, b) = self.samples[self.samples.len() - 1];
        let total = (b - self.samples[0].1) as f64;
        let want = rate as f64 * t.as_secs_f64() + burst as f64;
        let off = (total - want) / want;
        eprintln!(
            "{label}: per second:{line}; in all {total:.0} in {t:?}, want {want:.0} ({:+.3} %)",
            off * 100.0
        );
        assert!(off.abs() < 0.02, "{label}: {total} bytes, want {want:.0}");
        worst
    }
}

/// Runs `sim` with `up` (the client's flow, always queued) until `seconds` has `count` whole
/// seconds of `bytes` (read at every turn).
fn measure(sim: &mut Sim, up: &mut Flow, count: u64, bytes: impl Fn(&Sim) -> u64) -> Seconds {
    let mut seconds = Seconds::new(sim.now, bytes(sim));
    sim.run(Duration::from_secs(600), 5_000_000, |sim| {
        up.pump(&mut sim.client);
        up.drain(sim.server());
        seconds.see(sim.now, bytes(sim));
        seconds.done(count)
    });
    seconds
}

#[test]
fn a_write_limited_sender_moves_its_limit_within_two_percent_each_second() {
    const RATE: u64 = 1_000_000;
    let limit = RateLimit::new(RATE);
    let mut sim = pair((config(writes(limit)), config(RateLimits::default())), 1);
    let mut up = Flow::new(Side::Client, usize::MAX);
    let sent = |sim: &Sim| sim.client.stats().bytes_sent;
    let seconds = measure(&mut sim, &mut up, SECONDS, sent);
    seconds.check("1 MB/s, written", RATE, limit.burst);
    let stats = sim.client.stats();
    let off = (stats.send_rate as f64 - RATE as f64) / RATE as f64;
    assert!(off.abs() < 0.02, "send_rate {}", stats.send_rate);
    assert!(
        up.full > 0,
        "the send buffer filled: `Full`, as without a limit"
    );
    // The queue: about the send buffer, unsent, over the rate.
    let delay = stats.send_queue_delay.expect("bytes leave");
    assert!(
        delay > Duration::from_millis(900) && delay < Duration::from_millis(1_100),
        "{delay:?}"
    );
    let received = sim.server().stats().bytes_received;
    assert!(stats.bytes_sent - received < 50_000, "a clean link");
    assert_eq!(stats.retransmissions, 0);
    eprintln!(
        "send_rate {} B/s, send_queue_delay {delay:?}, {} messages, {} refused Full",
        stats.send_rate, up.received, up.full
    );

    // Changed at run time: a quarter of it, from a bucket that keeps its tokens.
    let now = sim.now;
    let quarter = RateLimit::new(RATE / 4);
    sim.client.set_rate_limits(writes(quarter), now);
    let mut seconds = measure(&mut sim, &mut up, 4, sent);
    // The first second after the change is the settling one (tokens kept, up to the new
    // burst): measured from the second on.
    seconds.samples.remove(0);
    seconds.t0 += Duration::from_secs(1);
    let first = seconds.samples[0].0;
    for s in &mut seconds.samples {
        s.0 -= first;
    }
    seconds.check("250 kB/s after the change", RATE / 4, 0);
    assert_eq!(sim.spins, 0);
}

#[test]
fn a_read_limited_receiver_holds_its_sender_to_the_limit_through_the_window() {
    const RATE: u64 = 400_000;
    let limit = RateLimit::new(RATE);
    let mut sim = pair((config(RateLimits::default()), config(reads(limit))), 2);
    let mut up = Flow::new(Side::Client, usize::MAX);
    let received = |sim: &Sim| sim.server.as_ref().map_or(0, |s| s.stats().bytes_received);
    let seconds = measure(&mut sim, &mut up, SECONDS, received);
    seconds.check("400 kB/s, read", RATE, limit.burst);
    let (client, server) = sim.stats();
    // Nothing the sender sent was dropped: no repeat on a clean link, every message whole and
    // in order (checked as they came), the session open both ends.
    assert_eq!(client.retransmissions, 0, "{client:?}");
    assert_eq!(server.duplicates, 0);
    assert_eq!(sim.client_events, vec![Event::Connected]);
    assert_eq!(sim.server_events, vec![Event::Connected]);
    let off = (server.receive_rate as f64 - RATE as f64) / RATE as f64;
    assert!(off.abs() < 0.02, "receive_rate {}", server.receive_rate);
    let off = (client.send_rate as f64 - RATE as f64) / RATE as f64;
    assert!(
        off.abs() < 0.02,
        "the sender's send_rate {}",
        client.send_rate
    );
    eprintln!(
        "receive_rate {} B/s, the sender's send_rate {} B/s, {} messages, {} window updates and acks",
        server.receive_rate, client.send_rate, up.received, server.acks_sent
    );
    assert_eq!(sim.spins, 0);
}

#[test]
fn an_encrypted_read_limited_receiver_holds_its_sender_to_the_limit_over_ten_seconds() {
    const RATE: u64 = 400_000;
    let limit = RateLimit::new(RATE);
    let configs = (config(RateLimits::default()), config(reads(limit)));
    let mut sim = pair_protected(Instant::now(), configs, 2, true);
    assert!(sim.client.is_encrypted());
    let mut up = Flow::new(Side::Client, usize::MAX);
    let received = |sim: &Sim| sim.server.as_ref().map_or(0, |s| s.stats().bytes_received);
    let t0 = (sim.now, received(&sim));
    sim.run(Duration::from_secs(60), 5_000_000, |sim| {
        up.pump(&mut sim.client);
        up.drain(sim.server());
        sim.now >= t0.0 + Duration::from_secs(SECONDS)
    });
    let got = (received(&sim) - t0.1) as f64;
    let want = (RATE * SECONDS + limit.burst) as f64;
    assert!(
        ((got - want) / want).abs() < 0.02,
        "{got} bytes in {SECONDS} s, want {want}"
    );
    let (client, server) = sim.stats();
    assert_eq!((client.retransmissions, server.duplicates), (0, 0));
}

/// After an idle spell, bytes from `t0` never pass the burst plus the rate since: written ones
/// exactly; read ones by less than a datagram (the window is granted in fragments of the mean
/// size received: a larger one that comes on that credit is owed, and repaid). A written burst
/// goes at once.
#[test]
fn bursts_are_bounded_by_the_bucket() {
    const RATE: u64 = 200_000;
    const BURST: u64 = 50_000;
    let limit = RateLimit::new(RATE).with_burst(BURST);
    for write in [true, false] {
        // A congestion window that takes the whole burst at once.
        let plain = || {
            let mut c = config(RateLimits::default());
            c.initial_window = 256;
            c
        };
        let limited = |limits| {
            let mut c = plain();
            c.rate_limits = limits;
            c
        };
        let (client, server) = if write {
            (limited(writes(limit)), plain())
        } else {
            (plain(), limited(reads(limit)))
        };
        let mut sim = pair((client, server), 3);
        let counted = |sim: &Sim| {
            if write {
                sim.client.stats().bytes_sent
            } else {
                sim.server.as_ref().map_or(0, |s| s.stats().bytes_received)
            }
        };
        // Idle: the bucket fills (keep-alives spend a little).
        sim.run_for(Duration::from_secs(2), |_| {});
        let (t0, b0) = (sim.now, counted(&sim));
        let mut up = Flow::new(Side::Client, usize::MAX);
        let (mut worst, mut at_once) = (i64::MIN, 0);
        sim.run(Duration::from_secs(60), 1_000_000, |sim| {
            up.pump(&mut sim.client);
            up.drain(sim.server());
            let moved = counted(sim) - b0;
            let bound = BURST + RATE * (sim.now - t0).as_nanos() as u64 / 1_000_000_000;
            worst = worst.max(moved as i64 - bound as i64);
            if sim.now == t0 || (write && sim.now < t0 + Duration::from_millis(1)) {
                at_once = moved;
            }
            sim.now >= t0 + Duration::from_secs(3)
        });
        let label = if write { "written" } else { "read" };
        eprintln!(
            "{label}: {at_once} bytes at once; at most {worst} bytes over burst + rate x time"
        );
        let slack = if write { 0 } else { 1_328 };
        assert!(worst <= slack, "{label}: {worst} bytes past the bucket");
        if write {
            assert!(at_once > BURST - 1_400, "the burst goes at once: {at_once}");
        }
    }
}

/// Runs `a` and `b` on one clock until `done`; both are turned at every instant.
fn lockstep(a: &mut Sim, b: &mut Sim, mut done: impl FnMut(&mut Sim, &mut Sim) -> bool) {
    let start = a.now.max(b.now);
    (a.now, b.now) = (start, start);
    let mut turns = 0u64;
    while !done(a, b) {
        turns += 1;
        assert!(turns < 5_000_000, "runaway");
        let moved = a.turn() | b.turn();
        if !moved {
            let next = [a.next_due(), b.next_due()]
                .into_iter()
                .flatten()
                .min()
                .expect("something is due");
            assert!(next > a.now, "a timer stayed in the past");
            (a.now, b.now) = (next, next);
        }
    }
}

/// Two sessions of one server, their servers' writes (`write`) or reads in one group's
/// bucket: together they move the group's limit within 2 % each second, each about half.
fn group(write: bool) {
    const RATE: u64 = 600_000;
    let limit = RateLimit::new(RATE);
    let start = Instant::now();
    let plain = || config(RateLimits::default());
    let mut a = pair_at(start, (plain(), plain()), 10);
    let mut b = pair_at(start, (plain(), plain()), 20);
    let now = a.now.max(b.now);
    let group = RateGroup::new(if write { writes(limit) } else { reads(limit) }, now);
    a.server().set_rate_group(&group, now);
    b.server().set_rate_group(&group, now);
    // Writes: the servers send down; reads: the clients send up.
    let (side, counted): (Side, fn(&mut Sim) -> u64) = if write {
        (Side::Server, |s| s.server().stats().bytes_sent)
    } else {
        (Side::Client, |s| s.server().stats().bytes_received)
    };
    let mut flows = [Flow::new(side, usize::MAX), Flow::new(side, usize::MAX)];
    let mut seconds = Seconds::new(now, counted(&mut a) + counted(&mut b));
    let mut last = [0u64; 2];
    lockstep(&mut a, &mut b, |a, b| {
        let [fa, fb] = &mut flows;
        for (sim, flow) in [(&mut *a, fa), (&mut *b, fb)] {
            let (from, to) = if write {
                (sim.server.as_mut().unwrap(), &mut sim.client)
            } else {
                (&mut sim.client, sim.server.as_mut().unwrap())
            };
            flow.pump(from);
            flow.drain(to);
        }
        last = [counted(a), counted(b)];
        seconds.see(a.now, last[0] + last[1]);
        seconds.done(SECONDS)
    });
    let label = if write { "group writes" } else { "group reads" };
    seconds.check(label, RATE, limit.burst);
    let share = last[0] as f64 / (last[0] + last[1]) as f64;
    eprintln!("{label}: the first session's share {:.1} %", share * 100.0);
    assert!((0.4..0.6).contains(&share), "{label}: {share}");
    for sim in [&a, &b] {
        assert_eq!(sim.client_events, vec![Event::Connected]);
        assert_eq!(sim.server_events, vec![Event::Connected]);
    }
}

#[test]
fn a_group_write_limit_is_shared_by_two_sessions_of_one_server() {
    group(true);
}

#[test]
fn a_group_read_limit_is_shared_by_two_sessions_of_one_server() {
    group(false);
}

/// A sender whose receiver reads slowly sees small windows, not a zero window held until its
/// zero-window deadline (here 2 s): at 2 kB/s, and below one datagram a second (where the
/// receiver's window opens by one datagram a second, whatever the limit).
#[test]
fn a_rate_limited_reader_is_not_closed_by_the_zero_window_deadline() {
    for (rate, at_least, at_most) in [(2_000u64, 1_900u64, 2_100u64), (300, 900, 1_300)] {
        let limit = RateLimit::new(rate).with_burst(1);
        let mut sender = config(RateLimits::default());
        sender.zero_window_timeout = Duration::from_secs(2);
        let mut sim = pair((sender, config(reads(limit))), 4);
        let mut up = Flow::new(Side::Client, usize::MAX);
        let t0 = sim.now;
        let b0 = sim.server().stats().bytes_received;
        sim.run(Duration::from_secs(60), 1_000_000, |sim| {
            up.pump(&mut sim.client);
            up.drain(sim.server());
            sim.now >= t0 + Duration::from_secs(20)
        });
        let (client, server) = sim.stats();
        let per_second = (server.bytes_received - b0) / 20;
        eprintln!(
            "read limit {rate} B/s: {per_second} B/s received over 20 s, {} messages, \
             the sender's acks (probes among them) {}",
            up.received, client.acks_sent
        );
        assert_eq!(sim.client_events, vec![Event::Connected], "{rate} B/s");
        assert_eq!(sim.server_events, vec![Event::Connected], "{rate} B/s");
        assert_eq!(client.zero_window_closes, 0);
        assert!(
            (at_least..=at_most).contains(&per_second),
            "{rate} B/s: {per_second}"
        );
        assert!(up.received > 0);
        assert_eq!(sim.spins, 0);
    }
}

/// What the socket test's server saw of one session.
#[derive(Default)]
struct Seen {
    bytes: AtomicU64,
    stats: Mutex<Option<RudpStats>>,
}

struct Count(Arc<Seen>);

impl RudpHandler for Count {
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        self.0
            .bytes
            .fetch_add(message.len() as u64, Ordering::Relaxed);
        *self.0.stats.lock().unwrap() = Some(session.stats());
    }
}

/// Sends `chunk`s as fast as the send buffer takes them until `stop`.
fn flood(client: ark_rudp::RudpClientHandle, stop: Arc<std::sync::atomic::AtomicBool>) {
    let chunk = vec![7u8; 4 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if client.send(&chunk, Delivery::Ordered).is_err() {
            thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = client.stop().wait_timeout(Duration::from_secs(2));
}

#[test]
fn on_sockets_a_limited_session_beside_an_unlimited_one() {
    const LIMIT: u64 = 100_000;
    let seen: Arc<Mutex<HashMap<SocketAddr, Arc<Seen>>>> = Arc::default();
    let (handles, opened) = mpsc::channel::<RudpSessionHandle>();
    struct Open(Count, mpsc::Sender<RudpSessionHandle>);
    impl RudpHandler for Open {
        fn on_open(&mut self, session: &mut RudpSession<'_>) {
            let _ = self.1.send(session.handle());
        }
        fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
            self.0.on_message(session, message);
        }
    }
    let seen_in = seen.clone();
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |peer| {
            let s = Arc::new(Seen::default());
            seen_in.lock().unwrap().insert(peer, s.clone());
            Open(Count(s), handles.clone())
        })
        .unwrap();
    let slow = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(server.local_addr(), Count(Arc::default()))
        .unwrap();
    let fast = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(server.local_addr(), Count(Arc::default()))
        .unwrap();
    // Limited at its own end, by its builder: its writes are paced.
    let paced = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .rate_limits(writes(RateLimit::new(LIMIT)))
        .connect(server.local_addr(), Count(Arc::default()))
        .unwrap();
    let slow_addr = slow.local_addr();
    let fast_addr = fast.local_addr();
    let paced_addr = paced.local_addr();
    for _ in 0..3 {
        let handle = opened.recv_timeout(Duration::from_secs(10)).unwrap();
        if handle.peer_addr() == slow_addr {
            // From any thread, through the session's mailbox.
            handle.set_rate_limits(reads(RateLimit::new(LIMIT)));
        }
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let floods = [slow, fast, paced].map(|c| {
        let stop = stop.clone();
        thread::spawn(move || flood(c, stop))
    });
    let bytes = |addr| seen.lock().unwrap()[&addr].bytes.load(Ordering::Relaxed);
    thread::sleep(Duration::from_millis(500));
    let at = |addr| bytes(addr) as f64;
    let (slow0, fast0, paced0) = (at(slow_addr), at(fast_addr), at(paced_addr));
    let t0 = Instant::now();
    thread::sleep(Duration::from_secs(2));
    let t = t0.elapsed().as_secs_f64();
    let slow_rate = (at(slow_addr) - slow0) / t;
    let fast_rate = (at(fast_addr) - fast0) / t;
    let paced_rate = (at(paced_addr) - paced0) / t;
    let slow_stats = seen.lock().unwrap()[&slow_addr]
        .stats
        .lock()
        .unwrap()
        .unwrap();
    let total = server.stats().unwrap();
    stop.store(true, Ordering::Relaxed);
    for f in floods {
        f.join().unwrap();
    }
    eprintln!(
        "read-limited session: {slow_rate:.0} B/s of messages (receive_rate {} B/s); \
         write-limited client: {paced_rate:.0} B/s; unlimited: {fast_rate:.0} B/s; the \
         server's receive_rate {} B/s",
        slow_stats.receive_rate, total.receive_rate
    );
    // Payload is 1200 of every 1233 bytes counted: at most the limit, over 2 s (the burst
    // went in the warm-up), with room for a loaded machine's timing.
    assert!(
        slow_rate < LIMIT as f64 * 1.1 && slow_rate > LIMIT as f64 * 0.8,
        "{slow_rate}"
    );
    let receive = slow_stats.receive_rate as f64;
    assert!(
        receive < LIMIT as f64 * 1.1 && receive > LIMIT as f64 * 0.8,
        "{receive}"
    );
    assert!(
        paced_rate < LIMIT as f64 * 1.1 && paced_rate > LIMIT as f64 * 0.8,
        "{paced_rate}"
    );
    assert!(fast_rate > 5.0 * LIMIT as f64, "{fast_rate}");
    server.stop().wait().unwrap();
}

#[test]
fn a_server_changes_the_group_limits_it_was_built_with() {
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .group_rate_limits(writes(RateLimit::new(1_000_000)))
        .start(|_| Count(Arc::default()))
        .unwrap();
    assert_eq!(
        server.set_group_rate_limits(RateLimits::both(10_000)),
        Err(RateLimitError::NoGroupLimit { direction: "read" }),
        "no read bucket to change"
    );
    assert_eq!(
        server.set_group_rate_limits(writes(RateLimit::new(10_000))),
        Ok(())
    );
    // Lifted: the bucket stays, unlimited.
    assert_eq!(server.set_group_rate_limits(RateLimits::default()), Ok(()));
    server.stop().wait().unwrap();
}
