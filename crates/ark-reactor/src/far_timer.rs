//! [`FarTimer`]: on Linux, a timerfd in the poll set that wakes the poll for deadlines at
//! least `FAR` (10 ms) away, so the poll blocks without a timeout; on the portable path (macOS,
//! Windows, the BSDs, and Linux built with `--cfg ark_portable`) every deadline goes to the
//! poll's timeout.
//!
//! `epoll_wait` with a finite timeout sets up a kernel high-resolution timer on every call
//! (`ktime_get`, `read_tsc`, `select_estimate_accuracy`, ...), and a session's idle timeout
//! (an hour by default) kept one pending on every poll: one exchange at a time over loopback
//! ran 3 % slower than with no timers at all (tcp and udp 1 KiB, 1 client). Far deadlines move
//! rarely (sessions keep one lazy timer each), so the timerfd is set again rarely, and it keeps
//! waking the poll for its deadline once that draws near; deadlines first seen near, which may
//! change at every turn, go to the poll's timeout.

/// The poll token of the far timer's source (the timerfd on Linux; unused elsewhere).
pub(crate) const FAR_TIMER: mio::Token = mio::Token(u32::MAX as usize - 1);

#[cfg(all(target_os = "linux", not(ark_portable)))]
mod timerfd;
#[cfg(all(target_os = "linux", not(ark_portable)))]
pub(crate) use timerfd::FarTimer;

#[cfg(not(all(target_os = "linux", not(ark_portable))))]
mod portable;
#[cfg(not(all(target_os = "linux", not(ark_portable))))]
pub(crate) use portable::FarTimer;
