//! `Deadlines`: a session's own timers, kept without IO, multiplexed onto one reactor timer.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::time::Instant;

use crate::ids::TimerId;

/// One-shot deadlines with ids, for sans-IO session cores: the core keeps its handler's
/// timers here, reports the earliest with [`earliest`](Self::earliest), and its driver keeps a single
/// reactor timer there. Insert, cancel and expiry are O(log n); cancelled entries are dropped
/// lazily (never from the top, so [`earliest`](Self::earliest) is a peek), and the heap is
/// rebuilt when they dominate, so repeated set/cancel cannot grow it without bound. Allocates
/// nothing until the first deadline is set.
///
/// ```
/// use std::time::{Duration, Instant};
/// use ark_reactor::Deadlines;
///
/// let start = Instant::now();
/// let mut deadlines = Deadlines::default();
/// let late = deadlines.insert(start + Duration::from_secs(2));
/// let early = deadlines.insert(start + Duration::from_secs(1));
/// assert!(deadlines.cancel(late));
/// assert_eq!(deadlines.earliest(), Some(start + Duration::from_secs(1)));
/// assert_eq!(deadlines.pop_due(start + Duration::from_secs(5)), Some(early));
/// assert_eq!(deadlines.pop_due(start + Duration::from_secs(5)), None);
/// ```
#[derive(Debug, Default)]
pub struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, TimerId)>>,
    live: HashSet<TimerId>,
    next_id: u64,
}

impl Deadlines {
    /// Adds a deadline; its id is unique within this set.
    pub fn insert(&mut self, deadline: Instant) -> TimerId {
        let id = TimerId(self.next_id);
        self.next_id += 1;
        self.heap.push(Reverse((deadline, id)));
        self.live.insert(id);
        id
    }

    /// Cancels a deadline; `true` if it was pending.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        let removed = self.live.remove(&id);
        if self.heap.len() > 2 * self.live.len() + 16 {
            let live = &self.live;
            self.heap.retain(|Reverse((_, id))| live.contains(id));
        }
        self.prune();
        removed
    }

    /// Drops cancelled entries from the top.
    fn prune(&mut self) {
        while let Some(Reverse((_, id))) = self.heap.peek()
            && !self.live.contains(id)
        {
            self.heap.pop();
        }
    }

    /// The earliest pending deadline.
    #[inline]
    pub fn earliest(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((deadline, _))| *deadline)
    }

    /// Removes and returns a deadline due at `now`, earliest first.
    pub fn pop_due(&mut self, now: Instant) -> Option<TimerId> {
        if self.earliest()? > now {
            return None;
        }
        let Reverse((_, id)) = self.heap.pop()?;
        self.live.remove(&id);
        self.prune();
        Some(id)
    }

    /// Pending deadlines.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }
}

/// The one reactor timer a source keeps for its earliest deadline (a session core's, or a
/// socket's many sessions'). [`arm`](Self::arm) after every turn; a deadline that only moved
/// later keeps the earlier timer, which then fires, finds nothing due and is set again — one
/// timer operation per idle period instead of one per turn.
#[derive(Debug, Default)]
pub struct TimerSlot {
    armed: Option<(TimerId, Instant)>,
}

impl TimerSlot {
    /// Keeps the timer at or before `want` (nothing to do for `None`: a timer set earlier may
    /// fire for nothing).
    #[inline]
    pub fn arm(&mut self, want: Option<Instant>, cx: &mut crate::Context<'_>) {
        let Some(want) = want else { return };
        if self.armed.is_some_and(|(_, at)| at <= want) {
            return;
        }
        self.rearm(want, cx);
    }

    #[cold]
    fn rearm(&mut self, want: Instant, cx: &mut crate::Context<'_>) {
        if let Some((timer, _)) = self.armed.take() {
            cx.cancel_timer(timer);
        }
        let delay = want.saturating_duration_since(cx.now());
        self.armed = Some((cx.set_timer(delay, None), want));
    }

    /// Whether `timer` is this slot's (it has fired: the slot is empty again).
    #[inline]
    pub fn fired(&mut self, timer: TimerId) -> bool {
        let mine = self.armed.is_some_and(|(armed, _)| armed == timer);
        if mine {
            self.armed = None;
        }
        mine
    }
}
