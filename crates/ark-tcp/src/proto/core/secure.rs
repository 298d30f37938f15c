//! TLS inside the session core (`tcps`; cargo feature `tls`): an [`ark_tls::TlsSession`]
//! between the stream's bytes and a [`SessionCore`], sans-IO. Ciphertext in
//! ([`input`](Secure::input)), plaintext to the core through a staging buffer; the core's
//! plaintext into the TLS session ([`pull`](Secure::pull)) and ciphertext out to any writer
//! ([`write_to`](Secure::write_to)); the handshake's deadline; `close_notify` before the end
//! of the stream. It is the TLS layer of a [`SessionMachine`], which the driver and the
//! [`Simulator`](crate::Simulator) both run: the sans-IO tests see TLS as the sockets do.
//!
//! [`SessionMachine`]: crate::proto::machine::SessionMachine

use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

use ark_tls::{PlaintextSink, TlsInfo, TlsSession};

use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler};
use crate::proto::core::{Framing, SessionCore};

/// A TLS session over a session core, with the session's facts kept until the handshake
/// opens it.
pub(crate) struct Secure {
    session: TlsSession,
    /// The stream is up and the handshake under way: what `on_open` will see.
    waiting: Option<SessionInfo>,
}

impl Secure {
    pub(crate) fn new(session: TlsSession) -> Self {
        Secure {
            session,
            waiting: None,
        }
    }

    /// The stream is up: the session opens (with `info`) when the handshake completes.
    pub(crate) fn connected(&mut self, info: SessionInfo) {
        self.waiting = Some(info);
    }

    /// The stream is up but the handshake is not done.
    pub(crate) fn handshaking(&self) -> bool {
        self.waiting.is_some()
    }

    /// Whether to read the stream: during the handshake, or while the core takes input.
    pub(crate) fn wants_read<C: Framing, H: TcpHandler>(&self, core: &SessionCore<C, H>) -> bool {
        if self.session.is_established() {
            core.wants_read()
        } else {
            self.waiting.is_some()
        }
    }

    /// Whether input is held back (the core paused reading mid-record).
    pub(crate) fn holds_input(&self) -> bool {
        self.session.holds_input()
    }

    /// Feeds ciphertext to the TLS session (`None`: what it held back) and its plaintext to
    /// the core, through `staging`: the plaintext of consecutive records reaches the core in
    /// one piece, so a message split over records (every message over 16 KiB, and many that
    /// straddle a record) is delivered whole instead of reassembled in the receive buffer.
    pub(crate) fn input<C: Framing, H: TcpHandler>(
        &mut self,
        core: &mut SessionCore<C, H>,
        now: Instant,
        input: Option<&[u8]>,
        staging: &mut [u8],
    ) {
        let mut sink = CoreSink {
            core: &mut *core,
            now,
            waiting: &mut self.waiting,
        };
        let result = match input {
            Some(bytes) => self.session.handle_input_staged(bytes, staging, &mut sink),
            None => self.session.resume_staged(staging, &mut sink),
        };
        match result {
            Err(e) => core.handle_error(CloseReason::Tls(e)),
            Ok(()) if self.session.peer_closed() && !self.session.holds_input() => {
                core.handle_eof(now);
            }
            Ok(()) => {}
        }
    }

    /// The stream ended: cleanly after the peer's `close_notify`, else truncated (or a
    /// handshake cut short).
    pub(crate) fn eof<C: Framing, H: TcpHandler>(
        &mut self,
        core: &mut SessionCore<C, H>,
        now: Instant,
    ) {
        match self.session.handle_eof() {
            Ok(()) => core.handle_eof(now),
            Err(_) if self.session.is_established() => core.handle_truncated(now),
            Err(e) => core.handle_error(CloseReason::Tls(e)),
        }
    }

    /// Moves what the core offers into the TLS session; whether the core's reading resumed.
    pub(crate) fn pull<C: Framing, H: TcpHandler>(
        &mut self,
        core: &mut SessionCore<C, H>,
        now: Instant,
    ) -> bool {
        let plaintext = core.transmit();
        if plaintext.is_empty() {
            return false;
        }
        let taken = self.session.write_plaintext(plaintext);
        taken > 0 && core.handle_written(now, taken)
    }

    /// Ciphertext waits to be written.
    pub(crate) fn wants_write(&self) -> bool {
        self.session.wants_write()
    }

    /// Writes ciphertext to `out` (one vectored write); what `out` returns.
    pub(crate) fn write_to(&mut self, out: &mut dyn Write) -> io::Result<usize> {
        self.session.write_to(out)
    }

    /// Once the core's graceful close has written everything and the ciphertext is out:
    /// queues `close_notify` and returns `true` (write it, then end the stream).
    pub(crate) fn close_notify_when_done<C: Framing, H: TcpHandler>(
        &mut self,
        core: &mut SessionCore<C, H>,
    ) -> bool {
        if self.session.wants_write() || !core.poll_shutdown() {
            return false;
        }
        self.session.send_close_notify();
        true
    }

    /// The handshake's deadline, while it runs.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// Ends the session if the handshake is past its deadline.
    pub(crate) fn handle_timeout<C: Framing, H: TcpHandler>(
        &mut self,
        core: &mut SessionCore<C, H>,
        now: Instant,
    ) {
        if let Err(e) = self.session.handle_timeout(now) {
            core.handle_error(CloseReason::Tls(e));
        }
    }
}

/// The core as the TLS session's plaintext sink.
struct CoreSink<'a, C: Framing, H: TcpHandler> {
    core: &'a mut SessionCore<C, H>,
    now: Instant,
    waiting: &'a mut Option<SessionInfo>,
}

impl<C: Framing, H: TcpHandler> PlaintextSink for CoreSink<'_, C, H> {
    fn established(&mut self, info: &Arc<TlsInfo>) {
        if let Some(mut session) = self.waiting.take() {
            session.tls = Some(info.clone());
            self.core.handle_connected(self.now, session);
        }
    }

    fn plaintext(&mut self, bytes: &[u8]) -> bool {
        self.core.handle_read(self.now, bytes);
        self.core.wants_read()
    }
}
