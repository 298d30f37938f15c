//! The WebSocket layer's counters: a server's or client's ([`WsStats`]) and one session's
//! ([`WsSessionStats`]). The TCP layer's are the handle's `tcp_stats()`.

ark_reactor::counters! {
    /// Live counters shared by a server's (or a client's) sessions, added once per callback
    /// from a plain tally.
    pub(crate) struct WsCounters(WsCounterSet);
    /// A copy of a WebSocket server's or client's counters (its TCP counters are
    /// `tcp_stats()`).
    pub struct WsStats {
        /// Sessions that opened (handshake done).
        sessions_opened,
        /// Data messages (text and binary) delivered to handlers.
        messages_in,
        /// Data messages queued by handlers and through handles.
        messages_out,
        /// Sessions the peer closed first with a close frame.
        closed_by_peer,
        /// Sessions this side closed first with a close frame (stops included).
        closed_local,
        /// Sessions failed for bad input (invalid UTF-8 1007, too big 1009, a protocol error
        /// 1002): a close frame with the code went out, nothing more was read.
        closed_bad_input,
        /// Open sessions whose connection ended without a close frame.
        closed_abnormal,
        /// Connections that never opened: a refused upgrade (answered with an HTTP error), a
        /// handshake timeout, or a connection lost during the handshake.
        opens_failed,
    }
}

/// A copy of one WebSocket session's counters, from
/// [`WsSessionHandle::stats`](crate::WsSessionHandle::stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WsSessionStats {
    /// Data messages delivered to the handler.
    pub messages_in: u64,
    /// Data messages queued by the handler and through handles.
    pub messages_out: u64,
    /// The TCP session's counters (bytes each way, queued).
    pub tcp: ark_tcp::TcpSessionStats,
}
