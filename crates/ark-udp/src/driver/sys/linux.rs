//! Linux's datagram syscalls: `recvmmsg`/`sendmmsg` batches, `recvfrom` with `MSG_TRUNC`,
//! `sendto`, and the classic-BPF program that steers a `SO_REUSEPORT` group. The only
//! `unsafe` of the crate lives here.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use mio::net::UdpSocket;

use crate::proto::batch::{RecvBatch, SendBatch};

/// `recvmmsg` and `sendmmsg` take several datagrams per call.
pub(crate) const BATCHED: bool = true;

/// Room for one control message of up to 8 bytes (`UDP_SEGMENT`'s `u16`, `UDP_GRO`'s `int`),
/// aligned as `cmsghdr`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Control([u8; 32]);

/// The message headers, iovecs, addresses and control buffers of a receive batch's
/// `recvmmsg`.
pub(crate) struct RecvScratch {
    addrs: Vec<libc::sockaddr_storage>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    /// `UDP_GRO`'s segment size per slot (used with GRO on).
    controls: Vec<Control>,
}

// SAFETY: the raw pointers inside the headers and iovecs point only into the receive batch's
// own heap buffers (which move with it), are rewritten before every syscall and are never
// dereferenced by Rust code; nothing is shared, so moving them to another thread is sound.
unsafe impl Send for RecvScratch {}

impl RecvScratch {
    /// Room for a batch of `slots` datagrams.
    pub(crate) fn new(slots: usize) -> Self {
        RecvScratch {
            // SAFETY: `sockaddr_storage`, `iovec` and `mmsghdr` are plain C structs of integers
            // and raw pointers, for which all-zero bytes (0 and null) are valid values.
            addrs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            iovecs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            headers: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            controls: vec![Control([0; 32]); slots],
        }
    }
}

/// The message headers, iovecs, destinations and control buffers of a `sendmmsg`, grown to
/// the largest batch sent.
#[derive(Default)]
pub(crate) struct SendScratch {
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    addrs: Vec<socket2::SockAddr>,
    controls: Vec<Control>,
    /// Tests: the next train's send fails with this OS error, as a kernel refusing GSO would.
    #[cfg(test)]
    pub(crate) fail_next_train: Option<i32>,
}

/// Turns on what the kernel offers of the datagram offloads `config` asks for, on `socket`
/// (both only with batching: without it every datagram is its own syscall, as documented):
/// GSO is probed with `getsockopt(UDP_SEGMENT)` (Linux 4.18; nothing is set: a train asks
/// for segmentation per message), GRO set with `UDP_GRO` (Linux 5.0) where batched receives
/// have slots of a whole UDP datagram (a coalesced buffer is never cut).
pub(crate) fn enable_offload(socket: &UdpSocket, config: &crate::UdpConfig) -> crate::UdpOffload {
    let fd = socket.as_raw_fd();
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals of the sizes passed; the kernel writes at most
    // `len` bytes into `value`.
    let gso = config.gso
        && config.batching
        && unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                (&mut value as *mut libc::c_int).cast(),
                &mut len,
            )
        } == 0;
    let on: libc::c_int = 1;
    let gro = config.gro
        && config.batching
        && config.max_datagram >= crate::config::GRO_MIN_DATAGRAM
        // SAFETY: `on` is a live `c_int` whose size is passed; the kernel only reads it.
        && unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_UDP,
                libc::UDP_GRO,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        } == 0;
    crate::UdpOffload { gso, gro }
}

/// Whether a train refused with `errno` means no GSO on this socket at all: `EIO` (the device
/// cannot checksum the segments) or `ENOPROTOOPT`, against `EINVAL`/`EMSGSIZE` (this train's
/// segments are over the path's MTU, or the train too long).
fn refused_for_good(errno: i32) -> bool {
    matches!(errno, libc::EIO | libc::ENOPROTOOPT)
}

/// The segment size in a received control buffer's `UDP_GRO` message (0: none).
fn gro_segment(header: &libc::msghdr) -> usize {
    // SAFETY: `header` is the header the kernel just filled: `msg_control` points at a live
    // control buffer and `msg_controllen` says how much of it holds messages; the CMSG_*
    // functions stay within that length and each message's data within its `cmsg_len`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(header);
        while !cmsg.is_null() {
            let c = &*cmsg;
            if c.cmsg_level == libc::SOL_UDP && c.cmsg_type == libc::UDP_GRO {
                let data = libc::CMSG_DATA(cmsg);
                let room = c.cmsg_len as usize - (data as usize - cmsg as usize);
                return if room >= size_of::<libc::c_int>() {
                    data.cast::<libc::c_int>().read_unaligned().max(0) as usize
                } else if room >= size_of::<u16>() {
                    usize::from(data.cast::<u16>().read_unaligned())
                } else {
                    0
                };
            }
            cmsg = libc::CMSG_NXTHDR(header, cmsg);
        }
    }
    0
}

