//! The TLS layer of a session's driver: the core's TLS ([`Secure`], sans-IO) over the
//! socket. Reads go socket → scratch → TLS → core (plaintext straight from rustls's buffer,
//! staged in the scratch's second half); writes go core → TLS → socket (vectored). One of the
//! two [`Transport`]s.

use std::io;
use std::time::Instant;

use ark_reactor::{Context, Ready};
use ark_tls::TlsSession;

use crate::driver::stream::SessionStream;
use crate::driver::transport::{Transport, read_loop, write_failed};
use crate::handler::{SessionInfo, TcpHandler};
use crate::proto::core::secure::Secure;
use crate::proto::core::{Framing, SessionCore};

/// The reactor's scratch buffer in two halves: the first takes a read of ciphertext, the
/// second stages the plaintext handed to the core.
fn halves(scratch: &mut [u8]) -> (&mut [u8], &mut [u8]) {
    let mid = scratch.len() / 2;
    scratch.split_at_mut(mid)
}

/// A session's TLS over its socket.
pub(crate) struct TlsLayer(Secure);

impl TlsLayer {
    pub(crate) fn new(session: TlsSession) -> Self {
        TlsLayer(Secure::new(session))
    }
}

impl<C: Framing, H: TcpHandler> Transport<C, H> for TlsLayer {
    /// The TCP connection is established; the session opens when the handshake completes.
    fn connected(&mut self, _: &mut SessionCore<C, H>, _: Instant, info: SessionInfo) -> bool {
        self.0.connected(info);
        false
    }

    fn take_opened(&mut self) -> bool {
        self.0.take_opened()
    }

    fn handshaking(&self) -> bool {
        self.0.handshaking()
    }

    fn wants_read(&self, core: &SessionCore<C, H>) -> bool {
        self.0.wants_read(core)
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
        self.0.input(core, now, Some(&ciphertext[..n]), staging);
        !self.0.holds_input()
    }

    fn end_of_stream(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        self.0.eof(core, now);
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
        if self.0.holds_input() {
            let (_, staging) = halves(cx.scratch());
            self.0.input(core, now, None, staging);
            if self.0.holds_input() {
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
        let resumed = self.0.pull(core, now);
        if !self.0.wants_write() {
            return (false, resumed);
        }
        let result = self.0.write_to(stream);
        cx.counters().add_writes(1);
        core.count_write();
        match result {
            // A partial write filled the socket: on Linux its next writable edge will come;
            // elsewhere the turn runs again and writes until `WouldBlock` (`SHORT_IO_DRAINS`).
            Ok(_) => (
                ark_reactor::SHORT_IO_DRAINS && self.0.wants_write(),
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
        if self.0.close_notify_when_done(core) {
            // The socket took everything before this, so the alert's few bytes fit.
            let _ = self.0.write_to(stream);
            let _ = stream.shutdown_write();
        }
    }

    fn wants_write(&self) -> bool {
        self.0.wants_write()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.0.poll_timeout()
    }

    fn handle_timeout(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        self.0.handle_timeout(core, now);
    }
}
