//! The TLS layer of a session's driver: an [`ark_tls::TlsSession`] between the socket and the
//! [`SessionCore`]. Reads go socket → scratch → TLS → core (plaintext straight from rustls's
//! buffer); writes go core → TLS → socket (vectored). One of the two [`Transport`]s.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use ark_reactor::{Context, Ready};
use ark_tls::{PlaintextSink, TlsInfo, TlsSession};

use crate::driver::stream::SessionStream;
use crate::driver::transport::{Transport, read_loop, write_failed};
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler};
use crate::proto::core::{Framing, SessionCore};

/// The reactor's scratch buffer in two halves: the first takes a read of ciphertext, the
/// second stages the plaintext handed to the core.
fn halves(scratch: &mut [u8]) -> (&mut [u8], &mut [u8]) {
    let mid = scratch.len() / 2;
    scratch.split_at_mut(mid)
}

/// A TLS session in a driver, with the session's facts kept until the handshake opens it.
pub(crate) struct TlsLayer {
    session: TlsSession,
    /// The TCP connection is up and the handshake under way: what `on_open` will see.
    waiting: Option<SessionInfo>,
    /// The handshake completed during the last input: the driver counts the session open.
    opened: bool,
}

impl TlsLayer {
    pub(crate) fn new(session: TlsSession) -> Self {
        TlsLayer {
            session,
            waiting: None,
            opened: false,
        }
    }

    /// Feeds ciphertext to the TLS session (`None`: what it held back) and its plaintext to
    /// the core, through `staging`: the plaintext of consecutive records reaches the core in
    /// one piece, so a message split over records (every message over 16 KiB, and many that
    /// straddle a record) is delivered whole instead of reassembled in the receive buffer.
    fn input<C: Framing, H: TcpHandler>(
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
            opened: &mut self.opened,
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

    /// The socket's stream ended.
    fn eof<C: Framing, H: TcpHandler>(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        match self.session.handle_eof() {
            Ok(()) => core.handle_eof(now),
            Err(_) if self.session.is_established() => core.handle_truncated(now),
            Err(e) => core.handle_error(CloseReason::Tls(e)),
        }
    }
}

/// The core as the TLS session's plaintext sink.
struct CoreSink<'a, C: Framing, H: TcpHandler> {
    core: &'a mut SessionCore<C, H>,
    now: Instant,
    waiting: &'a mut Option<SessionInfo>,
    opened: &'a mut bool,
}

impl<C: Framing, H: TcpHandler> PlaintextSink for CoreSink<'_, C, H> {
    fn established(&mut self, info: &Arc<TlsInfo>) {
        if let Some(mut session) = self.waiting.take() {
            session.tls = Some(info.clone());
            *self.opened = true;
            self.core.handle_connected(self.now, session);
        }
    }

    fn plaintext(&mut self, bytes: &[u8]) -> bool {
        self.core.handle_read(self.now, bytes);
        self.core.wants_read()
    }
}

impl<C: Framing, H: TcpHandler> Transport<C, H> for TlsLayer {
    /// The TCP connection is established; the session opens when the handshake completes.
    fn connected(&mut self, _: &mut SessionCore<C, H>, _: Instant, info: SessionInfo) -> bool {
        self.waiting = Some(info);
        false
    }

    fn take_opened(&mut self) -> bool {
        std::mem::take(&mut self.opened)
    }

    fn handshaking(&self) -> bool {
        self.waiting.is_some()
    }

    /// During the handshake, or while the core takes input.
    fn wants_read(&self, core: &SessionCore<C, H>) -> bool {
        if self.session.is_established() {
            core.wants_read()
        } else {
            self.waiting.is_some()
        }
    }

    fn read_from<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
    ) -> (io::Result<usize>, usize) {
        let (ciphertext, _) = halves(cx.scratch());
        // No more than the read budget of the session's rate limits (counted on plaintext,
        // which is never more than the ciphertext it came in).
        let cap = core.read_allowance().min(ciphertext.len());
        let ciphertext = &mut ciphertext[..cap];
        (stream.read(ciphertext), ciphertext.len())
    }

    fn received<S: SessionStream>(
        &mut self,
        _: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        n: usize,
    ) -> bool {
        let now = cx.now();
        let (ciphertext, staging) = halves(cx.scratch());
        self.input(core, now, Some(&ciphertext[..n]), staging);
        !self.session.holds_input()
    }

    fn end_of_stream(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        self.eof(core, now);
    }

    /// Input held back first, then the shared read loop.
    fn read<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        ready: Ready,
    ) -> bool {
        let now = cx.now();
        if self.session.holds_input() {
            let (_, staging) = halves(cx.scratch());
            self.input(core, now, None, staging);
            if self.session.holds_input() {
                return false;
            }
        }
        read_loop(stream, self, core, cx, ready)
    }

    /// Moves what the core offers into the TLS session, then one (vectored) write of the
    /// ciphertext.
    fn write<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        now: Instant,
    ) -> (bool, bool) {
        let mut resumed = false;
        let plaintext = core.transmit();
        if !plaintext.is_empty() {
            let taken = self.session.write_plaintext(plaintext);
            if taken > 0 {
                resumed = core.handle_written(now, taken);
            }
        }
        if !self.session.wants_write() {
            return (false, resumed);
        }
        let result = self.session.write_to(stream);
        cx.counters().add_writes(1);
        core.count_write();
        match result {
            // A partial write filled the socket: on Linux its next writable edge will come;
            // elsewhere the turn runs again and writes until `WouldBlock` (`SHORT_IO_DRAINS`).
            Ok(_) => (
                ark_reactor::SHORT_IO_DRAINS && self.session.wants_write(),
                resumed,
            ),
            Err(e) => (write_failed(&e, core), resumed),
        }
    }

    /// Once its ciphertext is written too: `close_notify`, then the socket's FIN.
    fn shutdown_when_done<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
    ) {
        if self.session.wants_write() || !core.poll_shutdown() {
            return;
        }
        self.session.send_close_notify();
        // The socket took everything before this, so the alert's few bytes fit.
        let _ = self.session.write_to(stream);
        let _ = stream.shutdown_write();
    }

    fn wants_write(&self) -> bool {
        self.session.wants_write()
    }

    /// The handshake deadline, while it runs.
    fn poll_timeout(&self) -> Option<Instant> {
        self.session.poll_timeout()
    }

    /// Ends the session if the handshake is past its deadline.
    fn handle_timeout(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        if let Err(e) = self.session.handle_timeout(now) {
            core.handle_error(CloseReason::Tls(e));
        }
    }
}
