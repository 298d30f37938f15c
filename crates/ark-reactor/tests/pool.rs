//! IO models: the shared model never runs one source on two threads; the sharded model
//! spreads sources evenly.

mod util;

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use ark_reactor::{
    CloseReason, Context, Handler, IoModel, Placement, ReactorConfig, ReactorPool, Ready, Turn,
};
use mio::net::UdpSocket;
use util::{NoSocket, Tally, TimerSource};

/// Reads numbered datagrams; flags re-entry, out-of-order delivery, and records its threads.
struct Reader {
    socket: UdpSocket,
    busy: Arc<AtomicBool>,
    violations: Arc<AtomicU64>,
    received: Arc<AtomicU64>,
    last_seq: Option<u64>,
    out_of_order: Arc<AtomicU64>,
    threads: Arc<Mutex<HashSet<ThreadId>>>,
    stopped: Arc<AtomicU64>,
}

impl Handler for Reader {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        if self.busy.swap(true, Ordering::SeqCst) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.threads
            .lock()
            .unwrap()
            .insert(std::thread::current().id());
        let budget = cx.budget().operations;
        let mut turn = Turn::Again;
        for _ in 0..budget {
            let result = self.socket.recv_from(cx.scratch());
            cx.counters().add_receives(1);
            match result {
                Ok((n, _)) if n >= 8 => {
                    let seq = u64::from_be_bytes(cx.scratch()[..8].try_into().unwrap());
                    if self.last_seq.is_some_and(|last| seq <= last) {
                        self.out_of_order.fetch_add(1, Ordering::SeqCst);
                    }
                    self.last_seq = Some(seq);
                    self.received.fetch_add(1, Ordering::SeqCst);
                    // Widen the window in which a second thread could wrongly enter.
                    std::hint::spin_loop();
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    turn = Turn::Done;
                    break;
                }
                Err(e) => panic!("recv failed: {e}"),
            }
        }
        self.busy.store(false, Ordering::SeqCst);
        turn
    }

    fn on_close(&mut self, reason: CloseReason) {
        assert_eq!(reason, CloseReason::Stopped);
        self.stopped.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn shared_model_never_serves_a_source_on_two_threads() {
    const SOURCES: usize = 8;
    const PER_SOURCE: u64 = 4_000;
    let pool =
        ReactorPool::start(IoModel::Shared { threads: 4 }, ReactorConfig::default()).unwrap();
    let violations = Arc::new(AtomicU64::new(0));
    let out_of_order = Arc::new(AtomicU64::new(0));
    let received = Arc::new(AtomicU64::new(0));
    let stopped = Arc::new(AtomicU64::new(0));
    let threads = Arc::new(Mutex::new(HashSet::new()));
    let mut addrs = Vec::new();
    for _ in 0..SOURCES {
        let (socket, addr) = util::udp();
        addrs.push(addr);
        let reader = Reader {
            socket,
            busy: Arc::new(AtomicBool::new(false)),
            violations: violations.clone(),
            received: received.clone(),
            last_seq: None,
            out_of_order: out_of_order.clone(),
            threads: threads.clone(),
            stopped: stopped.clone(),
        };
        assert!(
            pool.insert(Box::new(reader), mio::Interest::READABLE)
                .is_some()
        );
    }
    // Let the posts register every source before the load starts.
    let deadline = Instant::now() + Duration::from_secs(5);
    while pool.handles()[0].source_count() < SOURCES && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let senders: Vec<_> = (0..2)
        .map(|s| {
            let addrs = addrs.clone();
            std::thread::spawn(move || {
                let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let mut datagram = [0u8; 64];
                for seq in 0..PER_SOURCE {
                    for (i, addr) in addrs.iter().enumerate() {
                        if i % 2 == s {
                            datagram[..8].copy_from_slice(&seq.to_be_bytes());
                            socket.send_to(&datagram, addr).unwrap();
                        }
                    }
                    if seq % 256 == 0 {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    // Wait until the readers have caught up (loopback UDP can drop when a queue is full).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = u64::MAX;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = received.load(Ordering::SeqCst);
        if now == last || now == SOURCES as u64 * PER_SOURCE {
            break;
        }
        last = now;
    }
    let stats = pool.stats();
    pool.stop().unwrap();
    let got = received.load(Ordering::SeqCst);
    assert!(
        got >= SOURCES as u64 * PER_SOURCE / 2,
        "received only {got} datagrams"
    );
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "a source ran on two threads at once"
    );
    assert_eq!(
        out_of_order.load(Ordering::SeqCst),
        0,
        "a source saw its datagrams out of order"
    );
    assert!(
        threads.lock().unwrap().len() >= 2,
        "the load was spread over the threads"
    );
    assert_eq!(
        stopped.load(Ordering::SeqCst),
        SOURCES as u64,
        "every source closed once at stop"
    );
    assert!(stats.receives >= got, "receive syscalls are counted");
}

#[test]
fn sharded_model_spreads_sources_round_robin() {
    let pool =
        ReactorPool::start(IoModel::Sharded { reactors: 4 }, ReactorConfig::default()).unwrap();
    let tally = Arc::new(Tally::default());
    for _ in 0..1000 {
        let handler = TimerSource {
            socket: NoSocket,
            fired: Arc::default(),
            tally: tally.clone(),
            on_first_ready: None,
        };
        assert!(
            pool.insert(Box::new(handler), mio::Interest::READABLE)
                .is_some()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let counts = loop {
        let counts: Vec<usize> = pool.handles().iter().map(|h| h.source_count()).collect();
        if counts.iter().sum::<usize>() == 1000 || Instant::now() > deadline {
            break counts;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(counts.iter().sum::<usize>(), 1000);
    assert!(
        counts.iter().all(|&c| (249..=251).contains(&c)),
        "uneven: {counts:?}"
    );
    pool.stop().unwrap();
    assert_eq!(tally.stopped.load(Ordering::SeqCst), 1000);
}

#[test]
fn least_loaded_placement_fills_the_emptiest_reactor() {
    let pool = ReactorPool::start(IoModel::Sharded { reactors: 3 }, ReactorConfig::default())
        .unwrap()
        .with_placement(Placement::LeastLoaded);
    let tally = Arc::new(Tally::default());
    let mut per_reactor: HashMap<usize, usize> = HashMap::new();
    for _ in 0..30 {
        let target = pool.next() as *const _ as usize;
        *per_reactor.entry(target).or_default() += 1;
        let handler = TimerSource {
            socket: NoSocket,
            fired: Arc::default(),
            tally: tally.clone(),
            on_first_ready: None,
        };
        let before: usize = pool.handles().iter().map(|h| h.source_count()).sum();
        assert!(
            pool.insert(Box::new(handler), mio::Interest::READABLE)
                .is_some()
        );
        // Wait for the registration so the next placement sees it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool
            .handles()
            .iter()
            .map(|h| h.source_count())
            .sum::<usize>()
            == before
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let counts: Vec<usize> = pool.handles().iter().map(|h| h.source_count()).collect();
    assert_eq!(counts, vec![10, 10, 10]);
    pool.stop().unwrap();
}

/// Drains its socket each turn, spinning `cost` per turn; records the names of its threads.
struct Costly {
    socket: UdpSocket,
    cost: Duration,
    threads: Arc<Mutex<HashMap<String, u64>>>,
    turns_done: Arc<AtomicU64>,
}

impl Handler for Costly {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        *self.threads.lock().unwrap().entry(name).or_default() += 1;
        while self.socket.recv_from(cx.scratch()).is_ok() {}
        let until = Instant::now() + self.cost;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        self.turns_done.fetch_add(1, Ordering::SeqCst);
        Turn::Done
    }
}

/// Sends `rounds` rounds of one datagram to each of `sources` sockets (each handler spinning
/// `cost` per turn) and returns how many turns ran on each thread, by thread name.
///
/// Each round is sent from the reactor's own thread (a post), between two polls: the next poll
/// then finds every source ready together, however the machine schedules the test's threads.
fn turns_by_thread(sources: usize, cost: Duration, rounds: u64) -> HashMap<String, u64> {
    let pool =
        ReactorPool::start(IoModel::Shared { threads: 2 }, ReactorConfig::default()).unwrap();
    let threads = Arc::new(Mutex::new(HashMap::new()));
    let turns_done = Arc::new(AtomicU64::new(0));
    let mut addrs = Vec::new();
    for _ in 0..sources {
        let (socket, addr) = util::udp();
        addrs.push(addr);
        let handler = Costly {
            socket,
            cost,
            threads: threads.clone(),
            turns_done: turns_done.clone(),
        };
        assert!(
            pool.insert(Box::new(handler), mio::Interest::READABLE)
                .is_some()
        );
    }
    let reactor = &pool.handles()[0];
    assert!(ark_testkit::wait_until(Duration::from_secs(5), || reactor
        .source_count()
        == sources));
    let sender = Arc::new(std::net::UdpSocket::bind("127.0.0.1:0").unwrap());
    let addrs = Arc::new(addrs);
    for round in 1..=rounds {
        let (sender, addrs) = (sender.clone(), addrs.clone());
        assert!(reactor.post(move |_| {
            for addr in addrs.iter() {
                sender.send_to(&[1u8; 8], addr).unwrap();
            }
        }));
        // One round at a time: every source is ready together, then all are served.
        let expected = round * sources as u64;
        assert!(ark_testkit::wait_until(
            Duration::from_secs(5),
            || turns_done.load(Ordering::SeqCst) >= expected
        ));
    }
    pool.stop().unwrap();
    threads.lock().unwrap().clone()
}

#[test]
fn shared_model_runs_sources_ready_together_on_both_threads() {
    // Costly turns (200 µs) of 4 sources ready together: the polling thread takes one and
    // wakes the other thread for the rest, so both run turns; every turn runs once.
    let costly = turns_by_thread(4, Duration::from_micros(200), 50);
    assert_eq!(costly.values().sum::<u64>(), 200, "one turn per datagram");
    assert!(
        costly.keys().all(|name| name.starts_with("ark-shared-")),
        "turns run on the pool's threads: {costly:?}"
    );
    let least = costly.values().copied().min().unwrap_or(0);
    assert!(
        costly.len() == 2 && least >= 20,
        "both threads run turns: {costly:?}"
    );
    // Cheap turns run once each too.
    let cheap = turns_by_thread(4, Duration::ZERO, 200);
    assert_eq!(cheap.values().sum::<u64>(), 800, "one turn per datagram");
}

/// What a long turn and a quick source share.
#[derive(Default)]
struct LongTurnProbe {
    slow_turns: AtomicU64,
    /// The slow source is inside a long turn.
    spinning: AtomicBool,
    /// The quick source has run: the long turn may end.
    released: AtomicBool,
    /// The quick source ran while the slow one was inside its long turn.
    served_during: AtomicBool,
}

/// Its first turn spins 1 ms; later ones spin until the quick source has run (at most 5 s).
struct Slow {
    socket: UdpSocket,
    probe: Arc<LongTurnProbe>,
}

impl Handler for Slow {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        while self.socket.recv_from(cx.scratch()).is_ok() {}
        let first = self.probe.slow_turns.fetch_add(1, Ordering::SeqCst) == 0;
        let start = Instant::now();
        if first {
            while start.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            }
        } else {
            self.probe.spinning.store(true, Ordering::SeqCst);
            while !self.probe.released.load(Ordering::SeqCst)
                && start.elapsed() < Duration::from_secs(5)
            {
                std::hint::spin_loop();
            }
            self.probe.spinning.store(false, Ordering::SeqCst);
        }
        Turn::Done
    }
}

/// Notes whether the slow source was mid-turn when it ran, then releases it.
struct Quick {
    socket: UdpSocket,
    probe: Arc<LongTurnProbe>,
}

impl Handler for Quick {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        while self.socket.recv_from(cx.scratch()).is_ok() {}
        if self.probe.spinning.load(Ordering::SeqCst) {
            self.probe.served_during.store(true, Ordering::SeqCst);
        }
        self.probe.released.store(true, Ordering::SeqCst);
        Turn::Done
    }
}

#[test]
fn shared_model_polls_on_another_thread_while_a_long_turn_runs() {
    let pool =
        ReactorPool::start(IoModel::Shared { threads: 2 }, ReactorConfig::default()).unwrap();
    let probe = Arc::new(LongTurnProbe::default());
    let (slow, slow_addr) = util::udp();
    let (quick, quick_addr) = util::udp();
    let slow = Slow {
        socket: slow,
        probe: probe.clone(),
    };
    let quick = Quick {
        socket: quick,
        probe: probe.clone(),
    };
    assert!(
        pool.insert(Box::new(slow), mio::Interest::READABLE)
            .is_some()
    );
    assert!(
        pool.insert(Box::new(quick), mio::Interest::READABLE)
            .is_some()
    );
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let wait = |what: &dyn Fn() -> bool| {
        assert!(ark_testkit::wait_until(Duration::from_secs(5), what));
    };
    // A first turn of 1 ms marks the slow source's turns as long.
    sender.send_to(&[1], slow_addr).unwrap();
    wait(&|| probe.slow_turns.load(Ordering::SeqCst) == 1);
    // While its next turn runs, the other thread polls and serves the quick source.
    sender.send_to(&[2], slow_addr).unwrap();
    wait(&|| probe.spinning.load(Ordering::SeqCst));
    sender.send_to(&[3], quick_addr).unwrap();
    wait(&|| probe.released.load(Ordering::SeqCst));
    pool.stop().unwrap();
    assert!(
        probe.served_during.load(Ordering::SeqCst),
        "the quick source waited for the long turn to end"
    );
}
