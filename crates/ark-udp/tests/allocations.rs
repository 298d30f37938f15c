//! Zero allocations per message in a steady-state UDP echo (all threads counted). Its own
//! test binary, with one test.

mod util;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ark_udp::{UdpClient, UdpHandler, UdpServer, UdpSession};
use util::Echo;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARMUP: u64 = 2_000;
const MEASURED: u64 = 10_000;
const WINDOW: u64 = 16;

struct Measure {
    payload: [u8; 1024],
    sent: u64,
    echoed: u64,
    start: Arc<AtomicU64>,
    end: Arc<AtomicU64>,
    done: Arc<AtomicBool>,
}

impl Measure {
    fn pump(&mut self, session: &mut UdpSession<'_>) {
        while self.sent < WARMUP + MEASURED && self.sent - self.echoed < WINDOW {
            session.send(&self.payload).unwrap();
            self.sent += 1;
        }
    }
}

impl UdpHandler for Measure {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        self.pump(session);
    }
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        assert_eq!(datagram, &self.payload[..]);
        self.echoed += 1;
        if self.echoed == WARMUP {
            self.start
                .store(ALLOCATIONS.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        if self.echoed == WARMUP + MEASURED {
            self.end
                .store(ALLOCATIONS.load(Ordering::SeqCst), Ordering::SeqCst);
            self.done.store(true, Ordering::SeqCst);
            return;
        }
        self.pump(session);
    }
}

#[test]
fn a_steady_state_udp_echo_allocates_nothing_per_message() {
    let server = UdpServer::builder()
        .bind("127.0.0.1:0".parse().unwrap())
        .max_datagram(2048)
        .start(|_| Echo::default())
        .unwrap();
    let (start, end) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let done = Arc::new(AtomicBool::new(false));
    let client = UdpClient::builder()
        .max_datagram(2048)
        .connect(
            server.local_addr(),
            Measure {
                payload: [7; 1024],
                sent: 0,
                echoed: 0,
                start: start.clone(),
                end: end.clone(),
                done: done.clone(),
            },
        )
        .unwrap();
    // Loopback UDP at window 16 does not drop; a drop would stall the window and fail here.
    assert!(util::wait_until(Duration::from_secs(60), || done.load(Ordering::SeqCst)));
    let allocations = end.load(Ordering::SeqCst) - start.load(Ordering::SeqCst);
    assert_eq!(
        allocations, 0,
        "{allocations} allocations for {MEASURED} echoed datagrams"
    );
    client.stop().unwrap();
    server.stop().unwrap();
}
