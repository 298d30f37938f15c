//! Counters a caller can read: loop activity and the syscalls transports report.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Striped;

/// Live counters of one reactor (over all of its threads). Relaxed atomics, one set per thread
/// ([`Striped`]: the threads of a shared loop do not write one cache line): cheap to bump,
/// readable from any thread through [`ReactorHandle::stats`](crate::ReactorHandle::stats).
///
/// The reactor bumps `turns`, `events` and `wakeups`; transports bump the syscall counters
/// (`reads`, `writes`, `receives`, `sends`) once per system call, so a benchmark can report
/// syscalls per message.
#[derive(Debug, Default)]
pub struct Counters {
    threads: Striped<CounterSet>,
}

/// One thread's [`Counters`].
#[derive(Debug, Default)]
struct CounterSet {
    turns: AtomicU64,
    events: AtomicU64,
    wakeups: AtomicU64,
    reads: AtomicU64,
    writes: AtomicU64,
    receives: AtomicU64,
    sends: AtomicU64,
}

macro_rules! bump {
    ($($(#[$doc:meta])* $name:ident => $field:ident),* $(,)?) => {
        impl Counters {
            $(
                $(#[$doc])*
                #[inline]
                pub fn $name(&self, n: u64) {
                    self.threads.local().$field.fetch_add(n, Ordering::Relaxed);
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

impl Counters {
    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> Stats {
        let mut stats = Stats::default();
        for set in self.threads.iter() {
            stats.merge(&set.snapshot());
        }
        stats
    }
}

impl CounterSet {
    fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            turns: get(&self.turns),
            events: get(&self.events),
            wakeups: get(&self.wakeups),
            reads: get(&self.reads),
            writes: get(&self.writes),
            receives: get(&self.receives),
            sends: get(&self.sends),
        }
    }
}

/// A copy of a reactor's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Loop turns (one `poll` each).
    pub turns: u64,
    /// Readiness events received.
    pub events: u64,
    /// Wakeups through the waker.
    pub wakeups: u64,
    /// Stream read syscalls reported by transports.
    pub reads: u64,
    /// Stream write syscalls reported by transports.
    pub writes: u64,
    /// Datagram receive syscalls reported by transports.
    pub receives: u64,
    /// Datagram send syscalls reported by transports.
    pub sends: u64,
}

impl Stats {
    /// Syscalls reported by transports.
    pub fn syscalls(&self) -> u64 {
        self.reads + self.writes + self.receives + self.sends
    }

    /// Adds another reactor's counters (for pool totals).
    pub fn merge(&mut self, other: &Stats) {
        self.turns += other.turns;
        self.events += other.events;
        self.wakeups += other.wakeups;
        self.reads += other.reads;
        self.writes += other.writes;
        self.receives += other.receives;
        self.sends += other.sends;
    }
}
