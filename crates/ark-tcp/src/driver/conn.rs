//! The thin driver: one TCP socket on the reactor, moving bytes between it and a
//! [`SessionCore`] through a [`Transport`] (plain TCP, or TLS in `tls.rs`). Read → feed →
//! deliver → write; the core decides everything else.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use ark_reactor::{
    Context, Handler, Member, Phase, ReactorHandle, Ready, TimerId, TimerSlot, Turn,
};

use crate::driver::stream::SessionStream;
#[cfg(feature = "tls")]
use crate::driver::tls::TlsLayer;
use crate::driver::transport::{Plain, Transport};
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler};
use crate::owner::Owner;
use crate::proto::core::link::State;
use crate::proto::core::{Framing, SessionCore};
use crate::trace::{self, SessionSpan};

/// A session's socket `S` on the reactor, its bytes crossing through `T`.
pub(crate) struct Conn<C: Framing, H: TcpHandler, T, S> {
    stream: S,
    /// `None` once closed (the handler went back to the owner).
    core: Option<SessionCore<C, H>>,
    owner: Arc<dyn Owner<H>>,
    reactor: ReactorHandle,
    transport: T,
    /// An outgoing connect (check it completes) rather than an accepted connection.
    outgoing: bool,
    /// The reactor timer kept at the core's next deadline.
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
/// under way; with `tls`, it opens once the handshake completes.
pub(crate) fn conn<C: Framing, H: TcpHandler, S: SessionStream>(
    stream: S,
    core: SessionCore<C, H>,
    (owner, reactor, member): (Arc<dyn Owner<H>>, ReactorHandle, Member),
    outgoing: bool,
    tls: Option<Secure>,
) -> Box<dyn Handler> {
    let parts = (stream, core, owner, reactor, member);
    match tls {
        #[cfg(feature = "tls")]
        Some(tls) => Box::new(Conn::new(parts, outgoing, tls)),
        _ => Box::new(Conn::new(parts, outgoing, Plain::default())),
    }
}

/// A connection's TLS layer ([`TlsLayer`] with the `tls` feature; a type without values
/// without it, so a session is always plain).
#[cfg(feature = "tls")]
pub(crate) type Secure = TlsLayer;
/// A connection's TLS layer ([`TlsLayer`] with the `tls` feature; a type without values
/// without it, so a session is always plain).
#[cfg(not(feature = "tls"))]
pub(crate) type Secure = std::convert::Infallible;

/// What every [`Conn`] is made of.
type Parts<C, H, S> = (
    S,
    SessionCore<C, H>,
    Arc<dyn Owner<H>>,
    ReactorHandle,
    Member,
);

impl<C: Framing, H: TcpHandler, T: Transport<C, H>, S: SessionStream> Conn<C, H, T, S> {
    fn new(
        (stream, core, owner, reactor, member): Parts<C, H, S>,
        outgoing: bool,
        transport: T,
    ) -> Self {
        Conn {
            span: trace::span(core.info(), outgoing),
            stream,
            core: Some(core),
            owner,
            reactor,
            transport,
            outgoing,
            timer: TimerSlot::default(),
            read_more: true,
            write_blocked: false,
            published: (0, 0),
            _member: member,
        }
    }

    /// Completes the connect (or reports its failure) on the first turns.
    fn connect(&mut self, now: Instant) {
        let Some(core) = self.core.as_mut() else {
            return;
        };
        let peer = core.info().peer;
        let connected = if self.outgoing {
            self.stream.connected(peer)
        } else {
            Ok(true)
        };
        match connected {
            Ok(true) => {
                let info = SessionInfo {
                    local: self.stream.local_addr_or(core.info().local),
                    socket_buffers: self.stream.socket_buffers(),
                    ..core.info().clone()
                };
                if self.transport.connected(core, now, info) {
                    self.count_open();
                }
            }
            Ok(false) => {}
            Err(reason) => core.handle_error(reason),
        }
    }

    /// The session opened: the owner's counters and its `opened` hook.
    fn count_open(&mut self) {
        let Some(core) = self.core.as_ref() else {
            return;
        };
        trace::opened(core.info());
        let counters = self.owner.counters().local();
        counters.sessions_open.fetch_add(1, Relaxed);
        counters.sessions_total.fetch_add(1, Relaxed);
        self.owner.opened(core.info().id);
    }

