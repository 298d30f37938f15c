//! The thin driver: one socket on the reactor, moving bytes between it and a
//! [`SessionMachine`] (plain TCP, or TLS inside the machine) through the machine's four
//! verbs: read into the buffer it lends, let it write, keep its deadline, take its events.

use std::io::{self, IoSlice, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use ark_reactor::{
    Context, Handler, Member, Phase, ReactorHandle, Ready, TimerId, TimerSlot, Turn,
};

use crate::driver::stream::SessionStream;
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler};
use crate::owner::Owner;
use crate::proto::core::Framing;
use crate::proto::machine::SessionMachine;
use crate::trace::{self, SessionSpan};

/// A session's socket `S` on the reactor.
pub(crate) struct Conn<C: Framing, H: TcpHandler, S> {
    stream: S,
    /// `None` once closed (the handler went back to the owner).
    machine: Option<SessionMachine<C, H>>,
    owner: Arc<dyn Owner<H>>,
    reactor: ReactorHandle,
    /// An outgoing connect (check it completes) rather than an accepted connection.
    outgoing: bool,
    /// The reactor timer kept at the machine's next deadline.
    timer: TimerSlot,
    /// The last read filled its buffer or reading resumed: read without a new edge.
    read_more: bool,
    /// The last write found the socket full: no write until a writable event. (On Windows a
    /// `WouldBlock` re-arms every interest, so a write tried on every turn of a session that
    /// is paused with unread input made each turn raise the next: a spin.)
    write_blocked: bool,
    /// Buffer bytes last published to the owner's counters: (receive, send).
    published: (usize, usize),
    /// Keeps the owner's stop waiting until the session is gone.
    _member: Member,
    /// The session's tracing span (cargo feature `tracing`; nothing without it).
    span: SessionSpan,
}

/// A session over `stream` as a reactor handler: accepted, or `outgoing` with its connect
/// under way.
pub(crate) fn conn<C: Framing, H: TcpHandler, S: SessionStream>(
    stream: S,
    machine: SessionMachine<C, H>,
    owner: Arc<dyn Owner<H>>,
    reactor: ReactorHandle,
    member: Member,
    outgoing: bool,
) -> Box<dyn Handler> {
    Box::new(Conn {
        span: trace::span(machine.info(), outgoing),
        stream,
        machine: Some(machine),
        owner,
        reactor,
        outgoing,
        timer: TimerSlot::default(),
        read_more: true,
        write_blocked: false,
        published: (0, 0),
        _member: member,
    })
}

/// The socket as the machine's writer, counting its write calls (the reactor's counters).
struct Counted<'a, S> {
    stream: &'a mut S,
    writes: u64,
}

impl<S: Write> Write for Counted<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writes += 1;
        self.stream.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writes += 1;
        self.stream.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

impl<C: Framing, H: TcpHandler, S: SessionStream> Conn<C, H, S> {
    /// Completes the connect (or reports its failure) on the first turns.
    fn connect(&mut self, now: Instant) {
        let Some(machine) = self.machine.as_mut() else {
            return;
        };
        let peer = machine.info().peer;
        let connected = if self.outgoing {
            self.stream.connected(peer)
        } else {
            Ok(true)
        };
        match connected {
            Ok(true) => {
                let info = SessionInfo {
                    local: self.stream.local_addr_or(machine.info().local),
                    socket_buffers: self.stream.socket_buffers(),
                    ..machine.info().clone()
                };
                machine.handle_connected(now, info);
            }
            Ok(false) => {}
            Err(reason) => machine.handle_error(reason),
        }
    }

    /// The session opened (once): the owner's counters and its `opened` hook.
    fn count_open(&mut self) {
        let Some(machine) = self.machine.as_mut() else {
            return;
        };
        if !machine.take_opened() {
            return;
        }
        trace::opened(machine.info());
        let counters = self.owner.counters().local();
        counters.sessions_open.fetch_add(1, Relaxed);
        counters.sessions_total.fetch_add(1, Relaxed);
        self.owner.opened(machine.info().id);
    }

