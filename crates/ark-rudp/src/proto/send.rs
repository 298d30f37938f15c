//! The sending side of a connection: fragments waiting in their lanes, in flight and
//! acknowledged; loss detection (packet and time thresholds, as RFC 9002 section 6.1, and the
//! retransmission timer); the peer's flow-control window.
//!
//! A fragment waits in its lane's queue without a session sequence; the lane scheduler
//! (`lane::Schedule`) picks which lane's front takes the next one when the windows let a
//! new fragment go, so lanes interleave fragment by fragment.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::proto::lane::{Lane, Schedule};
use crate::proto::packet::{AckBlock, FIRST, LAST, LaneTag, UNORDERED, widen};

/// A fragment acknowledged once a fragment sent this many transmissions later is.
const PACKET_THRESHOLD: u64 = 3;

/// One fragment of a reliable message.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) flags: u8,
    /// Its lane and its sequence there.
    pub(crate) lane: LaneTag,
    pub(crate) data: Vec<u8>,
    /// When last sent (`None`: never).
    pub(crate) sent_at: Option<Instant>,
    /// The transmission serial of its last sending (orders every DATA datagram sent).
    serial: u64,
    /// The connection's DATA+PARITY count just after its last sending.
    pub(crate) tx_mark: u64,
    pub(crate) transmissions: u32,
    /// Its last sending was in a FEC group: parity may still repair it.
    protected: bool,
    acked: bool,
    /// Counted in `in_flight`.
    flying: bool,
}

/// What an acknowledgement did.
#[derive(Debug, Default)]
pub(crate) struct AckOutcome {
    /// Fragments newly acknowledged.
    pub(crate) newly_acked: usize,
    /// The newest of them: (sent at, sent once, tx mark).
    pub(crate) newest: Option<(Instant, bool, u64)>,
    /// Send times of fragments now declared lost.
    pub(crate) lost: Vec<Instant>,
    /// The acknowledgement named data never sent.
    pub(crate) forged: bool,
}

/// The send buffer: fragments waiting in their lanes, then those given a sequence, oldest
/// first: sequences `base..base + queue.len()`.
#[derive(Debug)]
pub(crate) struct Sender {
    base: u64,
    queue: VecDeque<Outgoing>,
    /// The first fragment never sent, as an index into `queue` (at most the last: a fragment
    /// is taken from its lane when it may go, and stays next if a rate limit holds it back).
    unsent: usize,
    /// Fragments not yet given a sequence, by lane.
    lanes: Schedule<Outgoing>,
    /// Sequences to send again.
    pub(crate) retransmit: VecDeque<u64>,
    /// Payload bytes buffered (waiting or unacknowledged).
    pub(crate) buffered: usize,
    /// Payload bytes never sent yet (the queue a rate limit or a window holds back).
    pub(crate) unsent_bytes: usize,
    /// Payload bytes of reliable messages queued so far.
    pub(crate) accepted_bytes: u64,
    /// Payload bytes of reliable messages acknowledged so far.
    pub(crate) acked_bytes: u64,
    pub(crate) in_flight: usize,
    serial: u64,
    largest_acked_serial: u64,
    /// When a fragment overtaken by an acknowledged one becomes late enough to be declared
    /// lost even if no further acknowledgement comes (RFC 9002's loss timer).
    loss_deadline: Option<Instant>,
    /// The peer's next expected sequence and window.
    peer_next: u64,
    peer_window: u64,
    pub(crate) spare: Vec<Vec<u8>>,
}

impl Sender {
    pub(crate) fn new(first: u64, initial_window: u64, lanes: &[Lane]) -> Self {
        Sender {
            base: first,
            queue: VecDeque::new(),
            unsent: 0,
            lanes: Schedule::new(lanes),
            retransmit: VecDeque::new(),
            buffered: 0,
            unsent_bytes: 0,
            accepted_bytes: 0,
            acked_bytes: 0,
            in_flight: 0,
            serial: 0,
            largest_acked_serial: 0,
            loss_deadline: None,
            peer_next: first,
            peer_window: initial_window,
            spare: Vec::new(),
        }
    }

