//! Why a TCP session ended ([`CloseReason`]) and why a send was refused ([`SendError`]).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ark_frame::{DecodeError, EncodeError};

/// Why a session ended. Delivered to [`TcpHandler::on_close`](crate::TcpHandler::on_close).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// Closed by [`TcpSession::close`](crate::TcpSession::close) (graceful: everything queued was sent first).
    #[error("closed locally after flushing")]
    Local,
    /// Closed by [`TcpSession::abort`](crate::TcpSession::abort): queued data dropped, connection reset.
    #[error("aborted locally")]
    Aborted,
    /// The peer ended its stream at a frame boundary; every whole frame it sent was delivered
    /// and everything queued for it was written before the session closed.
    #[error("peer closed the connection")]
    PeerClosed,
    /// The peer ended its stream in the middle of a frame (every whole frame before it was
    /// delivered, and what was queued for the peer was written).
    #[error("peer closed the connection mid-frame, with {buffered} bytes of the frame received")]
    EofMidFrame {
        /// Bytes of the incomplete frame that had arrived.
        buffered: usize,
    },
    /// The peer reset the connection.
    #[error("connection reset by peer")]
    Reset,
    /// A malformed or oversized frame arrived (the connection is reset).
    #[error("bad frame: {0}")]
    Frame(DecodeError),
    /// Nothing arrived for the idle timeout (`TcpConfig::idle_timeout`).
    #[error("no data for {0:?} (idle timeout)")]
    IdleTimeout(Duration),
    /// A frame had started to arrive and no byte of it came for the stall timeout
    /// (`TcpConfig::stall_timeout`).
    #[error("a frame stalled: {buffered} bytes of it received, then nothing for {after:?}")]
    FrameStalled {
        /// Bytes of the incomplete frame that had arrived.
        buffered: usize,
        /// The stall timeout.
        after: Duration,
    },
    /// Bytes were queued and none could be written for the write stall timeout
    /// (`TcpConfig::write_stall_timeout`): the peer stopped reading. The unsent bytes
    /// were dropped and the connection reset.
    #[error("the peer stopped reading: nothing written for {after:?}, {unsent} bytes dropped")]
    WriteStalled {
        /// Queued bytes that were dropped.
        unsent: usize,
        /// The write stall timeout.
        after: Duration,
    },
    /// A graceful close (for `cause`) did not finish within the close timeout
    /// (`TcpConfig::close_timeout`): the peer did not take what was queued. The unsent
    /// bytes were dropped and the connection reset.
    #[error("closing ({cause}) timed out with {unsent} bytes unsent; connection reset")]
    Unflushed {
        /// Why the session was closing.
        cause: Box<CloseReason>,
        /// Queued bytes that were dropped.
        unsent: usize,
    },
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
    /// The handler panicked in a callback: this session was closed (and reset); the others
    /// go on.
    #[error("the handler panicked")]
    Panicked,
    /// The TLS layer failed: a bad handshake (which check failed is in the error), a bad
    /// record, an alert from the peer, a handshake timeout, or a stream truncated without
    /// `close_notify`. The alert for the peer, if any, was sent before the connection closed.
    #[cfg(feature = "tls")]
    #[error("TLS: {0}")]
    Tls(#[from] ark_tls::TlsError),
}

impl CloseReason {
    /// Whether this side ended the session by its own choice: its close or abort, a stop, or
    /// a handler's panic (what a reconnecting client does not reconnect after, by default).
    pub fn is_local_choice(&self) -> bool {
        matches!(
            self,
            CloseReason::Local
                | CloseReason::Aborted
                | CloseReason::Stopped
                | CloseReason::Panicked
        )
    }

    /// Counts this close in `stats`'s `closed_*` counter of its kind.
    pub(crate) fn count(&self, stats: &mut crate::TcpStats) {
        let counter = match self {
            CloseReason::Local | CloseReason::Aborted => &mut stats.closed_local,
            CloseReason::PeerClosed => &mut stats.closed_by_peer,
            CloseReason::Reset => &mut stats.closed_reset,
            CloseReason::IdleTimeout(_)
            | CloseReason::FrameStalled { .. }
            | CloseReason::WriteStalled { .. }
            | CloseReason::Unflushed { .. }
            | CloseReason::ConnectTimeout(_) => &mut stats.closed_timeout,
            CloseReason::Frame(_) | CloseReason::EofMidFrame { .. } => &mut stats.closed_bad_input,
            CloseReason::Refused(_) | CloseReason::ConnectFailed { .. } => {
                &mut stats.closed_connect_failed
            }
            CloseReason::Io { .. } => &mut stats.closed_io,
            CloseReason::Stopped => &mut stats.closed_stopped,
            CloseReason::Panicked => &mut stats.closed_panicked,
            #[cfg(feature = "tls")]
            CloseReason::Tls(_) => &mut stats.closed_tls,
        };
        *counter += 1;
    }

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

    /// Whether ending the session this way resets the connection rather than closing it
    /// with a FIN: the peer must not take a truncated stream as complete.
    pub(crate) fn resets(&self) -> bool {
        matches!(
            self,
            CloseReason::Aborted
                | CloseReason::Panicked
                | CloseReason::Frame(_)
                | CloseReason::Unflushed { .. }
                | CloseReason::WriteStalled { .. }
        )
    }
}

/// Why a send was refused. Nothing of the message was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send queue would pass its limit (`TcpConfig::send_limit`). `on_writable` follows
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
    #[error("the session is closing or closed")]
    Closed,
    /// A client has no connection now (between attempts, or after it ended).
    #[error("the client is not connected")]
    NotConnected,
}
