//! Shared IO model under concurrent wakes, timers and socket writes from other threads: every
//! event reaches its source exactly once and no source stalls.
//!
//! 64 sources on a shared pool with 4 worker threads. Each owns the reading end of a TCP
//! connection; writer threads stream a known byte pattern into them, waker threads queue
//! numbered items for them and wake them, and each source keeps a chain of timers running.
//! Bounded in count (every thread does a fixed amount of work) and in time (20 s).

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_reactor::{
    Context, Handler, IoModel, ReactorConfig, ReactorPool, Ready, SourceRef, TimerId, Turn,
};

const SOURCES: usize = 64;
const CHUNKS: usize = 200;
const CHUNK: usize = 1024;
const ITEMS: u64 = 300;
const TIMERS: u64 = 40;

/// Items queued for a source by other threads, drained when it is woken.
type Inbox = Arc<Mutex<Vec<u64>>>;

/// What one source saw, checked at the end.
#[derive(Default)]
struct Seen {
    bytes: AtomicU64,
    pattern_errors: AtomicU64,
    items: AtomicU64,
    item_sum: AtomicU64,
    timers: AtomicU64,
    duplicate_timers: AtomicU64,
    overlapping_turns: AtomicU64,
    in_turn: AtomicBool,
}

struct Stressed {
    socket: mio::net::TcpStream,
    inbox: Inbox,
    seen: Arc<Seen>,
    fired: HashSet<TimerId>,
    next_byte: u8,
    started: bool,
}

impl Stressed {
    fn enter(&self) {
        if self.seen.in_turn.swap(true, Ordering::SeqCst) {
            self.seen.overlapping_turns.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self) {
        self.seen.in_turn.store(false, Ordering::SeqCst);
    }

    fn read(&mut self, cx: &mut Context<'_>) -> Turn {
        for _ in 0..cx.budget().operations {
            match self.socket.read(cx.scratch()) {
                Ok(0) => return Turn::Done,
                Ok(n) => {
                    let mut errors = 0;
                    for &b in &cx.scratch()[..n] {
                        errors += u64::from(b != self.next_byte);
                        self.next_byte = self.next_byte.wrapping_add(1);
                    }
                    self.seen.pattern_errors.fetch_add(errors, Ordering::SeqCst);
                    self.seen.bytes.fetch_add(n as u64, Ordering::SeqCst);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Done,
                Err(e) => panic!("read: {e}"),
            }
        }
        Turn::Again
    }
}

impl Handler for Stressed {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        self.enter();
        if !self.started {
            self.started = true;
            cx.set_timer(Duration::from_millis(1), None);
        }
        if ready.is_wake() {
            for item in self.inbox.lock().unwrap().drain(..) {
                self.seen.items.fetch_add(1, Ordering::SeqCst);
                self.seen.item_sum.fetch_add(item, Ordering::SeqCst);
            }
        }
        // Any turn may read: a re-run after the budget carries the readiness of its turn.
        let turn = self.read(cx);
        self.leave();
        turn
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        self.enter();
        if !self.fired.insert(timer) {
            self.seen.duplicate_timers.fetch_add(1, Ordering::SeqCst);
        }
        if self.seen.timers.fetch_add(1, Ordering::SeqCst) + 1 < TIMERS {
            cx.set_timer(Duration::from_millis(1), None);
        }
        self.leave();
        Turn::Done
    }
}

#[test]
fn shared_model_delivers_every_wake_timer_and_byte_exactly_once_under_load() {
    let pool =
        ReactorPool::start(IoModel::Shared { threads: 4 }, ReactorConfig::default()).expect("pool");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut writers = Vec::new();
    let mut sources: Vec<(SourceRef, Inbox, Arc<Seen>)> = Vec::new();
    for _ in 0..SOURCES {
        let writer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (reader, _) = listener.accept().unwrap();
        reader.set_nonblocking(true).unwrap();
        let inbox = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Seen::default());
        let handler = Stressed {
            socket: mio::net::TcpStream::from_std(reader),
            inbox: inbox.clone(),
            seen: seen.clone(),
            fired: HashSet::new(),
            next_byte: 0,
            started: false,
        };
        let source = pool
            .insert(Box::new(handler), mio::Interest::READABLE)
            .expect("pool running");
        // The first turn starts the timer chain.
        assert!(source.wake());
        writers.push(writer);
        sources.push((source, inbox, seen));
    }

    let mut threads = Vec::new();
    // Two writer threads, each streaming into half of the sources.
    for half in [0, 1] {
        let mut mine: Vec<TcpStream> = Vec::new();
        for (i, w) in writers.iter().enumerate() {
            if i % 2 == half {
                mine.push(w.try_clone().unwrap());
            }
        }
        threads.push(std::thread::spawn(move || {
            let mut next = vec![0u8; mine.len()];
            for _ in 0..CHUNKS {
                for (socket, next) in mine.iter_mut().zip(next.iter_mut()) {
                    let chunk: Vec<u8> = (0..CHUNK)
                        .map(|_| {
                            let b = *next;
                            *next = next.wrapping_add(1);
                            b
                        })
                        .collect();
                    socket.write_all(&chunk).unwrap();
                }
            }
        }));
    }
    // Two waker threads, each queueing numbered items for every source and waking it.
    for half in [0u64, 1] {
        let targets: Vec<(SourceRef, Inbox)> = sources
            .iter()
            .map(|(s, inbox, _)| (s.clone(), inbox.clone()))
            .collect();
        threads.push(std::thread::spawn(move || {
            for round in 0..ITEMS / 2 {
                let item = round * 2 + half + 1;
                for (source, inbox) in &targets {
                    inbox.lock().unwrap().push(item);
                    assert!(source.wake());
                }
                if round % 16 == 0 {
                    std::thread::yield_now();
                }
            }
        }));
    }
    for thread in threads {
        thread.join().unwrap();
    }

    let expected_bytes = (CHUNKS * CHUNK) as u64;
    let expected_sum = ITEMS * (ITEMS + 1) / 2;
    let done = |seen: &Seen| {
        seen.bytes.load(Ordering::SeqCst) == expected_bytes
            && seen.items.load(Ordering::SeqCst) == ITEMS
            && seen.timers.load(Ordering::SeqCst) == TIMERS
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sources.iter().all(|(_, _, seen)| done(seen)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for (i, (_, inbox, seen)) in sources.iter().enumerate() {
        let get = |c: &AtomicU64| c.load(Ordering::SeqCst);
        assert_eq!(
            get(&seen.bytes),
            expected_bytes,
            "source {i}: bytes (stalled?)"
        );
        assert_eq!(
            get(&seen.pattern_errors),
            0,
            "source {i}: bytes out of order"
        );
        assert_eq!(
            get(&seen.items),
            ITEMS,
            "source {i}: items, {} left in the inbox",
            inbox.lock().unwrap().len()
        );
        assert_eq!(
            get(&seen.item_sum),
            expected_sum,
            "source {i}: each item once"
        );
        assert_eq!(get(&seen.timers), TIMERS, "source {i}: timers");
        assert_eq!(
            get(&seen.duplicate_timers),
            0,
            "source {i}: a timer fired twice"
        );
        assert_eq!(
            get(&seen.overlapping_turns),
            0,
            "source {i}: two threads at once"
        );
    }
    drop(writers);
    pool.stop().unwrap();
}
