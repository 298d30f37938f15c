//! The receiving side of a connection: the receive window, reassembly of fragments, ordered
//! and unordered delivery, and the acknowledgement it sends back.

use std::collections::VecDeque;

use crate::proto::packet::{AckBlock, FIRST, LAST, UNORDERED, widen};

/// One sequence number past the delivery point.
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

/// What happened to an arriving fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// New: taken.
    New,
    /// Arrived before (or already delivered).
    Duplicate,
    /// Past the receive window: dropped (the sender will send it again).
    BeyondWindow,
}

/// Reassembles and delivers; `inbox` holds whole messages for the application.
#[derive(Debug)]
pub(crate) struct Receiver {
    /// The next sequence to deliver in order; every one before it was delivered.
    next: u64,
    /// Sequences `next..next + slots.len()`.
    slots: VecDeque<Slot>,
    window: usize,
    /// Whole messages, in delivery order.
    pub(crate) inbox: VecDeque<Vec<u8>>,
    /// Buffers to reuse.
    pub(crate) spare: Vec<Vec<u8>>,
    /// Fragments held now (bytes bounded by window × fragment size).
    held: usize,
    pub(crate) duplicates: u64,
    /// The largest message delivered (`RudpConfig::max_message`): a larger one is dropped whole
    /// and recorded in `oversized`.
    limit: usize,
    /// The length of a message over `limit` that the peer sent: a protocol violation.
    pub(crate) oversized: Option<usize>,
    /// The ordered message being assembled at the delivery point: its fragments up to `next`
    /// are appended here as they come in order (one copy, not one into a slot and one more
    /// into the message), their slots gone.
    partial: Partial,
}

/// An ordered message assembled in order (see [`Receiver::partial`]).
#[derive(Debug, Default)]
struct Partial {
    /// Between a FIRST fragment and its LAST one.
    open: bool,
    /// The bytes so far (none kept once `len` is over the limit).
    bytes: Vec<u8>,
    /// The message's length so far.
    len: usize,
    /// Its fragments appended: counted in `held` and off the window, as they were in slots.
    fragments: usize,
}

impl Receiver {
    /// A receiver expecting `first` next, holding at most `window` sequences past it.
    pub(crate) fn new(first: u64, window: usize) -> Self {
        Receiver {
            next: first,
            slots: VecDeque::new(),
            window,
            inbox: VecDeque::new(),
            spare: Vec::new(),
            held: 0,
            duplicates: 0,
            limit: usize::MAX,
            oversized: None,
            partial: Partial::default(),
        }
    }

