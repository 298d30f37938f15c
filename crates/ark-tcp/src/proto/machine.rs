//! The one seam between a TCP session and whatever moves its bytes: [`SessionMachine`], the
//! session core with its byte layer (plain, or TLS inside it), sans-IO. A driver — the
//! reactor's (`driver/conn.rs`) or the [`Simulator`](crate::Simulator) — does four things with
//! it and nothing else to move bytes:
//!
//! 1. **read**: it reads into the buffer the machine lends ([`read_buf`]) and hands over what
//!    the read returned ([`handle_read`]: bytes, the end of the stream, or an error);
//! 2. **write**: it lets the machine write what it has to the stream as any [`Write`]
//!    ([`transmit`]), and ends the stream when told to;
//! 3. **time**: it keeps one timer at [`poll_timeout`] and calls [`handle_timeout`];
//! 4. **events**: the session opened ([`take_opened`]) or closed ([`close_reason`]).
//!
//! The owner's inputs (the handles' requests, a drain, a stop: [`handle_owner`]) and the
//! counters it publishes ([`take_published`]) are the rest. The machine names no socket, no
//! syscall and no clock: a driver passes `now`, a scratch buffer and a writer.
//!
//! [`read_buf`]: SessionMachine::read_buf
//! [`handle_read`]: SessionMachine::handle_read
//! [`transmit`]: SessionMachine::transmit
//! [`poll_timeout`]: SessionMachine::poll_timeout
//! [`handle_timeout`]: SessionMachine::handle_timeout
//! [`take_opened`]: SessionMachine::take_opened
//! [`close_reason`]: SessionMachine::close_reason
//! [`handle_owner`]: SessionMachine::handle_owner
//! [`take_published`]: SessionMachine::take_published

use std::io::{self, IoSlice, Write};
use std::time::Instant;

use ark_reactor::Phase;

use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler};
#[cfg(feature = "tls")]
use crate::proto::core::earliest;
use crate::proto::core::link::State;
#[cfg(feature = "tls")]
use crate::proto::core::secure::Secure;
use crate::proto::core::{Framing, SessionCore};
use crate::stats::TcpStats;

/// A TCP session as its driver sees it: the core and the layer its bytes cross (see the
/// module's documentation for the four verbs).
pub(crate) struct SessionMachine<C: Framing, H: TcpHandler> {
    pub(crate) core: SessionCore<C, H>,
    layer: Layer,
    /// The owner was told the session opened ([`take_opened`](Self::take_opened)).
    announced: bool,
}

/// The bytes between the stream and the core.
enum Layer {
    /// As they are. `direct`: the last read went into the core's receive buffer (a large
    /// pending frame) rather than the driver's scratch.
    Plain { direct: bool },
    /// Through TLS: ciphertext on the stream, plaintext in the core.
    #[cfg(feature = "tls")]
    Tls(Box<Secure>),
}

/// A session's TLS side, when it has one: [`ark_tls::TlsSession`] with the `tls` feature; a
/// type without values without it, so a session is always plain.
#[cfg(feature = "tls")]
pub(crate) type TlsSide = ark_tls::TlsSession;
/// A session's TLS side, when it has one: `ark_tls::TlsSession` with the `tls` feature; a
/// type without values without it, so a session is always plain.
#[cfg(not(feature = "tls"))]
pub(crate) type TlsSide = std::convert::Infallible;

/// The machine of `core`: over `tls` when there is one, else plain.
pub(crate) fn machine<C: Framing, H: TcpHandler>(
    core: SessionCore<C, H>,
    tls: Option<TlsSide>,
) -> SessionMachine<C, H> {
    match tls {
        #[cfg(feature = "tls")]
        Some(tls) => SessionMachine::secure(core, tls),
        _ => SessionMachine::plain(core),
    }
}

/// What a [`transmit`](SessionMachine::transmit) did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Transmitted {
    /// Bytes the stream took.
    pub(crate) written: usize,
    /// The stream took part of what was offered (on Linux: its buffer is full).
    pub(crate) partial: bool,
    /// The stream took nothing (`WouldBlock`), or failed (the session is closing): write no
    /// more until it is writable.
    pub(crate) full: bool,
    /// Reading, paused by backpressure, may go on.
    pub(crate) resumed: bool,
    /// Everything is written after a graceful close: end the stream now (once).
    pub(crate) end_stream: bool,
}

