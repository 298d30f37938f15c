//! What a handler sees: `Session`, `TcpHandler`, close reasons and send errors.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ark_frame::{DecodeError, EncodeError, Encoder};

/// Why a session ended. Delivered to [`TcpHandler::on_close`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// Closed by [`Session::close`] (graceful: everything queued was sent first).
    #[error("closed locally after flushing")]
    Local,
    /// Closed by [`Session::abort`]: queued data dropped, connection reset.
    #[error("aborted locally")]
    Aborted,
    /// The peer closed the connection at a frame boundary.
    #[error("peer closed the connection")]
    PeerClosed,
    /// The peer closed the connection in the middle of a frame.
    #[error("peer closed the connection mid-frame, with {buffered} bytes of the frame received")]
    EofMidFrame {
        /// Bytes of the incomplete frame that had arrived.
        buffered: usize,
    },
    /// The peer reset the connection.
    #[error("connection reset by peer")]
    Reset,
    /// A malformed or oversized frame arrived.
    #[error("bad frame: {0}")]
    Frame(DecodeError),
    /// Nothing arrived for the idle timeout.
    #[error("no data for {0:?} (idle timeout)")]
    IdleTimeout(Duration),
    /// The connection was not established within the connect timeout.
    #[error("connect timed out after {0:?}")]
    ConnectTimeout(Duration),
    /// The peer refused the connection.
    #[error("connection refused by {0}")]
    Refused(SocketAddr),
    /// Connecting failed otherwise.
    #[error("connect to {addr} failed: {kind:?}: {message}")]
    ConnectFailed {
        /// Address connected to.
        addr: SocketAddr,
        /// The error's kind.
        kind: io::ErrorKind,
        /// The error's message.
        message: String,
    },
    /// A read or write failed.
    #[error("I/O error: {kind:?}: {message}")]
    Io {
        /// The error's kind.
        kind: io::ErrorKind,
        /// The error's message.
        message: String,
    },
    /// The server, client or reactor stopped.
    #[error("stopped")]
    Stopped,
}

impl CloseReason {
    pub(crate) fn io(e: &io::Error) -> CloseReason {
        match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => CloseReason::Reset,
            kind => CloseReason::Io {
                kind,
                message: e.to_string(),
            },
        }
    }
}

/// Why a send was refused. Nothing of the message was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send queue would pass its limit (`SessionConfig::send_limit`). `on_writable` follows
    /// once the queue drains under the low watermark.
    #[error("send queue full: {queued} bytes queued, the frame needs {needed}, limit {limit}")]
    Full {
        /// Bytes already queued.
        queued: usize,
        /// Bytes the frame needs.
        needed: usize,
        /// The queue limit.
        limit: usize,
    },
    /// The message cannot be framed (over `max_frame`, for example).
    #[error("cannot frame the message: {0}")]
    Encode(#[from] EncodeError),
    /// The session is closing or closed.
    #[error("the session is closing")]
    Closed,
}

/// The outgoing byte queue of a session: frames are appended contiguously and written with
/// one `write` per turn; the storage is reused, so steady-state sends allocate nothing.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
}

impl SendQueue {
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// Moves the unsent tail to the front when the sent head dominates.
    pub(crate) fn compact(&mut self) {
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    pub(crate) fn clear(&mut self) -> usize {
        let dropped = self.len();
        self.buf.clear();
        self.pos = 0;
        dropped
    }
}

/// What the handler asked the session to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Ending {
    #[default]
    None,
    Graceful,
    Abort,
}

/// A handler's view of its session during a callback.
pub struct Session<'a> {
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) out: &'a mut SendQueue,
    pub(crate) encoder: &'a dyn EncodeInto,
    pub(crate) send_limit: usize,
    pub(crate) ending: &'a mut Ending,
    pub(crate) wants_writable: &'a mut bool,
    pub(crate) frames_out: &'a mut u64,
    pub(crate) socket_buffers: (usize, usize),
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .field("queued", &self.out.len())
            .finish_non_exhaustive()
    }
}

