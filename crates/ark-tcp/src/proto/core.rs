//! The sans-IO TCP session: bytes and time in, bytes, deadlines and handler callbacks out.
//!
//! [`SessionCore`] knows nothing of sockets or clocks. Its machine
//! ([`SessionMachine`](crate::proto::machine::SessionMachine), the one seam a driver uses)
//! feeds it what was read ([`handle_read_lending`](SessionCore::handle_read_lending),
//! [`handle_eof`](SessionCore::handle_eof)), writes what it offers
//! ([`transmit`](SessionCore::transmit), then [`handle_written`](SessionCore::handle_written)),
//! ends the stream when asked ([`poll_shutdown`](SessionCore::poll_shutdown)), and applies its
//! deadlines ([`poll_timeout`](SessionCore::poll_timeout),
//! [`handle_timeout`](SessionCore::handle_timeout)). A byte transform (TLS, `secure`) fits
//! between the two: it takes the reads and gives the core plaintext, and wraps what the core
//! transmits.
//!
//! The session's phase is one [`State`]; the receive side's pause (backpressure) is the frame
//! reader's own state.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_frame::{Decoder, Encoder, FrameReader, RecvBuf};
use ark_reactor::{Deadlines, Pace, SourceRef};

use crate::config::TcpConfig;
use crate::error::CloseReason;
use crate::handle::TcpShared;
use crate::handler::{SessionInfo, TcpHandler, TcpSession};
use crate::stats::TcpStats;

pub(crate) mod link;
mod rate;
#[cfg(feature = "tls")]
pub(crate) mod secure;
use link::{Link, SendQueue, State};
use rate::SessionRate;

/// The codecs a TCP session can use: any ark-frame decoder that also encodes (and that a
/// server or client can share between its threads).
pub trait Framing: Decoder + Encoder + Clone + Send + Sync + 'static {}
impl<T: Decoder + Encoder + Clone + Send + Sync + 'static> Framing for T {}

/// Frames at least this large are read straight into the session's receive buffer instead of
/// through the reactor's scratch buffer.
const DIRECT_READ_THRESHOLD: usize = 32 * 1024;

