//! Lanes: a session's independent orders. Each lane is reliable-ordered, reliable-unordered
//! or unreliable-sequenced (newest wins), and has a priority and a weight that decide which
//! lane's fragment leaves next (GameNetworkingSockets' lanes are the model). A message waits
//! only for its own lane: a 1 MiB message on one lane does not hold back a small one on
//! another, neither at the sender (fragments interleave) nor at the receiver (each lane
//! reassembles and orders by its own sequence, see `recv`).

use std::collections::VecDeque;

/// The most lanes a session has.
pub const MAX_LANES: usize = 16;

/// How a lane's messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneMode {
    /// Reliable, delivered in the order sent on the lane.
    Ordered,
    /// Reliable, each delivered as soon as it is whole.
    Unordered,
    /// One datagram each (at most `RudpConfig::mtu` bytes), not repeated if lost; the
    /// receiver drops one older than the newest it delivered on the lane (newest wins: a
    /// position, a state snapshot).
    Sequenced,
}

/// One lane of a session ([`RudpConfig::lanes`](crate::RudpConfig::lanes)).
///
/// ```
/// use ark_rudp::{Lane, RudpConfig};
///
/// let mut config = RudpConfig::default();
/// // Chat first, positions newest-wins, and bulk transfers with what is left.
/// config.lanes = vec![
///     Lane::ordered().priority(0),
///     Lane::sequenced().priority(0),
///     Lane::ordered().priority(1),
/// ];
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lane {
    /// How its messages travel.
    pub mode: LaneMode,
    /// Lower goes first: a lane's fragments leave only when no lane of a lower priority
    /// has one waiting (default 0).
    pub priority: u8,
    /// Lanes of one priority share the link by weight, in bytes (default 1; at least 1).
    pub weight: u16,
}

impl Lane {
    /// A reliable-ordered lane of priority 0 and weight 1.
    pub fn ordered() -> Lane {
        Lane {
            mode: LaneMode::Ordered,
            priority: 0,
            weight: 1,
        }
    }

    /// A reliable-unordered lane of priority 0 and weight 1.
    pub fn unordered() -> Lane {
        Lane {
            mode: LaneMode::Unordered,
            ..Lane::ordered()
        }
    }

    /// An unreliable-sequenced lane of priority 0 and weight 1.
    pub fn sequenced() -> Lane {
        Lane {
            mode: LaneMode::Sequenced,
            ..Lane::ordered()
        }
    }

    /// The same lane with `priority` (lower goes first).
    pub fn priority(self, priority: u8) -> Lane {
        Lane { priority, ..self }
    }

    /// The same lane with `weight` (raised to 1).
    pub fn weight(self, weight: u16) -> Lane {
        Lane {
            weight: weight.max(1),
            ..self
        }
    }
}

/// Virtual time per byte at weight 1 (a weight of w advances a lane's clock 1/w as fast).
const VTIME_PER_BYTE: u64 = 1 << 16;

/// One lane's fragments not yet sent, with its place in the schedule.
#[derive(Debug)]
pub(crate) struct LaneQueue<T> {
    pub(crate) waiting: VecDeque<T>,
    /// The lane sequence of its next fragment (or sequenced message).
    pub(crate) next_seq: u64,
    priority: u8,
    weight: u64,
    /// Its virtual finish time: the lane of the lowest goes next within a priority.
    vtime: u64,
}

/// The lanes' waiting fragments and the scheduler that picks the next (strict priority,
/// then weighted fair queueing by bytes within a priority, as start-time fair queueing).
#[derive(Debug)]
pub(crate) struct Schedule<T> {
    pub(crate) lanes: Vec<LaneQueue<T>>,
    /// The virtual time of the last pick: a lane that was idle starts from it (it cannot
    /// bank the time it had nothing to send).
    clock: u64,
}

