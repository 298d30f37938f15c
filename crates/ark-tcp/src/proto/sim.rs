//! `Simulator`: a TCP session run in memory — the same session core the reactor drives, fed
//! by the test instead of a socket, on a clock the test moves.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;

use crate::config::TcpConfig;
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler, TcpSession};
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
    inbound: Vec<u8>,
    inbound_pos: usize,
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
}

impl<C: Framing, H: TcpHandler> std::fmt::Debug for Simulator<C, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("inbound", &(self.inbound.len() - self.inbound_pos))
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
        let info = SessionInfo::without_socket(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let config = Arc::new(config.normalized());
        let pace = ark_reactor::Pace::new(config.rate_limits, (None, None), now);
        let core = SessionCore::new(
            handler,
            codec,
            config,
            info.clone(),
            now,
            None,
            (None, pace),
        );
        let mut sim = Simulator {
            core,
            now,
            inbound: Vec::new(),
            inbound_pos: 0,
            read_buf: Vec::new(),
            peer_ended: false,
            eof_given: false,
            peer_reset: false,
            outbound: Vec::new(),
            window: usize::MAX,
            ended: false,
            reset: false,
            reported: false,
        };
        sim.core.handle_connected(now, info);
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
        self.inbound.extend_from_slice(bytes);
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
        self.inbound.len() - self.inbound_pos
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
            let next = self.core.poll_timeout().filter(|&t| t <= end);
            self.now = next.unwrap_or(end).max(self.now);
            self.core.handle_timeout(self.now);
            self.run();
            if next.is_none() {
                return;
            }
        }
        panic!("deadlines did not settle: {self:?}");
    }

    /// The session's next deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.core.poll_timeout()
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
            return self.report_close();
        }
        if self.peer_reset {
            self.core.handle_error(CloseReason::Reset);
            return true;
        }
        if self.core.wants_read() && self.unconsumed() > 0 {
            let chunk = READ_CHUNK.min(self.core.read_allowance());
            let end = (self.inbound_pos + chunk).min(self.inbound.len());
            // The read lands in a buffer of its own (reused), as a driver reads into its
            // scratch.
            let mut chunk = std::mem::take(&mut self.read_buf);
            chunk.clear();
            chunk.extend_from_slice(&self.inbound[self.inbound_pos..end]);
            self.inbound_pos = end;
            if self.inbound_pos == self.inbound.len() {
                self.inbound.clear();
                self.inbound_pos = 0;
            }
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
