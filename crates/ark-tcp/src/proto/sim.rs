//! `Simulator`: a TCP session run in memory — the same session core the reactor drives, fed
//! by the test instead of a socket, on a clock the test moves.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;

use crate::config::TcpConfig;
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler, TcpSession};
#[cfg(feature = "tls")]
use crate::proto::core::secure::Secure;
use crate::proto::core::{Framing, SessionCore};

/// Bytes handed to the session per simulated read, as a socket read into 64 KiB of scratch.
const READ_CHUNK: usize = 64 * 1024;

/// A TCP session run in memory: no socket and no clock. The test plays the peer — it sends
/// bytes ([`peer_send`](Self::peer_send)), reads what the session wrote
/// ([`peer_read`](Self::peer_read)), ends or resets its stream — and moves time forward
/// ([`advance`](Self::advance)). The session is the one servers and clients run (framing,
/// backpressure, timeouts, close), with the handler under test: deterministic tests of a
/// handler, or fuzzing of a protocol built on ark-tcp, in microseconds.
///
/// ```
/// use std::time::Duration;
/// use ark_frame::LengthPrefix;
/// use ark_tcp::{CloseReason, TcpSession, TcpConfig, Simulator, TcpHandler};
///
/// struct Echo;
/// impl TcpHandler for Echo {
///     fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
///         let _ = session.send(message);
///     }
/// }
///
/// let config = TcpConfig {
///     idle_timeout: Some(Duration::from_secs(5)),
///     ..TcpConfig::default()
/// };
/// let mut sim = Simulator::new(Echo, LengthPrefix::default(), config);
/// sim.peer_send(&[0, 0, 0, 2, b'h', b'i']);
/// assert_eq!(sim.peer_read(), [0, 0, 0, 2, b'h', b'i']);
/// sim.advance(Duration::from_secs(5));
/// sim.peer_close(); // the peer answers the idle close with its own end of stream
/// assert_eq!(sim.close_reason(), Some(&CloseReason::IdleTimeout(Duration::from_secs(5))));
/// assert!(sim.ended_stream());
/// ```
pub struct Simulator<C: Framing, H: TcpHandler> {
    core: SessionCore<C, H>,
    now: Instant,
    /// Peer bytes the session has not taken yet (it stops reading under backpressure).
    inbound: Inbound,
    /// The buffer a read lands in, kept between reads.
    read_buf: Vec<u8>,
    /// The peer ended its stream; the session sees it once `inbound` is taken.
    peer_ended: bool,
    eof_given: bool,
    peer_reset: bool,
    /// What the session wrote and the peer has not read.
    outbound: Vec<u8>,
    /// Most bytes `outbound` holds: the peer's receive window and socket buffers.
    window: usize,
    /// The session shut down writing (FIN) or closed.
    ended: bool,
    /// The session reset the connection.
    reset: bool,
    reported: bool,
    /// The session's TLS ([`with_tls`](Self::with_tls)), and the buffer its plaintext is
    /// staged in.
    #[cfg(feature = "tls")]
    secure: Option<(Secure, Vec<u8>)>,
}

impl<C: Framing, H: TcpHandler> std::fmt::Debug for Simulator<C, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("inbound", &self.inbound.len())
            .field("outbound", &self.outbound.len())
            .field("ended", &self.ended)
            .field("reset", &self.reset)
            .field("close_reason", &self.core.close_reason())
            .finish_non_exhaustive()
    }
}

impl<H: TcpHandler> Simulator<LengthPrefix, H> {
    /// A simulated session with the default framing (4-byte big-endian length prefix).
    pub fn with_handler(handler: H, config: TcpConfig) -> Self {
        Self::new(handler, LengthPrefix::default(), config)
    }
}

impl<C: Framing, H: TcpHandler> Simulator<C, H> {
    /// An established session (`on_open` has run) with `handler`, framing `codec` and
    /// `config`, at a simulated time that starts now.
    pub fn new(handler: H, codec: C, config: TcpConfig) -> Self {
        let mut sim = Self::starting_at(handler, codec, config, Instant::now());
        sim.run();
        sim
    }

    /// As [`new`](Self::new), with the simulated clock starting at `now` (two simulators
    /// that talk to each other share one clock). What `on_open` sent moves at the next call
    /// (after a [`set_window`](Self::set_window), say).
    pub fn starting_at(handler: H, codec: C, config: TcpConfig, now: Instant) -> Self {
        let mut sim = Self::unopened(handler, codec, config, now);
        let info = sim.core.info().clone();
        sim.core.handle_connected(now, info);
        sim
    }