    /// The same, delivering no message over `limit` bytes.
    pub(crate) fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// A buffer from `spare` (or a new one) holding `parts`, one after the other.
    pub(crate) fn copy(&mut self, parts: &[&[u8]]) -> Vec<u8> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        for p in parts {
            buf.extend_from_slice(p);
        }
        buf
    }

    /// A DATA fragment with wire sequence `wire` arrived.
    pub(crate) fn on_fragment(&mut self, wire: u32, flags: u8, fragment: &[u8]) -> Arrival {
        let seq = widen(wire, self.next);
        if seq < self.next {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        let offset = (seq - self.next) as usize;
        // The message assembled at the front holds fragments the window held before they were
        // appended: the window still bounds them all.
        if offset + self.partial.fragments >= self.window {
            return Arrival::BeyondWindow;
        }
        if self.slots.len() <= offset {
            self.slots.resize_with(offset + 1, Slot::default);
        }
        if self.slots[offset].arrived() {
            self.duplicates += 1;
            return Arrival::Duplicate;
        }
        let whole = flags & (FIRST | LAST) == FIRST | LAST;
        if offset == 0 && self.takes_in_order(flags) {
            // In order: straight into the message (a whole one too).
            self.held += 1;
            self.append_in_order(flags, fragment);
            self.slots[0] = Slot::Delivered;
        } else if whole && flags & UNORDERED != 0 {
            let message = self.copy(&[fragment]);
            self.inbox.push_back(message);
            self.slots[offset] = Slot::Delivered;
        } else {
            let fragment = self.copy(&[fragment]);
            self.held += 1;
            self.slots[offset] = Slot::Held { flags, fragment };
            if flags & UNORDERED != 0 {
                self.deliver_unordered(offset);
            }
        }
        self.advance();
        Arrival::New
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
    fn deliver_range(&mut self, first: usize, last: usize) {
        let len: usize = (first..=last)
            .map(|i| match &self.slots[i] {
                Slot::Held { fragment, .. } => fragment.len(),
                _ => 0,
            })
            .sum();
        let mut message = self.spare.pop().unwrap_or_default();
        message.clear();
        let keep = len <= self.limit;
        for i in first..=last {
            if let Slot::Held { fragment, .. } =
                std::mem::replace(&mut self.slots[i], Slot::Delivered)
            {
                if keep {
                    message.extend_from_slice(&fragment);
                }
                self.spare.push(fragment);
                self.held -= 1;
            }
        }
        if keep {
            self.inbox.push_back(message);
        } else {
            self.spare.push(message);
            self.oversized = Some(len);
        }
    }

    fn deliver_unordered(&mut self, offset: usize) {
        if let Some((first, last)) = self.complete_around(offset) {
            self.deliver_range(first, last);
        }
    }

    /// Delivers what is in order at the front, and drops delivered slots.
    fn advance(&mut self) {
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
                self.append_in_order(flags, &fragment);
                self.spare.push(fragment);
            }
            self.next += 1;
        }
    }

    /// Whether the next fragment in order, with `flags`, goes into the message assembled at
    /// the front: an ordered one that opens it (FIRST) or continues it.
    fn takes_in_order(&self, flags: u8) -> bool {
        flags & UNORDERED == 0 && (self.partial.open || flags & FIRST != 0)
    }

    /// Appends the next fragment in order (already counted in `held`) to the message
    /// assembled at the front — a FIRST one opens it (a fragment that is not FIRST continues
    /// it even if FIRST: a new message cannot begin before the last one's LAST) — and moves
    /// it to the inbox on its LAST, or drops it there and records its length in `oversized`
    /// if it is over the limit.
    fn append_in_order(&mut self, flags: u8, fragment: &[u8]) {
        if !self.partial.open {
            self.partial.open = true;
            self.partial.bytes = self.copy(&[]);
        }
        let partial = &mut self.partial;
        partial.len += fragment.len();
        partial.fragments += 1;
        if partial.len <= self.limit {
            partial.bytes.extend_from_slice(fragment);
        } else if !partial.bytes.is_empty() {
            partial.bytes.clear();
        }
        if flags & LAST == 0 {
            return;
        }
        let done = std::mem::take(partial);
        self.held -= done.fragments;
        if done.len <= self.limit {
            self.inbox.push_back(done.bytes);
        } else {
            self.spare.push(done.bytes);
            self.oversized = Some(done.len);
        }
    }

    /// The acknowledgement of what arrived: `received` counts DATA and PARITY datagrams.
    pub(crate) fn ack(&self, received: u64) -> AckBlock {
        let gap = self
            .slots
            .iter()
            .position(|s| !s.arrived())
            .unwrap_or(self.slots.len());
        let mut bitmap = 0u64;
        for (i, slot) in self.slots.iter().skip(gap + 1).take(64).enumerate() {
            if slot.arrived() {
                bitmap |= 1 << i;
            }
        }
        AckBlock {
            next: (self.next + gap as u64) as u32,
            bitmap,
            window: (self.window - self.held.min(self.window)).min(usize::from(u16::MAX)) as u16,
            received: received as u16,
        }
    }

    /// Fragments held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_over_the_limit_is_dropped_whole_and_reported() {
        let mut r = Receiver::new(0, 64).with_limit(10);
        assert_eq!(r.on_fragment(0, FIRST, &[1; 6]), Arrival::New);
        assert_eq!(r.on_fragment(1, LAST, &[2; 6]), Arrival::New);
        assert!(r.inbox.is_empty(), "12 bytes over a 10-byte limit");
        assert_eq!(r.oversized, Some(12));
        assert_eq!(r.held(), 0, "its fragments are not kept");
        r.oversized = None;
        r.on_fragment(2, FIRST, &[3; 5]);
        r.on_fragment(3, LAST, &[4; 5]);
        assert_eq!(
            r.inbox.pop_front().map(|m| m.len()),
            Some(10),
            "at the limit"
        );
        assert_eq!(r.oversized, None);
    }

    fn drain(r: &mut Receiver) -> Vec<Vec<u8>> {
        r.inbox.drain(..).collect()
    }

    #[test]
    fn in_order_reordered_and_duplicate_fragments() {
        let mut r = Receiver::new(0, 64);
        assert_eq!(r.on_fragment(1, FIRST | LAST, b"b"), Arrival::New);
        assert!(drain(&mut r).is_empty(), "waits for 0");
        let ack = r.ack(1);
        assert_eq!((ack.next, ack.bitmap), (0, 0b1));
        assert_eq!(r.on_fragment(0, FIRST | LAST, b"a"), Arrival::New);
        assert_eq!(drain(&mut r), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(r.on_fragment(1, FIRST | LAST, b"b"), Arrival::Duplicate);
        assert_eq!(r.ack(2).next, 2);
        assert_eq!(
            r.on_fragment(64 + 2, FIRST | LAST, b"x"),
            Arrival::BeyondWindow
        );
    }

    #[test]
    fn fragments_reassemble_in_any_arrival_order() {
        let mut r = Receiver::new(10, 64);
        r.on_fragment(12, LAST, b"ef");
        r.on_fragment(10, FIRST, b"ab");
        assert!(drain(&mut r).is_empty());
        let ack = r.ack(2);
        assert_eq!(
            (ack.next, ack.bitmap),
            (11, 0b1),
            "10 held counts as arrived"
        );
        r.on_fragment(11, 0, b"cd");
        assert_eq!(drain(&mut r), vec![b"abcdef".to_vec()]);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn in_order_fragments_go_straight_into_the_message_and_count_against_the_window() {
        let mut r = Receiver::new(0, 4);
        r.on_fragment(0, FIRST, b"ab");
        r.on_fragment(1, 0, b"cd");
        r.on_fragment(2, 0, b"ef");
        assert_eq!(r.held(), 3, "appended, still held");
        assert_eq!(r.partial.bytes, b"abcdef", "no slot keeps a copy");
        assert!(r.slots.is_empty());
        let ack = r.ack(3);
        assert_eq!((ack.next, ack.window), (3, 1));
        assert_eq!(
            r.on_fragment(4, LAST, b"h"),
            Arrival::BeyondWindow,
            "the window holds the message's fragments wherever they are"
        );
        assert_eq!(r.on_fragment(3, LAST, b"g"), Arrival::New);
        assert_eq!(drain(&mut r), vec![b"abcdefg".to_vec()]);
        assert_eq!((r.held(), r.ack(4).window), (0, 4));
    }

    #[test]
    fn a_message_begun_in_order_takes_its_late_fragments_from_the_slots() {
        let mut r = Receiver::new(0, 64);
        r.on_fragment(0, FIRST, b"a");
        r.on_fragment(3, LAST, b"d");
        r.on_fragment(4, FIRST | LAST, b"next");
        r.on_fragment(2, 0, b"c");
        assert!(drain(&mut r).is_empty(), "1 is missing");
        assert_eq!(r.held(), 4);
        r.on_fragment(1, 0, b"b");
        assert_eq!(drain(&mut r), vec![b"abcd".to_vec(), b"next".to_vec()]);
        assert_eq!((r.held(), r.ack(5).next), (0, 5));
    }

    #[test]
    fn an_oversized_message_in_order_keeps_no_bytes_past_the_limit() {
        let mut r = Receiver::new(0, 64).with_limit(4);
        r.on_fragment(0, FIRST, b"abc");
        r.on_fragment(1, 0, b"def");
        assert!(r.partial.bytes.is_empty(), "over the limit: nothing kept");
        assert_eq!(r.oversized, None, "its length is known at its end");
        r.on_fragment(2, LAST, b"g");
        assert_eq!(r.oversized, Some(7));
        assert!(r.inbox.is_empty());
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn unordered_messages_skip_the_line_and_ordered_ones_wait() {
        let mut r = Receiver::new(0, 64);
        r.on_fragment(2, FIRST | LAST | UNORDERED, b"u");
        r.on_fragment(3, FIRST | UNORDERED, b"v1");
        r.on_fragment(4, LAST | UNORDERED, b"v2");
        r.on_fragment(1, FIRST | LAST, b"o1");
        assert_eq!(drain(&mut r), vec![b"u".to_vec(), b"v1v2".to_vec()]);
        r.on_fragment(0, FIRST | LAST, b"o0");
        assert_eq!(drain(&mut r), vec![b"o0".to_vec(), b"o1".to_vec()]);
        assert_eq!(r.ack(5).next, 5, "delivered unordered slots advance too");
    }

    #[test]
    fn sequences_wrap() {
        let start = u64::from(u32::MAX) - 1;
        let mut r = Receiver::new(start, 64);
        for (i, wire) in [u32::MAX - 1, u32::MAX, 0, 1].into_iter().enumerate() {
            r.on_fragment(wire, FIRST | LAST, &[i as u8]);
        }
        assert_eq!(drain(&mut r).concat(), vec![0, 1, 2, 3]);
        assert_eq!(r.ack(4).next, 2);
    }
}
