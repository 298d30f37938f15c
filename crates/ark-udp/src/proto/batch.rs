//! A socket's datagram buffers, lent to the driver's syscalls (smoltcp's way: the core never
//! names a socket or a syscall type): the receive slots ([`RecvBatch`]) that a receive fills
//! and the sessions read in place, and the send queue ([`SendBatch`]) that the sessions and
//! the pacer fill and a send drains, message by message ([`Outgoing`]).
//!
//! Offloads, when the driver turned them on: consecutive datagrams of one size to one
//! destination queue as one *train* (sent as one message with `UDP_SEGMENT`), and a receive
//! with `UDP_GRO` may hold several datagrams of one peer, split here by the segment size the
//! kernel reported.

use std::net::SocketAddr;

/// The most datagrams in one GSO train (the kernel's `UDP_MAX_SEGMENTS`).
pub(crate) const MAX_TRAIN_SEGMENTS: usize = 64;

/// The most payload bytes in one GSO train: one IPv4 UDP datagram's worth (the kernel builds
/// the train as one such datagram before cutting it).
pub(crate) const MAX_TRAIN_BYTES: usize = crate::MAX_PAYLOAD_V4;

/// One received datagram of a [`RecvBatch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Where its bytes start in the batch's `data`.
    pub(crate) start: usize,
    /// Bytes stored (at most the slot size).
    pub(crate) len: usize,
    pub(crate) from: SocketAddr,
    /// The datagram was longer than the slot: the tail was cut off.
    pub(crate) truncated: bool,
}

/// Where receive slots start: half-way into a page, and every slot of a page or more at the
/// same offset (smaller slots a cache line apart).
///
/// The kernel copies a datagram out of its buffer with `rep movsb`; a destination a few bytes
/// past a page boundary, where the source data sits too, makes that copy alias on the low
/// 12 address bits and run several times slower. A 128 KiB buffer comes from `mmap` and starts
/// 16 bytes into a page: 16 KiB datagrams to 16 connected clients ran at 31 k msg/s, with
/// `_copy_to_iter` taking 45 % of all cycles (7 % for tokio's heap buffer at a random offset);
/// at half a page the same run made 52 k (offsets 64 to 3,072 all 48–52 k, 0 gave 43 k).
fn slot_layout(slot: usize) -> (usize, usize) {
    const PAGE: usize = 4096;
    let stride = if slot >= PAGE {
        slot.next_multiple_of(PAGE)
    } else {
        slot.next_multiple_of(64)
    };
    (stride, PAGE / 2)
}

/// Reusable buffers for receiving up to `slots` datagrams of at most `slot` bytes per call.
pub(crate) struct RecvBatch {
    /// The slots, with slack before the first (see [`slot_layout`]); receives write here.
    pub(crate) data: Vec<u8>,
    /// The most bytes a datagram may have (longer ones are cut and reported truncated).
    pub(crate) slot: usize,
    /// Distance between slot starts (see [`slot_layout`]).
    stride: usize,
    /// Where slot 0 starts in `data`.
    offset: usize,
    /// Datagrams per receive call (the driver gives 1 where its path has no batched receive).
    slots: usize,
    /// The socket has `UDP_GRO` on: a slot may hold several datagrams, split on receipt.
    gro: bool,
    /// Buffers that held several datagrams (GRO), since the driver last took the count.
    pub(crate) coalesced: u64,
    pub(crate) received: Vec<Received>,
}

impl RecvBatch {
    /// Room for `slots` datagrams (at least 1) of at most `slot` bytes per receive.
    pub(crate) fn new(slots: usize, slot: usize) -> Self {
        let slots = slots.max(1);
        let slot = slot.max(1);
        let (stride, page_offset) = slot_layout(slot);
        // A page of slack puts slot 0 at `page_offset` into a page wherever the heap puts `data`;
        // the byte after the last slot lets the portable path see a datagram longer than `slot`.
        let data = vec![0; 4096 + (slots - 1) * stride + slot + 1];
        let offset = (page_offset + 4096 - data.as_ptr() as usize % 4096) % 4096;
        RecvBatch {
            data,
            slot,
            stride,
            offset,
            slots,
            gro: false,
            coalesced: 0,
            received: Vec::with_capacity(slots),
        }
    }