/// Received bytes to deliver, and how their frames are lent.
enum Input<'a> {
    /// To [`TcpHandler::on_message`]; with `in_place`, frames sent back unchanged from
    /// `input` are queued by reference (see [`SessionCore::handle_read_lending`]).
    Shared { input: &'a [u8], in_place: bool },
    /// To [`TcpHandler::on_message_mut`].
    Mut(&'a mut [u8]),
}

/// The earliest of some optional instants.
pub(crate) fn earliest<const N: usize>(instants: [Option<Instant>; N]) -> Option<Instant> {
    instants.into_iter().flatten().min()
}

/// One TCP session without IO: framing, send queue, phase, deadlines and the handler.
pub(crate) struct SessionCore<C: Framing, H: TcpHandler> {
    handler: H,
    reader: FrameReader<C>,
    codec: C,
    link: Link,
    info: SessionInfo,
    /// What the session shares with its handles.
    handle: Arc<TcpShared>,
    /// When bytes last arrived (idle and stall deadlines count from it).
    last_rx: Instant,
    /// When an emptied receive buffer is to be freed (see [`RECEIVE_RELEASE_DELAY`]).
    release_at: Option<Instant>,
    /// When the receive buffer last kept bytes after a read (a frame spanning reads).
    buffer_used_at: Instant,
    /// `on_close` has been called.
    reported: bool,
    /// `on_open` has run (the session counts as opened until it is gone).
    opened: bool,
    /// `on_drain` has run (once per session).
    drained: bool,
    /// Reading stopped on a spent read budget may go on (see `take_read_resumed`).
    read_resumed: bool,
}

/// How long a session's receive buffer must go unused (empty, no frame spanning reads) before
/// it is freed. Freeing it at every drain cost an allocation for every frame that spans two
/// reads (a quarter of the messages at 16 KiB with 64 KiB reads); this way a busy session keeps
/// its buffer and an idle one holds no receive memory after the delay.
pub(crate) const RECEIVE_RELEASE_DELAY: Duration = Duration::from_millis(20);

impl<C: Framing, H: TcpHandler> SessionCore<C, H> {
    /// A session not yet established; `connect_timeout` bounds a client's connect; `source`
    /// is where its handles' wakes go (none in a `Simulator`).
    pub(crate) fn new(
        handler: H,
        codec: C,
        config: Arc<TcpConfig>,
        info: SessionInfo,
        now: Instant,
        connect_timeout: Option<Duration>,
        (source, pace): (Option<SourceRef>, Pace),
    ) -> Self {
        let handle = TcpShared::new(
            info.id,
            (info.peer, info.local),
            source,
            Box::new(codec.clone()),
            config.send_limit,
        );
        let max = codec.max_encoded_len().saturating_add(64 * 1024);
        let initial = config.initial_recv_buffer.max(1);
        let buf = RecvBuf::with_capacity(initial, max.max(initial)).unwrap_or_default();
        SessionCore {
            handler,
            reader: FrameReader::with_buffer(codec.clone(), buf),
            codec,
            link: Link {
                state: State::Connecting {
                    since: now,
                    deadline: connect_timeout.map(|t| now + t),
                },
                queue: SendQueue::default(),
                config,
                now,
                wants_writable: false,
                last_tx: now,
                timers: Deadlines::default(),
                tally: TcpStats::default(),
                in_place: None,
                rate: SessionRate::new(pace),
            },
            info,
            handle,
            last_rx: now,
            release_at: None,
            buffer_used_at: now,
            reported: false,
            opened: false,
            drained: false,
            read_resumed: false,
        }
    }

    /// The session's fixed facts.
    pub(crate) fn info(&self) -> &SessionInfo {
        &self.info
    }

    pub(crate) fn state(&self) -> &State {
        &self.link.state
    }

    /// Why the session closed, once it has.
    pub(crate) fn close_reason(&self) -> Option<&CloseReason> {
        match &self.link.state {
            State::Closed(reason) => Some(reason),
            _ => None,
        }
    }

    /// The handler.
    pub(crate) fn handler(&self) -> &H {
        &self.handler
    }

    /// Runs `f` with the handler and a session view.
    pub(crate) fn with_session<R>(
        &mut self,
        f: impl FnOnce(&mut H, &mut TcpSession<'_>) -> R,
    ) -> R {
        let mut session =
            TcpSession::new(&self.info, &[], &mut self.link, &self.codec, &self.handle);
        f(&mut self.handler, &mut session)
    }

    /// The connection is established: `on_open` runs.
    pub(crate) fn handle_connected(&mut self, now: Instant, info: SessionInfo) {
        if !matches!(self.link.state, State::Connecting { .. }) {
            return;
        }
        self.link.now = now;
        self.info = info;
        self.last_rx = now;
        self.link.state = State::Open;
        self.opened = true;
        self.with_session(|h, s| h.on_open(s));
    }

    /// Whether the session opened (`on_open` ran), whatever its state now.
    pub(crate) fn was_opened(&self) -> bool {
        self.opened
    }

    /// A transport failure (connect refused, reset, I/O error): the session ends.
    pub(crate) fn handle_error(&mut self, reason: CloseReason) {
        self.link.finish(reason);
    }

    /// Whether the driver should read: the session takes input and delivery is not paused.
    pub(crate) fn wants_read(&self) -> bool {
        let open = match &self.link.state {
            State::Open | State::ShutdownSent { .. } => true,
            State::Closing { peer_done, .. } => !peer_done,
            State::Connecting { .. } | State::Closed(_) => false,
        };
        open && !self.reader.is_paused() && self.link.rate.read_budget() > 0
    }

    /// The most bytes the next read may take: the read budget of the rate limits
    /// (`usize::MAX` without a read limit).
    pub(crate) fn read_allowance(&self) -> usize {
        self.link.rate.read_budget()
    }

    /// Whether reading, stopped on a spent read budget, may go on now (once): the driver
    /// then reads without waiting for a readiness event (none may come: the socket was not
    /// read to `WouldBlock`).
    pub(crate) fn take_read_resumed(&mut self) -> bool {
        std::mem::take(&mut self.read_resumed)
    }

    /// For a large pending frame, the receive buffer's free room to read into directly (then
    /// [`handle_read_direct`](Self::handle_read_direct)); `None` to read into scratch instead.
    pub(crate) fn direct_read_buf(&mut self) -> Option<&mut [u8]> {
        if self.reader.pending_remaining() < DIRECT_READ_THRESHOLD {
            return None;
        }
        match self.reader.spare_mut() {
            Ok(buf) => Some(buf),
            Err(e) => {
                self.link.finish(CloseReason::Frame(e));
                None
            }
        }
    }

    /// `n` bytes were read into [`direct_read_buf`](Self::direct_read_buf).
    pub(crate) fn handle_read_direct(&mut self, now: Instant, n: usize) {
        self.reader.commit(n);
        self.received(now, n);
        self.deliver_held();
        self.note_buffer_use();
    }

    /// Bytes arrived from the peer: every whole frame goes to `on_message`; what the
    /// handler sends is queued. (TLS's path; plain TCP lends its reads with
    /// [`handle_read_lending`](Self::handle_read_lending).)
    #[cfg(any(feature = "tls", test))]
    pub(crate) fn handle_read(&mut self, now: Instant, input: &[u8]) {
        self.received(now, input.len());
        self.deliver(Input::Shared {
            input,
            in_place: false,
        });
        self.note_buffer_use();
    }

    /// As [`handle_read`](Self::handle_read), but frames the handler sends back unchanged
    /// from `input` (an echo, a relay of the same framing) are not copied into the queue: the
    /// driver then writes the queue's bytes and those frames, straight from `input`, in one
    /// call ([`transmit_in_place`](Self::transmit_in_place)), and only what it does not take
    /// is copied into the queue ([`handle_written_in_place`](Self::handle_written_in_place)),
    /// as a program that writes from its receive buffer does. A handler that
    /// [decodes in place](TcpHandler::decodes_in_place) gets the frames mutably instead.
    pub(crate) fn handle_read_lending(&mut self, now: Instant, input: &mut [u8]) {
        debug_assert!(
            self.link.in_place.is_none(),
            "the last in-place write was settled"
        );
        self.received(now, input.len());
        let lent = self.lent(&mut *input);
        self.deliver(lent);
        self.note_buffer_use();
    }

    /// After [`handle_read_lending`](Self::handle_read_lending) of `input`: when the handler
    /// sent frames in place, the bytes to write now and in this order (what the queue holds,
    /// then those frames of `input`); `None` when it did not. The driver writes them in one
    /// call and reports it with [`handle_written_in_place`](Self::handle_written_in_place),
    /// or a failure with [`handle_error`](Self::handle_error).
    pub(crate) fn transmit_in_place<'a>(&'a self, input: &'a [u8]) -> Option<[&'a [u8]; 2]> {
        let run = self.link.in_place.clone()?;
        Some([self.link.queue.bytes(), &input[run]])
    }

    /// `n` bytes of [`transmit_in_place`](Self::transmit_in_place) were written (0 when the
    /// socket was full): what the frames of `input` still hold is copied into the queue.
    pub(crate) fn handle_written_in_place(&mut self, now: Instant, input: &[u8], n: usize) {
        let Some(run) = self.link.in_place.take() else {
            return;
        };
        let (queued_len, frames) = (self.link.queue.len(), &input[run]);
        let written = n.min(queued_len + frames.len());
        let from_frames = written.saturating_sub(queued_len);
        self.link.tally.bytes_out += from_frames as u64;
        self.link.rate.spend_write(from_frames, 0, now);
        if from_frames > 0 {
            self.link.last_tx = now;
        }
        self.link
            .queue
            .tail()
            .extend_from_slice(&frames[from_frames..]);
        // A delivery that queued frames in place did not pause (the high watermark stops
        // queueing in place first), so the reader cannot resume here; `on_writable` may be due.
        let _ = self.handle_written(now, written - from_frames);
    }

    /// The session read while it holds a receive buffer: the buffer is in use (see
    /// [`RECEIVE_RELEASE_DELAY`]). A busy session whose reads happen to end at frame
    /// boundaries for a while keeps it too: counting only reads that left bytes buffered
    /// freed it then, and the next frame spanning reads allocated it again.
    fn note_buffer_use(&mut self) {
        if self.reader.held_bytes() > 0 {
            self.buffer_used_at = self.link.now;
        }
    }

    fn received(&mut self, now: Instant, n: usize) {
        self.link.now = now;
        self.last_rx = now;
        self.link.tally.bytes_in += n as u64;
        self.link.rate.spend_read(n, now);
    }

    /// Delivers the frames the reader holds (after a pause, or read into its buffer).
    fn deliver_held(&mut self) {
        let lent = self.lent(&mut []);
        self.deliver(lent);
    }

    /// How the frames of `input`, which the session holds mutably, are lent: mutably to a
    /// handler that [decodes in place](TcpHandler::decodes_in_place), otherwise shared, with
    /// frames sent back unchanged queued by reference.
    fn lent<'a>(&self, input: &'a mut [u8]) -> Input<'a> {
        if self.handler.decodes_in_place() {
            Input::Mut(input)
        } else {
            // Under a write limit the budget decides what goes: every frame is queued.
            let in_place = !self.link.rate.write_limited();
            Input::Shared { input, in_place }
        }
    }

    /// Feeds `input` (after what the reader holds) to the handler, frame by frame. Delivery
    /// pauses when a message's handling leaves the send queue at or above the high watermark,
    /// or the handler aborts.
    fn deliver(&mut self, input: Input<'_>) {
        if matches!(self.link.state, State::Closed(_)) {
            return;
        }
        let SessionCore {
            handler,
            reader,
            codec,
            link,
            info,
            handle,
            ..
        } = self;
        let high = link.config.high_watermark;
        let result = match input {
            Input::Shared { input, in_place } => {
                let sent_from = if in_place { input } else { &[] };
                reader.feed(input, |frame: &[u8]| {
                    let queued = link.begin_message();
                    handler.on_message(
                        &mut TcpSession::new(info, sent_from, link, codec, handle),
                        frame,
                    );
                    link.end_message(queued, high)
                })
            }
            Input::Mut(input) => reader.feed_mut(input, |frame: &mut [u8]| {
                let queued = link.begin_message();
                handler.on_message_mut(&mut TcpSession::new(info, &[], link, codec, handle), frame);
                link.end_message(queued, high)
            }),
        };
        match result {
            // The driver never feeds a paused reader, so every error here ends the stream.
            Err(e) => link.finish(CloseReason::Frame(e)),
            Ok(_) if reader.is_paused() => crate::trace::backpressure(true, link.queued()),
            Ok(_) => {}
        }
    }

    /// The peer ended its stream. Whole frames already arrived have been delivered; what is
    /// queued for the peer is still written, then writing is shut down and the session closes.
    pub(crate) fn handle_eof(&mut self, now: Instant) {
        self.end_of_stream(now, CloseReason::PeerClosed);
    }

    /// As [`handle_eof`](Self::handle_eof), for a TLS stream that ended without the peer's
    /// `close_notify`: what arrived may be truncated, and the session says so.
    #[cfg(feature = "tls")]
    pub(crate) fn handle_truncated(&mut self, now: Instant) {
        self.end_of_stream(now, CloseReason::Tls(ark_tls::TlsError::Truncated));
    }

    /// The peer's stream ended; at a frame boundary the session closes for `at_boundary`.
    fn end_of_stream(&mut self, now: Instant, at_boundary: CloseReason) {
        self.link.now = now;
        let buffered = self.reader.buffered_len();
        let deadline = now + self.link.config.close_timeout;
        match &mut self.link.state {
            State::Connecting { .. } | State::Open => {
                let reason = if buffered == 0 {
                    at_boundary
                } else {
                    CloseReason::EofMidFrame { buffered }
                };
                self.link.state = State::Closing {
                    reason,
                    deadline,
                    peer_done: true,
                };
            }
            State::Closing { peer_done, .. } => *peer_done = true,
            State::ShutdownSent { reason, .. } => {
                let reason = reason.clone();
                self.link.finish(reason);
            }
            State::Closed(_) => {}
        }
    }

    /// The bytes to write now (empty when there are none or writing is over).
    pub(crate) fn transmit(&self) -> &[u8] {
        match self.link.state {
            State::Open | State::Closing { .. } => {
                let bytes = self.link.queue.bytes();
                &bytes[..self.link.rate.write_cap(bytes.len())]
            }
            _ => &[],
        }
    }

    /// `n` bytes of [`transmit`](Self::transmit) were written. Under the low watermark a
    /// paused delivery resumes and `on_writable` runs; returns whether reading may go on
    /// again after a pause.
    pub(crate) fn handle_written(&mut self, now: Instant, n: usize) -> bool {
        self.link.now = now;
        self.link.queue.consume(n);
        self.link.tally.bytes_out += n as u64;
        self.link.rate.spend_write(n, self.link.queue.len(), now);
        if n > 0 {
            self.link.last_tx = now;
        }
        if self.link.queue.len() > self.link.config.low_watermark {
            return false;
        }
        let resumed = self.reader.is_paused() && {
            self.deliver_held();
            !self.reader.is_paused()
        };
        if resumed {
            crate::trace::backpressure(false, self.link.queued());
        }
        if self.link.wants_writable && self.link.state == State::Open {
            self.link.wants_writable = false;
            self.with_session(|h, s| h.on_writable(s));
        }
        resumed
    }

    /// Whether the driver must shut down writing now (once): a graceful close has written
    /// everything. If the peer already ended its stream, the session is then closed.
    pub(crate) fn poll_shutdown(&mut self) -> bool {
        let State::Closing {
            reason,
            deadline,
            peer_done,
        } = &self.link.state
        else {
            return false;
        };
        if self.link.queue.len() > 0 {
            return false;
        }
        let (reason, deadline) = (reason.clone(), *deadline);
        if *peer_done {
            self.link.finish(reason);
        } else {
            self.link.state = State::ShutdownSent { reason, deadline };
        }
        true
    }

    /// The earliest deadline the session has (connect, idle, stalled frame or write, close,
    /// the handler's timers).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let config = &self.link.config;
        let phase = match &self.link.state {
            State::Connecting { deadline, .. } => *deadline,
            State::Open => earliest([
                config.idle_timeout.map(|t| self.last_rx + t),
                self.stalled_frame().map(|t| self.last_rx + t),
                self.stalled_write().map(|t| self.link.last_tx + t),
            ]),
            State::Closing { deadline, .. } => earliest([
                Some(*deadline),
                self.stalled_write().map(|t| self.link.last_tx + t),
            ]),
            State::ShutdownSent { deadline, .. } => Some(*deadline),
            State::Closed(_) => return None,
        };
        earliest([
            phase,
            self.link.timers.earliest(),
            self.release_at,
            self.link.rate.deadline(),
        ])
    }

    /// The write stall timeout, if bytes wait to be written.
    fn stalled_write(&self) -> Option<Duration> {
        let waiting = self.link.queue.len() > 0;
        self.link.config.write_stall_timeout.filter(|_| waiting)
    }

    /// The stall timeout, if a frame has started to arrive while reading goes on.
    fn stalled_frame(&self) -> Option<Duration> {
        let started = self.reader.buffered_len() > 0 && !self.reader.is_paused();
        self.link.config.stall_timeout.filter(|_| started)
    }

    /// Applies every deadline passed at `now`, then runs the handler's due timers.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.link.now = now;
        self.pace(now);
        if self.release_at.is_some_and(|at| now >= at) {
            self.release_at = self.release_if_quiet(now);
        }
        self.expire_phase(now);
        while !matches!(self.link.state, State::Closed(_))
            && let Some(timer) = self.link.timers.pop_due(now)
        {
            self.with_session(|h, s| h.on_timer(s, timer));
        }
    }

    /// Frees the receive buffer if it has been unused for [`RECEIVE_RELEASE_DELAY`]; else when
    /// to look again (`None`: it holds a partial frame, and the next drain looks again).
    fn release_if_quiet(&mut self, now: Instant) -> Option<Instant> {
        if self.reader.buffered_len() > 0 {
            return None;
        }
        let quiet_at = self.buffer_used_at + RECEIVE_RELEASE_DELAY;
        if now < quiet_at {
            return Some(quiet_at);
        }
        self.reader.release();
        None
    }

    /// The session's own deadlines: connect, idle, stalls, close.
    fn expire_phase(&mut self, now: Instant) {
        let config = self.link.config.clone();
        let expired = |deadline: Instant| now >= deadline;
        if let Some(after) = self
            .stalled_write()
            .filter(|&t| expired(self.link.last_tx + t))
            .filter(|_| matches!(self.link.state, State::Open | State::Closing { .. }))
        {
            let unsent = self.link.queue.len();
            self.link
                .finish(CloseReason::WriteStalled { unsent, after });
            return;
        }
        match &self.link.state {
            State::Connecting {
                since,
                deadline: Some(deadline),
            } if expired(*deadline) => {
                let waited = now.saturating_duration_since(*since);
                self.link.finish(CloseReason::ConnectTimeout(waited));
            }
            State::Open => {
                if let Some(idle) = config.idle_timeout.filter(|&t| expired(self.last_rx + t)) {
                    // A last word before the close (which writes it first).
                    self.with_session(|h, s| h.on_idle(s));
                    self.link.begin_close(CloseReason::IdleTimeout(idle));
                } else if let Some(after) =
                    self.stalled_frame().filter(|&t| expired(self.last_rx + t))
                {
                    let buffered = self.reader.buffered_len();
                    self.link
                        .begin_close(CloseReason::FrameStalled { buffered, after });
                }
            }
            State::Closing {
                reason, deadline, ..
            } if expired(*deadline) => {
                let unsent = self.link.queue.len();
                let cause = Box::new(reason.clone());
                self.link.finish(CloseReason::Unflushed { cause, unsent });
            }
            State::ShutdownSent { reason, deadline } if expired(*deadline) => {
                let reason = reason.clone();
                self.link.finish(reason);
            }
            _ => {}
        }
    }

    /// The owner is draining: `on_drain` runs once the session is open (once), and the session
    /// goes on serving until its peer or its handler closes it.
    pub(crate) fn drain(&mut self, now: Instant) {
        if self.drained || self.link.state != State::Open {
            return;
        }
        self.drained = true;
        self.link.now = now;
        self.with_session(|h, s| h.on_drain(s));
    }

    /// The owner is stopping: `on_stopping` runs (a last chance to say goodbye), then the
    /// session closes gracefully with [`CloseReason::Stopped`].
    pub(crate) fn stop(&mut self, now: Instant) {
        self.link.now = now;
        if self.link.state == State::Open {
            self.with_session(|h, s| h.on_stopping(s));
        }
        self.link.begin_close(CloseReason::Stopped);
    }

    /// Applies what the session's handles asked since the last call: their frames join the
    /// queue (after what is queued), `on_wake` runs, a close or abort starts.
    pub(crate) fn handle_requests(&mut self, now: Instant) {
        self.pace(now);
        let Some(mut inbox) = self.handle.take() else {
            return;
        };
        self.link.now = now;
        if let Some(limits) = inbox.rate_limits.take() {
            self.link.rate.set_limits(limits, now);
        }
        if matches!(self.link.state, State::Open | State::Connecting { .. }) {
            if !inbox.bytes.is_empty() && self.link.queue.len() == 0 {
                self.link.last_tx = now;
            }
            self.link.queue.append(&mut inbox.bytes);
            self.link.tally.frames_out += inbox.frames;
        } else {
            self.link.tally.aborted_send_bytes += inbox.bytes.len() as u64;
        }
        if inbox.wake {
            self.with_session(|h, s| h.on_wake(s));
        }
        if inbox.abort {
            self.link.abort();
        } else if inbox.close {
            self.link.begin_close(CloseReason::Local);
        }
    }

    /// The turn's budgets from the rate limits (nothing without them); a read that stopped
    /// on a spent budget may go on when it came back ([`take_read_resumed`]).
    ///
    /// [`take_read_resumed`]: Self::take_read_resumed
    fn pace(&mut self, now: Instant) {
        if self.link.rate.refresh(now) {
            self.read_resumed = true;
        }
        self.link.rate.wait_to_write(self.link.queue.len(), now);
    }

    /// Tells the session's handles its queue length and whether it still takes sends.
    pub(crate) fn publish_to_handles(&mut self) {
        match self.link.state {
            State::Open | State::Connecting { .. } => self.handle.set_queued(self.link.queue.len()),
            State::Closed(_) => {
                self.link.tally.aborted_send_bytes += self.handle.set_closed() as u64;
            }
            _ => self.handle.set_closing(),
        }
    }

    /// A handle to the session.
    pub(crate) fn session_handle(&self) -> crate::TcpSessionHandle {
        crate::TcpSessionHandle::new(self.handle.clone())
    }

    /// The socket is drained: a receive buffer that holds memory with nothing in it is freed
    /// once it has gone unused for [`RECEIVE_RELEASE_DELAY`], so idle sessions hold no receive
    /// memory and busy ones do not allocate per frame.
    pub(crate) fn release_idle_buffers(&mut self) {
        if self.release_at.is_none()
            && self.reader.buffered_len() == 0
            && self.reader.held_bytes() > 0
        {
            self.release_at = Some(self.link.now + RECEIVE_RELEASE_DELAY);
        }
    }

    /// Ends the session (with `reason` unless it has ended already) and tells the handler,
    /// once. Returns the reason reported.
    pub(crate) fn report_close(&mut self, reason: CloseReason) -> CloseReason {
        self.link.finish(reason);
        let reason = self.close_reason().cloned().unwrap_or(CloseReason::Stopped);
        if !self.reported {
            self.reported = true;
            self.handler.on_close(&reason);
        }
        reason
    }

    /// The handler, for a client that reconnects with it.
    pub(crate) fn into_handler(self) -> H {
        self.handler
    }

    /// Counts a read syscall of the driver.
    pub(crate) fn count_read(&mut self) {
        self.link.tally.reads += 1;
    }

    /// Counts a write syscall of the driver.
    pub(crate) fn count_write(&mut self) {
        self.link.tally.writes += 1;
    }

    /// Counters since the last call.
    /// The turn's counts (the session's own are added to what its handles read).
    pub(crate) fn take_tally(&mut self) -> TcpStats {
        let tally = std::mem::take(&mut self.link.tally);
        self.handle.count(&tally);
        let rates = self.link.rate.measure(self.link.now, self.link.queue.len());
        self.handle.set_rates(rates.rates, rates.queue_delay);
        tally
    }

    /// Receive-buffer bytes held.
    pub(crate) fn held_recv(&self) -> usize {
        self.reader.held_bytes()
    }

    /// Bytes queued for sending.
    pub(crate) fn queued(&self) -> usize {
        self.link.queue.len()
    }
}

#[cfg(test)]
mod pair;
#[cfg(test)]
mod tests;