    /// Reads and feeds the machine within the turn's budget. Returns whether input may still
    /// be waiting (the budget ran out).
    fn read(&mut self, cx: &mut Context<'_>, ready: Ready) -> bool {
        let Some(machine) = self.machine.as_mut() else {
            return false;
        };
        let (budget, now) = (cx.budget(), cx.now());
        let (mut reads, mut bytes) = (0u32, 0usize);
        while machine.wants_read() {
            if reads == budget.operations || bytes >= budget.bytes {
                return true;
            }
            let Some(buf) = machine.read_buf(now, cx.scratch()) else {
                return false;
            };
            let asked = buf.len();
            let result = self.stream.read(buf);
            reads += 1;
            let got = *result.as_ref().unwrap_or(&0);
            let mut out = Counted {
                stream: &mut self.stream,
                writes: 0,
            };
            let more = machine.handle_read(now, cx.scratch(), result, &mut out);
            let counters = cx.counters();
            counters.add_reads(1);
            counters.add_writes(out.writes);
            if !more {
                return false;
            }
            bytes += got;
            // A short read drained the socket (where it does: `SHORT_IO_DRAINS`), unless the
            // peer's end of stream came with this edge: then read on until it shows.
            // Elsewhere the next read's `WouldBlock` ends the loop.
            if ark_reactor::SHORT_IO_DRAINS
                && got > 0
                && got < asked
                && !ready.contains(Ready::READ_CLOSED)
            {
                machine.read_drained();
                return false;
            }
        }
        false
    }

    /// Everything a turn does after its input: write, shut down, close, arm the timer.
    fn finish_turn(&mut self, cx: &mut Context<'_>, mut turn: Turn) -> Turn {
        let Some(machine) = self.machine.as_mut() else {
            return Turn::Done;
        };
        if !self.write_blocked {
            let mut out = Counted {
                stream: &mut self.stream,
                writes: 0,
            };
            let done = machine.transmit(cx.now(), &mut out);
            cx.counters().add_writes(out.writes);
            // A partial write filled the socket: on Linux its next writable edge will come;
            // elsewhere only a `WouldBlock` promises one, so the turn runs again and writes
            // until it sees one (`SHORT_IO_DRAINS`).
            self.write_blocked = done.full || (ark_reactor::SHORT_IO_DRAINS && done.partial);
            if done.resumed {
                self.read_more = true;
                turn = Turn::Again;
            }
            if done.end_stream {
                let _ = self.stream.shutdown_write();
            }
        }
        self.publish();
        let Some(machine) = self.machine.as_mut() else {
            return Turn::Done;
        };
        if let Some(reason) = machine.close_reason() {
            if reason.resets() {
                // Reset rather than FIN: the peer must not take a truncated stream as complete.
                self.stream.reset_on_close();
            }
            cx.close();
            return Turn::Done;
        }
        self.timer.arm(machine.poll_timeout(), cx);
        if !self.write_blocked && machine.wants_write() {
            // Queued by callbacks after this turn's write, with room in the socket.
            turn = Turn::Again;
        }
        turn
    }

    /// Publishes the turn's counters and buffer sizes to the owner.
    fn publish(&mut self) {
        let Some(machine) = self.machine.as_mut() else {
            return;
        };
        let published = machine.take_published();
        let counters = self.owner.counters();
        counters.add(&published.tally);
        let held = (published.recv_held, published.send_queued);
        if held != self.published {
            let delta = |now: usize, before: usize| now as i64 - before as i64;
            let counters = counters.local();
            let recv = delta(held.0, self.published.0);
            counters.recv_buffer_bytes.fetch_add(recv, Relaxed);
            let send = delta(held.1, self.published.1);
            counters.send_queue_bytes.fetch_add(send, Relaxed);
            self.published = held;
        }
    }
}

impl<C: Framing, H: TcpHandler, S: SessionStream> Handler for Conn<C, H, S> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        self.in_span(|conn| conn.ready(cx, ready))
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        self.in_span(|conn| conn.timer(cx, timer))
    }

    fn on_close(&mut self, reason: ark_reactor::CloseReason) {
        self.in_span(|conn| conn.close(reason));
    }
}