    /// Receives with the socket's `UDP_GRO` on (the driver's `enable_offload`): every receive then
    /// reads the segment size, so a coalesced buffer is split, never delivered whole.
    pub(crate) fn set_gro(&mut self, on: bool) {
        self.gro = on;
    }

    /// Whether a slot may hold several datagrams (receive only with `recv_batch` then).
    pub(crate) fn gro(&self) -> bool {
        self.gro
    }

    /// Where slot `i` starts in `data` (`slot` bytes from there are the slot's, and one more
    /// byte after the last slot).
    pub(crate) fn slot_start(&self, i: usize) -> usize {
        self.offset + i * self.stride
    }

    /// Records the `len` bytes received into slot `slot` from `from`: one datagram, or with a
    /// GRO `segment` size shorter than `len`, one datagram per segment (the last may be
    /// shorter). A cut buffer's last datagram is reported truncated. A receive clears
    /// `received` first, then records each slot it filled.
    pub(crate) fn push_received(
        &mut self,
        slot: usize,
        len: usize,
        from: SocketAddr,
        (segment, truncated): (usize, bool),
    ) {
        let start = self.slot_start(slot);
        if segment == 0 || segment >= len {
            self.received.push(Received {
                start,
                len,
                from,
                truncated,
            });
            return;
        }
        self.coalesced += 1;
        let mut at = 0;
        while at < len {
            let n = segment.min(len - at);
            self.received.push(Received {
                start: start + at,
                len: n,
                from,
                truncated: truncated && at + n == len,
            });
            at += n;
        }
    }

    /// Datagrams one receive may take.
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The bytes of received datagram `i`.
    pub(crate) fn datagram(&self, i: usize) -> &[u8] {
        let r = &self.received[i];
        &self.data[r.start..r.start + r.len]
    }

    /// Tests: the batch as a receive of `datagrams` would leave it, one per slot (as many as
    /// fit).
    #[cfg(test)]
    pub(crate) fn fill(&mut self, datagrams: &[(SocketAddr, &[u8])]) {
        self.received.clear();
        for (i, (from, bytes)) in datagrams.iter().take(self.slots).enumerate() {
            let len = bytes.len().min(self.slot);
            let start = self.slot_start(i);
            self.data[start..start + len].copy_from_slice(&bytes[..len]);
            self.push_received(i, len, *from, (0, bytes.len() > self.slot));
        }
    }
}

/// Datagrams queued for sending: contiguous bytes plus entries saying where each message's
/// bytes are. A datagram sent back unchanged from the receive batch being delivered (an echo)
/// is queued by its place there instead of copied ([`push_received`](Self::push_received));
/// such entries are sent, or copied in by [`settle`](Self::settle), before the receive batch
/// is reused. With GSO on, datagrams of one size to one destination pushed one after another
/// share an entry (a train, sent as one message with `UDP_SEGMENT`).
pub(crate) struct SendBatch {
    pub(crate) data: Vec<u8>,
    entries: Vec<Entry>,
    /// Entries before this one were sent.
    sent: usize,
    /// Bytes of the entries queued by their place in the receive batch (since the last reset).
    received_bytes: usize,
    /// Most datagrams per train: 1 without GSO.
    max_segments: usize,
    /// Trains of several datagrams sent as one message, since the driver last took the count.
    pub(crate) trains_sent: u64,
    /// Trains the kernel refused and that went datagram by datagram instead.
    pub(crate) gso_fallbacks: u64,
}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch {
            data: Vec::new(),
            entries: Vec::new(),
            sent: 0,
            received_bytes: 0,
            max_segments: 1,
            trains_sent: 0,
            gso_fallbacks: 0,
        }
    }
}