    /// A simulated session whose stream is not up yet.
    fn unopened(handler: H, codec: C, config: TcpConfig, now: Instant) -> Self {
        let info = SessionInfo::without_socket(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let config = Arc::new(config.normalized());
        let pace = ark_reactor::Pace::new(config.rate_limits, (None, None), now);
        let core = SessionCore::new(handler, codec, config, info, now, None, (None, pace));
        Simulator {
            core,
            now,
            inbound: Inbound::default(),
            read_buf: Vec::new(),
            peer_ended: false,
            eof_given: false,
            peer_reset: false,
            outbound: Vec::new(),
            window: usize::MAX,
            ended: false,
            reset: false,
            reported: false,
            #[cfg(feature = "tls")]
            secure: None,
        }
    }

    /// A session speaking TLS (`tcps`) over the simulated stream, as a server or client does
    /// with `tls` set: `tls` is the TLS side (`ark_tls::TlsSession::server` or `client`,
    /// made at `now`, which starts the simulated clock). The peer is another simulator, or
    /// any TLS peer fed through [`peer_send`](Self::peer_send) and
    /// [`peer_read`](Self::peer_read): the session opens (`on_open`, with
    /// [`TcpSession::tls`](crate::TcpSession::tls) set) when the handshake completes; a bad
    /// handshake closes it with [`CloseReason::Tls`]; a graceful close sends `close_notify`
    /// before the end of the stream, and a stream that ends without one closes with
    /// `CloseReason::Tls(TlsError::Truncated)`. [`exchange`](Self::exchange) runs two
    /// simulators against each other.
    #[cfg(feature = "tls")]
    pub fn with_tls(
        handler: H,
        codec: C,
        config: TcpConfig,
        tls: ark_tls::TlsSession,
        now: Instant,
    ) -> Self {
        let mut sim = Self::unopened(handler, codec, config, now);
        let mut secure = Secure::new(tls);
        secure.connected(sim.core.info().clone());
        sim.secure = Some((secure, vec![0; READ_CHUNK]));
        sim.run();
        sim
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        self.core.handler()
    }

    /// Acts as the application outside a callback (as a session handle would): `f` gets the
    /// handler and the session.
    pub fn with_session<R>(&mut self, f: impl FnOnce(&mut H, &mut TcpSession<'_>) -> R) -> R {
        let result = self.core.with_session(f);
        self.run();
        result
    }

    /// The session's owner drains (a server's drain): `on_drain` runs (once), and the session
    /// goes on until its peer or its handler closes it.
    pub fn drain(&mut self) {
        self.core.drain(self.now);
        self.run();
    }

    /// The session's owner stops (a server or client stop): `on_stopping` runs, then the
    /// session closes gracefully with [`CloseReason::Stopped`].
    pub fn stop(&mut self) {
        self.core.stop(self.now);
        self.run();
    }

    /// A handle to the session (as [`TcpSession::handle`](crate::TcpSession::handle)). A simulated
    /// session has no reactor to wake: what handles ask is applied at the simulator's next
    /// call, or at [`poll_handles`](Self::poll_handles).
    pub fn handle(&self) -> crate::TcpSessionHandle {
        self.core.session_handle()
    }

    /// Applies what the session's handles asked (from any thread) since the last call.
    pub fn poll_handles(&mut self) {
        self.run();
    }

    /// The peer sends `bytes`. The session reads them as a socket would (in 64 KiB reads,
    /// and not while it pauses reading under backpressure).
    pub fn peer_send(&mut self, bytes: &[u8]) {
        self.inbound.bytes.extend_from_slice(bytes);
        self.run();
    }

    /// The peer ends its stream (shuts down writing).
    pub fn peer_close(&mut self) {
        self.peer_ended = true;
        self.run();
    }

    /// The peer resets the connection.
    pub fn peer_reset(&mut self) {
        self.peer_reset = true;
        self.run();
    }

    /// The peer reads everything the session has written.
    pub fn peer_read(&mut self) -> Vec<u8> {
        self.peer_read_up_to(usize::MAX)
    }

    /// The peer reads at most `max` bytes of what the session has written.
    pub fn peer_read_up_to(&mut self, max: usize) -> Vec<u8> {
        let n = max.min(self.outbound.len());
        let bytes: Vec<u8> = self.outbound.drain(..n).collect();
        self.run();
        bytes
    }

    /// Bytes the session wrote that the peer has not read.
    pub fn unread(&self) -> usize {
        self.outbound.len()
    }

    /// Peer bytes the session has not read yet.
    pub fn unconsumed(&self) -> usize {
        self.inbound.len()
    }

    /// Sets how many written bytes the peer's side buffers (its receive window); the session's
    /// writes block when that many are unread. Default: unlimited.
    pub fn set_window(&mut self, bytes: usize) {
        self.window = bytes;
        self.run();
    }

    /// The session core (for the crate's own tests).
    #[cfg(test)]
    pub(crate) fn core(&self) -> &SessionCore<C, H> {
        &self.core
    }

    /// Moves the simulated time forward by `by`, stopping at every deadline on the way.
    pub fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        for _ in 0..100_000 {
            let next = self.next_deadline().filter(|&t| t <= end);
            self.now = next.unwrap_or(end).max(self.now);
            self.core.handle_timeout(self.now);
            #[cfg(feature = "tls")]
            if let Some((secure, _)) = self.secure.as_mut() {
                secure.handle_timeout(&mut self.core, self.now);
            }
            self.run();
            if next.is_none() {
                return;
            }
        }
        panic!("deadlines did not settle: {self:?}");
    }

    /// The session's next deadline (its TLS handshake's included).
    pub fn next_deadline(&self) -> Option<Instant> {
        let core = self.core.poll_timeout();
        #[cfg(feature = "tls")]
        if let Some(tls) = self.secure.as_ref().and_then(|(s, _)| s.poll_timeout()) {
            return Some(core.map_or(tls, |core| core.min(tls)));
        }
        core
    }

    /// Runs two simulators against each other — what each writes, the other reads — until
    /// neither has anything more to say (at most `rounds` exchanges). Returns the rounds
    /// that moved bytes. They should share a clock (made with the same `now`).
    pub fn exchange<D: Framing, G: TcpHandler>(
        &mut self,
        peer: &mut Simulator<D, G>,
        rounds: usize,
    ) -> usize {
        for round in 0..rounds {
            // What either wrote since its last call (its `on_open`, say) moves too.
            self.run();
            peer.run();
            let ours = self.peer_read();
            let theirs = peer.peer_read();
            if ours.is_empty() && theirs.is_empty() {
                return round;
            }
            peer.peer_send(&ours);
            self.peer_send(&theirs);
        }
        rounds
    }

    /// Whether the session is reading (not paused by backpressure, not closed).
    pub fn is_reading(&self) -> bool {
        self.core.wants_read()
    }

    /// Whether the session ended its stream (a FIN after everything it wrote).
    pub fn ended_stream(&self) -> bool {
        self.ended && !self.reset
    }

    /// Whether the session reset the connection.
    pub fn was_reset(&self) -> bool {
        self.reset
    }

    /// Why the session closed, once it has.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.core.close_reason()
    }