    /// Queues `message` on `lane` as fragments of at most `mtu` bytes.
    pub(crate) fn push(&mut self, message: &[u8], mtu: usize, (lane, unordered): (u8, bool)) {
        let count = message.len().div_ceil(mtu).max(1);
        let mode = if unordered { UNORDERED } else { 0 };
        for i in 0..count {
            let part = &message[(i * mtu).min(message.len())..((i + 1) * mtu).min(message.len())];
            let mut data = self.spare.pop().unwrap_or_default();
            data.clear();
            data.extend_from_slice(part);
            let flags =
                mode | if i == 0 { FIRST } else { 0 } | if i + 1 == count { LAST } else { 0 };
            let seq = self.lanes.lanes[usize::from(lane)].next_seq as u32;
            self.lanes.push(
                usize::from(lane),
                Outgoing {
                    flags,
                    lane: LaneTag { lane, seq },
                    data,
                    sent_at: None,
                    serial: 0,
                    tx_mark: 0,
                    transmissions: 0,
                    protected: false,
                    acked: false,
                    flying: false,
                },
            );
        }
        self.buffered += message.len();
        self.unsent_bytes += message.len();
        self.accepted_bytes += message.len() as u64;
    }

    /// Whether nothing is queued or unacknowledged (an empty message counts: it is a fragment).
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty() && self.lanes.is_empty()
    }

    /// Whether fragments wait, none is in flight or unacknowledged, and the peer's window
    /// admits none of them (a zero window): only a window probe can move it on.
    pub(crate) fn window_closed(&self) -> bool {
        self.unsent == 0
            && !self.is_empty()
            && self.retransmit.is_empty()
            && self.base >= self.peer_next + self.peer_window
    }

    /// Drops everything queued (the connection closed); returns the payload bytes dropped.
    pub(crate) fn clear(&mut self) -> usize {
        let dropped = self.buffered;
        while let Some(o) = self.queue.pop_front() {
            self.base += 1;
            self.spare.push(o.data);
        }
        self.spare.extend(self.lanes.drain().map(|o| o.data));
        self.spare.truncate(64);
        self.retransmit.clear();
        (self.unsent, self.buffered, self.in_flight) = (0, 0, 0);
        self.unsent_bytes = 0;
        self.loss_deadline = None;
        dropped
    }

    /// Whether anything sent is unacknowledged.
    pub(crate) fn has_unacked(&self) -> bool {
        self.unsent > 0
    }

    /// The next fragment to send: a retransmission first, then new data within `window`
    /// fragments in flight and the peer's window, from the lane the schedule picks (it gets
    /// the next sequence then). Returns its sequence; it stays next until
    /// [`sent`](Self::sent) (a rate limit may hold it back).
    pub(crate) fn next_to_send(&mut self, window: usize) -> Option<u64> {
        while let Some(&seq) = self.retransmit.front() {
            if seq >= self.base && !self.get(seq).is_some_and(|o| o.acked) {
                return Some(seq);
            }
            self.retransmit.pop_front();
        }
        let seq = self.base + self.unsent as u64;
        if self.in_flight >= window || seq >= self.peer_next + self.peer_window {
            return None;
        }
        if self.unsent == self.queue.len() {
            let lane = self.lanes.next_lane()?;
            let len = self.lanes.lanes[lane].waiting.front()?.data.len();
            let fragment = self.lanes.take(lane, len)?;
            self.queue.push_back(fragment);
        }
        Some(seq)
    }

    /// The priority of `lane`.
    pub(crate) fn lane_priority(&self, lane: u8) -> u8 {
        self.lanes.priority(usize::from(lane))
    }

    /// The priority of the lane whose fragment would go next (a retransmission's lane is
    /// ahead of all: `None` when nothing waits).
    pub(crate) fn next_priority(&self) -> Option<u8> {
        if !self.retransmit.is_empty() {
            return Some(0);
        }
        if let Some(staged) = self.queue.get(self.unsent) {
            return Some(self.lanes.priority(usize::from(staged.lane.lane)));
        }
        self.lanes.next_lane().map(|l| self.lanes.priority(l))
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&Outgoing> {
        self.queue.get(seq.checked_sub(self.base)? as usize)
    }

    /// Records that `seq` was sent at `now`, `tx_mark` being the count after it; `protected`:
    /// in a FEC group.
    pub(crate) fn sent(&mut self, seq: u64, now: Instant, tx_mark: u64, protected: bool) {
        if self.retransmit.front() == Some(&seq) {
            self.retransmit.pop_front();
        }
        let index = (seq - self.base) as usize;
        if index == self.unsent {
            self.unsent += 1;
            self.unsent_bytes -= self.queue[index].data.len();
        }
        self.serial += 1;
        let o = &mut self.queue[index];
        o.sent_at = Some(now);
        o.serial = self.serial;
        o.tx_mark = tx_mark;
        o.transmissions += 1;
        o.protected = protected;
        if !o.flying {
            o.flying = true;
            self.in_flight += 1;
        }
    }

    /// Applies an acknowledgement received at `now`; `rtt` is the loss detection's time, and
    /// `fec_wait` how much longer a FEC-protected fragment gets (its parity may be on the way).
    pub(crate) fn on_ack(
        &mut self,
        ack: &AckBlock,
        now: Instant,
        (rtt, fec_wait): (Duration, Duration),
    ) -> AckOutcome {
        let mut out = AckOutcome::default();
        let next = widen(ack.next, self.base);
        let sent_end = self.base + self.unsent as u64;
        if next > sent_end {
            out.forged = true;
            return out;
        }
        self.peer_next = self.peer_next.max(next);
        self.peer_window = u64::from(ack.window);
        for seq in self.base..next {
            self.acknowledge(seq, &mut out);
        }
        for bit in 0..64 {
            let seq = next + 1 + bit;
            if seq >= sent_end {
                break;
            }
            if ack.bitmap & (1 << bit) != 0 {
                self.acknowledge(seq, &mut out);
            }
        }
        self.release_acked();
        if out.newly_acked > 0 {
            self.detect_losses(now, (rtt, fec_wait), &mut out);
        }
        out
    }

    fn acknowledge(&mut self, seq: u64, out: &mut AckOutcome) {
        let Some(index) = seq.checked_sub(self.base) else {
            return;
        };
        let Some(o) = self.queue.get_mut(index as usize) else {
            return;
        };
        if o.acked || o.sent_at.is_none() {
            return;
        }
        o.acked = true;
        if o.flying {
            o.flying = false;
            self.in_flight -= 1;
        }
        out.newly_acked += 1;
        if o.serial > self.largest_acked_serial {
            out.newest = o.sent_at.map(|t| (t, o.transmissions == 1, o.tx_mark));
            // Only a fragment sent once tells what it overtook: which copy of a resent one
            // arrived is unknown, and a late first copy acknowledged after the resend would
            // declare lost everything sent before the resend (a storm of spurious resends
            // under mere reordering).
            if o.transmissions == 1 {
                self.largest_acked_serial = o.serial;
            }
        }
    }

    fn release_acked(&mut self) {
        while self.queue.front().is_some_and(|o| o.acked) {
            if let Some(o) = self.queue.pop_front() {
                self.buffered -= o.data.len();
                self.acked_bytes += o.data.len() as u64;
                self.spare.push(o.data);
            }
            self.base += 1;
            self.unsent -= 1;
        }
    }

    /// Declares lost what a later acknowledged fragment overtook by the packet threshold or by
    /// 9/8 of the RTT. A FEC-protected fragment is judged by time only, with `fec_wait` more:
    /// declaring it lost before its group's parity could arrive would repair it twice.
    fn detect_losses(
        &mut self,
        now: Instant,
        (rtt, fec_wait): (Duration, Duration),
        out: &mut AckOutcome,
    ) {
        // RFC 9002 section 6.1.2: 9/8 of the RTT, never under the timer granularity.
        let late = (rtt * 9 / 8).max(Duration::from_millis(1));
        self.loss_deadline = None;
        for (i, o) in self.queue.iter_mut().enumerate().take(self.unsent) {
            if o.acked || !o.flying || o.serial >= self.largest_acked_serial {
                continue;
            }
            let overtaken =
                !o.protected && o.serial + PACKET_THRESHOLD <= self.largest_acked_serial;
            let wait = if o.protected { late + fec_wait } else { late };
            let Some(sent_at) = o.sent_at else {
                continue;
            };
            if overtaken || now.saturating_duration_since(sent_at) >= wait {
                o.flying = false;
                self.in_flight -= 1;
                out.lost.push(sent_at);
                self.retransmit.push_back(self.base + i as u64);
            } else {
                let due = sent_at + wait;
                self.loss_deadline = Some(self.loss_deadline.map_or(due, |d| d.min(due)));
            }
        }
    }

    /// When the loss timer runs next, if a fragment waits for it.
    pub(crate) fn loss_deadline(&self) -> Option<Instant> {
        self.loss_deadline
    }

    /// The loss timer expired: the send times of the fragments now declared lost.
    pub(crate) fn on_loss_timer(
        &mut self,
        now: Instant,
        times: (Duration, Duration),
    ) -> Vec<Instant> {
        let mut out = AckOutcome::default();
        self.detect_losses(now, times, &mut out);
        out.lost
    }

    /// The retransmission timer expired at `now`: everything in flight for at least `rto` is
    /// sent again. Returns how many.
    pub(crate) fn on_timeout(&mut self, now: Instant, rto: Duration) -> usize {
        let mut count = 0;
        for (i, o) in self.queue.iter_mut().enumerate().take(self.unsent) {
            let due = o
                .sent_at
                .is_some_and(|t| now.saturating_duration_since(t) >= rto);
            if o.flying && due {
                o.flying = false;
                self.in_flight -= 1;
                self.retransmit.push_back(self.base + i as u64);
                count += 1;
            }
        }
        count
    }

    /// The earliest send time of a fragment in flight.
    pub(crate) fn oldest_in_flight(&self) -> Option<Instant> {
        self.queue
            .iter()
            .take(self.unsent)
            .filter(|o| o.flying)
            .filter_map(|o| o.sent_at)
            .min()
    }

    /// Fragments queued: given a sequence or waiting in a lane (for tests).
    #[cfg(test)]
    pub(crate) fn fragments(&self) -> usize {
        self.queue.len()
            + self
                .lanes
                .lanes
                .iter()
                .map(|q| q.waiting.len())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(next: u64, bitmap: u64) -> AckBlock {
        AckBlock {
            next: next as u32,
            bitmap,
            window: 1024,
            received: 0,
        }
    }

    fn send_all(s: &mut Sender, now: Instant) -> Vec<u64> {
        let mut sent = Vec::new();
        while let Some(seq) = s.next_to_send(usize::MAX) {
            s.sent(seq, now, 0, false);
            sent.push(seq);
        }
        sent
    }

    #[test]
    fn fragments_acks_and_release() {
        let t = Instant::now();
        let mut s = Sender::new(0, 1024, &[]);
        s.push(&[7u8; 2500], 1000, (0, false));
        assert_eq!(s.fragments(), 3);
        assert_eq!(send_all(&mut s, t), vec![0, 1, 2]);
        assert_eq!(s.get(2).unwrap().flags, LAST);
        let out = s.on_ack(&ack(2, 0), t, (Duration::from_millis(10), Duration::ZERO));
        assert_eq!(out.newly_acked, 2);
        assert_eq!(s.buffered, 500, "acknowledged fragments are released");
        s.on_ack(&ack(3, 0), t, (Duration::from_millis(10), Duration::ZERO));
        assert_eq!((s.buffered, s.in_flight, s.has_unacked()), (0, 0, false));
    }

    #[test]
    fn forged_acks_for_unsent_data_are_refused() {
        let t = Instant::now();
        let mut s = Sender::new(0, 1024, &[]);
        s.push(b"a", 1000, (0, false));
        s.push(b"b", 1000, (0, false));
        assert_eq!(s.next_to_send(usize::MAX), Some(0));
        s.sent(0, t, 0, false);
        let out = s.on_ack(&ack(2, 0), t, (Duration::from_millis(10), Duration::ZERO));
        assert!(out.forged);
        assert_eq!(out.newly_acked, 0);
        // A SACK bit past what was sent is ignored.
        let out = s.on_ack(
            &ack(0, 0b1111),
            t,
            (Duration::from_millis(10), Duration::ZERO),
        );
        assert_eq!(out.newly_acked, 0);
    }

    #[test]
    fn three_later_acks_declare_a_loss_and_the_timer_resends() {
        let t = Instant::now();
        let mut s = Sender::new(0, 1024, &[]);
        for _ in 0..5 {
            s.push(b"m", 1000, (0, false));
        }
        send_all(&mut s, t);
        // 0 lost, 1..=3 acknowledged: 0 is overtaken by 3.
        let out = s.on_ack(&ack(0, 0b111), t, (Duration::from_secs(1), Duration::ZERO));
        assert_eq!(out.lost.len(), 1);
        assert_eq!(s.next_to_send(usize::MAX), Some(0));
        s.sent(0, t, 0, false);
        let later = t + Duration::from_millis(50);
        assert_eq!(s.on_timeout(later, Duration::from_millis(40)), 2, "0 and 4");
    }

    #[test]
    fn a_zero_window_with_nothing_in_flight_is_closed_and_clear_frees_all() {
        let t = Instant::now();
        let mut s = Sender::new(0, 1024, &[]);
        s.push(&[1; 3000], 1000, (0, false));
        assert!(!s.window_closed(), "the window admits new data");
        assert_eq!(s.next_to_send(usize::MAX), Some(0));
        s.sent(0, t, 0, false);
        let zero = AckBlock {
            window: 0,
            ..ack(1, 0)
        };
        s.on_ack(&zero, t, (Duration::from_secs(1), Duration::ZERO));
        assert_eq!(s.next_to_send(usize::MAX), None);
        assert!(s.window_closed(), "two fragments wait behind a zero window");
        assert_eq!((s.accepted_bytes, s.acked_bytes), (3000, 1000));
        assert_eq!(s.clear(), 2000);
        assert!(s.is_empty() && !s.window_closed() && s.buffered == 0);
    }

    #[test]
    fn lanes_interleave_fragments_and_number_them_per_lane() {
        let t = Instant::now();
        let lanes = [Lane::ordered().priority(1), Lane::ordered()];
        let mut s = Sender::new(100, 1024, &lanes);
        s.push(&[1; 5000], 1000, (0, false));
        s.push(b"small", 1000, (1, false));
        s.push(b"later", 1000, (1, true));
        let sent = send_all(&mut s, t);
        assert_eq!(
            sent,
            (100..107).collect::<Vec<_>>(),
            "sequences in sending order"
        );
        let tags: Vec<(u8, u32, u8)> = sent
            .iter()
            .map(|&q| {
                s.get(q)
                    .map(|o| (o.lane.lane, o.lane.seq, o.flags))
                    .unwrap()
            })
            .collect();
        assert_eq!(
            &tags[..3],
            &[
                (1, 0, FIRST | LAST),
                (1, 1, FIRST | LAST | UNORDERED),
                (0, 0, FIRST)
            ],
            "the priority-0 lane first, then the bulk lane from its own 0"
        );
        assert_eq!(tags[6], (0, 4, LAST));
    }

    #[test]
    fn the_peer_window_and_congestion_window_limit_new_data() {
        let t = Instant::now();
        let mut s = Sender::new(0, 2, &[]);
        for _ in 0..4 {
            s.push(b"m", 1000, (0, false));
        }
        assert_eq!(send_all(&mut s, t), vec![0, 1], "peer window of 2");
        s.on_ack(&ack(2, 0), t, (Duration::from_secs(1), Duration::ZERO));
        assert_eq!(s.next_to_send(0), None, "congestion window of 0");
    }
}
