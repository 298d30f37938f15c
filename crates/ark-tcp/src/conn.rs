//! One TCP connection as an ark-reactor source: the receive path, the send path, close.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ark_frame::{Decoder, Encoder, Feed, Flow, FrameReader, RecvBuf};
use ark_reactor::{Context, Handler, ReactorHandle, Ready, TimerId, Turn};
use mio::net::TcpStream;

use crate::config::SessionConfig;
use crate::owner::Owner;
use crate::session::{CloseReason, Ending, SendQueue, Session, TcpHandler};
use crate::stats::TurnTally;

/// Frames at least this large are read straight into the session's receive buffer instead of
/// through the reactor's scratch buffer.
const DIRECT_READ_THRESHOLD: usize = 32 * 1024;

/// The codecs a TCP session can use: any ark-frame decoder that also encodes.
pub trait Framing: Decoder + Encoder + Clone + Send + 'static {}
impl<T: Decoder + Encoder + Clone + Send + 'static> Framing for T {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Connecting {
        started: Instant,
    },
    Open,
    /// Writing is shut down; reading until the peer's end of stream.
    ShutdownSent,
}

enum ReadOutcome {
    /// The socket is drained (a short read or `WouldBlock`).
    Drained,
    /// The read filled the buffer: more may be waiting.
    More,
    Eof,
    Failed(CloseReason),
}

pub(crate) struct Conn<C: Framing, H: TcpHandler> {
    stream: TcpStream,
    reader: FrameReader<C>,
    codec: C,
    out: SendQueue,
    pub(crate) handler: Option<H>,
    phase: Phase,
    id: u64,
    addr: SocketAddr,
    local: SocketAddr,
    config: Arc<SessionConfig>,
    pub(crate) owner: Owner,
    ending: Ending,
    wants_writable: bool,
    paused: bool,
    reader_paused: bool,
    read_more: bool,
    opened: bool,
    last_activity: Instant,
    idle_timer: Option<TimerId>,
    phase_timer: Option<TimerId>,
    /// The reason to report when the close completes.
    close_reason: Option<CloseReason>,
    held_recv: usize,
    held_send: usize,
    reactor: Option<ReactorHandle>,
    socket_buffers: (usize, usize),
}

impl<C: Framing, H: TcpHandler> Conn<C, H> {
    /// A connection over an established (accepted) stream.
    pub(crate) fn accepted(
        stream: TcpStream,
        peer: SocketAddr,
        codec: C,
        handler: H,
        config: Arc<SessionConfig>,
        owner: Owner,
    ) -> Self {
        let mut conn = Self::new(stream, peer, codec, handler, config, owner);
        conn.phase = Phase::Open;
        conn
    }

    /// A connection whose non-blocking connect is in progress.
    pub(crate) fn connecting(
        stream: TcpStream,
        addr: SocketAddr,
        codec: C,
        handler: H,
        config: Arc<SessionConfig>,
        owner: Owner,
    ) -> Self {
        Self::new(stream, addr, codec, handler, config, owner)
    }

    fn new(
        stream: TcpStream,
        addr: SocketAddr,
        codec: C,
        handler: H,
        config: Arc<SessionConfig>,
        owner: Owner,
    ) -> Self {
        let max = codec.max_encoded_len().saturating_add(64 * 1024);
        let buf = RecvBuf::with_capacity(
            config.initial_recv_buffer.max(1),
            max.max(config.initial_recv_buffer.max(1)),
        )
        .unwrap_or_default();
        let local = stream.local_addr().unwrap_or(addr);
        Conn {
            stream,
            reader: FrameReader::with_buffer(codec.clone(), buf),
            codec,
            out: SendQueue::default(),
            handler: Some(handler),
            phase: Phase::Connecting {
                started: Instant::now(),
            },
            id: owner.next_session_id(),
            addr,
            local,
            config,
            owner,
            ending: Ending::None,
            wants_writable: false,
            paused: false,
            reader_paused: false,
            read_more: true,
            opened: false,
            last_activity: Instant::now(),
            idle_timer: None,
            phase_timer: None,
            close_reason: None,
            held_recv: 0,
            held_send: 0,
            reactor: None,
            socket_buffers: (0, 0),
        }
    }

    /// The session id.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Arms the connect timeout (clients). Called on the first turn.
    fn ensure_started(&mut self, cx: &mut Context<'_>) {
        if self.reactor.is_none() {
            self.reactor = Some(cx.handle());
            if let (Phase::Connecting { .. }, Some(timeout)) =
                (self.phase, self.owner.connect_timeout())
            {
                self.phase_timer = Some(cx.set_timer(timeout, None));
            }
        }
    }

