//! Why a QUIC session (a client's connection, or a stream the server echoes) ended: every
//! failure on the network path is one of these, and ends the session it happened in.

use ark_peers::peer_io::FrameTooLong;

/// What ended a session.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The connection failed or was closed (handshake, idle timeout, peer's close, ...).
    #[error("connection: {0}")]
    Connection(#[from] quinn::ConnectionError),
    /// The connection could not be started.
    #[error("connect: {0}")]
    Connect(#[from] quinn::ConnectError),
    /// Writing a stream failed (the connection was lost, or the peer stopped the stream).
    #[error("write: {0}")]
    Write(#[from] quinn::WriteError),
    /// Reading a stream failed.
    #[error("read: {0}")]
    Read(#[from] quinn::ReadError),
    /// Reading a stream to its end failed, or it was longer than a message.
    #[error("read to end: {0}")]
    ReadToEnd(#[from] quinn::ReadToEndError),
    /// A stream was finished twice or after a reset.
    #[error("stream: {0}")]
    Closed(#[from] quinn::ClosedStream),
    /// A length prefix announced more than a message.
    #[error("framing: {0}")]
    TooLong(#[from] FrameTooLong),
    /// The peer finished its stream while messages were still in flight.
    #[error("the stream ended with messages in flight")]
    Ended,
}
