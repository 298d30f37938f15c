//! Counters of a server or client, readable from any thread.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Live counters shared by a server's (or client's) sessions. Sessions add their per-turn
/// totals once per turn, not once per message.
#[derive(Debug, Default)]
pub(crate) struct TcpCounters {
    pub(crate) sessions_open: AtomicI64,
    pub(crate) sessions_total: AtomicU64,
    pub(crate) bytes_in: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    pub(crate) frames_in: AtomicU64,
    pub(crate) frames_out: AtomicU64,
    pub(crate) recv_buffer_bytes: AtomicI64,
    pub(crate) send_queue_bytes: AtomicI64,
    pub(crate) reads: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) aborted_send_bytes: AtomicU64,
    pub(crate) accept_errors: AtomicU64,
}

/// One turn's worth of counter changes of one session.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TurnTally {
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) frames_in: u64,
    pub(crate) frames_out: u64,
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    /// Queued bytes dropped by an abort, a reset or a close that timed out.
    pub(crate) dropped_send_bytes: u64,
}

impl TcpCounters {
    pub(crate) fn add(&self, t: &TurnTally) {
        let add = |c: &AtomicU64, n: u64| {
            if n != 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&self.bytes_in, t.bytes_in);
        add(&self.bytes_out, t.bytes_out);
        add(&self.frames_in, t.frames_in);
        add(&self.frames_out, t.frames_out);
        add(&self.reads, t.reads);
        add(&self.writes, t.writes);
        add(&self.aborted_send_bytes, t.dropped_send_bytes);
    }

    pub(crate) fn snapshot(&self) -> TcpStats {
        let u = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let i = |c: &AtomicI64| c.load(Ordering::Relaxed).max(0) as u64;
        TcpStats {
            sessions_open: i(&self.sessions_open),
            sessions_total: u(&self.sessions_total),
            bytes_in: u(&self.bytes_in),
            bytes_out: u(&self.bytes_out),
            frames_in: u(&self.frames_in),
            frames_out: u(&self.frames_out),
            recv_buffer_bytes: i(&self.recv_buffer_bytes),
            send_queue_bytes: i(&self.send_queue_bytes),
            reads: u(&self.reads),
            writes: u(&self.writes),
            aborted_send_bytes: u(&self.aborted_send_bytes),
            accept_errors: u(&self.accept_errors),
        }
    }
}

/// A copy of a server's or client's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Sessions currently open.
    pub sessions_open: u64,
    /// Sessions opened since start.
    pub sessions_total: u64,
    /// Bytes read from sockets.
    pub bytes_in: u64,
    /// Bytes written to sockets.
    pub bytes_out: u64,
    /// Frames delivered to handlers.
    pub frames_in: u64,
    /// Frames queued by handlers.
    pub frames_out: u64,
    /// Receive-buffer bytes held by all sessions (partial frames only; whole frames are read
    /// in place from the reactor's scratch buffer).
    pub recv_buffer_bytes: u64,
    /// Bytes queued for sending in all sessions.
    pub send_queue_bytes: u64,
    /// Read syscalls.
    pub reads: u64,
    /// Write syscalls.
    pub writes: u64,
    /// Queued bytes dropped by aborts, resets, closes that timed out and reconnects (never
    /// replayed).
    pub aborted_send_bytes: u64,
    /// Failed `accept` calls (server).
    pub accept_errors: u64,
}
