//! Counters of a server or client, readable from any thread.

ark_reactor::counters! {
    /// Live counters shared by a server's (or client's) sessions. Sessions add their per-turn
    /// totals once per turn, not once per message, each thread to a set of its own (the
    /// reactor threads of a server do not write one cache line every turn).
    pub(crate) struct TcpCounters(TcpCounterSet);
    /// A copy of a server's or client's counters. A session's core also counts its turn in
    /// one (its tally), added to the live counters once per turn.
    pub struct TcpStats {
        /// Sessions opened since start.
        sessions_total,
        /// Bytes read from sockets.
        bytes_in,
        /// Bytes written to sockets.
        bytes_out,
        /// Frames delivered to handlers.
        frames_in,
        /// Frames queued by handlers.
        frames_out,
        /// Read syscalls.
        reads,
        /// Write syscalls.
        writes,
        /// Queued bytes dropped by aborts, resets, closes that timed out and reconnects (never
        /// replayed).
        aborted_send_bytes,
        /// Failed `accept` calls (server).
        accept_errors,
        /// Connections reset as soon as accepted because `max_sessions` sessions were open
        /// (server; see [`AcceptLimits`](crate::AcceptLimits)).
        refused_sessions,
        /// Sessions that ended by a close or abort of this side (`CloseReason::Local`,
        /// `Aborted`).
        closed_local,
        /// Sessions the peer ended at a frame boundary (`PeerClosed`).
        closed_by_peer,
        /// Sessions the peer reset (`Reset`).
        closed_reset,
        /// Sessions ended by a deadline: idle, stalled frame or write, a close that did not
        /// finish, a connect that timed out.
        closed_timeout,
        /// Sessions ended by bad input: a bad frame, or the stream ending mid-frame.
        closed_bad_input,
        /// Connections that could not be made (refused, failed).
        closed_connect_failed,
        /// Sessions ended by a TLS failure.
        closed_tls,
        /// Sessions ended by another I/O error.
        closed_io,
        /// Sessions ended by a stop.
        closed_stopped,
        /// Sessions whose handler panicked.
        closed_panicked,
    }
    gauges {
        /// Sessions currently open.
        sessions_open,
        /// Receive-buffer bytes held by all sessions (partial frames only; whole frames are read
        /// in place from the reactor's scratch buffer).
        recv_buffer_bytes,
        /// Bytes queued for sending in all sessions.
        send_queue_bytes,
    }
}

/// A copy of one session's counters, from [`TcpSessionHandle::stats`](crate::TcpSessionHandle::stats)
/// (published at the end of each of the session's turns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpSessionStats {
    /// Bytes read from the socket (after TLS: the plaintext's).
    pub bytes_in: u64,
    /// Bytes written to the socket.
    pub bytes_out: u64,
    /// Messages (frames) delivered to the handler.
    pub messages_in: u64,
    /// Messages (frames) queued by the handler and through handles.
    pub messages_out: u64,
    /// Bytes queued for sending now.
    pub queued_bytes: u64,
    /// Bytes a second read over the last whole second.
    pub bytes_in_per_second: u64,
    /// Bytes a second written over the last whole second.
    pub bytes_out_per_second: u64,
    /// How long the queued bytes take to leave at that rate (`Some(0)` with nothing queued;
    /// `None` with bytes queued and none leaving): the send queue's delay.
    pub queue_delay: Option<std::time::Duration>,
}
