//! Counters a caller can read: loop activity and the syscalls transports report.

use std::sync::atomic::Ordering;

#[cfg(doc)]
use crate::Striped;

crate::counters! {
    /// Live counters of one reactor (over all of its threads). Relaxed atomics, one set per
    /// thread ([`Striped`]: the threads of a shared loop do not write one cache line): cheap
    /// to bump, readable from any thread through
    /// [`ReactorHandle::stats`](crate::ReactorHandle::stats).
    ///
    /// The reactor bumps `turns`, `events` and `wakeups`; transports bump the syscall counters
    /// (`reads`, `writes`, `receives`, `sends`) once per system call, so a benchmark can report
    /// syscalls per message.
    pub struct Counters(CounterSet);
    /// A copy of a reactor's counters.
    pub struct Stats {
        /// Loop turns (one `poll` each).
        turns,
        /// Readiness events received.
        events,
        /// Wakeups through the waker.
        wakeups,
        /// Stream read syscalls reported by transports.
        reads,
        /// Stream write syscalls reported by transports.
        writes,
        /// Datagram receive syscalls reported by transports.
        receives,
        /// Datagram send syscalls reported by transports.
        sends,
    }
}

macro_rules! bump {
    ($($(#[$doc:meta])* $name:ident => $field:ident),* $(,)?) => {
        impl Counters {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name(&self, n: u64) {
                    self.local().$field.fetch_add(n, Ordering::Relaxed);
                }
            )*
        }
    };
}

bump! {
    /// Counts `n` loop turns.
    add_turns => turns,
    /// Counts `n` readiness events.
    add_events => events,
    /// Counts `n` wakeups by the waker (posts, wakes, stop, sooner timers, turns over budget).
    add_wakeups => wakeups,
    /// Counts `n` stream read syscalls (`read`, `readv`, `recv` on a stream).
    add_reads => reads,
    /// Counts `n` stream write syscalls (`write`, `writev`, `send` on a stream).
    add_writes => writes,
    /// Counts `n` datagram receive syscalls (`recvfrom`, `recvmmsg`).
    add_receives => receives,
    /// Counts `n` datagram send syscalls (`sendto`, `sendmmsg`).
    add_sends => sends,
}

impl Stats {
    /// Syscalls reported by transports.
    pub fn syscalls(&self) -> u64 {
        self.reads + self.writes + self.receives + self.sends
    }
}
