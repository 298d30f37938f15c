//! Counters of a UDP socket (one per shard), readable from any thread.

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
    }
}
