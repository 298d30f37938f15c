//! Close codes that may go on the wire, and how a session ended.

use std::fmt;
use std::time::Duration;

/// A WebSocket close code that may be sent (RFC 6455 7.4): 1000–1003, 1007–1014 and
/// 3000–4999. The codes the RFC reserves for reporting and never sends — 1005 (no status),
/// 1006 (abnormal closure), 1015 (TLS failure) — and the unassigned ones cannot be made, so
/// they never reach the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CloseCode(u16);

/// A number that is not a close code one may send; see [`CloseCode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} is not a close code that may be sent (1000-1003, 1007-1014, 3000-4999)")]
pub struct InvalidCloseCode(pub u16);

impl CloseCode {
    /// 1000: the purpose of the connection is fulfilled.
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001: the endpoint is going away (a server stopping, a page left).
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1002: a protocol error.
    pub const PROTOCOL_ERROR: CloseCode = CloseCode(1002);
    /// 1003: a kind of data the endpoint cannot accept.
    pub const UNSUPPORTED_DATA: CloseCode = CloseCode(1003);
    /// 1007: data not consistent with the message type (invalid UTF-8 in text).
    pub const INVALID_DATA: CloseCode = CloseCode(1007);
    /// 1008: a message that violates the endpoint's policy.
    pub const POLICY_VIOLATION: CloseCode = CloseCode(1008);
    /// 1009: a message too big to process.
    pub const TOO_BIG: CloseCode = CloseCode(1009);
    /// 1010: the client expected an extension the server did not negotiate.
    pub const MISSING_EXTENSION: CloseCode = CloseCode(1010);
    /// 1011: an unexpected condition on the server.
    pub const INTERNAL_ERROR: CloseCode = CloseCode(1011);
    /// 1012: the service is restarting.
    pub const SERVICE_RESTART: CloseCode = CloseCode(1012);
    /// 1013: try again later.
    pub const TRY_AGAIN_LATER: CloseCode = CloseCode(1013);
    /// 1014: a gateway got an invalid response upstream.
    pub const BAD_GATEWAY: CloseCode = CloseCode(1014);

    /// The code `code`, if it may be sent.
    ///
    /// # Errors
    /// [`InvalidCloseCode`] for reserved or unassigned numbers (1005, 1006, 1015, 2000, ...).
    pub const fn new(code: u16) -> Result<CloseCode, InvalidCloseCode> {
        match code {
            1000..=1003 | 1007..=1014 | 3000..=4999 => Ok(CloseCode(code)),
            _ => Err(InvalidCloseCode(code)),
        }
    }

    /// The number.
    pub const fn get(self) -> u16 {
        self.0
    }
}

/// Why a text message fails its connection: bad UTF-8 (1007), with the reason sent.
pub(crate) const BAD_UTF8: (CloseCode, &str) =
    (CloseCode::INVALID_DATA, "invalid UTF-8 in a text message");

impl TryFrom<u16> for CloseCode {
    type Error = InvalidCloseCode;
    fn try_from(code: u16) -> Result<Self, Self::Error> {
        CloseCode::new(code)
    }
}

impl From<CloseCode> for u16 {
    fn from(code: CloseCode) -> u16 {
        code.0
    }
}

impl fmt::Debug for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CloseCode({})", self.0)
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Which side closed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initiator {
    /// This side (the handler, a stop, or a bad message from the peer).
    Local,
    /// The peer.
    Peer,
}

/// Why a session never opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The TCP connection failed or ended before the upgrade completed.
    #[error("connection: {0}")]
    Connection(ark_tcp::CloseReason),
    /// Client: the server answered the upgrade with this HTTP status instead of 101.
    #[error("the server refused the upgrade with HTTP {status}")]
    Rejected {
        /// The server's status.
        status: u16,
    },
    /// Server: the upgrade request was malformed or refused, and answered with `status`.
    #[error("bad upgrade ({status}): {detail}")]
    BadUpgrade {
        /// The HTTP status answered.
        status: u16,
        /// What was wrong.
        detail: String,
    },
    /// Client: the server's answer to the upgrade was not a valid WebSocket handshake.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The opening handshake did not finish within `handshake_timeout`.
    #[error("the opening handshake took longer than {0:?}")]
    Timeout(Duration),
}

/// How a session ended, given to [`WsHandler::on_close`](crate::WsHandler::on_close) exactly
/// once per session — including a client whose connection or handshake failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WsClose {
    /// A close frame was sent or received: `code` and `reason` of the side that closed first
    /// (`code` is `None` for a close frame without one).
    Closed {
        /// Who closed first.
        by: Initiator,
        /// The close code.
        code: Option<CloseCode>,
        /// The reason text.
        reason: String,
    },
    /// The connection ended without any close frame (what RFC 6455 reports as 1006): the TCP
    /// session's reason says why.
    Abnormal(ark_tcp::CloseReason),
    /// The session never opened.
    Failed(OpenError),
}

impl WsClose {
    /// The close code of a [`WsClose::Closed`].
    pub fn code(&self) -> Option<CloseCode> {
        match self {
            WsClose::Closed { code, .. } => *code,
            _ => None,
        }
    }
}
