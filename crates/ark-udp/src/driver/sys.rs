//! The datagram syscalls behind one interface: the receive slots ([`RecvBatch`]) and the send
//! queue ([`SendBatch`]), with truncation detection. On Linux ([`linux`]) they take batches
//! with `recvmmsg`/`sendmmsg` and carry the `SO_REUSEPORT` steering program (the only `unsafe`
//! of the crate); the portable path ([`portable`]: macOS, Windows, the BSDs, and Linux built
//! with `--cfg ark_portable`) moves one datagram per `recv_from`/`send_to` through mio.

use std::net::SocketAddr;

#[cfg(all(target_os = "linux", not(ark_portable)))]
mod linux;
#[cfg(all(target_os = "linux", not(ark_portable)))]
use linux as imp;
#[cfg(not(all(target_os = "linux", not(ark_portable))))]
mod portable;
#[cfg(not(all(target_os = "linux", not(ark_portable))))]
use portable as imp;

pub(crate) use imp::steer_by_source_port;

/// One received datagram, in slot `slot` of a [`RecvBatch`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Received {
    /// Bytes stored in the slot (at most the slot size).
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
    pub(crate) data: Vec<u8>,
    /// The most bytes a datagram may have (longer ones are cut and reported truncated).
    pub(crate) slot: usize,
    /// Distance between slot starts (see [`slot_layout`]).
    stride: usize,
    /// Where slot 0 starts in `data`.
    offset: usize,
    /// Datagrams per receive call: 1 where the path has no batched receive.
    slots: usize,
    /// The path's syscall scratch space (message headers on Linux).
    #[cfg_attr(
        not(all(target_os = "linux", not(ark_portable))),
        allow(dead_code, reason = "the portable path keeps nothing between syscalls")
    )]
    scratch: imp::RecvScratch,
    pub(crate) received: Vec<Received>,
}

impl RecvBatch {
    pub(crate) fn new(slots: usize, slot: usize) -> Self {
        let slots = if imp::BATCHED { slots.max(1) } else { 1 };
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
            scratch: imp::RecvScratch::new(slots),
            received: Vec::with_capacity(slots),
        }
    }

    /// Datagrams one [`recv_batch`](Self::recv_batch) may take.
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    /// The bytes of received datagram `i`.
    pub(crate) fn datagram(&self, i: usize) -> &[u8] {
        let r = &self.received[i];
        let start = self.offset + i * self.stride;
        &self.data[start..start + r.len]
    }
}