impl<C: Framing, H: TcpHandler, S: SessionStream> Conn<C, H, S> {
    /// Runs `f` inside the session's span (cargo feature `tracing`; just `f` without it).
    fn in_span<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let span = std::mem::replace(&mut self.span, trace::none());
        let result = {
            let _entered = trace::enter(&span);
            f(self)
        };
        self.span = span;
        result
    }

    /// A readiness turn: connect, the owner's turn, read, then write and the rest.
    fn ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let now = cx.now();
        if ready.is_writable() {
            self.write_blocked = false;
        }
        if self.machine.as_ref().is_some_and(|m| m.awaits_stream()) {
            self.connect(now);
            self.count_open();
        }
        let Some(machine) = self.machine.as_mut() else {
            return Turn::Done;
        };
        let phase = self.owner.phase();
        // Before the handles' requests: what a handle asked after a drain began (a deferred
        // answer given, a wake) finds the session knowing of it.
        if machine.handle_owner(now, phase) {
            self.read_more = true;
        }
        let mut turn = Turn::Done;
        if machine.wants_read() && (ready.is_readable() || self.read_more) {
            self.read_more = self.read(cx, ready);
            if self.read_more {
                turn = Turn::Again;
            }
        }
        self.count_open();
        // After the read: a session that opened in it (a TLS handshake's end) hears of a drain
        // under way at once.
        if phase == Phase::Draining
            && let Some(machine) = self.machine.as_mut()
        {
            machine.drain(now);
        }
        self.finish_turn(cx, turn)
    }

    /// A timer turn: the core's deadlines.
    fn timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        let mut turn = Turn::Done;
        if self.timer.fired(timer)
            && let Some(machine) = self.machine.as_mut()
        {
            // Reading stopped on a spent rate budget goes on now (it had not reached
            // `WouldBlock`, so no readiness event may come): a turn that reads.
            if machine.handle_timeout(cx.now()) {
                self.read_more = true;
                turn = Turn::Again;
            }
        }
        self.finish_turn(cx, turn)
    }

    /// The source closed: the handler's `on_close`, the counters, the owner's bookkeeping.
    fn close(&mut self, reason: ark_reactor::CloseReason) {
        let Some(mut machine) = self.machine.take() else {
            return;
        };
        let removed = if self.owner.stopping() {
            // Removed by a stop past its deadline.
            CloseReason::Stopped
        } else {
            CloseReason::Local
        };
        let reason = match reason {
            ark_reactor::CloseReason::Stopped => CloseReason::Stopped,
            ark_reactor::CloseReason::Closed => removed,
            ark_reactor::CloseReason::RegistrationFailed(kind) => CloseReason::Io {
                kind,
                message: "registering the socket with the reactor failed".to_string(),
            },
            ark_reactor::CloseReason::Panicked => CloseReason::Panicked,
        };
        // The handler's `on_close` may panic too (it panicked before, say): the bookkeeping
        // below still runs.
        let report = std::panic::AssertUnwindSafe(|| machine.report_close(reason));
        let reason = std::panic::catch_unwind(report).unwrap_or(CloseReason::Panicked);
        trace::closed(machine.info(), &reason);
        let counters = self.owner.counters();
        let mut tally = machine.take_published().tally;
        reason.count(&mut tally);
        counters.add(&tally);
        let counters = counters.local();
        let published = (self.published.0 as i64, self.published.1 as i64);
        counters.recv_buffer_bytes.fetch_sub(published.0, Relaxed);
        counters.send_queue_bytes.fetch_sub(published.1, Relaxed);
        let (id, opened) = (machine.info().id, machine.was_opened());
        self.owner
            .clone()
            .closed(id, &reason, machine.into_handler(), &self.reactor);
        // After the owner let the session go (a server's `max_sessions` counts its registry):
        // one that sees the gauge fall finds the room.
        if opened {
            counters.sessions_open.fetch_sub(1, Relaxed);
        }
    }
}
