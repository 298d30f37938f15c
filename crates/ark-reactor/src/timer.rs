//! Timers: a binary heap of deadlines with lazy cancellation. Insert, cancel and expiry cost
//! O(log n); cancelled entries are skipped when they reach the top. A timer wakes a source or
//! runs a callback of type `C` (the reactor's is a closure over the reactor itself).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::ids::{SourceId, TimerId};

/// Who a timer wakes.
pub(crate) enum Target<C> {
    /// A source's `on_timer`.
    Source(SourceId),
    /// A closure (taken out while it runs).
    Callback(Option<C>),
}

pub(crate) struct Entry<C> {
    pub(crate) target: Target<C>,
    pub(crate) period: Option<Duration>,
    deadline: Instant,
    /// A fired one-shot waiting for delivery: out of the heap for good.
    parked: bool,
}

/// The reactor's timers.
pub(crate) struct Timers<C> {
    heap: BinaryHeap<Reverse<(Instant, TimerId)>>,
    /// Keyed by ids the reactor hands out in sequence, so FxHash (one multiply) serves: std's
    /// SipHash took two hashes of about 20 ns on every turn (the heap's top checked in
    /// `begin_poll` and again in `end_poll`), 1 % of a one-client exchange.
    entries: FxHashMap<TimerId, Entry<C>>,
}

impl<C> Default for Timers<C> {
    fn default() -> Self {
        Timers {
            heap: BinaryHeap::new(),
            entries: FxHashMap::default(),
        }
    }
}

impl<C> Timers<C> {
    pub(crate) fn insert(
        &mut self,
        id: TimerId,
        deadline: Instant,
        period: Option<Duration>,
        target: Target<C>,
    ) {
        self.heap.push(Reverse((deadline, id)));
        self.entries.insert(
            id,
            Entry {
                target,
                period,
                deadline,
                parked: false,
            },
        );
    }

    /// Cancels a timer; `true` if it was pending. Cancelled heap entries are dropped lazily;
    /// when they outnumber the live timers the heap is rebuilt (amortised O(1) per cancel), so
    /// cancelling long timers cannot grow the heap without bound.
    pub(crate) fn cancel(&mut self, id: TimerId) -> bool {
        let removed = self.entries.remove(&id).is_some();
        if self.heap.len() > 2 * self.entries.len() + 64 {
            self.heap = self
                .entries
                .iter()
                .filter(|(_, entry)| !entry.parked)
                .map(|(&id, entry)| Reverse((entry.deadline, id)))
                .collect();
        }
        removed
    }

    /// Whether `id` is still pending (not fired as a one-shot, not cancelled).
    pub(crate) fn contains(&self, id: TimerId) -> bool {
        self.entries.contains_key(&id)
    }

    /// The earliest live deadline.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(Reverse((deadline, id))) = self.heap.peek().copied() {
            match self.entries.get(&id) {
                Some(entry) if entry.deadline == deadline => return Some(deadline),
                // Cancelled, or a stale heap entry of a rescheduled periodic timer.
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }

    /// Pops the next timer due at `now`, rescheduling it first if periodic (a one-shot stays in
    /// `entries` until [`finish`](Self::finish), so a cancel before delivery still wins).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TimerId> {
        let deadline = self.next_deadline()?;
        if deadline > now {
            return None;
        }
        let Reverse((_, id)) = self.heap.pop()?;
        let entry = self.entries.get_mut(&id)?;
        if let Some(period) = entry.period {
            // Next deadline from the previous one, never in the past (no burst catch-up).
            let mut next = entry.deadline + period.max(Duration::from_micros(1));
            if next <= now {
                next = now + period.max(Duration::from_micros(1));
            }
            entry.deadline = next;
            self.heap.push(Reverse((next, id)));
        } else {
            // Parked until delivered (or cancelled), out of the heap.
            entry.parked = true;
        }
        Some(id)
    }

    pub(crate) fn get_mut(&mut self, id: TimerId) -> Option<&mut Entry<C>> {
        self.entries.get_mut(&id)
    }

    /// After delivering `id`: a one-shot is removed.
    pub(crate) fn finish(&mut self, id: TimerId) {
        if self.entries.get(&id).is_some_and(|e| e.period.is_none()) {
            self.entries.remove(&id);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelling_long_timers_keeps_the_heap_bounded() {
        let mut timers = Timers::<()>::default();
        let start = Instant::now();
        for i in 0..100_000u64 {
            let id = TimerId(i);
            timers.insert(
                id,
                start + Duration::from_secs(3600),
                None,
                Target::Callback(None),
            );
            assert!(timers.cancel(id));
        }
        assert_eq!(timers.len(), 0);
        assert!(
            timers.heap.len() <= 64 + 1,
            "heap holds {} dead entries",
            timers.heap.len()
        );
    }

    #[test]
    fn a_parked_one_shot_is_not_revived_by_a_rebuild() {
        let mut timers = Timers::<()>::default();
        let start = Instant::now();
        timers.insert(TimerId(0), start, None, Target::Callback(None));
        assert_eq!(timers.pop_due(start), Some(TimerId(0)));
        for i in 1..1000u64 {
            timers.insert(
                TimerId(i),
                start + Duration::from_secs(60),
                None,
                Target::Callback(None),
            );
            timers.cancel(TimerId(i));
        }
        assert_eq!(timers.pop_due(start + Duration::from_secs(120)), None);
        timers.finish(TimerId(0));
        assert_eq!(timers.len(), 0);
    }
}