/// What a turn published: the counters since the last one, and the bytes held.
pub(crate) struct Published {
    pub(crate) tally: TcpStats,
    /// Receive-buffer bytes held.
    pub(crate) recv_held: usize,
    /// Bytes queued for sending.
    pub(crate) send_queued: usize,
}

/// The driver's scratch buffer in two halves for TLS: the first takes a read of ciphertext,
/// the second stages the plaintext handed to the core.
#[cfg(feature = "tls")]
fn halves(scratch: &mut [u8]) -> (&mut [u8], &mut [u8]) {
    let mid = scratch.len() / 2;
    scratch.split_at_mut(mid)
}

/// Whether a failed write means the stream is full (`true`), try again (`false`), or, for any
/// other error, the session ends (`true`: write no more).
fn write_failed<C: Framing, H: TcpHandler>(e: &io::Error, core: &mut SessionCore<C, H>) -> bool {
    match e.kind() {
        io::ErrorKind::WouldBlock => true,
        io::ErrorKind::Interrupted => false,
        _ => {
            core.handle_error(CloseReason::io(e));
            true
        }
    }
}

impl<C: Framing, H: TcpHandler> SessionMachine<C, H> {
    /// A session whose bytes cross the stream as they are.
    pub(crate) fn plain(core: SessionCore<C, H>) -> Self {
        SessionMachine {
            core,
            layer: Layer::Plain { direct: false },
            announced: false,
        }
    }

    /// A session speaking TLS (`tcps`) over the stream: it opens when the handshake completes.
    #[cfg(feature = "tls")]
    pub(crate) fn secure(core: SessionCore<C, H>, tls: ark_tls::TlsSession) -> Self {
        SessionMachine {
            core,
            layer: Layer::Tls(Box::new(Secure::new(tls))),
            announced: false,
        }
    }

    /// The session's fixed facts.
    pub(crate) fn info(&self) -> &SessionInfo {
        self.core.info()
    }

    /// The stream is up (`info` completed with what it knows): a plain session opens now
    /// (`on_open`), a TLS one when its handshake completes.
    pub(crate) fn handle_connected(&mut self, now: Instant, info: SessionInfo) {
        match &mut self.layer {
            Layer::Plain { .. } => self.core.handle_connected(now, info),
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => secure.connected(info),
        }
    }

    /// Whether the session waits for its stream to come up (an outgoing connect under way).
    pub(crate) fn awaits_stream(&self) -> bool {
        let handshaking = match &self.layer {
            Layer::Plain { .. } => false,
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => secure.handshaking(),
        };
        matches!(self.core.state(), State::Connecting { .. }) && !handshaking
    }

    /// A failure of the stream (a connect refused, a reset): the session ends.
    pub(crate) fn handle_error(&mut self, reason: CloseReason) {
        self.core.handle_error(reason);
    }

    /// The owner's turn: a drain under way (`on_drain`, once the session is open), what the
    /// handles asked, a stop (`on_stopping`, then a graceful close). Returns whether reading,
    /// stopped on a spent rate budget, may go on now (no readiness event may come for it).
    pub(crate) fn handle_owner(&mut self, now: Instant, phase: Phase) -> bool {
        if phase == Phase::Draining {
            self.core.drain(now);
        }
        self.core.handle_requests(now);
        let resumed = self.core.take_read_resumed();
        if phase == Phase::Stopping {
            self.core.stop(now);
        }
        resumed
    }

    /// A drain under way reaches a session that opened since [`handle_owner`]
    /// (a TLS handshake's end).
    ///
    /// [`handle_owner`]: Self::handle_owner
    pub(crate) fn drain(&mut self, now: Instant) {
        self.core.drain(now);
    }

    /// Whether to read the stream now (a handshake, or a core taking input).
    pub(crate) fn wants_read(&self) -> bool {
        match &self.layer {
            Layer::Plain { .. } => self.core.wants_read(),
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => secure.wants_read(&self.core),
        }
    }