/// Object-safe framing of outgoing messages.
pub(crate) trait EncodeInto {
    fn encode_into(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError>;
    fn encoded_len(&self, payload: &[u8]) -> Result<usize, EncodeError>;
}

impl<E: Encoder> EncodeInto for E {
    fn encode_into(&self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.encode(payload, out).map(|_| ())
    }
    fn encoded_len(&self, payload: &[u8]) -> Result<usize, EncodeError> {
        Ok(self.header(payload)?.as_slice().len() + payload.len() + self.trailer().len())
    }
}

impl Session<'_> {
    /// This session's id (unique within its server or client).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The socket's actual `(SO_SNDBUF, SO_RCVBUF)` sizes, read when the session opened (the
    /// kernel may have doubled or capped the requested sizes).
    pub fn socket_buffers(&self) -> (usize, usize) {
        self.socket_buffers
    }

    /// Bytes queued and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.out.len()
    }

    /// Queues `payload` as one frame. Never blocks: the frame is written at the end of this
    /// turn together with everything else queued. An empty queue accepts any one frame the
    /// codec can encode; otherwise the queue may not pass `send_limit`.
    ///
    /// # Errors
    /// [`SendError::Full`] when the queue would pass its limit, [`SendError::Encode`] when the
    /// payload cannot be framed, [`SendError::Closed`] after `close`/`abort`. Nothing is queued
    /// on error.
    pub fn send(&mut self, payload: &[u8]) -> Result<(), SendError> {
        let needed = self.encoder.encoded_len(payload)?;
        self.check_room(needed)?;
        self.out.compact();
        self.encoder.encode_into(payload, &mut self.out.buf)?;
        *self.frames_out += 1;
        Ok(())
    }

    /// Queues `bytes` as they are, without framing.
    ///
    /// # Errors
    /// As [`send`](Self::send), without `Encode`.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        self.check_room(bytes.len())?;
        self.out.compact();
        self.out.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Queues all of `bytes` as they are, without framing, and leaves `bytes` empty (as
    /// `Vec::append` does). When nothing is queued the two buffers are swapped instead of
    /// copied, so `bytes` comes back holding the queue's empty storage: a caller that keeps
    /// encoding into its own buffer hands it over without a copy.
    ///
    /// # Errors
    /// As [`send_raw`](Self::send_raw); on error `bytes` is left as it was.
    pub fn append_raw(&mut self, bytes: &mut Vec<u8>) -> Result<(), SendError> {
        self.check_room(bytes.len())?;
        if self.out.len() == 0 {
            self.out.clear();
            std::mem::swap(&mut self.out.buf, bytes);
        } else {
            self.out.compact();
            self.out.buf.extend_from_slice(bytes);
            bytes.clear();
        }
        Ok(())
    }

    fn check_room(&mut self, needed: usize) -> Result<(), SendError> {
        if *self.ending != Ending::None {
            return Err(SendError::Closed);
        }
        let queued = self.out.len();
        // An empty queue always takes one frame, so a frame larger than the limit (up to the
        // codec's maximum) can still be sent.
        if queued > 0 && queued + needed > self.send_limit {
            *self.wants_writable = true;
            return Err(SendError::Full {
                queued,
                needed,
                limit: self.send_limit,
            });
        }
        Ok(())
    }

    /// Closes gracefully: everything queued is written, writing is shut down, and the session
    /// closes when the peer ends its side (or after `close_linger`); messages the peer still
    /// sends meanwhile are delivered. No more sends are accepted.
    pub fn close(&mut self) {
        if *self.ending == Ending::None {
            *self.ending = Ending::Graceful;
        }
    }

    /// Closes at once: queued data is dropped and the connection is reset.
    pub fn abort(&mut self) {
        *self.ending = Ending::Abort;
    }
}

/// The callbacks of a TCP session. One handler value per session (its fields are the
/// session's typed state); every callback runs on the thread serving the session, never two
/// at once.
pub trait TcpHandler: Send + 'static {
    /// The connection is established.
    fn on_open(&mut self, session: &mut Session<'_>) {
        let _ = session;
    }

    /// A whole message arrived. The slice is lent for this call only.
    fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]);

    /// The send queue drained to the low watermark after a `SendError::Full` or a read pause.
    fn on_writable(&mut self, session: &mut Session<'_>) {
        let _ = session;
    }

    /// The session ended. For a reconnecting client, `on_open` follows on the next connection.
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = reason;
    }
}
