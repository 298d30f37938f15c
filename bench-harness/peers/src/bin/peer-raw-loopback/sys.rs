//! The syscalls the raw peer makes, through `libc` with nothing between: epoll, eventfd,
//! `recvmmsg`/`sendmmsg` on preallocated headers.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The result of a syscall returning -1 on error.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A new epoll instance.
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; a new descriptor is returned on success and owned here.
    let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new nonblocking eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; a new descriptor is returned on success and owned here.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Makes an eventfd readable for good (level-triggered: every waiter wakes).
pub fn signal(fd: &OwnedFd) -> io::Result<()> {
    let one = 1u64.to_ne_bytes();
    // SAFETY: writes 8 bytes from a live local array.
    let n = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `epoll_ctl` with `op` for `fd`, reporting `events` with `token`.
pub fn epoll_ctl(
    epoll: &OwnedFd,
    op: libc::c_int,
    fd: RawFd,
    events: u32,
    token: u64,
) -> io::Result<()> {
    let mut event = libc::epoll_event { events, u64: token };
    // SAFETY: `event` is a valid, live `epoll_event` for the call.
    check(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), op, fd, &mut event) })?;
    Ok(())
}

/// Waits for events (interruptions count as none).
pub fn epoll_wait(epoll: &OwnedFd, events: &mut [libc::epoll_event]) -> io::Result<usize> {
    // SAFETY: `events` is a live, writable array of the length passed.
    let n = unsafe {
        libc::epoll_wait(
            epoll.as_raw_fd(),
            events.as_mut_ptr(),
            events.len() as libc::c_int,
            -1,
        )
    };
    match check(n) {
        Ok(n) => Ok(n as usize),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
        Err(e) => Err(e),
    }
}

/// Cache line: slots smaller than a page are this far apart. (On the AMD EPYC VM this was
/// measured on, 16 KiB datagrams received into a buffer at page offset 16, where a large `Vec`
/// lands, ran at 24–32 k round trips per second against 40–55 k at other offsets; at offset 64,
/// where aligning to a line put them, 43–51 k against 44–53 k half-way into a page.)
const LINE: usize = 64;
/// Page: slot 0 starts half-way into one.
const PAGE: usize = 4096;

/// Preallocated `recvmmsg`/`sendmmsg` headers over `slots` buffers of `slot` bytes, each with
/// its peer address (or none, on a connected socket), each starting on a cache line (slots of
/// a page or more half-way into a page):
/// datagrams are received into the slots and can be sent back from them.
pub struct Batch {
    data: Vec<u8>,
    /// Where the first slot starts in `data` (half-way into a page).
    start: usize,
    /// Bytes from one slot to the next: `slot` rounded up to a cache line, or to a page.
    stride: usize,
    slot: usize,
    with_addr: bool,
    addrs: Vec<libc::sockaddr_storage>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers in `iovecs`/`headers` point into this struct's own heap buffers
// (`data`, `addrs`, `iovecs`), which move with it; nothing is shared.
unsafe impl Send for Batch {}

impl Batch {
    /// `slots` buffers of `slot` bytes, each with a peer address if `with_addr` (a server's
    /// socket), without for a connected socket.
    pub fn new(slots: usize, slot: usize, with_addr: bool) -> Self {
        // As ark-udp lays out its slots: half-way into a page, every slot of a page or more at
        // that offset. At 16 bytes into a page (where a 128 KiB buffer from mmap starts, or 64
        // after aligning to a line) the kernel's and our copies alias on the low address bits
        // and run several times slower.
        let stride = if slot >= PAGE {
            slot.next_multiple_of(PAGE)
        } else {
            slot.next_multiple_of(LINE)
        };
        let data = vec![0; slots * stride + PAGE];
        let start = (PAGE / 2 + PAGE - data.as_ptr() as usize % PAGE) % PAGE;
        let mut batch = Batch {
            data,
            start,
            stride,
            slot,
            with_addr,
            // SAFETY: all-zero is a valid `sockaddr_storage`, `iovec` and `mmsghdr`.
            addrs: vec![unsafe { zeroed() }; slots],
            iovecs: vec![unsafe { zeroed() }; slots],
            headers: vec![unsafe { zeroed() }; slots],
        };
        for i in 0..slots {
            batch.iovecs[i].iov_base = batch.slot_mut(i).as_mut_ptr().cast();
            batch.iovecs[i].iov_len = slot;
            let header = &mut batch.headers[i].msg_hdr;
            if with_addr {
                header.msg_name = (&mut batch.addrs[i] as *mut libc::sockaddr_storage).cast();
            }
            header.msg_iov = &mut batch.iovecs[i];
            header.msg_iovlen = 1;
        }
        batch
    }

    /// Slots.
    pub fn slots(&self) -> usize {
        self.headers.len()
    }

    /// The bytes of slot `i`.
    pub fn slot_mut(&mut self, i: usize) -> &mut [u8] {
        let from = self.start + i * self.stride;
        &mut self.data[from..from + self.slot]
    }

    /// Receives up to `max` datagrams (with their senders if the batch keeps addresses);
    /// returns how many.
    pub fn recv(&mut self, fd: RawFd, max: usize) -> io::Result<usize> {
        let with_addr = self.with_addr;
        let max = max.min(self.slots());
        for i in 0..max {
            self.iovecs[i].iov_len = self.slot;
            let header = &mut self.headers[i].msg_hdr;
            header.msg_namelen = if with_addr {
                size_of::<libc::sockaddr_storage>() as libc::socklen_t
            } else {
                0
            };
            header.msg_flags = 0;
        }
        // SAFETY: every header points at its iovec into `data` and its `sockaddr_storage` of
        // the size it announces, all alive and unaliased for the call; `max` ≤ headers.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                max as libc::c_uint,
                0,
                std::ptr::null_mut(),
            )
        };
        Ok(check(n)? as usize)
    }

    /// Length of datagram `i` of the last receive; `None` if it was cut (longer than a slot).
    pub fn received(&self, i: usize) -> Option<usize> {
        let header = &self.headers[i];
        (header.msg_hdr.msg_flags & libc::MSG_TRUNC == 0).then_some(header.msg_len as usize)
    }

    /// Sets slot `i` to send `len` bytes (to the address it was received from, if that was
    /// kept).
    pub fn set_len(&mut self, i: usize, len: usize) {
        self.iovecs[i].iov_len = len;
    }

    /// Sends slots `from..to` as set by [`Batch::set_len`]; returns how many went out.
    pub fn send(&mut self, fd: RawFd, from: usize, to: usize) -> io::Result<usize> {
        // SAFETY: headers `from..to` exist and point at live iovecs/addresses, as in `recv`.
        let n = unsafe {
            libc::sendmmsg(
                fd,
                self.headers.as_mut_ptr().add(from),
                (to - from) as libc::c_uint,
                0,
            )
        };
        Ok(check(n)? as usize)
    }
}
