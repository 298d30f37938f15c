//! UDP: the echo server receives up to 32 datagrams per `recvmmsg` and sends them back
//! from the same buffers with one `sendmmsg`; a short batch means the socket is drained.
//! Clients use connected sockets and the same batches; a client that has every message in
//! flight answered knows nothing more can arrive and does not ask again.

use std::io;
use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;

use crate::poller::Conn;
use crate::sys::Batch;

/// Datagrams per server batch.
pub const SERVER_BATCH: usize = 32;
/// Datagrams per client batch.
pub const CLIENT_BATCH: usize = 8;

/// The echo server's socket (one of several with `SO_REUSEPORT` in the sharded model).
pub struct UdpServer {
    socket: UdpSocket,
    batch: Batch,
    echo: Echo,
}

impl UdpServer {
    /// A server on nonblocking `socket` for datagrams of up to `max_datagram` bytes,
    /// `batch` per syscall.
    pub fn new(socket: UdpSocket, max_datagram: usize, batch: usize, echo: Echo) -> Self {
        UdpServer {
            socket,
            batch: Batch::new(batch, max_datagram, true),
            echo,
        }
    }

    /// Sends slots `0..n` back; what the socket refuses is dropped (and counted).
    fn send_back(&mut self, n: usize, syscalls: &mut u64) {
        let fd = self.socket.as_raw_fd();
        let mut sent = 0;
        while sent < n {
            *syscalls += 1;
            match self.batch.send(fd, sent, n) {
                Ok(k) => sent += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    // Full or refused: this datagram is lost (the run counts it).
                    self.echo.rejected();
                    sent += 1;
                }
            }
        }
    }
}

impl Conn for UdpServer {
    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn ready(&mut self, readable: bool, _: bool, syscalls: &mut u64) -> bool {
        if !readable {
            return true;
        }
        let fd = self.socket.as_raw_fd();
        loop {
            *syscalls += 1;
            let n = match self.batch.recv(fd, self.batch.slots()) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                // An ICMP error of an earlier send: that peer is gone, others are not.
                Err(_) => continue,
            };
            for i in 0..n {
                let len = self.batch.received(i).unwrap_or(0);
                self.echo.before_echo(&self.batch.slot_mut(i)[..len]);
                self.batch.set_len(i, len);
            }
            self.send_back(n, syscalls);
            if n < self.batch.slots() {
                return true;
            }
        }
    }
}

/// A closed-loop client on a connected socket.
pub struct UdpClient {
    socket: UdpSocket,
    batch: Batch,
    core: Box<Core>,
    /// Messages to send, back to back, each `payload` bytes.
    out: Vec<u8>,
    payload: usize,
}

impl UdpClient {
    /// A client on nonblocking, connected `socket`, `batch` datagrams per syscall; its
    /// window is queued at once.
    pub fn new(socket: UdpSocket, mut core: Box<Core>, payload: usize, batch: usize) -> Self {
        let mut out = Vec::with_capacity(payload * 4);
        core.pump(|m| {
            out.extend_from_slice(m);
            true
        });
        UdpClient {
            socket,
            batch: Batch::new(batch, payload + 1, false),
            core,
            out,
            payload,
        }
    }

    /// Sends what is queued (one `sendmmsg` per batch); a datagram the kernel refuses is
    /// lost, and counted as lost by the run.
    fn flush(&mut self, syscalls: &mut u64) {
        let fd = self.socket.as_raw_fd();
        for chunk in self.out.chunks(self.payload * self.batch.slots()) {
            let count = chunk.len() / self.payload;
            for (i, message) in chunk.chunks(self.payload).enumerate() {
                self.batch.slot_mut(i)[..message.len()].copy_from_slice(message);
                self.batch.set_len(i, message.len());
            }
            let mut sent = 0;
            while sent < count {
                *syscalls += 1;
                match self.batch.send(fd, sent, count) {
                    Ok(k) => sent += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => sent += 1,
                }
            }
        }
        self.out.clear();
    }

    /// Receives until every message in flight is answered (nothing more can arrive before
    /// the next send) or a short batch drained the socket.
    fn receive(&mut self, syscalls: &mut u64) -> io::Result<()> {
        let fd = self.socket.as_raw_fd();
        let mut awaited = self.core.in_flight();
        while awaited > 0 {
            *syscalls += 1;
            let n = match self.batch.recv(fd, awaited) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            for i in 0..n {
                let len = self.batch.received(i).unwrap_or(0);
                let echo = &self.batch.slot_mut(i)[..len];
                self.core.on_echo(echo, |m| {
                    self.out.extend_from_slice(m);
                    true
                });
            }
            if n < awaited.min(self.batch.slots()) {
                return Ok(());
            }
            awaited -= n;
        }
        Ok(())
    }
}

impl Conn for UdpClient {
    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn ready(&mut self, readable: bool, _: bool, syscalls: &mut u64) -> bool {
        let received = if readable {
            self.receive(syscalls)
        } else {
            Ok(())
        };
        self.flush(syscalls);
        if received.is_err() {
            self.core.on_disconnect();
            return false;
        }
        true
    }
}
