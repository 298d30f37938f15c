//! The receiving side of a connection: the receive window and the acknowledgement it sends
//! back (by the session's sequence), and per lane the reassembly of fragments and ordered,
//! unordered and sequenced delivery (by the lane's own sequence: a gap in one lane holds
//! back no other).
//!
//! Memory: fragments held out of their lane's order are at most the receive window (a
//! fragment that would be held past it is refused, and an honest sender never sends one: the
//! window it is told is what is left); the message each lane assembles in order is at most
//! `RudpConfig::max_message` (no bytes are kept past it).

use std::collections::VecDeque;

use crate::proto::packet::{AckBlock, FIRST, LAST, LaneTag, UNORDERED, widen};

/// One sequence number of a lane past its delivery point.
#[derive(Debug, Default)]
enum Slot {
    /// Not arrived.
    #[default]
    Empty,
    /// Arrived, not yet delivered (its message is incomplete, or waits for an earlier one).
    Held { flags: u8, fragment: Vec<u8> },
    /// Arrived and delivered (an unordered message).
    Delivered,
}

impl Slot {
    fn arrived(&self) -> bool {
        !matches!(self, Slot::Empty)
    }
}

/// What happened to an arriving fragment or sequenced message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// New: taken.
    New,
    /// Arrived before (or already delivered), or a sequenced message older than the newest
    /// delivered on its lane.
    Duplicate,
    /// Past the receive window: dropped (the sender will send it again).
    BeyondWindow,
    /// Lane fields no honest sender writes (a lane the session does not have, a lane
    /// sequence far outside the window, two fragments with one lane sequence): the session
    /// must end.
    Violation(&'static str),
}

/// Where delivered messages go, and what every lane shares.
#[derive(Debug)]
struct Sink<'a> {
    inbox: &'a mut VecDeque<Vec<u8>>,
    spare: &'a mut Vec<Vec<u8>>,
    /// Fragments held in lane slots (out of their lane's order).
    held: &'a mut usize,
    limit: usize,
    oversized: &'a mut Option<usize>,
}

impl Sink<'_> {
    fn copy(&mut self, parts: &[&[u8]]) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        for p in parts {
            buf.extend_from_slice(p);
        }
        buf
    }
}

/// Receives, acknowledges and delivers; `inbox` holds whole messages for the application.
#[derive(Debug)]
pub(crate) struct Receiver {
    /// The session's next sequence not arrived; every one before it arrived.
    next: u64,
    /// Whether each of `next..next + arrived.len()` arrived.
    arrived: VecDeque<bool>,
    window: usize,
    lanes: Vec<LaneRx>,
    /// Whole messages, in delivery order.
    pub(crate) inbox: VecDeque<Vec<u8>>,
    /// Buffers to reuse.
    pub(crate) spare: Vec<Vec<u8>>,
    /// Fragments held in lane slots now (bounded by the window).
    held: usize,
    pub(crate) duplicates: u64,
    /// Sequenced messages dropped for a newer one delivered on their lane.
    pub(crate) stale: u64,
    /// The largest message delivered (`RudpConfig::max_message`): a larger one is dropped whole
    /// and recorded in `oversized`.
    limit: usize,
    /// The length of a message over `limit` that the peer sent: a protocol violation.
    pub(crate) oversized: Option<usize>,
}

/// One lane's reassembly, by the lane's sequence.
#[derive(Debug, Default)]
struct LaneRx {
    /// The lane's next sequence to deliver in order; every one before it was delivered.
    next: u64,
    /// Sequences `next..next + slots.len()`.
    slots: VecDeque<Slot>,
    /// The message being assembled at the delivery point: its fragments up to `next` are
    /// appended here as they come in order (one copy), their slots gone.
    partial: Partial,
    /// A sequenced lane: the number after the newest message delivered.
    sequenced_next: u64,
}

/// A message assembled in order (see [`LaneRx::partial`]).
#[derive(Debug, Default)]
struct Partial {
    /// Between a FIRST fragment and its LAST one.
    open: bool,
    /// The bytes so far (none kept once `len` is over the limit).
    bytes: Vec<u8>,
    /// The message's length so far.
    len: usize,
}

