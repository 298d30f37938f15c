//! The TCP listener: accepts every pending connection on each edge and hands each to the
//! next poller of the server's, round-robin.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use ark_loopback::servers::Echo;
use ark_peers::peer_io::RecvBuf;

use crate::poller::{Conn, Poller};
use crate::stream::{Codec, End, RECV_BUF, StreamConn};

/// A nonblocking listener and where its connections go.
pub struct Listener {
    listener: TcpListener,
    targets: Vec<Arc<Poller>>,
    next: usize,
    echo: Echo,
    codec: Codec,
}

impl Listener {
    /// Serves connections of `listener` (nonblocking) on `targets` with `codec`
    /// (`LengthPrefix`, or `WsHandshake` for WebSocket).
    pub fn new(listener: TcpListener, targets: Vec<Arc<Poller>>, echo: Echo, codec: Codec) -> Self {
        Listener {
            listener,
            targets,
            next: 0,
            echo,
            codec,
        }
    }

    fn accept_one(&mut self, syscalls: &mut u64) -> io::Result<()> {
        *syscalls += 1;
        let (stream, _) = self.listener.accept()?;
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        let buf = RecvBuf::with_capacity(RECV_BUF);
        let conn = StreamConn::new(stream, buf, self.codec, End::Server(self.echo.clone()));
        let target = &self.targets[self.next % self.targets.len()];
        self.next += 1;
        target.add(Box::new(conn))
    }
}

impl Conn for Listener {
    fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }

    fn ready(&mut self, readable: bool, _: bool, syscalls: &mut u64) -> bool {
        if !readable {
            return true;
        }
        loop {
            match self.accept_one(syscalls) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Out of descriptors, a full table, a connection reset before it was
                // accepted: that connection is lost (its client's setup fails and says so).
                // The listener waits for the next edge rather than spin on the error.
                Err(_) => return true,
            }
        }
    }
}
