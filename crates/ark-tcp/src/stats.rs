//! Counters of a server or client, readable from any thread.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use ark_reactor::Striped;

/// Live counters shared by a server's (or client's) sessions. Sessions add their per-turn
/// totals once per turn, not once per message, each thread to a set of its own ([`Striped`]:
/// the reactor threads of a server do not write one cache line every turn).
#[derive(Debug, Default)]
pub(crate) struct TcpCounters {
    threads: Striped<CounterSet>,
}

/// One thread's [`TcpCounters`]; a gauge's copies may go below zero, their sum does not.
#[derive(Debug, Default)]
pub(crate) struct CounterSet {
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
    /// The calling thread's set, to add to.
    #[inline]
    pub(crate) fn local(&self) -> &CounterSet {
        self.threads.local()
    }

    /// Adds one turn's changes to the calling thread's set.
    pub(crate) fn add(&self, t: &TurnTally) {
        let local = self.local();
        let add = |counter: &AtomicU64, n: u64| {
            if n != 0 {
                counter.fetch_add(n, Ordering::Relaxed);
            }
        };
        add(&local.bytes_in, t.bytes_in);
        add(&local.bytes_out, t.bytes_out);
        add(&local.frames_in, t.frames_in);
        add(&local.frames_out, t.frames_out);
        add(&local.reads, t.reads);
        add(&local.writes, t.writes);
        add(&local.aborted_send_bytes, t.dropped_send_bytes);
    }

    /// The sum of every thread's set.
    pub(crate) fn snapshot(&self) -> TcpStats {
        let mut stats = TcpStats::default();
        let mut open = 0i64;
        let mut buffers = (0i64, 0i64);
        for set in self.threads.iter() {
            let u = |c: &AtomicU64| c.load(Ordering::Relaxed);
            let i = |c: &AtomicI64| c.load(Ordering::Relaxed);
            open += i(&set.sessions_open);
            buffers.0 += i(&set.recv_buffer_bytes);
            buffers.1 += i(&set.send_queue_bytes);
            stats.sessions_total += u(&set.sessions_total);
            stats.bytes_in += u(&set.bytes_in);
            stats.bytes_out += u(&set.bytes_out);
            stats.frames_in += u(&set.frames_in);
            stats.frames_out += u(&set.frames_out);
            stats.reads += u(&set.reads);
            stats.writes += u(&set.writes);
            stats.aborted_send_bytes += u(&set.aborted_send_bytes);
            stats.accept_errors += u(&set.accept_errors);
        }
        stats.sessions_open = open.max(0) as u64;
        stats.recv_buffer_bytes = buffers.0.max(0) as u64;
        stats.send_queue_bytes = buffers.1.max(0) as u64;
        stats
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
