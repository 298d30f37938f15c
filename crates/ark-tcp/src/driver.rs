//! The thin driver: one TCP socket on the reactor, moving bytes between it and a
//! [`SessionCore`]. Read → feed → deliver → write; the core decides everything else. With TLS
//! (`tls.rs`) the bytes pass through an `ark_tls::TlsSession` on the way.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use ark_reactor::{Context, Handler, Member, ReactorHandle, Ready, TimerId, TimerSlot, Turn};
use mio::net::TcpStream;

use crate::core::{Framing, SessionCore, State};
use crate::owner::Owner;
use crate::session::{CloseReason, SessionInfo, TcpHandler};
use crate::tls::{self, TlsLayer};

/// A session's socket on the reactor.
pub(crate) struct Conn<C: Framing, H: TcpHandler> {
    stream: TcpStream,
    /// `None` once closed (the handler went back to the owner).
    core: Option<SessionCore<C, H>>,
    owner: Arc<dyn Owner<H>>,
    reactor: ReactorHandle,
    /// TLS between the socket and the core (`tcps`), or `None` for plain TCP.
    tls: Option<TlsLayer>,
    /// An outgoing connect (check it completes) rather than an accepted connection.
    outgoing: bool,
    /// The TCP connection is established (the session opens now, or after the handshake).
    connected: bool,
    /// The reactor timer kept at the core's next deadline.
    timer: TimerSlot,
    /// The last read filled its buffer or reading resumed: read without a new edge.
    read_more: bool,
    opened: bool,
    /// Buffer bytes last published to the owner's counters: (receive, send).
    published: (usize, usize),
    /// Keeps the owner's stop waiting until the session is gone.
    _member: Member,
}

