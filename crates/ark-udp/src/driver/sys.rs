//! The datagram syscalls: batched `recvmmsg`/`sendmmsg` and single `recvfrom`/`sendto`, with
//! truncation detection, and the `SO_REUSEPORT` steering program. The only `unsafe` of the
//! crate lives here.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

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
    addrs: Vec<libc::sockaddr_storage>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    pub(crate) received: Vec<Received>,
}

// SAFETY: the raw pointers inside the headers and iovecs point only into this struct's own
// heap buffers (which move with it), are rewritten before every syscall and are never
// dereferenced by Rust code; nothing is shared, so moving the batch to another thread is sound.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    pub(crate) fn new(slots: usize, slot: usize) -> Self {
        let slots = slots.max(1);
        let slot = slot.max(1);
        let (stride, page_offset) = slot_layout(slot);
        // A page of slack puts slot 0 at `page_offset` into a page wherever the heap puts `data`.
        let data = vec![0; 4096 + (slots - 1) * stride + slot];
        let offset = (page_offset + 4096 - data.as_ptr() as usize % 4096) % 4096;
        RecvBatch {
            data,
            slot,
            stride,
            offset,
            // SAFETY: `sockaddr_storage`, `iovec` and `mmsghdr` are plain C structs of integers
            // and raw pointers, for which all-zero bytes (0 and null) are valid values.
            addrs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            iovecs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            headers: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            received: Vec::with_capacity(slots),
        }
    }

    pub(crate) fn slots(&self) -> usize {
        self.headers.len()
    }

    /// The bytes of received datagram `i`.
    pub(crate) fn datagram(&self, i: usize) -> &[u8] {
        let r = &self.received[i];
        let start = self.offset + i * self.stride;
        &self.data[start..start + r.len]
    }

    /// Receives up to `slots` datagrams with one `recvmmsg`. Returns how many arrived.
    pub(crate) fn recv_mmsg(&mut self, fd: RawFd) -> io::Result<usize> {
        self.received.clear();
        let base = self.data.as_mut_ptr();
        for i in 0..self.headers.len() {
            self.iovecs[i] = libc::iovec {
                // SAFETY: `data` holds `4096 + (slots - 1) * stride + slot` bytes and
                // `offset` < 4096, so slot `i`, `slot` bytes from `offset + i * stride`, lies
                // within it.
                iov_base: unsafe { base.add(self.offset + i * self.stride) }.cast(),
                iov_len: self.slot,
            };
            let header = &mut self.headers[i].msg_hdr;
            header.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_storage).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &mut self.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
            self.headers[i].msg_len = 0;
        }
        // SAFETY: every header points at an iovec into `data` and at a `sockaddr_storage` of
        // the size it announces, all alive and unaliased for the call; the count matches.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                self.headers.len() as libc::c_uint,
                0,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for i in 0..n as usize {
            let header = &self.headers[i];
            let from = sockaddr_to_std(&self.addrs[i])
                .ok_or_else(|| io::Error::other("datagram from a non-IP address"))?;
            self.received.push(Received {
                len: header.msg_len as usize,
                from,
                truncated: header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            });
        }
        Ok(n as usize)
    }

    /// Receives one datagram into slot 0 with `recvfrom`. Returns 1, or `WouldBlock`.
    pub(crate) fn recv_one(&mut self, fd: RawFd) -> io::Result<usize> {
        self.received.clear();
        // SAFETY: as in `new`: all-zero is a valid `sockaddr_storage`.
        let mut addr: libc::sockaddr_storage = unsafe { zeroed() };
        let mut addr_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // MSG_TRUNC makes Linux return the datagram's real length even when it was cut.
        // SAFETY: the buffer is slot 0, `slot` bytes of `data` from `offset`; the address
        // buffer is a `sockaddr_storage` whose size is passed.
        let n = unsafe {
            libc::recvfrom(
                fd,
                self.data.as_mut_ptr().add(self.offset).cast(),
                self.slot,
                libc::MSG_TRUNC,
                (&mut addr as *mut libc::sockaddr_storage).cast(),
                &mut addr_len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let real = n as usize;
        let from = sockaddr_to_std(&addr)
            .ok_or_else(|| io::Error::other("datagram from a non-IP address"))?;
        self.received.push(Received {
            len: real.min(self.slot),
            from,
            truncated: real > self.slot,
        });
        Ok(1)
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
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

/// Where a queued datagram's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bytes {
    /// At this offset of the batch's own `data`.
    Queued(usize),
    /// At this offset of the receive batch's buffer.
    Received(usize),
}

// SAFETY: as for `RecvBatch`: the header and iovec pointers are scratch space rewritten before
// every `sendmmsg`, pointing into this struct's own buffers or the receive batch's, never
// dereferenced by Rust code.
unsafe impl Send for SendBatch {}

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

    /// The bytes of an entry.
    fn bytes_of<'a>(&'a self, received: &'a [u8], bytes: Bytes, len: usize) -> &'a [u8] {
        match bytes {
            Bytes::Queued(start) => &self.data[start..start + len],
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

    /// Sends up to `max` queued datagrams with one `sendmmsg`; returns how many went out.
    /// `received` is the receive batch's buffer (for the entries queued by their place in it).
    pub(crate) fn send_mmsg(
        &mut self,
        fd: RawFd,
        max: usize,
        received: &[u8],
    ) -> io::Result<usize> {
        let count = (self.entries.len() - self.sent).min(max.max(1));
        if count == 0 {
            return Ok(0);
        }
        while self.headers.len() < count {
            // SAFETY: plain C structs; all-zero is valid (see `RecvBatch::new`).
            self.headers.push(unsafe { zeroed() });
            self.iovecs.push(unsafe { zeroed() });
        }
        for i in 0..count {
            let (_, bytes, len) = self.entries[self.sent + i];
            let bytes = self.bytes_of(received, bytes, len).as_ptr();
            // `sendmmsg` only reads the bytes (the pointer is `*mut` for C's sake).
            self.iovecs[i] = libc::iovec {
                iov_base: bytes as *mut libc::c_void,
                iov_len: len,
            };
            let (to, _, _) = &self.entries[self.sent + i];
            let header = &mut self.headers[i].msg_hdr;
            match to {
                Some(addr) => {
                    header.msg_name = addr.as_ptr() as *mut libc::c_void;
                    header.msg_namelen = addr.len();
                }
                None => {
                    header.msg_name = std::ptr::null_mut();
                    header.msg_namelen = 0;
                }
            }
            header.msg_iov = &mut self.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
        }
        // SAFETY: `count` headers, each pointing at a live iovec over `data` or `received`
        // (both borrowed for this call) and at a live socket address (or none); the kernel only
        // reads them and writes `msg_len`.
        let n = unsafe { libc::sendmmsg(fd, self.headers.as_mut_ptr(), count as libc::c_uint, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.sent += n as usize;
        self.reset_if_done();
        Ok(n as usize)
    }

    /// Sends the next queued datagram with one `sendto`/`send`.
    pub(crate) fn send_one(&mut self, fd: RawFd, received: &[u8]) -> io::Result<usize> {
        let Some((to, bytes, len)) = self.entries.get(self.sent) else {
            return Ok(0);
        };
        let bytes = self.bytes_of(received, *bytes, *len);
        let (name, name_len) = match to {
            Some(addr) => (addr.as_ptr(), addr.len()),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: `bytes` and the address are live for the call and their lengths are given.
        let n = unsafe {
            libc::sendto(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                0,
                name.cast(),
                name_len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.sent += 1;
        self.reset_if_done();
        Ok(1)
    }

    /// Drops the next queued datagram (it failed for a reason a retry will not fix).
    pub(crate) fn skip_one(&mut self) {
        if self.sent < self.entries.len() {
            self.sent += 1;
        }
        self.reset_if_done();
    }
}

/// Attaches to `fd`'s `SO_REUSEPORT` group a classic-BPF program that gives each datagram
/// to the socket at index `source port % shards` (in the order the sockets were bound):
/// `crate::Steering::PeerPort`. The program runs with the data at the UDP payload; the port
/// is read relative to the IP header (20 bytes for IPv4, 40 for IPv6).
pub(crate) fn steer_by_source_port(fd: RawFd, shards: u32, v6: bool) -> io::Result<()> {
    let source_port = libc::SKF_NET_OFF + if v6 { 40 } else { 20 };
    let statement = |code: u32, k: u32| libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let mut program = [
        statement(
            libc::BPF_LD | libc::BPF_H | libc::BPF_ABS,
            source_port as u32,
        ),
        statement(libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K, shards.max(1)),
        statement(libc::BPF_RET | libc::BPF_A, 0),
    ];
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: `fprog` points at `program`, both alive for the call; the kernel copies and
    // checks the program and only reads the struct.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An IPv4 or IPv6 socket address from a `sockaddr_storage`.
fn sockaddr_to_std(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a `sockaddr_in`, which it is large and
            // aligned enough to contain.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for `sockaddr_in6`.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_start_half_way_into_a_page_and_fit_the_buffer() {
        for (slots, slot) in [(32, 65_536), (8, 16_385), (32, 1_025), (1, 1), (4, 4_096)] {
            let batch = RecvBatch::new(slots, slot);
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

    #[test]
    fn datagrams_queued_by_their_place_are_sent_from_it_or_copied_in_order() {
        use std::os::fd::AsRawFd;
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.connect(peer.local_addr().unwrap()).unwrap();
        let fd = sender.as_raw_fd();
        let mut received = b"..echo..".to_vec();
        let mut out = SendBatch::default();
        out.push(None, b"first");
        out.push_received(None, 2, 4);
        out.push(None, b"last");
        assert_eq!((out.bytes(), out.refers_to_received()), (13, true));
        assert_eq!(out.send_mmsg(fd, 2, &received).unwrap(), 2);
        // The receive buffer is about to be reused: what is left is copied in.
        out.push_received(None, 0, 2);
        out.settle(&received);
        assert!(!out.refers_to_received());
        received.fill(b'x');
        assert_eq!(out.send_mmsg(fd, 8, &received).unwrap(), 2);
        assert!(out.is_empty());
        let mut buf = [0u8; 16];
        for expected in [&b"first"[..], b"echo", b"last", b".."] {
            let n = peer.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], expected);
        }
    }
}