impl Receiver {
    /// A receiver of `lanes` lanes expecting `first` next, holding at most `window` fragments
    /// out of their lane's order, and none `window` or more past the first not arrived.
    pub(crate) fn new(first: u64, window: usize, lanes: usize) -> Self {
        Receiver {
            next: first,
            arrived: VecDeque::new(),
            window,
            lanes: (0..lanes.max(1)).map(|_| LaneRx::default()).collect(),
            inbox: VecDeque::new(),
            spare: Vec::new(),
            held: 0,
            duplicates: 0,
            stale: 0,
            limit: usize::MAX,
            oversized: None,
        }
    }

    /// The same, delivering no message over `limit` bytes.
    pub(crate) fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// A buffer from `spare` (or a new one) holding `parts`, one after the other.
    pub(crate) fn copy(&mut self, parts: &[&[u8]]) -> Vec<u8> {
        self.sink().copy(parts)
    }

    fn sink(&mut self) -> Sink<'_> {
        Sink {
            inbox: &mut self.inbox,
            spare: &mut self.spare,
            held: &mut self.held,
            limit: self.limit,
            oversized: &mut self.oversized,
        }
    }

    /// A DATA fragment with wire sequence `wire` on `lane` arrived.
    pub(crate) fn on_fragment(
        &mut self,
        wire: u32,
        lane: LaneTag,
        flags: u8,
        fragment: &[u8],
    ) -> Arrival {
        let seq = widen(wire, self.next);
        let offset = seq.wrapping_sub(self.next) as usize;
        if seq < self.next || self.arrived.get(offset) == Some(&true) {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        if offset >= self.window {
            return Arrival::BeyondWindow;
        }
        let window = self.window;
        let Some(rx) = self.lanes.get_mut(usize::from(lane.lane)) else {
            return Arrival::Violation("a fragment on a lane the session does not have");
        };
        let lane_seq = widen(lane.seq, rx.next);
        let Some(at) = lane_seq
            .checked_sub(rx.next)
            .map(|o| o as usize)
            .filter(|&o| o < window)
        else {
            return Arrival::Violation("a lane sequence outside the receive window");
        };
        if rx.slots.get(at).is_some_and(Slot::arrived) {
            return Arrival::Violation("two fragments with one lane sequence");
        }
        let whole_unordered = flags & (FIRST | LAST | UNORDERED) == FIRST | LAST | UNORDERED;
        let in_order = at == 0 && rx.takes_in_order(flags);
        let held_in_slot = !(whole_unordered || in_order);
        if held_in_slot && self.held >= window {
            return Arrival::BeyondWindow;
        }
        if self.arrived.len() <= offset {
            self.arrived.resize(offset + 1, false);
        }
        self.arrived[offset] = true;
        while self.arrived.front() == Some(&true) {
            self.arrived.pop_front();
            self.next += 1;
        }
        let Receiver {
            lanes,
            inbox,
            spare,
            held,
            limit,
            oversized,
            ..
        } = self;
        let mut sink = Sink {
            inbox,
            spare,
            held,
            limit: *limit,
            oversized,
        };
        lanes[usize::from(lane.lane)].on_fragment(at, flags, fragment, &mut sink);
        Arrival::New
    }

    /// A sequenced lane's message arrived: delivered unless one as new or newer was.
    pub(crate) fn on_sequenced(&mut self, lane: LaneTag, message: &[u8]) -> Arrival {
        let Some(rx) = self.lanes.get_mut(usize::from(lane.lane)) else {
            return Arrival::Violation("a message on a lane the session does not have");
        };
        let seq = widen(lane.seq, rx.sequenced_next);
        if seq < rx.sequenced_next {
            self.stale += 1;
            return Arrival::Duplicate;
        }
        rx.sequenced_next = seq + 1;
        let buf = self.copy(&[message]);
        self.inbox.push_back(buf);
        Arrival::New
    }

    /// The acknowledgement of what arrived: `received` counts DATA and PARITY datagrams.
    pub(crate) fn ack(&self, received: u64) -> AckBlock {
        let mut bitmap = 0u64;
        for (i, &arrived) in self.arrived.iter().skip(1).take(64).enumerate() {
            if arrived {
                bitmap |= 1 << i;
            }
        }
        AckBlock {
            next: self.next as u32,
            bitmap,
            window: (self.window - self.held.min(self.window)).min(usize::from(u16::MAX)) as u16,
            received: received as u16,
        }
    }

    /// Fragments held out of their lane's order now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held
    }
}