impl<C: Framing, H: TcpHandler> Conn<C, H> {
    /// A session over `stream`: accepted, or `outgoing` with its connect under way (bounded by
    /// `connect_timeout`); with `tls`, it opens once the handshake completes.
    pub(crate) fn new(
        stream: TcpStream,
        core: SessionCore<C, H>,
        owner: Arc<dyn Owner<H>>,
        reactor: ReactorHandle,
        (outgoing, tls): (bool, Option<TlsLayer>),
        member: Member,
    ) -> Self {
        Conn {
            stream,
            core: Some(core),
            owner,
            reactor,
            tls,
            outgoing,
            connected: false,
            timer: TimerSlot::default(),
            read_more: true,
            opened: false,
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
            check_connected(&self.stream, peer)
        } else {
            Ok(true)
        };
        match connected {
            Ok(true) => {
                self.connected = true;
                let socket = socket2::SockRef::from(&self.stream);
                let info = SessionInfo {
                    local: self.stream.local_addr().unwrap_or(core.info().local),
                    socket_buffers: (
                        socket.send_buffer_size().unwrap_or(0),
                        socket.recv_buffer_size().unwrap_or(0),
                    ),
                    ..core.info().clone()
                };
                match self.tls.as_mut() {
                    // The handshake opens the session.
                    Some(tls) => tls.connected(info),
                    None => {
                        core.handle_connected(now, info);
                        self.count_open();
                    }
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
        self.opened = true;
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
        let (blocked, resumed) = match self.tls.as_mut() {
            Some(tls) => tls::write_once(&mut self.stream, tls, core, cx, now),
            None => write_once(&mut self.stream, core, cx, now),
        };
        if resumed {
            self.read_more = true;
            turn = Turn::Again;
        }
        match self.tls.as_mut() {
            // With TLS, shut down only once its ciphertext is written too.
            Some(tls) if !tls.wants_write() && core.poll_shutdown() => {
                tls::shutdown(&mut self.stream, tls);
            }
            Some(_) => {}
            None if core.poll_shutdown() => {
                let _ = self.stream.shutdown(Shutdown::Write);
            }
            None => {}
        }
        self.publish();
        let Some(core) = self.core.as_mut() else {
            return Turn::Done;
        };
        if let Some(reason) = core.close_reason() {
            if reason.resets() {
                // Reset rather than FIN: the peer must not take a truncated stream as complete.
                let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
            }
            cx.close();
            return Turn::Done;
        }
        let handshake = self.tls.as_ref().and_then(TlsLayer::poll_timeout);
        let deadline = match (core.poll_timeout(), handshake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.timer.arm(deadline, cx);
        let tls_pending = self.tls.as_ref().is_some_and(TlsLayer::wants_write);
        if !blocked && (!core.transmit().is_empty() || tls_pending) {
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

/// Whether a non-blocking connect has completed (`Ok(false)`: still under way).
fn check_connected(stream: &TcpStream, addr: SocketAddr) -> Result<bool, CloseReason> {
    let failed = |e: io::Error| match e.kind() {
        io::ErrorKind::ConnectionRefused => CloseReason::Refused(addr),
        kind => CloseReason::ConnectFailed {
            addr,
            kind,
            message: e.to_string(),
        },
    };
    if let Ok(Some(e)) | Err(e) = stream.take_error() {
        return Err(failed(e));
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(e) => Err(failed(e)),
    }
}

/// Where a session's reads go: straight to the core (plain TCP, [`Plain`]) or through TLS
/// (`tls::TlsLayer`). The read loop ([`read`]) is the same for both.
pub(crate) trait Feed<C: Framing, H: TcpHandler> {
    /// Whether to read the socket now.
    fn wants_read(&self, core: &SessionCore<C, H>) -> bool;

    /// One read from `stream`: its result, and how many bytes it asked for.
    fn read_from(
        &mut self,
        stream: &mut TcpStream,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
    ) -> (io::Result<usize>, usize);

    /// `n` bytes were read; `false` ends the turn's reading (input is held back). What the
    /// delivery sends may be written to `stream` at once.
    fn received(
        &mut self,
        stream: &mut TcpStream,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        n: usize,
    ) -> bool;

    /// The peer ended its stream.
    fn end_of_stream(&mut self, core: &mut SessionCore<C, H>, now: Instant);
}

/// Plain TCP: reads go to the reactor's scratch buffer, or straight into the receive buffer
/// for a large pending frame.
#[derive(Default)]
pub(crate) struct Plain {
    /// The last read went into the receive buffer.
    direct: bool,
}

impl<C: Framing, H: TcpHandler> Feed<C, H> for Plain {
    fn wants_read(&self, core: &SessionCore<C, H>) -> bool {
        core.wants_read()
    }

    fn read_from(
        &mut self,
        stream: &mut TcpStream,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
    ) -> (io::Result<usize>, usize) {
        let buf = match core.direct_read_buf() {
            Some(buf) => {
                self.direct = true;
                buf
            }
            None => {
                self.direct = false;
                cx.scratch()
            }
        };
        (stream.read(buf), buf.len())
    }

    fn received(
        &mut self,
        stream: &mut TcpStream,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        n: usize,
    ) -> bool {
        let now = cx.now();
        if self.direct {
            core.handle_read_direct(now, n);
            return true;
        }
        // Echoed frames are written from the scratch buffer before the next read reuses it.
        let input = &mut cx.scratch()[..n];
        core.handle_read_lending(now, input);
        let Some(bufs) = core.transmit_in_place(input) else {
            return true;
        };
        let result = match bufs {
            [[], frames] => stream.write(frames),
            [queued, frames] => {
                stream.write_vectored(&[IoSlice::new(queued), IoSlice::new(frames)])
            }
        };
        core.count_write();
        match result {
            Ok(written) => core.handle_written_in_place(now, input, written),
            Err(e) if would_block(&e) => core.handle_written_in_place(now, input, 0),
            Err(e) => core.handle_error(CloseReason::io(&e)),
        }
        cx.counters().add_writes(1);
        true
    }

    fn end_of_stream(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        core.handle_eof(now);
    }
}

/// Reads and feeds `feed` within the turn's budget. Returns whether input may still be
/// waiting (the budget ran out).
pub(crate) fn read<C: Framing, H: TcpHandler>(
    stream: &mut TcpStream,
    feed: &mut impl Feed<C, H>,
    core: &mut SessionCore<C, H>,
    cx: &mut Context<'_>,
    ready: Ready,
) -> bool {
    let budget = cx.budget();
    let (mut reads, mut bytes) = (0u32, 0usize);
    while feed.wants_read(core) {
        if reads == budget.operations || bytes >= budget.bytes {
            return true;
        }
        let (result, asked) = feed.read_from(stream, core, cx);
        reads += 1;
        cx.counters().add_reads(1);
        core.count_read();
        match result {
            Ok(0) => {
                feed.end_of_stream(core, cx.now());
                return false;
            }
            Ok(n) => {
                bytes += n;
                if !feed.received(stream, core, cx, n) {
                    return false;
                }
                // A short read drained the socket, unless the peer's end of stream came with
                // this edge: then read on until it shows.
                if n < asked && !ready.contains(Ready::READ_CLOSED) {
                    core.release_idle_buffers();
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                core.release_idle_buffers();
                return false;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                core.handle_error(CloseReason::io(&e));
                return false;
            }
        }
    }
    false
}

/// Whether a failed read or write only means "not now".
fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// One write of what the core offers. Returns (the socket is full, reading resumed).
fn write_once<C: Framing, H: TcpHandler>(
    stream: &mut TcpStream,
    core: &mut SessionCore<C, H>,
    cx: &mut Context<'_>,
    now: Instant,
) -> (bool, bool) {
    let bytes = core.transmit();
    if bytes.is_empty() {
        return (false, false);
    }
    let len = bytes.len();
    let result = stream.write(bytes);
    cx.counters().add_writes(1);
    core.count_write();
    match result {
        // A partial write filled the socket: its next writable edge will come.
        Ok(n) => (n < len, core.handle_written(now, n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => (true, false),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => (false, false),
        Err(e) => {
            core.handle_error(CloseReason::io(&e));
            (true, false)
        }
    }
}

impl<C: Framing, H: TcpHandler> Handler for Conn<C, H> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let now = cx.now();
        if !self.connected
            && self
                .core
                .as_ref()
                .is_some_and(|c| matches!(c.state(), State::Connecting { .. }))
        {
            self.connect(now);
        }
        let Some(core) = self.core.as_mut() else {
            return Turn::Done;
        };
        core.handle_requests(now);
        if self.owner.stopping() {
            core.stop(now);
        }
        let mut turn = Turn::Done;
        let wants_read = match &self.tls {
            Some(tls) => tls.wants_read(core),
            None => core.wants_read(),
        };
        if wants_read && (ready.is_readable() || self.read_more) {
            self.read_more = match self.tls.as_mut() {
                Some(tls) => tls::read(&mut self.stream, tls, core, cx, ready),
                None => read(&mut self.stream, &mut Plain::default(), core, cx, ready),
            };
            if self.read_more {
                turn = Turn::Again;
            }
        }
        if self.tls.as_mut().is_some_and(TlsLayer::take_opened) {
            self.count_open();
        }
        self.finish_turn(cx, turn)
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        if self.timer.fired(timer)
            && let Some(core) = self.core.as_mut()
        {
            core.handle_timeout(cx.now());
            if let Some(tls) = self.tls.as_mut() {
                tls.handle_timeout(core, cx.now());
            }
        }
        self.finish_turn(cx, Turn::Done)
    }

    fn on_close(&mut self, reason: ark_reactor::CloseReason) {
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
        core.publish_to_handles();
        let counters = self.owner.counters();
        counters.add(&core.take_tally());
        let counters = counters.local();
        let published = (self.published.0 as i64, self.published.1 as i64);
        counters.recv_buffer_bytes.fetch_sub(published.0, Relaxed);
        counters.send_queue_bytes.fetch_sub(published.1, Relaxed);
        if self.opened {
            counters.sessions_open.fetch_sub(1, Relaxed);
        }
        let id = core.info().id;
        self.owner
            .clone()
            .closed(id, &reason, core.into_handler(), &self.reactor);
    }
}
