//! What ark-ws's session API names besides the session itself: the upgrade request type and
//! why a send was refused.

use crate::proto::close::InvalidCloseCode;

/// The HTTP upgrade request of a session (the server's received request, or the client's sent
/// one).
pub type UpgradeRequest = tungstenite::http::Request<()>;

/// Why a send was refused. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Bytes waiting to be written would pass the write-buffer limit
    /// (`WsConfig::write_buffer_limit`).
    #[error("write buffer full: {queued} bytes waiting, limit {limit}")]
    Full {
        /// Bytes waiting (encoded frames not yet written to the socket).
        queued: usize,
        /// The limit.
        limit: usize,
    },
    /// The message is over the maximum message size (or a control frame over 125 bytes).
    #[error("message of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Message length.
        len: usize,
        /// `WsConfig::max_message`, or 125 for a control frame.
        max: usize,
    },
    /// A close message with a code that may not be sent (1005, 1006, 1015, ...).
    #[error(transparent)]
    InvalidCloseCode(#[from] InvalidCloseCode),
    /// The session is not open: still in its handshake, closing, or closed.
    #[error("the WebSocket session is not open")]
    Closed,
    /// A client has no open session now.
    #[error("the client is not connected")]
    NotConnected,
}
