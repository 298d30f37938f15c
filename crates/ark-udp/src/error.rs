//! The errors of ark-udp's sessions: why one ended, a datagram not delivered, a refused send,
//! a group rate limit that cannot change so.

use std::time::Duration;

/// Why a UDP session ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// No datagram from the peer for the session expiry time.
    #[error("no datagram for {0:?} (session expiry)")]
    Expired(Duration),
    /// Closed through its handle ([`UdpSessionHandle::close`](crate::UdpSessionHandle::close)).
    #[error("closed locally")]
    Local,
    /// The session table was full (`UdpConfig::max_sessions`) and this session had been
    /// silent since the eviction hand last passed it: it made room for a new peer.
    #[error("evicted to make room for a new peer (session table full)")]
    Evicted,
    /// The server or client stopped.
    #[error("stopped")]
    Stopped,
}

/// A datagram that could not be delivered whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DatagramError {
    /// The datagram was larger than the receive slot (`UdpConfig::max_datagram`); its tail was
    /// cut off by the kernel, so it is not delivered.
    #[error("datagram longer than the {max}-byte receive limit was truncated and dropped")]
    Truncated {
        /// The receive limit.
        max: usize,
    },
}

/// Why a send was refused. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Larger than a UDP datagram to this address can be (65,507 bytes over IPv4, 65,527 over
    /// IPv6): it would be truncated or refused by the kernel.
    #[error("payload of {len} bytes exceeds the UDP maximum of {max} bytes for this address")]
    TooLarge {
        /// Payload length.
        len: usize,
        /// The maximum for the destination's address family.
        max: usize,
    },
    /// `send_to` on a connected socket (a client): use `send`.
    #[error("send_to on a connected socket")]
    Connected,
    /// The socket's send queue would pass `UdpConfig::send_queue_limit` (the kernel's send
    /// buffer is full and replies are waiting).
    #[error("send queue full: {queued} bytes queued, limit {limit}")]
    Full {
        /// Bytes queued.
        queued: usize,
        /// The limit.
        limit: usize,
    },
    /// The socket is closed (or, for a client handle, not running).
    #[error("the socket is closed")]
    Closed,
}