/// One queued message: a datagram, or a train of datagrams of `segment` bytes (the last may
/// be shorter) to one destination.
#[derive(Debug, Clone)]
struct Entry {
    /// The destination (`None`: the connected peer).
    to: Option<SocketAddr>,
    bytes: Bytes,
    /// Bytes of the whole message.
    len: usize,
    /// Bytes per datagram: `len` for a single datagram.
    segment: usize,
}

impl Entry {
    /// Several datagrams in one message.
    fn is_train(&self) -> bool {
        self.len > self.segment
    }

    /// Datagrams in the message.
    fn datagrams(&self) -> usize {
        if self.segment == 0 {
            1
        } else {
            self.len.div_ceil(self.segment)
        }
    }
}

/// Where a queued datagram's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bytes {
    /// At this offset of the batch's own `data`.
    Queued(usize),
    /// At this offset of the receive batch's buffer.
    Received(usize),
}

impl SendBatch {
    pub(crate) fn is_empty(&self) -> bool {
        self.sent == self.entries.len()
    }

    /// Messages (datagrams or trains) queued and not yet sent.
    pub(crate) fn queued(&self) -> usize {
        self.entries.len() - self.sent
    }

    /// Queues trains of up to `segments` datagrams (1: no GSO).
    pub(crate) fn set_max_segments(&mut self, segments: usize) {
        self.max_segments = segments.clamp(1, MAX_TRAIN_SEGMENTS);
    }

    /// Whether the next message to send is a train.
    pub(crate) fn next_is_train(&self) -> bool {
        self.entries.get(self.sent).is_some_and(Entry::is_train)
    }