impl LaneRx {
    /// A fragment `at` past the lane's delivery point arrived (new, checked by the caller).
    fn on_fragment(&mut self, at: usize, flags: u8, fragment: &[u8], sink: &mut Sink<'_>) {
        if self.slots.len() <= at {
            self.slots.resize_with(at + 1, Slot::default);
        }
        let whole = flags & (FIRST | LAST) == FIRST | LAST;
        if at == 0 && self.takes_in_order(flags) {
            // In order: straight into the message (a whole one too).
            self.append_in_order(flags, fragment, sink);
            self.slots[0] = Slot::Delivered;
        } else if whole && flags & UNORDERED != 0 {
            let message = sink.copy(&[fragment]);
            sink.inbox.push_back(message);
            self.slots[at] = Slot::Delivered;
        } else {
            let fragment = sink.copy(&[fragment]);
            *sink.held += 1;
            self.slots[at] = Slot::Held { flags, fragment };
            if flags & UNORDERED != 0 {
                self.deliver_unordered(at, sink);
            }
        }
        self.advance(sink);
    }

    /// The bounds `first..=last` of the complete message around `offset`, if it is complete.
    fn complete_around(&self, offset: usize) -> Option<(usize, usize)> {
        let flags = |i: usize| match &self.slots[i] {
            Slot::Held { flags, .. } => Some(*flags),
            _ => None,
        };
        let mut first = offset;
        while flags(first)? & FIRST == 0 {
            first = first.checked_sub(1)?;
        }
        let mut last = offset;
        while flags(last)? & LAST == 0 {
            last += 1;
            if last >= self.slots.len() {
                return None;
            }
        }
        Some((first, last))
    }

    /// Moves the held fragments `first..=last` into one message in the inbox — or, if the
    /// message is over the limit, drops them and records its length in `oversized`.
    fn deliver_range(&mut self, first: usize, last: usize, sink: &mut Sink<'_>) {
        let len: usize = (first..=last)
            .map(|i| match &self.slots[i] {
                Slot::Held { fragment, .. } => fragment.len(),
                _ => 0,
            })
            .sum();
        let mut message = sink.spare.pop().unwrap_or_default();
        message.clear();
        let keep = len <= sink.limit;
        for i in first..=last {
            if let Slot::Held { fragment, .. } =
                std::mem::replace(&mut self.slots[i], Slot::Delivered)
            {
                if keep {
                    message.extend_from_slice(&fragment);
                }
                sink.spare.push(fragment);
                *sink.held -= 1;
            }
        }
        if keep {
            sink.inbox.push_back(message);
        } else {
            sink.spare.push(message);
            *sink.oversized = Some(len);
        }
    }

    fn deliver_unordered(&mut self, offset: usize, sink: &mut Sink<'_>) {
        if let Some((first, last)) = self.complete_around(offset) {
            self.deliver_range(first, last, sink);
        }
    }

    /// Delivers what is in order at the front, and drops delivered slots.
    fn advance(&mut self, sink: &mut Sink<'_>) {
        loop {
            let goes = match self.slots.front() {
                Some(Slot::Delivered) => true,
                Some(Slot::Held { flags, .. }) => self.takes_in_order(*flags),
                _ => false,
            };
            if !goes {
                return;
            }
            if let Some(Slot::Held { flags, fragment }) = self.slots.pop_front() {
                *sink.held -= 1;
                self.append_in_order(flags, &fragment, sink);
                sink.spare.push(fragment);
            }
            self.next += 1;
        }
    }

