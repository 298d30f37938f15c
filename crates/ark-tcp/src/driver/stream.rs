//! The byte streams a session's driver can own: a TCP connection, or (Unix) a Unix-domain
//! stream socket. Everything above this trait — the core, framing, TLS, handles, timers, the
//! stop — is the same for both.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use ark_reactor::SocketBuffers;

use crate::error::CloseReason;

/// What a driver needs of its socket beyond reading, writing and readiness.
pub(crate) trait SessionStream: Read + Write + mio::event::Source + Send + 'static {
    /// Whether an outgoing connect has completed (`Ok(false)`: still under way), or why it
    /// failed (`peer`: the address it went to, for the reason).
    fn connected(&self, peer: SocketAddr) -> Result<bool, CloseReason>;

    /// The local address once connected (`fallback` for a stream without an IP address).
    fn local_addr_or(&self, fallback: SocketAddr) -> SocketAddr;

    /// The buffer sizes the kernel granted the socket.
    fn socket_buffers(&self) -> SocketBuffers;

    /// Shuts writing down (a FIN, or the end of the stream for the peer).
    fn shutdown_write(&self) -> io::Result<()>;

    /// Makes the close a reset where the protocol has one (TCP: `SO_LINGER` 0), so that the
    /// peer cannot take a cut stream for a complete one.
    fn reset_on_close(&self);
}

/// The buffer sizes of any socket socket2 can refer to.
fn granted(socket: socket2::SockRef<'_>) -> SocketBuffers {
    SocketBuffers {
        send: socket.send_buffer_size().unwrap_or(0),
        recv: socket.recv_buffer_size().unwrap_or(0),
    }
}

impl SessionStream for mio::net::TcpStream {
    fn connected(&self, addr: SocketAddr) -> Result<bool, CloseReason> {
        let failed = |e: io::Error| match e.kind() {
            io::ErrorKind::ConnectionRefused => CloseReason::Refused(addr),
            kind => CloseReason::ConnectFailed {
                addr,
                kind,
                message: e.to_string(),
            },
        };
        if let Ok(Some(e)) | Err(e) = self.take_error() {
            return Err(failed(e));
        }
        match self.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(failed(e)),
        }
    }

    fn local_addr_or(&self, fallback: SocketAddr) -> SocketAddr {
        self.local_addr().unwrap_or(fallback)
    }

    fn socket_buffers(&self) -> SocketBuffers {
        granted(socket2::SockRef::from(self))
    }

    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }

    fn reset_on_close(&self) {
        let _ = socket2::SockRef::from(self).set_linger(Some(Duration::ZERO));
    }
}

/// A Unix-domain stream connects at once or fails at once (no connect under way), and has
/// no IP address: its sessions report `fallback` (the unspecified address, port 0).
#[cfg(unix)]
impl SessionStream for mio::net::UnixStream {
    fn connected(&self, _: SocketAddr) -> Result<bool, CloseReason> {
        match self.take_error() {
            Ok(None) => Ok(true),
            Ok(Some(e)) | Err(e) => Err(CloseReason::io(&e)),
        }
    }

    fn local_addr_or(&self, fallback: SocketAddr) -> SocketAddr {
        fallback
    }

    fn socket_buffers(&self) -> SocketBuffers {
        granted(socket2::SockRef::from(self))
    }

    fn shutdown_write(&self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }

    /// Unix-domain streams have no reset: the peer sees the stream end, and a frame cut
    /// short is still bad input to it (the end came mid-frame).
    fn reset_on_close(&self) {}
}

/// A listening socket a server accepts its sessions' streams from.
pub(crate) trait Listen: mio::event::Source + Send + 'static {
    /// The accepted streams.
    type Stream: SessionStream;

    /// Accepts one connection: its stream, and the peer's address (the unspecified address,
    /// port 0, for a peer without one).
    fn accept_one(&self) -> io::Result<(Self::Stream, SocketAddr)>;

    /// Applies to an accepted stream the options of `config` its kind of socket has.
    fn prepare(stream: &Self::Stream, config: &crate::TcpConfig) -> io::Result<()>;
}

impl Listen for mio::net::TcpListener {
    type Stream = mio::net::TcpStream;

    fn accept_one(&self) -> io::Result<(Self::Stream, SocketAddr)> {
        self.accept()
    }

    fn prepare(stream: &Self::Stream, config: &crate::TcpConfig) -> io::Result<()> {
        crate::config::apply_socket_options(&socket2::SockRef::from(stream), config)
    }
}

/// The address a Unix-domain session reports for its peer and itself: it has no IP address.
#[cfg(unix)]
pub(crate) const NO_IP_ADDRESS: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

#[cfg(unix)]
impl Listen for mio::net::UnixListener {
    type Stream = mio::net::UnixStream;

    fn accept_one(&self) -> io::Result<(Self::Stream, SocketAddr)> {
        self.accept().map(|(stream, _)| (stream, NO_IP_ADDRESS))
    }

    /// Only the buffer sizes: nodelay and keepalive are TCP's.
    fn prepare(stream: &Self::Stream, config: &crate::TcpConfig) -> io::Result<()> {
        crate::config::apply_buffer_sizes(&socket2::SockRef::from(stream), config)
    }
}