/// Datagrams queued for sending: contiguous bytes plus (destination, bytes, length) entries.
/// A datagram sent back unchanged from the receive batch being delivered (an echo) is queued by
/// its place there instead of copied ([`push_received`](Self::push_received)); such entries
/// are sent, or copied in by [`settle`](Self::settle), before the receive batch is reused.
#[derive(Default)]
pub(crate) struct SendBatch {
    pub(crate) data: Vec<u8>,
    /// Destination (`None`: the connected peer), where the bytes are, length.
    entries: Vec<(Option<socket2::SockAddr>, Bytes, usize)>,
    /// Entries before this one were sent.
    sent: usize,
    /// Bytes of the entries queued by their place in the receive batch (since the last reset).
    received_bytes: usize,
    /// The path's syscall scratch space (message headers on Linux).
    #[cfg_attr(
        not(all(target_os = "linux", not(ark_portable))),
        allow(dead_code, reason = "the portable path keeps nothing between syscalls")
    )]
    scratch: imp::SendScratch,
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

    /// Datagrams queued and not yet sent.
    pub(crate) fn queued(&self) -> usize {
        self.entries.len() - self.sent
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
        let to = to.map(socket2::SockAddr::from);
        self.entries.push((to, Bytes::Queued(start), payload.len()));
    }

    /// Queues the `len` bytes at `offset` of the receive batch's buffer, by their place.
    pub(crate) fn push_received(&mut self, to: Option<SocketAddr>, offset: usize, len: usize) {
        let to = to.map(socket2::SockAddr::from);
        self.entries.push((to, Bytes::Received(offset), len));
        self.received_bytes += len;
    }

    /// Copies the unsent datagrams queued by their place in `received` (the receive batch's
    /// buffer) into the queue: the buffer is about to be reused.
    pub(crate) fn settle(&mut self, received: &[u8]) {
        if self.received_bytes == 0 {
            return;
        }
        for (_, bytes, len) in &mut self.entries[self.sent..] {
            if let Bytes::Received(offset) = *bytes {
                *bytes = Bytes::Queued(self.data.len());
                self.data
                    .extend_from_slice(&received[offset..offset + *len]);
            }
        }
        self.received_bytes = 0;
    }

    /// The bytes of an entry (`data`: the queue's own bytes).
    fn bytes_of<'a>(data: &'a [u8], received: &'a [u8], bytes: Bytes, len: usize) -> &'a [u8] {
        match bytes {
            Bytes::Queued(start) => &data[start..start + len],
            Bytes::Received(offset) => &received[offset..offset + len],
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

    /// Drops the next queued datagram (it failed for a reason a retry will not fix).
    pub(crate) fn skip_one(&mut self) {
        if self.sent < self.entries.len() {
            self.sent += 1;
        }
        self.reset_if_done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mio::net::UdpSocket;

    #[test]
    fn slots_start_half_way_into_a_page_and_fit_the_buffer() {
        for (slots, slot) in [(32, 65_536), (8, 16_385), (32, 1_025), (1, 1), (4, 4_096)] {
            let batch = RecvBatch::new(slots, slot);
            // One slot where the path has no batched receive.
            let slots = if imp::BATCHED { slots } else { 1 };
            assert_eq!(batch.slots(), slots);
            let base = batch.data.as_ptr() as usize;
            let starts: Vec<usize> = (0..slots)
                .map(|i| batch.offset + i * batch.stride)
                .collect();
            assert_eq!((base + starts[0]) % 4096, 2048, "{slots} x {slot}");
            for (i, start) in starts.iter().enumerate() {
                assert!(
                    start + slot <= batch.data.len(),
                    "slot {i} of {slots} x {slot}"
                );
                assert_eq!((base + start) % 64, 0, "cache-line aligned");
                if slot >= 4096 {
                    assert_eq!((base + start) % 4096, 2048, "every large slot alike");
                }
            }
            assert!(batch.stride >= slot, "slots do not overlap");
        }
    }

    /// Sends up to `max` queued datagrams, in as many calls as the path needs; how many went.
    fn send_up_to(out: &mut SendBatch, socket: &UdpSocket, max: usize, received: &[u8]) -> usize {
        let mut sent = 0;
        while sent < max && !out.is_empty() {
            sent += out.send_batch(socket, max - sent, received).unwrap();
        }
        sent
    }

    #[test]
    fn datagrams_queued_by_their_place_are_sent_from_it_or_copied_in_order() {
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        sender.connect(peer.local_addr().unwrap()).unwrap();
        let mut received = b"..echo..".to_vec();
        let mut out = SendBatch::default();
        out.push(None, b"first");
        out.push_received(None, 2, 4);
        out.push(None, b"last");
        assert_eq!((out.bytes(), out.refers_to_received()), (13, true));
        assert_eq!(send_up_to(&mut out, &sender, 2, &received), 2);
        // The receive buffer is about to be reused: what is left is copied in.
        out.push_received(None, 0, 2);
        out.settle(&received);
        assert!(!out.refers_to_received());
        received.fill(b'x');
        assert_eq!(send_up_to(&mut out, &sender, 8, &received), 2);
        assert!(out.is_empty());
        let mut buf = [0u8; 16];
        for expected in [&b"first"[..], b"echo", b"last", b".."] {
            let n = peer.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], expected);
        }
    }
}