    /// Ends the session: reports `reason` on close, resets the connection for an abort.
    fn finish(&mut self, cx: &mut Context<'_>, reason: CloseReason) -> Turn {
        if reason == CloseReason::Aborted || matches!(reason, CloseReason::Frame(_)) {
            // Reset rather than FIN: the peer must not take a truncated stream as complete.
            let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
        }
        self.close_reason.get_or_insert(reason);
        cx.close();
        Turn::Done
    }

    fn check_connected(&mut self) -> Result<bool, CloseReason> {
        let failed = |addr: SocketAddr, e: io::Error| match e.kind() {
            io::ErrorKind::ConnectionRefused => CloseReason::Refused(addr),
            kind => CloseReason::ConnectFailed {
                addr,
                kind,
                message: e.to_string(),
            },
        };
        if let Ok(Some(e)) | Err(e) = self.stream.take_error() {
            return Err(failed(self.addr, e));
        }
        match self.stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(failed(self.addr, e)),
        }
    }

    /// Runs `f` with the handler and a session view.
    fn with_session(&mut self, tally: &mut TurnTally, f: impl FnOnce(&mut H, &mut Session<'_>)) {
        let Some(handler) = self.handler.as_mut() else {
            return;
        };
        let mut session = Session {
            id: self.id,
            peer: self.addr,
            local: self.local,
            out: &mut self.out,
            encoder: &self.codec,
            send_limit: self.config.send_limit,
            ending: &mut self.ending,
            wants_writable: &mut self.wants_writable,
            frames_out: &mut tally.frames_out,
            socket_buffers: self.socket_buffers,
        };
        f(handler, &mut session);
    }

    /// One read (into the scratch buffer, or straight into the receive buffer for a large
    /// pending frame), and delivery of every whole frame. Frames are counted in `tally`; the
    /// bytes read by the syscall, if one was made, are returned.
    fn read_once(
        &mut self,
        cx: &mut Context<'_>,
        tally: &mut TurnTally,
    ) -> (ReadOutcome, Option<usize>) {
        let Conn {
            stream,
            reader,
            out,
            handler,
            codec,
            config,
            ending,
            wants_writable,
            paused,
            reader_paused,
            id,
            addr,
            local,
            socket_buffers,
            ..
        } = self;
        // After a graceful close the peer's remaining messages are still delivered (until its
        // end of stream); after an abort nothing is.
        let draining = *ending == Ending::Abort;
        let high = config.high_watermark;
        let mut deliver = |frame: &[u8]| -> Flow {
            tally.frames_in += 1;
            let Some(handler) = handler.as_mut() else {
                return Flow::Continue;
            };
            let mut session = Session {
                id: *id,
                peer: *addr,
                local: *local,
                out,
                encoder: codec,
                send_limit: config.send_limit,
                ending,
                wants_writable,
                frames_out: &mut tally.frames_out,
                socket_buffers: *socket_buffers,
            };
            handler.on_message(&mut session, frame);
            if *session.ending == Ending::Abort {
                return Flow::Pause;
            }
            if session.out.len() >= high {
                *paused = true;
                return Flow::Pause;
            }
            Flow::Continue
        };
        let fed =
            |result: Result<Feed, ark_frame::DecodeError>, reader_paused: &mut bool| match result {
                Ok(feed) => {
                    *reader_paused = feed == Feed::Paused;
                    None
                }
                Err(e) => Some(ReadOutcome::Failed(CloseReason::Frame(e))),
            };
        // Frames kept by an earlier pause go first, without a syscall.
        if *reader_paused && !draining {
            if let Some(failed) = fed(reader.resume(&mut deliver), reader_paused) {
                return (failed, None);
            }
            if *reader_paused {
                return (ReadOutcome::Drained, None);
            }
        }
        let direct = !draining && reader.pending_remaining() >= DIRECT_READ_THRESHOLD;
        let (result, asked) = if direct {
            match reader.spare_mut() {
                Ok(spare) => {
                    let asked = spare.len();
                    (stream.read(spare), asked)
                }
                Err(e) => return (ReadOutcome::Failed(CloseReason::Frame(e)), None),
            }
        } else {
            let scratch = cx.scratch();
            let asked = scratch.len();
            (stream.read(scratch), asked)
        };
        cx.counters().add_reads(1);
        let n = match result {
            Ok(0) => return (ReadOutcome::Eof, Some(0)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return (ReadOutcome::Drained, Some(0));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                return (ReadOutcome::More, Some(0));
            }
            Err(e) => return (ReadOutcome::Failed(CloseReason::io(&e)), Some(0)),
        };
        if direct {
            reader.commit(n);
            if let Some(failed) = fed(reader.feed(&[], &mut deliver), reader_paused) {
                return (failed, Some(n));
            }
        } else if !draining {
            // The scratch is lent to this call; frames are handed out of it in place.
            let scratch = &cx.scratch()[..n];
            if let Some(failed) = fed(reader.feed(scratch, &mut deliver), reader_paused) {
                return (failed, Some(n));
            }
        }
        // A read that filled what it asked for may have left more in the socket; a short read
        // drained it (the next arrival raises a new edge).
        let outcome = if n == asked {
            ReadOutcome::More
        } else {
            ReadOutcome::Drained
        };
        (outcome, Some(n))
    }

    /// One write of everything queued. Returns whether the socket would block.
    fn flush(&mut self, cx: &mut Context<'_>, tally: &mut TurnTally) -> Result<bool, CloseReason> {
        if self.out.len() == 0 {
            return Ok(false);
        }
        let result = self.stream.write(&self.out.buf[self.out.pos..]);
        tally.writes += 1;
        cx.counters().add_writes(1);
        match result {
            Ok(n) => {
                tally.bytes_out += n as u64;
                self.out.consume(n);
                Ok(false)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(CloseReason::io(&e)),
        }
    }

    /// Publishes this turn's counters and buffer sizes.
    fn report(&mut self, tally: &TurnTally) {
        let counters = self.owner.counters();
        counters.add(tally);
        let held = self.reader.held_bytes();
        if held != self.held_recv {
            counters
                .recv_buffer_bytes
                .fetch_add(held as i64 - self.held_recv as i64, Ordering::Relaxed);
            self.held_recv = held;
        }
        let queued = self.out.len();
        if queued != self.held_send {
            counters
                .send_queue_bytes
                .fetch_add(queued as i64 - self.held_send as i64, Ordering::Relaxed);
            self.held_send = queued;
        }
    }

    fn turn(&mut self, cx: &mut Context<'_>, ready: Ready, tally: &mut TurnTally) -> Turn {
        self.ensure_started(cx);
        if let Phase::Connecting { .. } = self.phase {
            match self.check_connected() {
                Ok(true) => {
                    self.phase = Phase::Open;
                    if let Some(timer) = self.phase_timer.take() {
                        cx.cancel_timer(timer);
                    }
                    self.local = self.stream.local_addr().unwrap_or(self.local);
                    self.owner.connected();
                }
                Ok(false) => return Turn::Done,
                Err(reason) => return self.finish(cx, reason),
            }
        }
        if !self.opened {
            self.opened = true;
            let socket = socket2::SockRef::from(&self.stream);
            self.socket_buffers = (
                socket.send_buffer_size().unwrap_or(0),
                socket.recv_buffer_size().unwrap_or(0),
            );
            self.last_activity = cx.now();
            self.owner
                .counters()
                .sessions_open
                .fetch_add(1, Ordering::Relaxed);
            self.owner
                .counters()
                .sessions_total
                .fetch_add(1, Ordering::Relaxed);
            if let Some(idle) = self.config.idle_timeout {
                self.idle_timer = Some(cx.set_timer(idle, None));
            }
            self.with_session(tally, |h, s| h.on_open(s));
        }
        if self.owner.stopping() && self.ending == Ending::None {
            self.ending = Ending::Graceful;
            self.close_reason.get_or_insert(CloseReason::Stopped);
        }
        if self.ending == Ending::Abort {
            let dropped = self.out.clear();
            self.owner
                .counters()
                .aborted_send_bytes
                .fetch_add(dropped as u64, Ordering::Relaxed);
            return self.finish(cx, CloseReason::Aborted);
        }

        let mut turn = Turn::Done;
        // After shutting down writing, any event may be the peer's end of stream: read.
        let closing = self.phase == Phase::ShutdownSent;
        if !self.paused && (ready.is_readable() || self.read_more || self.reader_paused || closing)
        {
            self.read_more = false;
            // Read while the socket may hold more, within the turn's budget: one read per
            // turn would let a connection that keeps its socket full take turns from the
            // others (measured: 16 KiB echoes, window 16, two reactors — a few connections
            // did 100× the round trips of the rest).
            let budget = cx.budget();
            let (mut reads, mut bytes) = (0u32, 0usize);
            let outcome = loop {
                let (outcome, read) = self.read_once(cx, tally);
                if let Some(n) = read {
                    tally.reads += 1;
                    tally.bytes_in += n as u64;
                    bytes += n;
                }
                reads += 1;
                let more = matches!(outcome, ReadOutcome::More)
                    && !self.paused
                    && reads < budget.operations
                    && bytes < budget.bytes;
                if !more {
                    break outcome;
                }
            };
            match outcome {
                // The peer's FIN may have arrived with the data just read: its edge is spent,
                // so read again until the end of stream shows.
                ReadOutcome::Drained if ready.contains(Ready::READ_CLOSED) => {
                    self.last_activity = cx.now();
                    self.read_more = true;
                    turn = Turn::Again;
                }
                ReadOutcome::Drained => {
                    self.last_activity = cx.now();
                    if self.reader.buffered_len() == 0 {
                        // Idle between messages: hold no receive memory.
                        self.reader.release();
                    }
                }
                ReadOutcome::More => {
                    self.last_activity = cx.now();
                    self.read_more = true;
                    turn = Turn::Again;
                }
                ReadOutcome::Eof => {
                    let reason = match (self.phase, self.reader.buffered_len()) {
                        (Phase::ShutdownSent, _) => {
                            self.close_reason.take().unwrap_or(CloseReason::Local)
                        }
                        (_, 0) => CloseReason::PeerClosed,
                        (_, buffered) => CloseReason::EofMidFrame { buffered },
                    };
                    // Whatever is still queued cannot be delivered to a peer that left.
                    let _ = self.flush(cx, tally);
                    return self.finish(cx, reason);
                }
                ReadOutcome::Failed(reason) => return self.finish(cx, reason),
            }
        }

        let blocked = match self.flush(cx, tally) {
            Ok(blocked) => blocked,
            Err(reason) => return self.finish(cx, reason),
        };
        let low = self.config.low_watermark;
        if self.out.len() <= low {
            if self.paused {
                self.paused = false;
                self.read_more = true;
                turn = Turn::Again;
            }
            if self.wants_writable && self.ending == Ending::None {
                self.wants_writable = false;
                self.with_session(tally, |h, s| h.on_writable(s));
            }
        }
        if self.ending == Ending::Graceful && self.out.len() == 0 && self.phase == Phase::Open {
            let _ = self.stream.shutdown(Shutdown::Write);
            self.phase = Phase::ShutdownSent;
            if let Some(timer) = self.phase_timer.take() {
                cx.cancel_timer(timer);
            }
            self.phase_timer = Some(cx.set_timer(self.config.close_linger, None));
            self.read_more = true;
            turn = Turn::Again;
        }
        if self.ending == Ending::Abort {
            turn = Turn::Again;
        }
        // Queued by callbacks after this turn's write, with room in the socket: write next turn.
        if self.out.len() > 0 && !blocked {
            turn = Turn::Again;
        }
        turn
    }
}

impl<C: Framing, H: TcpHandler> Handler for Conn<C, H> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.stream
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let mut tally = TurnTally::default();
        let turn = self.turn(cx, ready, &mut tally);
        self.report(&tally);
        turn
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        if Some(timer) == self.phase_timer {
            self.phase_timer = None;
            return match self.phase {
                Phase::Connecting { started } => {
                    self.finish(cx, CloseReason::ConnectTimeout(cx.now() - started))
                }
                // The peer did not end its side within the linger time.
                Phase::ShutdownSent => {
                    let reason = self.close_reason.take().unwrap_or(CloseReason::Local);
                    self.finish(cx, reason)
                }
                Phase::Open => Turn::Done,
            };
        }
        if Some(timer) == self.idle_timer {
            let Some(idle) = self.config.idle_timeout else {
                return Turn::Done;
            };
            let silent = cx.now().saturating_duration_since(self.last_activity);
            if silent >= idle {
                self.idle_timer = None;
                self.close_reason = Some(CloseReason::IdleTimeout(idle));
                self.ending = Ending::Graceful;
                return Turn::Again;
            }
            self.idle_timer = Some(cx.set_timer(idle - silent, None));
        }
        Turn::Done
    }

    fn on_close(&mut self, reason: ark_reactor::CloseReason) {
        let reason = self.close_reason.take().unwrap_or(match reason {
            ark_reactor::CloseReason::Stopped => CloseReason::Stopped,
            ark_reactor::CloseReason::Closed => CloseReason::Local,
            ark_reactor::CloseReason::RegistrationFailed(kind) => CloseReason::Io {
                kind,
                message: "registering the socket with the reactor failed".to_string(),
            },
        });
        let counters = self.owner.counters();
        let dropped = self.out.clear();
        counters
            .aborted_send_bytes
            .fetch_add(dropped as u64, Ordering::Relaxed);
        if self.opened {
            counters.sessions_open.fetch_sub(1, Ordering::Relaxed);
        }
        counters
            .recv_buffer_bytes
            .fetch_sub(self.held_recv as i64, Ordering::Relaxed);
        counters
            .send_queue_bytes
            .fetch_sub(self.held_send as i64, Ordering::Relaxed);
        self.held_recv = 0;
        self.held_send = 0;
        if let Some(handler) = self.handler.as_mut() {
            handler.on_close(&reason);
        }
        self.owner.session_closed(self.id);
        if let (Some(handler), Some(reactor)) = (self.handler.take(), self.reactor.take()) {
            self.owner
                .maybe_reconnect(&reason, handler, self.codec.clone(), &reactor);
        }
    }
}
