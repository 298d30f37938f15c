//! One connection's IO on tokio, written for speed: readiness-driven `try_read`/`try_write`
//! (no read or write future per message) into a 64 KiB receive buffer decoded in place;
//! every message of a read is answered before one write, and a pending write never keeps the
//! connection from reading.

use std::io::{self, Read};

use ark_peers::peer_io::RecvBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// Receive (and send) buffer per connection, bytes: 64 KiB for speed, or `PEER_TOKIO_BUF`
/// (the `tokio-4k` implementation of ark-bench sets 4096: the program sized for many
/// connections, its buffers growing only when a message needs it).
pub fn recv_buf() -> usize {
    static SIZE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        std::env::var("PEER_TOKIO_BUF")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64 * 1024)
    })
}

/// Outgoing bytes of one connection and how far they are written.
pub struct Outgoing {
    /// Bytes to write, from `written` on.
    pub bytes: Vec<u8>,
    written: usize,
}

impl Outgoing {
    /// Nothing to write.
    pub fn new() -> Self {
        Outgoing {
            bytes: Vec::with_capacity(recv_buf()),
            written: 0,
        }
    }

    /// Whether bytes wait to be written.
    pub fn pending(&self) -> bool {
        self.written < self.bytes.len()
    }

    /// Writes what the socket takes now.
    fn write(&mut self, stream: &TcpStream) -> io::Result<()> {
        while self.pending() {
            match stream.try_write(&self.bytes[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.bytes.clear();
        self.written = 0;
        Ok(())
    }
}

/// Runs one connection until it ends (starting with what `buf` holds): waits for readiness, reads everything there is,
/// lets `on_data` decode it (appending replies to the outgoing bytes, or writing them), and
/// writes. Returns `Ok` at end of stream.
pub async fn drive(
    stream: &TcpStream,
    mut buf: RecvBuf,
    mut on_data: impl FnMut(&mut RecvBuf, &mut Outgoing) -> io::Result<()>,
    out: &mut Outgoing,
) -> io::Result<()> {
    loop {
        let interest = if out.pending() {
            Interest::READABLE | Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        let ready = stream.ready(interest).await?;
        if ready.is_readable() {
            while let Some(n) = read(stream, &mut buf)? {
                if n == 0 {
                    return Ok(());
                }
                on_data(&mut buf, out)?;
            }
            if !buf.data().is_empty() {
                on_data(&mut buf, out)?;
            }
        }
        out.write(stream)?;
    }
}

/// One read into `buf`: `Some(n)` with the bytes read (0 at end of stream) while the socket
/// may hold more, `None` once it is drained (bytes of a short read are in `buf` then).
///
/// A short read counts as draining the socket (ark assumes the same): the readiness is
/// dropped without the read that would block. The decision is made inside `try_io`, so
/// readiness that arrived during the read (a multi-thread runtime's driver) is not lost.
fn read(stream: &TcpStream, buf: &mut RecvBuf) -> io::Result<Option<usize>> {
    let spare = buf.spare();
    let room = spare.len();
    let mut got = 0;
    let result = stream.try_io(Interest::READABLE, || {
        got = (&*socket2::SockRef::from(stream)).read(spare)?;
        if got > 0 && got < room {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(got)
        }
    });
    buf.filled(got);
    match result {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `bytes` whole, waiting for room if the socket is full (setup only).
pub async fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await
}

/// Reads into `buf` until `parse` finds a whole message at its front (setup only: the
/// WebSocket handshake, over TCP or TLS); returns what `parse` returned. Bytes after it stay
/// in `buf`.
pub async fn read_until<
    S: tokio::io::AsyncRead + Unpin,
    T,
    E: std::error::Error + Send + Sync + 'static,
>(
    stream: &mut S,
    buf: &mut RecvBuf,
    mut parse: impl FnMut(&[u8]) -> Result<Option<T>, E>,
) -> io::Result<T> {
    loop {
        if let Some(found) = parse(buf.data()).map_err(io::Error::other)? {
            return Ok(found);
        }
        let n = stream.read(buf.spare()).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.filled(n);
    }
}
