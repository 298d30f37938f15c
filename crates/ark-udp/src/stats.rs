//! Counters of a UDP socket (one per shard), readable from any thread, and of one session
//! ([`UdpSessionStats`]).

use std::time::Duration;

use ark_reactor::RateLimits;

ark_reactor::counters! {
    /// Live counters of one socket (one set per thread that adds to them).
    pub(crate) struct UdpCounters(UdpCounterSet);
    /// A copy of a socket's (or a server's summed) counters.
    pub struct UdpStats {
        /// Sessions opened (first datagram from a new peer).
        sessions_opened,
        /// Sessions closed (expired, evicted or stopped).
        sessions_closed,
        /// Sessions evicted to make room for a new peer (the table was at `max_sessions`).
        sessions_evicted,
        /// New peers turned away (only with `max_sessions` 0).
        sessions_rejected,
        /// Datagrams received and delivered.
        datagrams_in,
        /// Datagrams queued by handlers.
        datagrams_out,
        /// Datagrams actually sent.
        datagrams_sent,
        /// Payload bytes received.
        bytes_in,
        /// Datagrams that arrived truncated and were dropped.
        truncated,
        /// Receive syscalls (`recvmmsg` or `recvfrom`).
        receives,
        /// Send syscalls (`sendmmsg` or `sendto`).
        sends,
        /// Datagrams dropped by a send error (other than a full buffer).
        send_errors,
        /// Receive errors (ICMP-reported errors on connected sockets, ...).
        receive_errors,
        /// Trains of several datagrams sent as one message with UDP GSO (`datagrams_sent /
        /// sends` is the datagrams per send syscall).
        trains_sent,
        /// Trains the kernel refused, sent datagram by datagram instead.
        gso_fallbacks,
        /// Received buffers that held several datagrams (UDP GRO), each split.
        coalesced_receives,
        /// Datagrams a server dropped because their session's read allowance (its own or its
        /// group's) did not cover them; never delivered nor buffered.
        rate_dropped,
        /// Datagrams that waited for their session's write allowance before they were queued
        /// for sending.
        rate_delayed,
        /// Datagrams that were waiting for their session's write allowance when it expired or
        /// was evicted: never sent.
        rate_discarded,
        /// Times a client's or cast socket's reading paused for its read allowance.
        read_pauses,
    }
}

/// A copy of one session's counters, rates and limits: [`UdpSession::stats`] in a callback,
/// [`UdpSessionHandle::stats`] from any thread. Bytes are datagram payload bytes (no IP or
/// UDP headers).
///
/// [`UdpSession::stats`]: crate::UdpSession::stats
/// [`UdpSessionHandle::stats`]: crate::UdpSessionHandle::stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpSessionStats {
    /// Datagrams delivered to the handler.
    pub datagrams_in: u64,
    /// Payload bytes delivered to the handler.
    pub bytes_in: u64,
    /// Datagrams put in the socket's send queue (after any wait for the write allowance).
    pub datagrams_out: u64,
    /// Payload bytes put in the socket's send queue.
    pub bytes_out: u64,
    /// Payload bytes a second delivered, over the last whole second (a window restarted each
    /// second, measured when the session moved a datagram or its stats were read: after a
    /// silence, the average over the silence).
    pub bytes_in_per_second: u64,
    /// Payload bytes a second put in the send queue, over the same window.
    pub bytes_out_per_second: u64,
    /// Datagrams dropped over the read allowance (a server's sessions; a client pauses
    /// instead).
    pub rate_dropped: u64,
    /// Datagrams that waited for the write allowance.
    pub rate_delayed: u64,
    /// Times reading paused for the read allowance (a client's or cast socket's session).
    pub read_pauses: u64,
    /// Payload bytes waiting for the write allowance now.
    pub send_wait_bytes: u64,
    /// How long the bytes waiting now take to leave: at the session's own write limit, or
    /// without one at the rate it sent over the last second (`None`: bytes wait and none
    /// left in that second).
    pub send_queue_delay: Option<Duration>,
    /// The session's own rate limits (its group's are the server's).
    pub rate_limits: RateLimits,
}
