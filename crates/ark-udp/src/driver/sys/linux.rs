//! Linux's datagram syscalls: `recvmmsg`/`sendmmsg` batches, `recvfrom` with `MSG_TRUNC`,
//! `sendto`, and the classic-BPF program that steers a `SO_REUSEPORT` group. The only
//! `unsafe` of the crate lives here.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;

use mio::net::UdpSocket;

use super::{Received, RecvBatch, SendBatch};

/// `recvmmsg` and `sendmmsg` take several datagrams per call.
pub(super) const BATCHED: bool = true;

/// The message headers, iovecs and addresses of a receive batch.
pub(super) struct RecvScratch {
    addrs: Vec<libc::sockaddr_storage>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside the headers and iovecs point only into the receive batch's
// own heap buffers (which move with it), are rewritten before every syscall and are never
// dereferenced by Rust code; nothing is shared, so moving them to another thread is sound.
unsafe impl Send for RecvScratch {}

impl RecvScratch {
    pub(super) fn new(slots: usize) -> Self {
        RecvScratch {
            // SAFETY: `sockaddr_storage`, `iovec` and `mmsghdr` are plain C structs of integers
            // and raw pointers, for which all-zero bytes (0 and null) are valid values.
            addrs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            iovecs: (0..slots).map(|_| unsafe { zeroed() }).collect(),
            headers: (0..slots).map(|_| unsafe { zeroed() }).collect(),
        }
    }
}

/// The message headers and iovecs of a `sendmmsg`, grown to the largest batch sent.
#[derive(Default)]
pub(super) struct SendScratch {
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

// SAFETY: as for `RecvScratch`: scratch space rewritten before every `sendmmsg`, pointing into
// the send queue's own buffers or the receive batch's, never dereferenced by Rust code.
unsafe impl Send for SendScratch {}

impl RecvBatch {
    /// Receives up to `slots` datagrams with one `recvmmsg`. Returns how many arrived.
    pub(crate) fn recv_batch(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let fd = socket.as_raw_fd();
        self.received.clear();
        let RecvScratch {
            addrs,
            iovecs,
            headers,
        } = &mut self.scratch;
        let base = self.data.as_mut_ptr();
        for i in 0..headers.len() {
            iovecs[i] = libc::iovec {
                // SAFETY: `data` holds `4096 + (slots - 1) * stride + slot` bytes and
                // `offset` < 4096, so slot `i`, `slot` bytes from `offset + i * stride`, lies
                // within it.
                iov_base: unsafe { base.add(self.offset + i * self.stride) }.cast(),
                iov_len: self.slot,
            };
            let header = &mut headers[i].msg_hdr;
            header.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
            header.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            header.msg_iov = &mut iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
            headers[i].msg_len = 0;
        }
        // SAFETY: every header points at an iovec into `data` and at a `sockaddr_storage` of
        // the size it announces, all alive and unaliased for the call; the count matches.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                headers.as_mut_ptr(),
                headers.len() as libc::c_uint,
                0,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        for i in 0..n as usize {
            let header = &headers[i];
            let from = sockaddr_to_std(&addrs[i])
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
    pub(crate) fn recv_one(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let fd = socket.as_raw_fd();
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

impl SendBatch {
    /// Sends up to `max` queued datagrams with one `sendmmsg`; returns how many went out.
    /// `received` is the receive batch's buffer (for the entries queued by their place in it).
    pub(crate) fn send_batch(
        &mut self,
        socket: &UdpSocket,
        max: usize,
        received: &[u8],
    ) -> io::Result<usize> {
        let fd = socket.as_raw_fd();
        let count = (self.entries.len() - self.sent).min(max.max(1));
        if count == 0 {
            return Ok(0);
        }
        let scratch = &mut self.scratch;
        while scratch.headers.len() < count {
            // SAFETY: plain C structs; all-zero is valid (see `RecvScratch::new`).
            scratch.headers.push(unsafe { zeroed() });
            scratch.iovecs.push(unsafe { zeroed() });
        }
        for i in 0..count {
            let (_, bytes, len) = self.entries[self.sent + i];
            let bytes = Self::bytes_of(&self.data, received, bytes, len).as_ptr();
            // `sendmmsg` only reads the bytes (the pointer is `*mut` for C's sake).
            scratch.iovecs[i] = libc::iovec {
                iov_base: bytes as *mut libc::c_void,
                iov_len: len,
            };
            let (to, _, _) = &self.entries[self.sent + i];
            let header = &mut scratch.headers[i].msg_hdr;
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
            header.msg_iov = &mut scratch.iovecs[i];
            header.msg_iovlen = 1;
            header.msg_control = std::ptr::null_mut();
            header.msg_controllen = 0;
            header.msg_flags = 0;
        }
        // SAFETY: `count` headers, each pointing at a live iovec over `data` or `received`
        // (both borrowed for this call) and at a live socket address (or none); the kernel only
        // reads them and writes `msg_len`.
        let n =
            unsafe { libc::sendmmsg(fd, scratch.headers.as_mut_ptr(), count as libc::c_uint, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.sent += n as usize;
        self.reset_if_done();
        Ok(n as usize)
    }

    /// Sends the next queued datagram with one `sendto`/`send`.
    pub(crate) fn send_one(&mut self, socket: &UdpSocket, received: &[u8]) -> io::Result<usize> {
        let fd = socket.as_raw_fd();
        let Some((to, bytes, len)) = self.entries.get(self.sent) else {
            return Ok(0);
        };
        let bytes = Self::bytes_of(&self.data, received, *bytes, *len);
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
