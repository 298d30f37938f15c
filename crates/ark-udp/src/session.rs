//! What a handler sees: `UdpSession`, `UdpHandler`, errors and close reasons.

use std::net::SocketAddr;
use std::time::Duration;

use crate::limits::max_payload;
use crate::sys::SendBatch;

/// Why a UDP session ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// No datagram from the peer for the session expiry time.
    #[error("no datagram for {0:?} (session expiry)")]
    Expired(Duration),
    /// The session table was full (`UdpConfig::max_sessions`) and this session was the least
    /// recently active of those sampled: it made room for a new peer.
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
}

/// A handler's view of its peer during a callback.
pub struct UdpSession<'a> {
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) connected: bool,
    pub(crate) out: &'a mut SendBatch,
    pub(crate) send_limit: usize,
    pub(crate) datagrams_out: &'a mut u64,
}

impl std::fmt::Debug for UdpSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSession")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl UdpSession<'_> {
    /// The peer's address (the session's key).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The local address of the socket serving the session.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Queues one datagram to the peer. Datagrams queued during a readiness turn go out
    /// together at its end (one `sendmmsg` per batch when batching is on).
    ///
    /// # Errors
    /// [`SendError::TooLarge`] over the UDP maximum for the address family (never truncated);
    /// [`SendError::Full`] when the queue is at its limit.
    pub fn send(&mut self, payload: &[u8]) -> Result<(), SendError> {
        let peer = self.peer;
        self.queue(peer, payload)
    }

    /// Queues one datagram to any address (unconnected sockets: servers and [`UdpCast`]).
    /// Broadcast and multicast destinations work only where the socket enabled them.
    ///
    /// [`UdpCast`]: crate::UdpCast
    ///
    /// # Errors
    /// As [`send`](Self::send), plus [`SendError::Connected`] on a client's connected socket.
    pub fn send_to(&mut self, to: std::net::SocketAddr, payload: &[u8]) -> Result<(), SendError> {
        if self.connected {
            return Err(SendError::Connected);
        }
        self.queue(to, payload)
    }

    fn queue(&mut self, to: SocketAddr, payload: &[u8]) -> Result<(), SendError> {
        let max = max_payload(&to);
        if payload.len() > max {
            return Err(SendError::TooLarge {
                len: payload.len(),
                max,
            });
        }
        let queued = self.out.data.len();
        if queued > 0 && queued + payload.len() > self.send_limit {
            return Err(SendError::Full {
                queued,
                limit: self.send_limit,
            });
        }
        self.out.push((!self.connected).then_some(to), payload);
        *self.datagrams_out += 1;
        Ok(())
    }
}

/// The callbacks of a UDP session (one peer). One handler value per session; callbacks run on
/// the thread serving the socket, never two at once.
pub trait UdpHandler: Send + 'static {
    /// The first datagram from this peer arrived (server), or the client socket is ready.
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        let _ = session;
    }

    /// A whole datagram arrived (empty datagrams included). The slice is lent for this call.
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]);

    /// A datagram from this peer could not be delivered whole.
    fn on_datagram_error(&mut self, session: &mut UdpSession<'_>, error: &DatagramError) {
        let _ = (session, error);
    }

    /// The session ended.
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = reason;
    }
}
