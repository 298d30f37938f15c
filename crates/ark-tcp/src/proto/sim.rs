//! `Simulator`: a TCP session run in memory — the same session core the reactor drives, fed
//! by the test instead of a socket, on a clock the test moves.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;

use crate::config::TcpConfig;
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler, TcpSession};
use crate::proto::core::{Framing, SessionCore};
use crate::proto::machine::SessionMachine;

/// The scratch a simulated read goes into, as a driver's: 64 KiB (TLS: half for ciphertext,
/// half for the plaintext staged for the core).
const SCRATCH: usize = 64 * 1024;

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
    /// The session, as the reactor's driver runs it (its TLS included).
    machine: SessionMachine<C, H>,
    now: Instant,
    /// Peer bytes the session has not taken yet (it stops reading under backpressure).
    inbound: Inbound,
    /// The scratch a read lands in, kept between reads.
    scratch: Vec<u8>,
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
}

impl<C: Framing, H: TcpHandler> std::fmt::Debug for Simulator<C, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("inbound", &self.inbound.len())
            .field("outbound", &self.outbound.len())
            .field("ended", &self.ended)
            .field("reset", &self.reset)
            .field("close_reason", &self.machine.close_reason())
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
        let core = Self::core_of(handler, codec, config, now);
        Self::connected(SessionMachine::plain(core), now)
    }

    /// A session core whose stream is not up yet.
    fn core_of(handler: H, codec: C, config: TcpConfig, now: Instant) -> SessionCore<C, H> {
        let info = SessionInfo::without_socket(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let config = Arc::new(config.normalized());
        let pace = ark_reactor::Pace::new(config.rate_limits, &Default::default(), now);
        SessionCore::new(handler, codec, config, info, now, None, (None, pace))
    }

    /// A simulator of `machine`, whose stream has just come up.
    fn connected(mut machine: SessionMachine<C, H>, now: Instant) -> Self {
        let info = machine.info().clone();
        machine.handle_connected(now, info);
        Simulator {
            machine,
            now,
            inbound: Inbound::default(),
            scratch: vec![0; SCRATCH],
            peer_ended: false,
            eof_given: false,
            peer_reset: false,
            outbound: Vec::new(),
            window: usize::MAX,
            ended: false,
            reset: false,
            reported: false,
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
        let core = Self::core_of(handler, codec, config, now);
        let mut sim = Self::connected(SessionMachine::secure(core, tls), now);
        sim.run();
        sim
    }

    /// The simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The handler.
    pub fn handler(&self) -> &H {
        self.machine.core.handler()
    }

    /// Acts as the application outside a callback (as a session handle would): `f` gets the
    /// handler and the session.
    pub fn with_session<R>(&mut self, f: impl FnOnce(&mut H, &mut TcpSession<'_>) -> R) -> R {
        let result = self.machine.core.with_session(f);
        self.run();
        result
    }

    /// The session's owner drains (a server's drain): `on_drain` runs (once), and the session
    /// goes on until its peer or its handler closes it.
    pub fn drain(&mut self) {
        self.machine.drain(self.now);
        self.run();
    }

    /// The session's owner stops (a server or client stop): `on_stopping` runs, then the
    /// session closes gracefully with [`CloseReason::Stopped`].
    pub fn stop(&mut self) {
        self.machine.core.stop(self.now);
        self.run();
    }

    /// A handle to the session (as [`TcpSession::handle`](crate::TcpSession::handle)). A simulated
    /// session has no reactor to wake: what handles ask is applied at the simulator's next
    /// call, or at [`poll_handles`](Self::poll_handles).
    pub fn handle(&self) -> crate::TcpSessionHandle {
        self.machine.core.session_handle()
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
        &self.machine.core
    }

    /// Moves the simulated time forward by `by`, stopping at every deadline on the way.
    pub fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        for _ in 0..100_000 {
            let next = self.next_deadline().filter(|&t| t <= end);
            self.now = next.unwrap_or(end).max(self.now);
            let _ = self.machine.handle_timeout(self.now);
            self.run();
            if next.is_none() {
                return;
            }
        }
        panic!("deadlines did not settle: {self:?}");
    }

    /// The session's next deadline (its TLS handshake's included).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.machine.poll_timeout()
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
        self.machine.core.wants_read()
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
        self.machine.close_reason()
    }

    /// Bytes the session has queued and not yet written.
    pub fn queued(&self) -> usize {
        self.machine.core.queued()
    }

    /// Moves bytes between the session and the peer until nothing changes.
    fn run(&mut self) {
        for _ in 0..1_000_000 {
            if !self.step() {
                // The end of a turn: the session's own counters reach its handles.
                let _ = self.machine.take_published();
                return;
            }
        }
        panic!("the simulated session did not settle: {self:?}");
    }

    /// One round: the handles' requests, a read, a write, a close reported — what the
    /// reactor's driver does in a turn, through the same machine. Returns whether anything
    /// changed.
    fn step(&mut self) -> bool {
        let now = self.now;
        let Simulator {
            machine,
            inbound,
            scratch,
            outbound,
            window,
            ..
        } = self;
        let _ = machine.handle_owner(now, ark_reactor::Phase::Running);
        // The handles learn the queue and the phase every round, as before this round's
        // close is reported (a send from `on_close` through a handle is refused then).
        machine.core.publish_to_handles();
        let room = window.saturating_sub(outbound.len());
        let mut out = Within {
            out: outbound,
            room,
        };
        if machine.close_reason().is_some() {
            // What TLS has to say first (an alert) goes out before the stream ends.
            if !self.reported && machine.transmit(now, &mut out).written > 0 {
                return true;
            }
            return self.report_close();
        }
        if self.peer_reset {
            machine.handle_error(CloseReason::Reset);
            return true;
        }
        let eof_due = self.peer_ended && !self.eof_given;
        if (inbound.len() > 0 || eof_due)
            && let Some(buf) = machine.read_buf(now, scratch)
        {
            let n = inbound.read(buf);
            self.eof_given |= n == 0;
            let _ = machine.handle_read(now, scratch, Ok(n), &mut out);
            return true;
        }
        let done = machine.transmit(now, &mut out);
        self.ended |= done.end_stream;
        done.written > 0 || done.resumed || done.end_stream
    }

    /// Tells the handler the session closed (once) and ends or resets the stream.
    fn report_close(&mut self) -> bool {
        if self.reported {
            return false;
        }
        self.reported = true;
        let reason = self.machine.report_close(CloseReason::Stopped);
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

    /// One read into `buf`: the bytes taken (0: none are left).
    fn read(&mut self, buf: &mut [u8]) -> usize {
        let end = (self.taken + buf.len()).min(self.bytes.len());
        let n = end - self.taken;
        buf[..n].copy_from_slice(&self.bytes[self.taken..end]);
        self.taken = end;
        if self.taken == self.bytes.len() {
            self.bytes.clear();
            self.taken = 0;
        }
        n
    }
}

/// A peer's receive window as the session's writer: takes at most `room` more bytes, then
/// `WouldBlock`, as a socket with that much room.
pub(crate) struct Within<'a> {
    pub(crate) out: &'a mut Vec<u8>,
    pub(crate) room: usize,
}

impl std::io::Write for Within<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_vectored(&[std::io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        if self.room == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        let mut taken = 0;
        for buf in bufs {
            let n = buf.len().min(self.room - taken);
            self.out.extend_from_slice(&buf[..n]);
            taken += n;
        }
        self.room -= taken;
        Ok(taken)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