/// Writes a `UDP_SEGMENT` control message of `segment` into `control`; its length.
fn write_segment(control: &mut Control, segment: u16) -> usize {
    // SAFETY: CMSG_SPACE/CMSG_LEN are pure arithmetic.
    let (space, len) = unsafe {
        (
            libc::CMSG_SPACE(size_of::<u16>() as u32) as usize,
            libc::CMSG_LEN(size_of::<u16>() as u32) as usize,
        )
    };
    debug_assert!(space <= control.0.len());
    control.0 = [0; 32];
    let cmsg = control.0.as_mut_ptr().cast::<libc::cmsghdr>();
    // SAFETY: `control` is 8-byte aligned and `space` (24) ≤ its 32 bytes, so the header and
    // its data lie within it; CMSG_DATA points just past the header.
    unsafe {
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = len as _;
        libc::CMSG_DATA(cmsg).cast::<u16>().write_unaligned(segment);
    }
    space
}

// SAFETY: as for `RecvScratch`: scratch space rewritten before every `sendmmsg`, pointing into
// the send queue's own buffers or the receive batch's, never dereferenced by Rust code.
unsafe impl Send for SendScratch {}

impl RecvScratch {
    /// Receives up to `max` datagrams (at most `slots`, at least 1) into `batch` with one
    /// `recvmmsg`. Returns how many arrived.
    pub(crate) fn recv_batch(
        &mut self,
        batch: &mut RecvBatch,
        socket: &UdpSocket,
        max: usize,
    ) -> io::Result<usize> {
        let fd = socket.as_raw_fd();
        batch.received.clear();
        let RecvScratch {
            addrs,
            iovecs,
            headers,
            controls,
        } = self;
        let gro = batch.gro();
        let count = max.clamp(1, headers.len().min(batch.slots()));
        for i in 0..count {
            let start = batch.slot_start(i);
            iovecs[i] = libc::iovec {
                // SAFETY: `RecvBatch` keeps `slot` bytes from every slot start below `slots`
                // within `data`.
                iov_base: unsafe { batch.data.as_mut_ptr().add(start) }.cast(),
                iov_len: batch.slot,
            };
            let header = &mut headers[i].msg_hdr;
            header.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &mut iovecs[i];
            header.msg_iovlen = 1;
            if gro {
                header.msg_control = controls[i].0.as_mut_ptr().cast();
                header.msg_controllen = controls[i].0.len();
            } else {
                header.msg_control = std::ptr::null_mut();
                header.msg_controllen = 0;
            }
            header.msg_flags = 0;
            headers[i].msg_len = 0;
        }
        // SAFETY: the first `count` headers point at an iovec into `data` and at a
        // `sockaddr_storage` of the size it announces, all alive and unaliased for the call.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                headers.as_mut_ptr(),
                count as libc::c_uint,
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
            let segment = if gro { gro_segment(&header.msg_hdr) } else { 0 };
            let truncated = header.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let len = header.msg_len as usize;
            batch.push_received(i, len, from, (segment, truncated));
        }
        Ok(n as usize)
    }

    /// Receives one datagram into slot 0 of `batch` with `recvfrom`. Returns 1, or
    /// `WouldBlock`.
    pub(crate) fn recv_one(
        &mut self,
        batch: &mut RecvBatch,
        socket: &UdpSocket,
    ) -> io::Result<usize> {
        let fd = socket.as_raw_fd();
        batch.received.clear();
        // SAFETY: as in `new`: all-zero is a valid `sockaddr_storage`.
        let mut addr: libc::sockaddr_storage = unsafe { zeroed() };
        let mut addr_len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let (start, slot) = (batch.slot_start(0), batch.slot);
        // MSG_TRUNC makes Linux return the datagram's real length even when it was cut.
        // SAFETY: the buffer is slot 0, `slot` bytes of `data` from its start; the address
        // buffer is a `sockaddr_storage` whose size is passed.
        let n = unsafe {
            libc::recvfrom(
                fd,
                batch.data.as_mut_ptr().add(start).cast(),
                slot,
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
        batch.push_received(0, real.min(slot), from, (0, real > slot));
        Ok(1)
    }
}

impl SendScratch {
    /// Empty: grown to the largest batch sent.
    pub(crate) fn new() -> Self {
        SendScratch::default()
    }

    /// Sends up to `max` of `out`'s queued messages (datagrams or trains) with one
    /// `sendmmsg`; returns how many datagrams went out. `received` is the receive batch's
    /// buffer (for the entries queued by their place in it). A train the kernel refuses is
    /// split into its datagrams (`SendBatch::split_refused_train`) and `Ok(0)` returned: the
    /// caller's next call sends them.
    pub(crate) fn send_batch(
        &mut self,
        out: &mut SendBatch,
        socket: &UdpSocket,
        max: usize,
        received: &[u8],
    ) -> io::Result<usize> {
        let count = out.queued().min(max.max(1));
        if count == 0 {
            return Ok(0);
        }
        #[cfg(test)]
        if out.next_is_train()
            && let Some(errno) = self.fail_next_train.take()
        {
            out.split_refused_train(refused_for_good(errno));
            return Ok(0);
        }
        self.prepare_headers(out, count, received);
        // SAFETY: `count` headers, each pointing at a live iovec over `out`'s bytes or
        // `received` (both borrowed for this call), at a live socket address (or none) and at
        // a live control buffer (or none); the kernel only reads them and writes `msg_len`.
        let n = unsafe {
            libc::sendmmsg(
                socket.as_raw_fd(),
                self.headers.as_mut_ptr(),
                count as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(errno @ (libc::EIO | libc::EINVAL | libc::EMSGSIZE | libc::ENOPROTOOPT))
                    if out.next_is_train() =>
                {
                    out.split_refused_train(refused_for_good(errno));
                    Ok(0)
                }
                _ => Err(error),
            };
        }
        Ok(out.sent(n as usize))
    }

    /// Fills the first `count` message headers for `out`'s unsent messages: an iovec over
    /// each message's bytes, its destination, and for a train a `UDP_SEGMENT` control message
    /// with its segment size.
    fn prepare_headers(&mut self, out: &SendBatch, count: usize, received: &[u8]) {
        while self.headers.len() < count {
            // SAFETY: plain C structs; all-zero is valid (see `RecvScratch::new`).
            self.headers.push(unsafe { zeroed() });
            self.iovecs.push(unsafe { zeroed() });
            self.addrs.push(SocketAddr::from(([0, 0, 0, 0], 0)).into());
            self.controls.push(Control([0; 32]));
        }
        for i in 0..count {
            let Some(message) = out.outgoing(i, received) else {
                break;
            };
            // `sendmmsg` only reads the bytes (the pointer is `*mut` for C's sake).
            self.iovecs[i] = libc::iovec {
                iov_base: message.bytes.as_ptr() as *mut libc::c_void,
                iov_len: message.bytes.len(),
            };
            let header = &mut self.headers[i].msg_hdr;
            match message.to {
                Some(to) => {
                    self.addrs[i] = to.into();
                    header.msg_name = self.addrs[i].as_ptr() as *mut libc::c_void;
                    header.msg_namelen = self.addrs[i].len();
                }
                None => {
                    header.msg_name = std::ptr::null_mut();
                    header.msg_namelen = 0;
                }
            }
            header.msg_iov = &mut self.iovecs[i];
            header.msg_iovlen = 1;
            if let Some(segment) = message.segment {
                // A train's segment is at most MAX_TRAIN_BYTES / 2 (it holds two or more).
                let segment = u16::try_from(segment).unwrap_or(u16::MAX);
                let len = write_segment(&mut self.controls[i], segment);
                header.msg_control = self.controls[i].0.as_mut_ptr().cast();
                header.msg_controllen = len;
            } else {
                header.msg_control = std::ptr::null_mut();
                header.msg_controllen = 0;
            }
            header.msg_flags = 0;
        }
    }

    /// Sends `out`'s next queued datagram with one `sendto`/`send` (a train with `sendmmsg`,
    /// which carries its segment size). Returns the datagrams sent.
    pub(crate) fn send_one(
        &mut self,
        out: &mut SendBatch,
        socket: &UdpSocket,
        received: &[u8],
    ) -> io::Result<usize> {
        if out.next_is_train() {
            return self.send_batch(out, socket, 1, received);
        }
        let Some(message) = out.outgoing(0, received) else {
            return Ok(0);
        };
        let to = message.to.map(socket2::SockAddr::from);
        let (name, name_len) = match &to {
            Some(addr) => (addr.as_ptr(), addr.len()),
            None => (std::ptr::null(), 0),
        };
        // SAFETY: the bytes and the address are live for the call and their lengths are given.
        let n = unsafe {
            libc::sendto(
                socket.as_raw_fd(),
                message.bytes.as_ptr().cast(),
                message.bytes.len(),
                0,
                name.cast(),
                name_len,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(out.sent(1))
    }
}

/// Attaches to `fd`'s `SO_REUSEPORT` group a classic-BPF program that gives each datagram
/// to the socket at index `source port % shards` (in the order the sockets were bound):
/// `crate::Steering::PeerPort`. The program runs with the data at the UDP payload; the port
/// is read relative to the IP header (20 bytes for IPv4, 40 for IPv6).
pub(crate) fn steer_by_source_port(
    socket: &socket2::SockRef<'_>,
    shards: u32,
    v6: bool,
) -> io::Result<()> {
    let fd = socket.as_raw_fd();
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
