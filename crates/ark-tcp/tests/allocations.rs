//! Zero allocations per message in a steady-state echo, counted by a global allocator across
//! every thread (server and client reactors). Its own test binary, with one test.

mod util;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ark_tcp::{Session, TcpClient, TcpHandler, TcpServer};
use util::Echo;

#[global_allocator]
static GLOBAL: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;

const WARMUP: u64 = 2_000;
const MEASURED: u64 = 10_000;
const WINDOW: u64 = 16;

/// Echo client that allocates nothing per message and samples the allocation counter at the
/// start and the end of the measured phase.
struct Measure {
    payload: Vec<u8>,
    sent: u64,
    echoed: u64,
    start: Arc<AtomicU64>,
    end: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
    bad: Arc<AtomicU64>,
}

impl Measure {
    fn pump(&mut self, session: &mut Session<'_>) {
        while self.sent < WARMUP + MEASURED && self.sent - self.echoed < WINDOW {
            session.send(&self.payload).unwrap();
            self.sent += 1;
        }
    }
}

impl TcpHandler for Measure {
    fn on_open(&mut self, session: &mut Session<'_>) {
        self.pump(session);
    }
    fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]) {
        if message != self.payload.as_slice() {
            self.bad.fetch_add(1, Ordering::Relaxed);
        }
        self.echoed += 1;
        if self.echoed == WARMUP {
            self.start
                .store(ark_testkit::allocations(), Ordering::SeqCst);
        }
        if self.echoed == WARMUP + MEASURED {
            self.end.store(ark_testkit::allocations(), Ordering::SeqCst);
            self.done.store(true, Ordering::SeqCst);
            return;
        }
        self.pump(session);
    }
}

#[test]
fn a_steady_state_echo_allocates_nothing_per_message() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo::default())
        .unwrap();
    let (start, end) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let done = Arc::new(AtomicBool::new(false));
    let bad = Arc::new(AtomicU64::new(0));
    let client = TcpClient::builder()
        .connect(
            server.local_addr(),
            Measure {
                payload: (0..1024).map(|i| i as u8).collect(),
                sent: 0,
                echoed: 0,
                start: start.clone(),
                end: end.clone(),
                done: done.clone(),
                bad: bad.clone(),
            },
        )
        .unwrap();
    // Poll without blocking on a channel (a blocking receive allocates its wait context).
    assert!(ark_testkit::wait_until(Duration::from_secs(60), || done.load(Ordering::SeqCst)));
    let allocations = end.load(Ordering::SeqCst) - start.load(Ordering::SeqCst);
    assert_eq!(bad.load(Ordering::Relaxed), 0);
    assert_eq!(
        allocations, 0,
        "{allocations} allocations for {MEASURED} echoed messages (window {WINDOW}, 1 KiB)"
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