impl<T> Schedule<T> {
    /// One queue per lane of `lanes` (at least one, at most [`MAX_LANES`]).
    pub(crate) fn new(lanes: &[Lane]) -> Self {
        let one = [Lane::ordered()];
        let lanes = if lanes.is_empty() {
            &one[..]
        } else {
            &lanes[..lanes.len().min(MAX_LANES)]
        };
        Schedule {
            lanes: lanes
                .iter()
                .map(|l| LaneQueue {
                    waiting: VecDeque::new(),
                    next_seq: 0,
                    priority: l.priority,
                    weight: u64::from(l.weight.max(1)),
                    vtime: 0,
                })
                .collect(),
            clock: 0,
        }
    }

    /// Appends `item` to `lane`'s queue; returns its lane sequence.
    pub(crate) fn push(&mut self, lane: usize, item: T) -> u64 {
        let clock = self.clock;
        let q = &mut self.lanes[lane];
        if q.waiting.is_empty() {
            q.vtime = q.vtime.max(clock);
        }
        q.waiting.push_back(item);
        q.next_seq += 1;
        q.next_seq - 1
    }

    /// The lane whose front goes next, if any waits.
    pub(crate) fn next_lane(&self) -> Option<usize> {
        self.lanes
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.waiting.is_empty())
            .min_by_key(|(_, q)| (q.priority, q.vtime))
            .map(|(i, _)| i)
    }

    /// Takes the front of `lane`, charging it `bytes`.
    pub(crate) fn take(&mut self, lane: usize, bytes: usize) -> Option<T> {
        let q = &mut self.lanes[lane];
        let item = q.waiting.pop_front()?;
        self.clock = q.vtime;
        q.vtime += (bytes as u64).max(1) * VTIME_PER_BYTE / q.weight;
        Some(item)
    }

    /// The priority of `lane`.
    pub(crate) fn priority(&self, lane: usize) -> u8 {
        self.lanes.get(lane).map_or(u8::MAX, |q| q.priority)
    }

    /// Whether nothing waits in any lane.
    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.iter().all(|q| q.waiting.is_empty())
    }

    /// Everything waiting, every lane, emptied.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.lanes.iter_mut().flat_map(|q| q.waiting.drain(..))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(s: &mut Schedule<(usize, usize)>, n: usize) -> Vec<usize> {
        (0..n)
            .filter_map(|_| {
                let lane = s.next_lane()?;
                s.take(lane, 1000).map(|(l, _)| l)
            })
            .collect()
    }

    #[test]
    fn a_lower_priority_goes_first_and_equal_weights_alternate() {
        let mut s = Schedule::new(&[
            Lane::ordered(),
            Lane::ordered(),
            Lane::ordered().priority(1),
        ]);
        for i in 0..4 {
            for lane in [2, 0, 1] {
                assert_eq!(
                    s.push(lane, (lane, i)),
                    i as u64,
                    "lane sequences count per lane"
                );
            }
        }
        assert_eq!(order(&mut s, 12), vec![0, 1, 0, 1, 0, 1, 0, 1, 2, 2, 2, 2]);
        assert!(s.is_empty());
    }

    #[test]
    fn weights_share_bytes_and_an_idle_lane_banks_nothing() {
        let mut s = Schedule::new(&[Lane::ordered().weight(3), Lane::ordered()]);
        for i in 0..8 {
            s.push(0, (0, i));
            s.push(1, (1, i));
        }
        let first = order(&mut s, 8);
        assert_eq!(
            first.iter().filter(|&&l| l == 0).count(),
            6,
            "3:1 — {first:?}"
        );
        let mut s = Schedule::new(&[Lane::ordered(), Lane::ordered()]);
        for i in 0..10 {
            s.push(0, (0, i));
        }
        assert_eq!(order(&mut s, 6), vec![0; 6]);
        for i in 0..4 {
            s.push(1, (1, i));
        }
        assert_eq!(
            order(&mut s, 4),
            vec![1, 0, 1, 0],
            "lane 1 starts at the clock, not at 0: no burst of six"
        );
        assert_eq!(s.drain().count(), 4, "two left in each");
    }
}
