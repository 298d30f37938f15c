//! A counting global allocator: allocation calls and live heap bytes, for "allocations per
//! message" and "bytes held" figures. A binary opts in with
//! `#[global_allocator] static A: CountingAllocator = CountingAllocator;`.

pub use ark_testkit::{CountingAllocator, allocations, live_bytes};

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