    /// Bytes queued (those queued by their place in the receive batch included), sent ones
    /// too until the queue empties.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len() + self.received_bytes
    }

    /// Whether entries refer to the receive batch: send or [`settle`](Self::settle) them
    /// before it is reused.
    pub(crate) fn refers_to_received(&self) -> bool {
        self.received_bytes > 0
    }

    pub(crate) fn push(&mut self, to: Option<SocketAddr>, payload: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(payload);
        self.push_entry(to, Bytes::Queued(start), payload.len());
    }

    /// Queues the datagram `write` puts at the front of the up to `max` bytes it is given,
    /// written in place (no copy); `write` returns its length, 0 for none (nothing queued).
    /// Returns the length.
    pub(crate) fn push_with(
        &mut self,
        to: Option<SocketAddr>,
        max: usize,
        write: impl FnOnce(&mut [u8]) -> usize,
    ) -> usize {
        let start = self.data.len();
        self.data.resize(start + max, 0);
        let len = write(&mut self.data[start..]).min(max);
        self.data.truncate(start + len);
        if len > 0 {
            self.push_entry(to, Bytes::Queued(start), len);
        }
        len
    }

    /// Queues the `len` bytes at `offset` of the receive batch's buffer, by their place (the
    /// datagrams of a coalesced receive sit back to back there: echoed, they form a train).
    pub(crate) fn push_received(&mut self, to: Option<SocketAddr>, offset: usize, len: usize) {
        self.push_entry(to, Bytes::Received(offset), len);
        self.received_bytes += len;
    }

    /// Queues a datagram of `len` bytes at `bytes`: onto the last entry's train where it
    /// joins it, else as an entry of its own.
    fn push_entry(&mut self, to: Option<SocketAddr>, bytes: Bytes, len: usize) {
        if self.max_segments > 1 && self.joins_last_train(&to, bytes, len) {
            if let Some(last) = self.entries.last_mut() {
                last.len += len;
            }
            return;
        }
        self.entries.push(Entry {
            to,
            bytes,
            len,
            segment: len,
        });
    }

    /// Whether `len` bytes to `to`, at `bytes`, extend the last entry's train: it is unsent,
    /// its bytes end where these start (in the same buffer), it goes to `to`, its datagrams
    /// are `len` bytes (or longer, for a short last one that ends the train) and it has room.
    fn joins_last_train(&self, to: &Option<SocketAddr>, bytes: Bytes, len: usize) -> bool {
        let Some(last) = self.entries.last() else {
            return false;
        };
        let contiguous = match (last.bytes, bytes) {
            (Bytes::Queued(a), Bytes::Queued(b)) | (Bytes::Received(a), Bytes::Received(b)) => {
                a + last.len == b
            }
            _ => false,
        };
        self.entries.len() > self.sent
            && contiguous
            && len > 0
            && last.len % last.segment == 0
            && len <= last.segment
            && last.datagrams() < self.max_segments
            && last.len + len <= MAX_TRAIN_BYTES
            && last.to == *to
    }

    /// The kernel refused the train at the head of the queue: it is split into its datagrams;
    /// `for_good` (the refusal is the socket's or the device's: no GSO there) splits every
    /// later train too and forms no new one.
    #[cfg_attr(
        not(all(target_os = "linux", not(ark_portable))),
        allow(dead_code, reason = "the portable path forms no trains")
    )]
    pub(crate) fn split_refused_train(&mut self, for_good: bool) {
        self.gso_fallbacks += 1;
        let end = if for_good {
            self.max_segments = 1;
            self.entries.len()
        } else {
            self.sent + 1
        };
        let mut split = Vec::with_capacity(self.entries.len());
        for entry in self.entries.drain(self.sent..end) {
            if !entry.is_train() {
                split.push(entry);
                continue;
            }
            let mut at = 0;
            while at < entry.len {
                let n = entry.segment.min(entry.len - at);
                let bytes = match entry.bytes {
                    Bytes::Queued(start) => Bytes::Queued(start + at),
                    Bytes::Received(start) => Bytes::Received(start + at),
                };
                split.push(Entry {
                    to: entry.to,
                    bytes,
                    len: n,
                    segment: n,
                });
                at += n;
            }
        }
        let sent = self.sent;
        self.entries.splice(sent..sent, split);
    }

    /// Copies the unsent datagrams queued by their place in `received` (the receive batch's
    /// buffer) into the queue: the buffer is about to be reused.
    pub(crate) fn settle(&mut self, received: &[u8]) {
        if self.received_bytes == 0 {
            return;
        }
        for entry in &mut self.entries[self.sent..] {
            if let Bytes::Received(offset) = entry.bytes {
                entry.bytes = Bytes::Queued(self.data.len());
                self.data
                    .extend_from_slice(&received[offset..offset + entry.len]);
            }
        }
        self.received_bytes = 0;
    }

    /// The bytes of an entry (`data`: the queue's own bytes).
    fn bytes_of<'a>(data: &'a [u8], received: &'a [u8], entry: &Entry) -> &'a [u8] {
        match entry.bytes {
            Bytes::Queued(start) => &data[start..start + entry.len],
            Bytes::Received(offset) => &received[offset..offset + entry.len],
        }
    }

    fn reset_if_done(&mut self) {
        if self.is_empty() {
            self.data.clear();
            self.entries.clear();
            self.sent = 0;
            self.received_bytes = 0;
        }
    }

    /// Tests: takes every queued datagram, as a send would (a train's datagrams one by one),
    /// with its destination.
    #[cfg(test)]
    pub(crate) fn take_all(&mut self, received: &[u8]) -> Vec<(Option<SocketAddr>, Vec<u8>)> {
        let mut taken = Vec::new();
        for entry in &self.entries[self.sent..] {
            let to = entry.to;
            let bytes = Self::bytes_of(&self.data, received, entry);
            if bytes.is_empty() {
                taken.push((to, Vec::new()));
            }
            for datagram in bytes.chunks(entry.segment.max(1)) {
                taken.push((to, datagram.to_vec()));
            }
        }
        self.sent = self.entries.len();
        self.reset_if_done();
        taken
    }

    /// Unsent message `i` (0: the next to send) as a send takes it, `received` being the
    /// receive batch's buffer; `None` past the last.
    pub(crate) fn outgoing<'a>(&'a self, i: usize, received: &'a [u8]) -> Option<Outgoing<'a>> {
        let entry = self.entries.get(self.sent + i)?;
        Some(Outgoing {
            to: entry.to,
            bytes: Self::bytes_of(&self.data, received, entry),
            segment: entry.is_train().then_some(entry.segment),
        })
    }

    /// The next `messages` messages were sent; returns how many datagrams they held.
    pub(crate) fn sent(&mut self, messages: usize) -> usize {
        let end = (self.sent + messages).min(self.entries.len());
        let mut datagrams = 0;
        for entry in &self.entries[self.sent..end] {
            datagrams += entry.datagrams();
            self.trains_sent += u64::from(entry.is_train());
        }
        self.sent = end;
        self.reset_if_done();
        datagrams
    }

    /// Drops the next queued message (it failed for a reason a retry will not fix).
    pub(crate) fn skip_one(&mut self) {
        if self.sent < self.entries.len() {
            self.sent += 1;
        }
        self.reset_if_done();
    }
}