    /// Bytes the session has queued and not yet written.
    pub fn queued(&self) -> usize {
        self.core.queued()
    }

    /// Moves bytes between the session and the peer until nothing changes.
    fn run(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                // The end of a turn: the session's own counters reach its handles.
                let _ = self.core.take_tally();
                return;
            }
        }
        panic!("the simulated session did not settle: {self:?}");
    }

    /// One round: read, write, shut down, report a close. Returns whether anything changed.
    fn step(&mut self) -> bool {
        self.core.handle_requests(self.now);
        self.core.publish_to_handles();
        if self.core.close_reason().is_some() {
            // What TLS has to say first (an alert) goes out before the stream ends.
            #[cfg(feature = "tls")]
            if !self.reported && self.write_ciphertext() {
                return true;
            }
            return self.report_close();
        }
        if self.peer_reset {
            self.core.handle_error(CloseReason::Reset);
            return true;
        }
        #[cfg(feature = "tls")]
        if self.secure.is_some() {
            return self.step_tls();
        }
        if self.core.wants_read() && self.unconsumed() > 0 {
            let max = READ_CHUNK.min(self.core.read_allowance());
            // The read lands in a buffer of its own (reused), as a driver reads into its
            // scratch.
            let mut chunk = std::mem::take(&mut self.read_buf);
            chunk.clear();
            self.inbound
                .read(max, |bytes| chunk.extend_from_slice(bytes));
            let room = self.window.saturating_sub(self.outbound.len());
            let outbound = &mut self.outbound;
            // Echoed frames are written from the read chunk, as the driver writes them.
            self.core.handle_read_lending(self.now, &mut chunk);
            if let Some(bufs) = self.core.transmit_in_place(&chunk) {
                let written = write_within(outbound, &bufs, room);
                self.core.count_write();
                self.core.handle_written_in_place(self.now, &chunk, written);
            }
            self.read_buf = chunk;
            return true;
        }
        if self.core.wants_read() && self.peer_ended && !self.eof_given {
            self.eof_given = true;
            self.core.handle_eof(self.now);
            return true;
        }
        let room = self.window.saturating_sub(self.outbound.len());
        let bytes = self.core.transmit();
        let n = bytes.len().min(room);
        if n > 0 {
            self.outbound.extend_from_slice(&bytes[..n]);
            self.core.handle_written(self.now, n);
            return true;
        }
        if self.core.poll_shutdown() {
            self.ended = true;
            return true;
        }
        false
    }

    /// One round of a TLS session (see [`step`](Self::step)): ciphertext in through the TLS
    /// session to the core, the core's plaintext out through it, `close_notify` before the
    /// end of the stream — what the driver's TLS layer does with a socket.
    #[cfg(feature = "tls")]
    fn step_tls(&mut self) -> bool {
        let Some((secure, staging)) = self.secure.as_mut() else {
            return false;
        };
        let core = &mut self.core;
        if secure.holds_input() && core.wants_read() {
            secure.input(core, self.now, None, staging);
            return true;
        }
        if secure.wants_read(core) && !secure.holds_input() {
            if self.inbound.len() > 0 {
                let max = (READ_CHUNK / 2).min(core.read_allowance());
                let now = self.now;
                self.inbound
                    .read(max, |bytes| secure.input(core, now, Some(bytes), staging));
                return true;
            }
            if self.peer_ended && !self.eof_given {
                self.eof_given = true;
                secure.eof(core, self.now);
                return true;
            }
        }
        let resumed = secure.pull(core, self.now);
        if self.write_ciphertext() || resumed {
            return true;
        }
        let Some((secure, _)) = self.secure.as_mut() else {
            return false;
        };
        let core = &mut self.core;
        if secure.close_notify_when_done(core) {
            let _ = secure.write_to(&mut self.outbound);
            self.ended = true;
            return true;
        }
        false
    }

    /// Writes what ciphertext the peer's window takes; whether any moved.
    #[cfg(feature = "tls")]
    fn write_ciphertext(&mut self) -> bool {
        let Some((secure, _)) = self.secure.as_mut() else {
            return false;
        };
        let room = self.window.saturating_sub(self.outbound.len());
        if !secure.wants_write() || room == 0 {
            return false;
        }
        let mut out = Within {
            out: &mut self.outbound,
            room,
        };
        let moved = secure.write_to(&mut out).is_ok_and(|n| n > 0);
        if moved {
            self.core.count_write();
        }
        moved
    }

    /// Tells the handler the session closed (once) and ends or resets the stream.
    fn report_close(&mut self) -> bool {
        if self.reported {
            return false;
        }
        self.reported = true;
        let reason = self.core.report_close(CloseReason::Stopped);
        if reason.resets() {
            self.reset = true;
        }
        self.ended = true;
        true
    }
}