    /// Verb 1: the buffer the next read goes into, at most the rate limits' read budget:
    /// `scratch` (the driver's, reused between reads), or the core's receive buffer for a large
    /// pending frame. `None`: do not read now. TLS first feeds the core what it held back.
    pub(crate) fn read_buf<'a>(
        &'a mut self,
        now: Instant,
        scratch: &'a mut [u8],
    ) -> Option<&'a mut [u8]> {
        if !self.wants_read() {
            return None;
        }
        let SessionMachine { core, layer, .. } = self;
        // No more than the read budget of the rate limits (TLS counts plaintext, never more
        // than the ciphertext it came in).
        let (buf, cap) = match layer {
            Layer::Plain { direct } => {
                let cap = core.read_allowance();
                match core.direct_read_buf() {
                    Some(buf) => {
                        *direct = true;
                        (buf, cap)
                    }
                    None => {
                        *direct = false;
                        (scratch, cap)
                    }
                }
            }
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => {
                let (ciphertext, staging) = halves(scratch);
                if secure.holds_input() {
                    secure.input(core, now, None, staging);
                    if secure.holds_input() || !secure.wants_read(core) {
                        return None;
                    }
                }
                (ciphertext, core.read_allowance())
            }
        };
        // `now` is for TLS's held input.
        let _ = now;
        let len = cap.min(buf.len());
        Some(&mut buf[..len])
    }

    /// Verb 1: what the read into [`read_buf`](Self::read_buf) returned, with the same
    /// `scratch`. Bytes go to the handler; frames it sends back unchanged are written to
    /// `out` at once, straight from `scratch`, before the next read reuses it (plain TCP).
    /// `Ok(0)` is the end of the peer's stream. Returns whether to read on in this turn.
    pub(crate) fn handle_read<W: Write>(
        &mut self,
        now: Instant,
        scratch: &mut [u8],
        read: io::Result<usize>,
        out: &mut W,
    ) -> bool {
        self.core.count_read();
        match read {
            Ok(0) => {
                self.end_of_stream(now);
                false
            }
            Ok(n) => self.received(now, scratch, n, out),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.core.release_idle_buffers();
                false
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
            Err(e) => {
                self.core.handle_error(CloseReason::io(&e));
                false
            }
        }
    }

    /// The driver knows the stream is drained without a `WouldBlock` (a short read on Linux):
    /// an idle receive buffer may be freed.
    pub(crate) fn read_drained(&mut self) {
        self.core.release_idle_buffers();
    }

    /// The peer ended its stream (TLS: after its `close_notify`, or truncated).
    fn end_of_stream(&mut self, now: Instant) {
        match &mut self.layer {
            Layer::Plain { .. } => self.core.handle_eof(now),
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => secure.eof(&mut self.core, now),
        }
    }

    /// `n` bytes were read; whether to read on (TLS: not while input is held back).
    fn received<W: Write>(
        &mut self,
        now: Instant,
        scratch: &mut [u8],
        n: usize,
        out: &mut W,
    ) -> bool {
        match &mut self.layer {
            Layer::Plain { direct: true } => {
                self.core.handle_read_direct(now, n);
                true
            }
            Layer::Plain { direct: false } => {
                self.core.handle_read_lending(now, &mut scratch[..n]);
                self.write_in_place(now, &scratch[..n], out);
                true
            }
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => {
                let (ciphertext, staging) = halves(scratch);
                secure.input(&mut self.core, now, Some(&ciphertext[..n]), staging);
                !secure.holds_input()
            }
        }
    }

    /// Writes frames the handler sent back unchanged from `input` (after what the queue
    /// holds) in one call; what `out` does not take is copied into the queue.
    fn write_in_place<W: Write>(&mut self, now: Instant, input: &[u8], out: &mut W) {
        let core = &mut self.core;
        let Some(bufs) = core.transmit_in_place(input) else {
            return;
        };
        let result = match bufs {
            [[], frames] => out.write(frames),
            [queued, frames] => out.write_vectored(&[IoSlice::new(queued), IoSlice::new(frames)]),
        };
        core.count_write();
        match result {
            Ok(written) => core.handle_written_in_place(now, input, written),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                core.handle_written_in_place(now, input, 0);
            }
            Err(e) => core.handle_error(CloseReason::io(&e)),
        }
    }

    /// Verb 2: one write to `out` of what the session has (TLS: the core's plaintext
    /// encrypted first), and, once a graceful close has written everything, what ends the
    /// stream (TLS: `close_notify`): then [`Transmitted::end_stream`].
    pub(crate) fn transmit<W: Write>(&mut self, now: Instant, out: &mut W) -> Transmitted {
        match &mut self.layer {
            Layer::Plain { .. } => transmit_plain(&mut self.core, now, out),
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => transmit_tls(secure, &mut self.core, now, out),
        }
    }

    /// Whether bytes wait to be written.
    pub(crate) fn wants_write(&self) -> bool {
        let layer = match &self.layer {
            Layer::Plain { .. } => false,
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => secure.wants_write(),
        };
        layer || !self.core.transmit().is_empty()
    }

    /// Verb 3: the earliest deadline (the session's, its TLS handshake's).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let core = self.core.poll_timeout();
        match &self.layer {
            Layer::Plain { .. } => core,
            #[cfg(feature = "tls")]
            Layer::Tls(secure) => earliest([core, secure.poll_timeout()]),
        }
    }

    /// Verb 3: applies every deadline passed at `now`. Returns whether reading, stopped on
    /// a spent rate budget, may go on now (no readiness event may come for it).
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> bool {
        self.core.handle_timeout(now);
        #[cfg(feature = "tls")]
        if let Layer::Tls(secure) = &mut self.layer {
            secure.handle_timeout(&mut self.core, now);
        }
        self.core.take_read_resumed()
    }

    /// Verb 4: whether the session opened (`on_open` ran) since the last call; once.
    pub(crate) fn take_opened(&mut self) -> bool {
        let opened = self.core.was_opened() && !self.announced;
        self.announced |= opened;
        opened
    }

    /// Verb 4: why the session closed, once it has; the driver then closes the stream
    /// (resetting it where [`CloseReason::resets`]).
    pub(crate) fn close_reason(&self) -> Option<&CloseReason> {
        self.core.close_reason()
    }

    /// The turn's counters and buffer sizes, for the owner (the session's own reach its
    /// handles).
    pub(crate) fn take_published(&mut self) -> Published {
        self.core.publish_to_handles();
        Published {
            tally: self.core.take_tally(),
            recv_held: self.core.held_recv(),
            send_queued: self.core.queued(),
        }
    }

    /// Ends the session (with `reason` unless it has ended) and tells the handler, once;
    /// then what is left to publish. Returns the reason reported.
    pub(crate) fn report_close(&mut self, reason: CloseReason) -> CloseReason {
        self.core.report_close(reason)
    }

    /// Whether the session opened, whatever its state now.
    pub(crate) fn was_opened(&self) -> bool {
        self.core.was_opened()
    }

    /// The handler, for a client that reconnects with it.
    pub(crate) fn into_handler(self) -> H {
        self.core.into_handler()
    }
}