    /// Everything a turn does after its input: write, shut down, close, arm the timer.
    fn finish_turn(&mut self, cx: &mut Context<'_>, mut turn: Turn) -> Turn {
        let Some(core) = self.core.as_mut() else {
            return Turn::Done;
        };
        let now = cx.now();
        let (blocked, resumed) = if self.write_blocked {
            (true, false)
        } else {
            self.transport.write(&mut self.stream, core, cx, now)
        };
        self.write_blocked = blocked;
        if resumed {
            self.read_more = true;
            turn = Turn::Again;
        }
        self.transport.shutdown_when_done(&mut self.stream, core);
        self.publish();
        let Some(core) = self.core.as_mut() else {
            return Turn::Done;
        };
        if let Some(reason) = core.close_reason() {
            if reason.resets() {
                // Reset rather than FIN: the peer must not take a truncated stream as complete.
                self.stream.reset_on_close();
            }
            cx.close();
            return Turn::Done;
        }
        let deadline = match (core.poll_timeout(), self.transport.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.timer.arm(deadline, cx);
        if !blocked && (!core.transmit().is_empty() || self.transport.wants_write()) {
            // Queued by callbacks after this turn's write, with room in the socket.
            turn = Turn::Again;
        }
        turn
    }

    /// Publishes the turn's counters and buffer sizes to the owner.
    fn publish(&mut self) {
        let Some(core) = self.core.as_mut() else {
            return;
        };
        core.publish_to_handles();
        let counters = self.owner.counters();
        counters.add(&core.take_tally());
        let held = (core.held_recv(), core.queued());
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

impl<C: Framing, H: TcpHandler, T: Transport<C, H>, S: SessionStream> Handler for Conn<C, H, T, S> {
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

impl<C: Framing, H: TcpHandler, T: Transport<C, H>, S: SessionStream> Conn<C, H, T, S> {
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

    /// A readiness turn: connect, requests from handles, read, then write and the rest.
    fn ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let now = cx.now();
        if ready.is_writable() {
            self.write_blocked = false;
        }
        let connecting = self
            .core
            .as_ref()
            .is_some_and(|c| matches!(c.state(), State::Connecting { .. }));
        if connecting && !self.transport.handshaking() {
            self.connect(now);
        }
        let Some(core) = self.core.as_mut() else {
            return Turn::Done;
        };
        let phase = self.owner.phase();
        // Before the handles' requests: what a handle asked after a drain began (a deferred
        // answer given, a wake) finds the session knowing of it.
        if phase == Phase::Draining {
            core.drain(now);
        }
        core.handle_requests(now);
        if core.take_read_resumed() {
            self.read_more = true;
        }
        if phase == Phase::Stopping {
            core.stop(now);
        }
        let mut turn = Turn::Done;
        if self.transport.wants_read(core) && (ready.is_readable() || self.read_more) {
            self.read_more = self.transport.read(&mut self.stream, core, cx, ready);
            if self.read_more {
                turn = Turn::Again;
            }
        }
        if self.transport.take_opened() {
            self.count_open();
        }
        // After the read: a session that opened in it (a TLS handshake's end) hears of a drain
        // under way at once.
        if phase == Phase::Draining
            && let Some(core) = self.core.as_mut()
        {
            core.drain(now);
        }
        self.finish_turn(cx, turn)
    }

    /// A timer turn: the core's deadlines.
    fn timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        let mut turn = Turn::Done;
        if self.timer.fired(timer)
            && let Some(core) = self.core.as_mut()
        {
            core.handle_timeout(cx.now());
            self.transport.handle_timeout(core, cx.now());
            // Reading stopped on a spent rate budget goes on now (it had not reached
            // `WouldBlock`, so no readiness event may come): a turn that reads.
            if core.take_read_resumed() {
                self.read_more = true;
                turn = Turn::Again;
            }
        }
        self.finish_turn(cx, turn)
    }

    /// The source closed: the handler's `on_close`, the counters, the owner's bookkeeping.
    fn close(&mut self, reason: ark_reactor::CloseReason) {
        let Some(mut core) = self.core.take() else {
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
        let report = std::panic::AssertUnwindSafe(|| core.report_close(reason));
        let reason = std::panic::catch_unwind(report).unwrap_or(CloseReason::Panicked);
        trace::closed(core.info(), &reason);
        core.publish_to_handles();
        let counters = self.owner.counters();
        let mut tally = core.take_tally();
        reason.count(&mut tally);
        counters.add(&tally);
        let counters = counters.local();
        let published = (self.published.0 as i64, self.published.1 as i64);
        counters.recv_buffer_bytes.fetch_sub(published.0, Relaxed);
        counters.send_queue_bytes.fetch_sub(published.1, Relaxed);
        let (id, opened) = (core.info().id, core.was_opened());
        self.owner
            .clone()
            .closed(id, &reason, core.into_handler(), &self.reactor);
        // After the owner let the session go (a server's `max_sessions` counts its registry):
        // one that sees the gauge fall finds the room.
        if opened {
            counters.sessions_open.fetch_sub(1, Relaxed);
        }
    }
}