/// Bytes the peer sent, taken from the front by the session's reads.
#[derive(Default)]
struct Inbound {
    bytes: Vec<u8>,
    /// Bytes before this were taken.
    taken: usize,
}

impl Inbound {
    /// Bytes not taken yet.
    fn len(&self) -> usize {
        self.bytes.len() - self.taken
    }

    /// One read of at most `max` bytes: `into` gets them, and they are taken.
    fn read(&mut self, max: usize, into: impl FnOnce(&[u8])) {
        let end = (self.taken + max).min(self.bytes.len());
        into(&self.bytes[self.taken..end]);
        self.taken = end;
        if self.taken == self.bytes.len() {
            self.bytes.clear();
            self.taken = 0;
        }
    }
}

/// A peer's receive window as a writer: takes at most `room` more bytes, then `WouldBlock`.
#[cfg(feature = "tls")]
struct Within<'a> {
    out: &'a mut Vec<u8>,
    room: usize,
}

#[cfg(feature = "tls")]
impl std::io::Write for Within<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.room);
        if n == 0 && !buf.is_empty() {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        self.out.extend_from_slice(&buf[..n]);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Appends `bufs` to `out`, at most `room` bytes in all (a socket with that much room);
/// returns the bytes taken.
pub(crate) fn write_within(out: &mut Vec<u8>, bufs: &[&[u8]], room: usize) -> usize {
    let mut taken = 0;
    for buf in bufs {
        let n = buf.len().min(room - taken);
        out.extend_from_slice(&buf[..n]);
        taken += n;
    }
    taken
}
