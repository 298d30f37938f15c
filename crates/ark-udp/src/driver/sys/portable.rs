//! The portable datagram path (macOS, Windows, the BSDs, and Linux built with
//! `--cfg ark_portable`): one `recv_from`/`send_to` per datagram through mio, truncation seen
//! through one byte past the slot, and no steering program.

use std::io;

use mio::net::UdpSocket;

use crate::proto::batch::{RecvBatch, SendBatch};

/// One datagram per syscall: a receive batch has one slot, a send batch one datagram.
pub(crate) const BATCHED: bool = false;

/// Nothing to keep between syscalls on this path.
pub(crate) struct RecvScratch;

impl RecvScratch {
    /// Nothing to make: a receive takes one datagram.
    pub(crate) fn new(_slots: usize) -> Self {
        RecvScratch
    }

    /// Receives one datagram (one per syscall on this path).
    pub(crate) fn recv_batch(
        &mut self,
        batch: &mut RecvBatch,
        socket: &UdpSocket,
        _max: usize,
    ) -> io::Result<usize> {
        self.recv_one(batch, socket)
    }

    /// Receives one datagram into slot 0 with `recv_from`. Returns 1, or `WouldBlock`.
    ///
    /// The buffer is one byte longer than the slot: macOS and the BSDs cut a longer datagram
    /// silently, so one that fills it was longer than the limit and is reported truncated.
    /// Windows refuses such a datagram with `WSAEMSGSIZE` (and std's `recv_from` then loses
    /// its sender): see [`recv_from`].
    pub(crate) fn recv_one(
        &mut self,
        batch: &mut RecvBatch,
        socket: &UdpSocket,
    ) -> io::Result<usize> {
        batch.received.clear();
        let (start, slot) = (batch.slot_start(0), batch.slot);
        let (len, cut, from) = recv_from(socket, &mut batch.data[start..start + slot + 1])?;
        batch.push_received(0, len.min(slot), from, (0, cut || len > slot));
        Ok(1)
    }
}

/// Nothing to keep between syscalls on this path.
pub(crate) struct SendScratch;

/// One datagram into `buffer`: its length, whether it was cut, its sender.
#[cfg(not(windows))]
fn recv_from(
    socket: &UdpSocket,
    buffer: &mut [u8],
) -> io::Result<(usize, bool, std::net::SocketAddr)> {
    socket
        .recv_from(buffer)
        .map(|(len, from)| (len, false, from))
}

/// One datagram into `buffer`: its length, whether it was cut, its sender. Windows reports a
/// datagram longer than the buffer as the error `WSAEMSGSIZE`, after filling the buffer;
/// socket2's `WSARecvFrom` turns that into a truncation flag with the sender, so a long
/// datagram is reported truncated to its session as on every other platform. Through mio's
/// `try_io`, so a `WouldBlock` re-arms the socket's readiness.
#[cfg(windows)]
fn recv_from(
    socket: &UdpSocket,
    buffer: &mut [u8],
) -> io::Result<(usize, bool, std::net::SocketAddr)> {
    use std::mem::MaybeUninit;
    // SAFETY: `u8` and `MaybeUninit<u8>` have the same layout; the slice is initialised and
    // the callee only writes bytes into it (never uninitialised ones), so it stays initialised.
    let uninit = unsafe { &mut *(std::ptr::from_mut::<[u8]>(buffer) as *mut [MaybeUninit<u8>]) };
    let mut bufs = [socket2::MaybeUninitSlice::new(uninit)];
    let (len, flags, from) =
        socket.try_io(|| socket2::SockRef::from(socket).recv_from_vectored(&mut bufs))?;
    let from = from
        .as_socket()
        .ok_or_else(|| io::Error::other("a datagram from a non-IP address"))?;
    Ok((len, flags.is_truncated(), from))
}

impl SendScratch {
    /// Nothing to make: a send takes one datagram.
    pub(crate) fn new() -> Self {
        SendScratch
    }

    /// Sends `out`'s next queued datagram (one per syscall on this path); `max` is not used.
    pub(crate) fn send_batch(
        &mut self,
        out: &mut SendBatch,
        socket: &UdpSocket,
        _max: usize,
        received: &[u8],
    ) -> io::Result<usize> {
        self.send_one(out, socket, received)
    }

    /// Sends `out`'s next queued datagram with one `send_to` (or `send` to the connected
    /// peer).
    pub(crate) fn send_one(
        &mut self,
        out: &mut SendBatch,
        socket: &UdpSocket,
        received: &[u8],
    ) -> io::Result<usize> {
        let Some(message) = out.outgoing(0, received) else {
            return Ok(0);
        };
        match message.to {
            Some(to) => socket.send_to(message.bytes, to)?,
            None => socket.send(message.bytes)?,
        };
        Ok(out.sent(1))
    }
}

/// No datagram offloads on this path: every datagram is its own syscall.
pub(crate) fn enable_offload(_socket: &UdpSocket, _config: &crate::UdpConfig) -> crate::UdpOffload {
    crate::UdpOffload::default()
}

/// [`Steering::PeerPort`](crate::Steering::PeerPort) needs Linux's
/// `SO_ATTACH_REUSEPORT_CBPF`: refused on this path.
pub(crate) fn steer_by_source_port(
    _socket: &socket2::SockRef<'_>,
    _shards: u32,
    _v6: bool,
) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "Steering::PeerPort needs Linux (SO_ATTACH_REUSEPORT_CBPF); this build runs the portable \
         IO path (ark_reactor::IO_PATH), whose sharded server steers by the kernel's hash only",
    ))
}
