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