    /// Whether the lane's next fragment in order, with `flags`, goes into the message
    /// assembled at the front: one that opens it (FIRST) or continues it. At the front an
    /// unordered message is assembled as an ordered one (nothing before it waits).
    fn takes_in_order(&self, flags: u8) -> bool {
        self.partial.open || flags & FIRST != 0
    }

    /// Appends the lane's next fragment in order to the message assembled at the front — a
    /// FIRST one opens it (a fragment that is not FIRST continues it even if FIRST: a new
    /// message cannot begin before the last one's LAST) — and moves it to the inbox on its
    /// LAST, or drops it there and records its length in `oversized` if it is over the limit.
    fn append_in_order(&mut self, flags: u8, fragment: &[u8], sink: &mut Sink<'_>) {
        if !self.partial.open {
            self.partial.open = true;
            self.partial.bytes = sink.copy(&[]);
        }
        let partial = &mut self.partial;
        partial.len += fragment.len();
        if partial.len <= sink.limit {
            partial.bytes.extend_from_slice(fragment);
        } else if !partial.bytes.is_empty() {
            partial.bytes.clear();
        }
        if flags & LAST == 0 {
            return;
        }
        let done = std::mem::take(partial);
        if done.len <= sink.limit {
            sink.inbox.push_back(done.bytes);
        } else {
            sink.spare.push(done.bytes);
            *sink.oversized = Some(done.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fragment on lane 0 whose lane sequence is its session sequence less `first` (one
    /// lane: the two orders are one).
    fn frag(r: &mut Receiver, first: u64, seq: u64, flags: u8, data: &[u8]) -> Arrival {
        let lane = LaneTag {
            lane: 0,
            seq: seq.wrapping_sub(first) as u32,
        };
        r.on_fragment(seq as u32, lane, flags, data)
    }

    fn on(
        r: &mut Receiver,
        seq: u32,
        (lane, lane_seq): (u8, u32),
        flags: u8,
        data: &[u8],
    ) -> Arrival {
        r.on_fragment(
            seq,
            LaneTag {
                lane,
                seq: lane_seq,
            },
            flags,
            data,
        )
    }

    fn drain(r: &mut Receiver) -> Vec<Vec<u8>> {
        r.inbox.drain(..).collect()
    }

    #[test]
    fn a_message_over_the_limit_is_dropped_whole_and_reported() {
        let mut r = Receiver::new(0, 64, 1).with_limit(10);
        assert_eq!(frag(&mut r, 0, 0, FIRST, &[1; 6]), Arrival::New);
        assert_eq!(frag(&mut r, 0, 1, LAST, &[2; 6]), Arrival::New);
        assert!(r.inbox.is_empty(), "12 bytes over a 10-byte limit");
        assert_eq!(r.oversized, Some(12));
        assert_eq!(r.held(), 0, "its fragments are not kept");
        r.oversized = None;
        frag(&mut r, 0, 2, FIRST, &[3; 5]);
        frag(&mut r, 0, 3, LAST, &[4; 5]);
        assert_eq!(
            r.inbox.pop_front().map(|m| m.len()),
            Some(10),
            "at the limit"
        );
        assert_eq!(r.oversized, None);
    }

    #[test]
    fn in_order_reordered_and_duplicate_fragments() {
        let mut r = Receiver::new(0, 64, 1);
        assert_eq!(frag(&mut r, 0, 1, FIRST | LAST, b"b"), Arrival::New);
        assert!(drain(&mut r).is_empty(), "waits for 0");
        let ack = r.ack(1);
        assert_eq!((ack.next, ack.bitmap), (0, 0b1));
        assert_eq!(frag(&mut r, 0, 0, FIRST | LAST, b"a"), Arrival::New);
        assert_eq!(drain(&mut r), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(frag(&mut r, 0, 1, FIRST | LAST, b"b"), Arrival::Duplicate);
        assert_eq!(r.ack(2).next, 2);
        assert_eq!(
            frag(&mut r, 0, 64 + 2, FIRST | LAST, b"x"),
            Arrival::BeyondWindow
        );
    }

    #[test]
    fn fragments_reassemble_in_any_arrival_order() {
        let mut r = Receiver::new(10, 64, 1);
        frag(&mut r, 10, 12, LAST, b"ef");
        frag(&mut r, 10, 10, FIRST, b"ab");
        assert!(drain(&mut r).is_empty());
        let ack = r.ack(2);
        assert_eq!((ack.next, ack.bitmap), (11, 0b1), "10 arrived");
        frag(&mut r, 10, 11, 0, b"cd");
        assert_eq!(drain(&mut r), vec![b"abcdef".to_vec()]);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn in_order_fragments_go_straight_into_the_message_and_leave_the_window_open() {
        let mut r = Receiver::new(0, 4, 1);
        frag(&mut r, 0, 0, FIRST, b"ab");
        frag(&mut r, 0, 1, 0, b"cd");
        frag(&mut r, 0, 2, 0, b"ef");
        assert_eq!(r.lanes[0].partial.bytes, b"abcdef", "no slot keeps a copy");
        assert!(r.lanes[0].slots.is_empty());
        let ack = r.ack(3);
        assert_eq!(
            (ack.next, ack.window, r.held()),
            (3, 4, 0),
            "a message assembled in order is bounded by the message limit, not the window \
             (two lanes mid-message could otherwise close it for good)"
        );
        assert_eq!(frag(&mut r, 0, 4, 0, b"h"), Arrival::New);
        assert_eq!(r.ack(4).window, 3, "one fragment held out of order");
        assert_eq!(frag(&mut r, 0, 3, 0, b"g"), Arrival::New);
        assert_eq!(frag(&mut r, 0, 5, LAST, b"i"), Arrival::New);
        assert_eq!(drain(&mut r), vec![b"abcdefghi".to_vec()]);
        assert_eq!((r.held(), r.ack(6).window), (0, 4));
    }

    #[test]
    fn a_message_begun_in_order_takes_its_late_fragments_from_the_slots() {
        let mut r = Receiver::new(0, 64, 1);
        frag(&mut r, 0, 0, FIRST, b"a");
        frag(&mut r, 0, 3, LAST, b"d");
        frag(&mut r, 0, 4, FIRST | LAST, b"next");
        frag(&mut r, 0, 2, 0, b"c");
        assert!(drain(&mut r).is_empty(), "1 is missing");
        assert_eq!(r.held(), 3);
        frag(&mut r, 0, 1, 0, b"b");
        assert_eq!(drain(&mut r), vec![b"abcd".to_vec(), b"next".to_vec()]);
        assert_eq!((r.held(), r.ack(5).next), (0, 5));
    }

    #[test]
    fn an_oversized_message_in_order_keeps_no_bytes_past_the_limit() {
        let mut r = Receiver::new(0, 64, 1).with_limit(4);
        frag(&mut r, 0, 0, FIRST, b"abc");
        frag(&mut r, 0, 1, 0, b"def");
        assert!(
            r.lanes[0].partial.bytes.is_empty(),
            "over the limit: nothing kept"
        );
        assert_eq!(r.oversized, None, "its length is known at its end");
        frag(&mut r, 0, 2, LAST, b"g");
        assert_eq!(r.oversized, Some(7));
        assert!(r.inbox.is_empty());
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn unordered_messages_skip_the_line_and_ordered_ones_wait() {
        let mut r = Receiver::new(0, 64, 1);
        frag(&mut r, 0, 2, FIRST | LAST | UNORDERED, b"u");
        frag(&mut r, 0, 3, FIRST | UNORDERED, b"v1");
        frag(&mut r, 0, 4, LAST | UNORDERED, b"v2");
        frag(&mut r, 0, 1, FIRST | LAST, b"o1");
        assert_eq!(drain(&mut r), vec![b"u".to_vec(), b"v1v2".to_vec()]);
        frag(&mut r, 0, 0, FIRST | LAST, b"o0");
        assert_eq!(drain(&mut r), vec![b"o0".to_vec(), b"o1".to_vec()]);
        assert_eq!(r.ack(5).next, 5, "delivered unordered slots advance too");
    }

    #[test]
    fn sequences_wrap() {
        let start = u64::from(u32::MAX) - 1;
        let mut r = Receiver::new(start, 64, 1);
        for (i, seq) in (start..start + 4).enumerate() {
            frag(&mut r, start, seq, FIRST | LAST, &[i as u8]);
        }
        assert_eq!(drain(&mut r).concat(), vec![0, 1, 2, 3]);
        assert_eq!(r.ack(4).next, 2);
    }

    #[test]
    fn a_gap_in_one_lane_holds_back_no_other() {
        let mut r = Receiver::new(0, 64, 2);
        // Lane 0 carries a three-fragment message at 0, 2 and 4 (2 is lost for now); lane 1
        // small messages between them.
        on(&mut r, 0, (0, 0), FIRST, b"B0");
        on(&mut r, 1, (1, 0), FIRST | LAST, b"s0");
        on(&mut r, 3, (1, 1), FIRST | LAST, b"s1");
        on(&mut r, 4, (0, 2), LAST, b"B2");
        on(&mut r, 5, (1, 2), FIRST, b"s2");
        on(&mut r, 6, (1, 3), LAST, b"s3");
        assert_eq!(
            drain(&mut r),
            vec![b"s0".to_vec(), b"s1".to_vec(), b"s2s3".to_vec()],
            "lane 1 is delivered, in its order, past lane 0's gap"
        );
        let ack = r.ack(6);
        assert_eq!((ack.next, ack.bitmap, r.held()), (2, 0b1111, 1));
        on(&mut r, 2, (0, 1), 0, b"B1");
        assert_eq!(drain(&mut r), vec![b"B0B1B2".to_vec()]);
        assert_eq!((r.ack(7).next, r.held()), (7, 0));
    }

    #[test]
    fn lane_fields_no_honest_sender_writes_are_violations() {
        let mut r = Receiver::new(0, 8, 2);
        assert!(matches!(
            on(&mut r, 0, (2, 0), FIRST | LAST, b"x"),
            Arrival::Violation(_)
        ));
        assert!(matches!(
            on(&mut r, 0, (1, 8), FIRST | LAST, b"x"),
            Arrival::Violation(_)
        ));
        assert_eq!(on(&mut r, 0, (1, 1), FIRST, b"x"), Arrival::New);
        assert!(matches!(
            on(&mut r, 1, (1, 1), FIRST, b"y"),
            Arrival::Violation(_)
        ));
        assert!(matches!(
            r.on_sequenced(LaneTag { lane: 5, seq: 0 }, b"p"),
            Arrival::Violation(_)
        ));
    }

    #[test]
    fn fragments_held_out_of_order_stay_within_the_window() {
        // A hostile sender: every fragment on its own lane sequence gap, none completing.
        let mut r = Receiver::new(0, 4, 4);
        let mut taken = 0;
        for seq in 0..40u32 {
            let lane = (seq % 4) as u8;
            if on(&mut r, seq, (lane, 1 + seq / 4), 0, &[0; 100]) == Arrival::New {
                taken += 1;
            }
        }
        assert_eq!((taken, r.held()), (4, 4), "the fifth is refused, not held");
        assert_eq!(r.ack(0).window, 0);
    }

    #[test]
    fn a_sequenced_lane_delivers_only_what_is_newer() {
        let mut r = Receiver::new(0, 64, 2);
        let tag = |seq| LaneTag { lane: 1, seq };
        assert_eq!(r.on_sequenced(tag(3), b"p3"), Arrival::New);
        assert_eq!(r.on_sequenced(tag(1), b"p1"), Arrival::Duplicate);
        assert_eq!(r.on_sequenced(tag(3), b"p3"), Arrival::Duplicate);
        assert_eq!(r.on_sequenced(tag(4), b"p4"), Arrival::New);
        assert_eq!(
            r.on_sequenced(LaneTag { lane: 0, seq: 0 }, b"q0"),
            Arrival::New,
            "each lane its own"
        );
        assert_eq!(
            drain(&mut r),
            vec![b"p3".to_vec(), b"p4".to_vec(), b"q0".to_vec()]
        );
        assert_eq!(r.stale, 2);
    }
}
