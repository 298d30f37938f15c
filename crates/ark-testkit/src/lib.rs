//! # ark-testkit
//!
//! Helpers shared by the ark crates' tests and benchmark programs (not published):
//!
//! * [`CountingAllocator`]: the system allocator, counting allocation calls and live bytes, for
//!   "allocations per message" and "bytes held" figures. A test binary opts in with
//!   `#[global_allocator] static A: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;`.
//! * [`wait_until`]: a bounded poll for a condition.
//! * [`process_cpu_seconds`]: exact process CPU time (`CLOCK_PROCESS_CPUTIME_ID`).
//! * [`last_record`]: the JSON record a benchmark program printed last on its stdout.
//!
//! ```
//! use std::time::Duration;
//!
//! assert!(ark_testkit::wait_until(Duration::from_millis(10), || true));
//! assert!(ark_testkit::process_cpu_seconds().is_some_and(|s| s >= 0.0));
//! ```

#![warn(missing_docs, missing_debug_implementations)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Allocation calls made by this thread (const-initialised: no lazy allocation inside the
    /// allocator).
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
static FREED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting calls and bytes with relaxed atomics (exact in a
/// single-threaded section, one uncontended add per call).
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

/// Allocation calls so far by every thread (`alloc`, `alloc_zeroed` and `realloc` each count
/// one).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Allocation calls so far by the calling thread only: immune to what the test harness's own
/// threads do.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(Cell::get)
}

#[inline]
fn count_call() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    // `try_with`: during thread teardown the slot may be gone; such calls count globally only.
    let _ = THREAD_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

/// Heap bytes currently allocated through the counting allocator.
pub fn live_bytes() -> i64 {
    ALLOCATED_BYTES.load(Ordering::Relaxed) as i64 - FREED_BYTES.load(Ordering::Relaxed) as i64
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counters have no effect on the memory returned.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_call();
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_call();
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_call();
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, which we pass on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract, which we pass on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Polls `condition` every millisecond for at most `timeout`; whether it became true.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// CPU time (user + system, all threads) this process has used, in seconds, from
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`, which is exact rather than tick-sampled. `None`
/// if the clock is unavailable.
pub fn process_cpu_seconds() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call, and the clock
    // id is a constant the kernel defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// The JSON record on the last line of a program's `stdout` (as ark-loopback and the peers
/// print it); `Value::Null` when that line is missing or not JSON.
///
/// ```
/// let record = ark_testkit::last_record(b"progress\n{\"ok\":true}\n");
/// assert_eq!(record["ok"], true);
/// assert!(ark_testkit::last_record(b"no record").is_null());
/// ```
pub fn last_record(stdout: &[u8]) -> serde_json::Value {
    String::from_utf8_lossy(stdout)
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or(serde_json::Value::Null)
}
