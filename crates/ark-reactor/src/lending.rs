//! The shared IO model's bookkeeping: turns waiting for a thread, who polls, who idles, and
//! whom a thread that took a turn wakes (pure state, tested without threads).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::turn::Job;

/// The reactor's side of the shared model: turns waiting for a thread, and who is doing what.
#[derive(Default)]
pub(crate) struct Lending {
    /// Lent turns waiting for a thread, oldest first.
    pub(crate) jobs: VecDeque<Job>,
    /// A thread is in (or about to enter) `poll`, without the reactor.
    pub(crate) polling: bool,
    /// When that poll returns at the latest (`None`: only on an event).
    pub(crate) poll_until: Option<Instant>,
    /// Threads waiting on `SharedLoop::idle` for work.
    pub(crate) idle: usize,
    /// One of those was notified and is not yet back with the reactor (at most one is on its
    /// way: see [`wake_idle`]).
    pub(crate) notified: bool,
    /// Threads still in their loop.
    pub(crate) running: usize,
    /// Turns taken since the last poll ended: work that makes more work (handlers waking each
    /// other) must not keep the threads from polling.
    pub(crate) taken_since_poll: usize,
}

/// Turns the threads take at most between two polls while nobody polls.
pub(crate) const TURNS_PER_POLL: usize = 64;

/// A source whose last turn took this long is expected to take long again: the thread that takes
/// its next turn first wakes an idle thread to poll, so the events of other sources are not held
/// up for the whole turn while a thread idles. Shorter turns keep the polling (a handoff costs a
/// thread wakeup, a few microseconds, and would move every request/response exchange between
/// threads).
pub(crate) const LONG_TURN: Duration = Duration::from_micros(200);

/// Whom a thread that took a turn wakes, once it has let go of the reactor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    Nobody,
    /// One thread waiting on the idle condition variable.
    Idle,
    /// The thread blocked in `poll`, through the reactor's waker.
    Poller,
}

/// After a thread took a turn: if more wait (`more`), wake an idle thread, or else the
/// poller, to take the next (it passes the rest on the same way); if none waits but this turn
/// is expected to be long and nobody polls, wake an idle thread to poll meanwhile.
pub(crate) fn spread(lending: &mut Lending, more: bool, long: bool) -> Wake {
    if more {
        if lending.idle > 0 {
            return wake_idle(lending);
        } else if lending.polling {
            return Wake::Poller;
        }
    } else if long && lending.idle > 0 && !lending.polling {
        return wake_idle(lending);
    }
    Wake::Nobody
}

/// Counts one idle thread as notified, unless one is on its way already (as tokio wakes a
/// parked worker only while none is searching): that thread takes the next turn and passes
/// the rest on in its turn. Waking one per waiting turn woke more threads than there were
/// cores to run them; with this limit and the wake made after unlocking (`SharedLoop::wake`),
/// `futex` calls per message at TCP 64 B, 16 clients, four threads on two cores fell from
/// 0.031 to 0.0015 and context switches from 0.016 to 0.001 (tokio: 0.004).
fn wake_idle(lending: &mut Lending) -> Wake {
    if lending.notified {
        return Wake::Nobody;
    }
    lending.notified = true;
    Wake::Idle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_idle_thread_is_on_its_way_at_a_time() {
        let mut lending = Lending {
            idle: 3,
            ..Lending::default()
        };
        assert_eq!(spread(&mut lending, true, false), Wake::Idle);
        for _ in 0..5 {
            assert_eq!(spread(&mut lending, true, false), Wake::Nobody);
        }
        assert!(lending.notified, "three idle threads, one notification");
        // It is back with the reactor (as `run_thread` counts it): the next may be notified.
        lending.idle -= 1;
        lending.notified = false;
        assert_eq!(spread(&mut lending, true, false), Wake::Idle);
        assert_eq!((lending.idle, lending.notified), (2, true));
    }

    #[test]
    fn with_nobody_idle_the_poller_takes_waiting_turns() {
        let mut lending = Lending {
            polling: true,
            ..Lending::default()
        };
        assert_eq!(
            spread(&mut lending, false, true),
            Wake::Nobody,
            "no turn waits"
        );
        assert_eq!(spread(&mut lending, true, false), Wake::Poller);
    }

    #[test]
    fn a_long_turn_wakes_an_idle_thread_to_poll() {
        let mut lending = Lending {
            idle: 1,
            ..Lending::default()
        };
        assert_eq!(spread(&mut lending, false, false), Wake::Nobody);
        assert_eq!(spread(&mut lending, false, true), Wake::Idle);
        lending.polling = true;
        lending.notified = false;
        assert_eq!(
            spread(&mut lending, false, true),
            Wake::Nobody,
            "somebody polls"
        );
    }
}