/// One queued message as a send syscall takes it: a datagram, or a train of datagrams of
/// `segment` bytes (the last may be shorter) to one destination.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outgoing<'a> {
    /// The destination (`None`: the connected peer).
    pub(crate) to: Option<SocketAddr>,
    /// The whole message.
    pub(crate) bytes: &'a [u8],
    /// A train's datagram size (`None`: one datagram).
    #[cfg_attr(
        not(all(target_os = "linux", not(ark_portable))),
        allow(dead_code, reason = "the portable path forms no trains")
    )]
    pub(crate) segment: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_start_half_way_into_a_page_and_fit_the_buffer() {
        for (slots, slot) in [(32, 65_536), (8, 16_385), (32, 1_025), (1, 1), (4, 4_096)] {
            let batch = RecvBatch::new(slots, slot);
            assert_eq!(batch.slots(), slots);
            let base = batch.data.as_ptr() as usize;
            let starts: Vec<usize> = (0..slots).map(|i| batch.slot_start(i)).collect();
            assert_eq!((base + starts[0]) % 4096, 2048, "{slots} x {slot}");
            for (i, start) in starts.iter().enumerate() {
                assert!(
                    start + slot < batch.data.len(),
                    "slot {i} of {slots} x {slot}, and the byte after"
                );
                assert_eq!((base + start) % 64, 0, "cache-line aligned");
                if slot >= 4096 {
                    assert_eq!((base + start) % 4096, 2048, "every large slot alike");
                }
            }
            assert!(batch.stride >= slot, "slots do not overlap");
        }
    }

    #[test]
    fn a_datagram_written_in_place_is_queued_as_written_and_none_leaves_nothing() {
        let mut out = SendBatch::default();
        let n = out.push_with(None, 64, |buf| {
            assert_eq!(buf.len(), 64, "room for the largest");
            buf[..5].copy_from_slice(b"hello");
            5
        });
        assert_eq!((n, out.bytes(), out.queued()), (5, 5, 1));
        assert_eq!(out.push_with(None, 64, |_| 0), 0);
        assert_eq!((out.bytes(), out.queued()), (5, 1), "nothing left of it");
        out.push(None, b"after");
        let first = out.outgoing(0, &[]).unwrap();
        assert_eq!(
            (first.to, first.bytes, first.segment),
            (None, &b"hello"[..], None)
        );
        assert_eq!(out.outgoing(1, &[]).unwrap().bytes, b"after");
        assert!(out.outgoing(2, &[]).is_none());
        assert_eq!(out.sent(2), 2);
        assert!(out.is_empty());
        assert_eq!(out.bytes(), 0, "an empty queue keeps no bytes");
    }

    #[test]
    fn datagrams_queued_by_their_place_are_lent_from_it_or_copied_in_order() {
        let mut received = b"..echo..".to_vec();
        let mut out = SendBatch::default();
        out.push(None, b"first");
        out.push_received(None, 2, 4);
        out.push(None, b"last");
        assert_eq!((out.bytes(), out.refers_to_received()), (13, true));
        assert_eq!(out.outgoing(1, &received).unwrap().bytes, b"echo");
        assert_eq!(out.sent(2), 2);
        // The receive buffer is about to be reused: what is left is copied in.
        out.push_received(None, 0, 2);
        out.settle(&received);
        assert!(!out.refers_to_received());
        received.fill(b'x');
        let left: Vec<_> = out
            .take_all(&received)
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        assert_eq!(left, [&b"last"[..], b".."]);
        assert!(out.is_empty());
    }

    #[test]
    fn trains_form_only_of_one_size_to_one_destination_within_the_kernels_limits() {
        let mut out = SendBatch::default();
        out.set_max_segments(MAX_TRAIN_SEGMENTS);
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        out.push(Some(a), &[1; 100]);
        out.push(Some(a), &[1; 100]);
        out.push(Some(b), &[1; 100]); // another destination
        out.push(Some(b), &[1; 200]); // longer: a new train
        out.push(Some(b), &[1; 200]);
        out.push(Some(b), &[1; 50]); // short: ends the train
        out.push(Some(b), &[1; 50]);
        out.push(Some(b), &[]); // empty datagrams stay alone
        let shape: Vec<(usize, usize)> = out.entries.iter().map(|e| (e.len, e.segment)).collect();
        assert_eq!(
            shape,
            [(200, 100), (100, 100), (450, 200), (50, 50), (0, 0)]
        );
        let train = out.outgoing(0, &[]).unwrap();
        assert_eq!(
            (train.to, train.bytes.len(), train.segment),
            (Some(a), 200, Some(100))
        );
        assert_eq!(out.outgoing(1, &[]).unwrap().segment, None, "one datagram");
        assert_eq!(out.sent(3), 2 + 1 + 3);
        assert_eq!(out.trains_sent, 2);
        let mut out = SendBatch::default();
        out.set_max_segments(MAX_TRAIN_SEGMENTS);
        for _ in 0..MAX_TRAIN_SEGMENTS + 1 {
            out.push(None, &[2; 10]);
        }
        assert_eq!(out.queued(), 2, "64 datagrams per train at most");
        let mut out = SendBatch::default();
        out.set_max_segments(MAX_TRAIN_SEGMENTS);
        for _ in 0..10 {
            out.push(None, &[3; 8_000]);
        }
        assert_eq!(out.entries[0].datagrams(), MAX_TRAIN_BYTES / 8_000);
        let mut out = SendBatch::default(); // GSO off: no trains
        out.push(None, &[4; 10]);
        out.push(None, &[4; 10]);
        assert_eq!(out.queued(), 2);
    }

    #[test]
    fn a_refused_train_is_split_and_for_good_no_train_forms_again() {
        let mut out = SendBatch::default();
        out.set_max_segments(MAX_TRAIN_SEGMENTS);
        for len in [1000, 1000, 300] {
            out.push(None, &vec![1; len]);
        }
        out.split_refused_train(false);
        let sizes: Vec<usize> = (0..out.queued())
            .map(|i| out.outgoing(i, &[]).unwrap().bytes.len())
            .collect();
        assert_eq!((sizes, out.gso_fallbacks), (vec![1000, 1000, 300], 1));
        out.push(None, &[2; 10]);
        out.push(None, &[2; 10]);
        assert_eq!(out.queued(), 4, "trains still form");
        out.split_refused_train(true);
        assert_eq!(out.queued(), 5, "every train split");
        out.push(None, &[3; 10]);
        out.push(None, &[3; 10]);
        assert_eq!(
            (out.queued(), out.gso_fallbacks),
            (7, 2),
            "and none forms again"
        );
    }

    #[test]
    fn a_coalesced_slot_is_split_by_its_segment_size_and_a_cut_tail_reported() {
        let mut batch = RecvBatch::new(2, 4096);
        let from: SocketAddr = "127.0.0.1:9".parse().unwrap();
        batch.push_received(0, 2500, from, (1000, true));
        batch.push_received(1, 40, from, (1000, false));
        let shape: Vec<(usize, bool)> = batch
            .received
            .iter()
            .map(|r| (r.len, r.truncated))
            .collect();
        assert_eq!(
            shape,
            [(1000, false), (1000, false), (500, true), (40, false)]
        );
        assert_eq!(batch.received[1].start, batch.slot_start(0) + 1000);
        assert_eq!(batch.coalesced, 1);
    }
}