/// [`SessionMachine::transmit`] of plain TCP.
fn transmit_plain<C: Framing, H: TcpHandler, W: Write>(
    core: &mut SessionCore<C, H>,
    now: Instant,
    out: &mut W,
) -> Transmitted {
    let mut done = Transmitted::default();
    let bytes = core.transmit();
    if !bytes.is_empty() {
        let len = bytes.len();
        let result = out.write(bytes);
        core.count_write();
        match result {
            Ok(n) => {
                done.written = n;
                done.partial = n < len;
                done.resumed = core.handle_written(now, n);
            }
            Err(e) => done.full = write_failed(&e, core),
        }
    }
    done.end_stream = !done.full && core.poll_shutdown();
    done
}

/// [`SessionMachine::transmit`] over TLS: the core's plaintext into the TLS session, one
/// (vectored) write of the ciphertext; `close_notify` once everything is out.
#[cfg(feature = "tls")]
fn transmit_tls<C: Framing, H: TcpHandler, W: Write>(
    secure: &mut Secure,
    core: &mut SessionCore<C, H>,
    now: Instant,
    out: &mut W,
) -> Transmitted {
    let mut done = Transmitted {
        resumed: secure.pull(core, now),
        ..Transmitted::default()
    };
    if secure.wants_write() {
        let result = secure.write_to(out);
        core.count_write();
        match result {
            Ok(n) => {
                done.written = n;
                done.partial = secure.wants_write();
            }
            Err(e) => done.full = write_failed(&e, core),
        }
    }
    if !done.full && secure.close_notify_when_done(core) {
        // The stream took everything before this, so the alert's few bytes fit.
        let _ = secure.write_to(out);
        done.end_stream = true;
    }
    done
}
