//! What a handler sees: [`RudpHandler`], [`RudpSession`], and [`RudpSessionHandle`] to reach
//! a session from any thread.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use ark_reactor::{Answer, Answerer, Deadlines, Mailbox, RateLimits, TimerId};
use ark_udp::UdpWaker;

use crate::config::RudpConfig;
use crate::proto::connection::{CloseReason, Connection, Delivery, RudpStats, SendError};

/// The callbacks of one reliable-UDP session. One handler value per session; callbacks run on
/// the thread serving the socket, never two at once.
pub trait RudpHandler: Send + 'static {
    /// The handshake finished: the session is open.
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        let _ = session;
    }

    /// A whole message arrived (in order, for ordered ones). The slice is lent for this call.
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]);

    /// A timer set with [`RudpSession::set_timer`] fired.
    fn on_timer(&mut self, session: &mut RudpSession<'_>, timer: TimerId) {
        let _ = (session, timer);
    }

    /// The server is draining (`RudpServerHandle::drain`): it takes no new sessions, and
    /// this one goes on as before until its peer or the handler closes it, or the drain's
    /// deadline passes (then `on_stopping` and a graceful close follow). The moment to tell
    /// the peer to finish (a lobby's "server restarting"), or to close a session with nothing
    /// under way. Runs once.
    fn on_drain(&mut self, session: &mut RudpSession<'_>) {
        let _ = session;
    }

    /// The server or client is stopping: the last moment to send (a CLOSE follows).
    fn on_stopping(&mut self, session: &mut RudpSession<'_>) {
        let _ = session;
    }

    /// The session ended; exactly once per opened session, and for a client also when its
    /// handshake failed (`CloseReason::HandshakeTimeout`, without `on_open`) or it stopped
    /// before the handshake finished.
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = reason;
    }
}

/// Whose a timer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerOwner {
    /// The connection's own (`poll_timeout`).
    Core,
    /// The handler's.
    User,
}

/// The timers of a socket's sessions.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    pub(crate) deadlines: Deadlines,
    pub(crate) owners: std::collections::HashMap<TimerId, (SocketAddr, TimerOwner)>,
}

impl Timers {
    pub(crate) fn set(&mut self, at: Instant, owner: (SocketAddr, TimerOwner)) -> TimerId {
        let timer = self.deadlines.insert(at);
        self.owners.insert(timer, owner);
        timer
    }

    pub(crate) fn cancel(&mut self, timer: TimerId) -> bool {
        self.owners.remove(&timer);
        self.deadlines.cancel(timer)
    }
}

/// What another thread asks of a socket's sessions.
#[derive(Debug)]
pub(crate) enum Command {
    Send(SocketAddr, Vec<u8>, Delivery),
    Close(SocketAddr),
    /// Answer once everything the session accepted so far is acknowledged.
    Flush(SocketAddr, Answerer<Result<(), CloseReason>>),
    /// The sum of every session's counters (closed ones included), answered on the channel.
    Stats(mpsc::Sender<RudpStats>),
    /// New rate limits of the session's own.
    RateLimits(SocketAddr, RateLimits),
}

/// What one session shares with its handles, so a handle can refuse a send on its own thread
/// at once: the bytes on their way through the mailbox and in the session's send buffer, the
/// limits, whether it is closed, and the refusals it made.
#[derive(Debug)]
pub(crate) struct SessionShared {
    /// Bytes posted by handles and not yet applied.
    pub(crate) posted: AtomicUsize,
    /// The session's `Connection::buffered`, published at the end of each of its turns.
    pub(crate) buffered: AtomicUsize,
    pub(crate) closed: AtomicBool,
    /// The session's settings: its send buffer, message limits and lanes.
    config: Arc<RudpConfig>,
    /// Refusals of the handle: full, too large, closed, no such lane.
    pub(crate) refused: [AtomicU64; 4],
}

impl SessionShared {
    pub(crate) fn new(config: &Arc<RudpConfig>) -> Arc<SessionShared> {
        Arc::new(SessionShared {
            posted: AtomicUsize::new(0),
            buffered: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            config: config.clone(),
            refused: Default::default(),
        })
    }

    /// Takes `len` bytes for the mailbox, or says why not (and counts it).
    fn admit(&self, len: usize, delivery: Delivery) -> Result<(), SendError> {
        let refused = self.check(len, delivery);
        if let Err(e) = &refused {
            let which = match e {
                SendError::Full { .. } => 0,
                SendError::TooLarge { .. } => 1,
                SendError::Closed => 2,
                SendError::NoLane { .. } => 3,
            };
            self.refused[which].fetch_add(1, Ordering::Relaxed);
        }
        refused
    }

    fn check(&self, len: usize, delivery: Delivery) -> Result<(), SendError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(SendError::Closed);
        }
        let max = self.config.limit_for(delivery)?;
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        let buffered = self.posted.load(Ordering::SeqCst) + self.buffered.load(Ordering::SeqCst);
        let limit = self.config.send_buffer;
        if buffered > 0 && buffered + len > limit {
            return Err(SendError::Full { buffered, limit });
        }
        self.posted.fetch_add(len, Ordering::SeqCst);
        Ok(())
    }

    /// The handle's refusals, as counters.
    pub(crate) fn refusals(&self) -> RudpStats {
        let [full, large, closed, no_lane] = &self.refused;
        RudpStats {
            refused_full: full.load(Ordering::Relaxed),
            refused_too_large: large.load(Ordering::Relaxed),
            refused_closed: closed.load(Ordering::Relaxed),
            refused_no_lane: no_lane.load(Ordering::Relaxed),
            ..RudpStats::default()
        }
    }
}

/// What a socket's sessions share with their handles: the commands of other threads, in
/// ark-reactor's [`Mailbox`], waking the socket's thread through its [`UdpWaker`].
#[derive(Debug, Default)]
pub(crate) struct RudpShared {
    pub(crate) mailbox: Mailbox<VecDeque<Command>, UdpWaker>,
}

impl RudpShared {
    pub(crate) fn post(&self, command: Command) {
        self.mailbox.post(|queue| queue.push_back(command));
    }

    pub(crate) fn take(&self) -> VecDeque<Command> {
        self.mailbox.take().unwrap_or_default()
    }

    /// Every session's counters summed on the socket's thread; `None` if it does not answer
    /// within a second (stopped).
    pub(crate) fn stats(&self) -> Option<RudpStats> {
        let (tx, rx) = mpsc::channel();
        self.post(Command::Stats(tx));
        rx.recv_timeout(Duration::from_secs(1)).ok()
    }
}

/// A handler's view of its session during a callback.
pub struct RudpSession<'a> {
    pub(crate) peer: SocketAddr,
    pub(crate) conn: &'a mut Connection,
    pub(crate) timers: &'a mut Timers,
    pub(crate) mailbox: &'a Arc<RudpShared>,
    pub(crate) shared: &'a Arc<SessionShared>,
    pub(crate) now: Instant,
}

impl std::fmt::Debug for RudpSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RudpSession")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

impl RudpSession<'_> {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The connect token the client sent in its handshake (encrypted to the server's key),
    /// as the server's check saw it: who this player is, for a game whose backend issues
    /// tokens. Empty on a client, in plaintext, or without one.
    pub fn connect_token(&self) -> &[u8] {
        self.conn.connect_token()
    }

    /// Whether the session is encrypted (the default) rather than plaintext.
    pub fn is_encrypted(&self) -> bool {
        self.conn.is_encrypted()
    }

    /// Sends a reliable message, delivered in order. It leaves at the end of the turn.
    ///
    /// # Errors
    /// [`SendError::TooLarge`] past `RudpConfig::max_message`; [`SendError::Full`] when the send
    /// buffer is full; [`SendError::Closed`].
    pub fn send(&mut self, message: &[u8]) -> Result<(), SendError> {
        self.conn.send(message, Delivery::Ordered)
    }

    /// Sends a reliable message delivered as soon as it is whole, before earlier ones.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn send_unordered(&mut self, message: &[u8]) -> Result<(), SendError> {
        self.conn.send(message, Delivery::Unordered)
    }

    /// Sends one datagram, not repeated if lost (at most `RudpConfig::mtu` bytes).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn send_unreliable(&mut self, message: &[u8]) -> Result<(), SendError> {
        self.conn.send(message, Delivery::Unreliable)
    }

    /// Sends a message on `lane` of `RudpConfig::lanes`, as that lane is configured: ordered
    /// or unordered (reliable) or sequenced (one datagram, newest wins). It waits only for
    /// its own lane.
    ///
    /// # Errors
    /// As [`send`](Self::send) (`TooLarge` past `RudpConfig::mtu` on a sequenced lane), and
    /// [`SendError::NoLane`] for a lane the session does not have.
    pub fn send_on(&mut self, lane: u8, message: &[u8]) -> Result<(), SendError> {
        self.conn.send(message, Delivery::Lane(lane))
    }

    /// Payload bytes queued and not yet acknowledged (reliable) or not yet sent (unreliable):
    /// what `RudpConfig::send_buffer` bounds, and what an application keeping a stream
    /// going tops up against.
    pub fn buffered(&self) -> usize {
        self.conn.buffered()
    }

    /// Closes the session gracefully: sends are refused from now on; what was sent is
    /// repeated until the peer acknowledged it (for at most `RudpConfig::close_timeout`), then
    /// a CLOSE goes, repeated until the peer answers; then `on_close(Local)` (or
    /// `CloseReason::Cut` if the deadline cut data).
    pub fn close(&mut self) {
        self.conn.close(self.now);
    }

    /// The session's counters, with its rates each way over the last second and its send
    /// queue's delay.
    pub fn stats(&self) -> RudpStats {
        self.conn.stats()
    }

    /// The session's own rate limits, each way (as applied: a burst is at least the largest
    /// datagram).
    pub fn rate_limits(&self) -> RateLimits {
        self.conn.rate_limits()
    }

    /// New rate limits of this session's own, from now (its server's group limits stay): the
    /// tokens left are kept, up to the new burst. Writes are paced (what the limit does not
    /// cover waits in the send buffer; `send` refuses with `Full` as before), reads limit the
    /// window the peer is given. See docs/rudp.md, "Rate limits".
    pub fn set_rate_limits(&mut self, limits: RateLimits) {
        self.conn.set_rate_limits(limits, self.now);
    }

    /// The time of the current turn (the reactor's clock, read once per turn): what
    /// [`set_timer`](Self::set_timer) counts from, and a timestamp that costs no clock read.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Starts a one-shot timer: [`RudpHandler::on_timer`] runs once `after` has passed.
    /// Timers end with the session.
    pub fn set_timer(&mut self, after: Duration) -> TimerId {
        self.timers
            .set(self.now + after, (self.peer, TimerOwner::User))
    }

    /// Cancels a timer of this session; `true` if it was pending.
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.timers
            .owners
            .get(&timer)
            .is_some_and(|o| o.0 == self.peer)
            && self.timers.cancel(timer)
    }

    /// A handle to this session, to send or close from any thread.
    pub fn handle(&self) -> RudpSessionHandle {
        RudpSessionHandle {
            peer: self.peer,
            mailbox: self.mailbox.clone(),
            shared: self.shared.clone(),
        }
    }
}

/// A cheap, cloneable, `Send` handle to one session: send to its peer, wait for what was
/// sent to be acknowledged, or close it, from any thread. What it sends is applied on the
/// session's thread at its next turn.
#[derive(Debug, Clone)]
pub struct RudpSessionHandle {
    pub(crate) peer: SocketAddr,
    pub(crate) mailbox: Arc<RudpShared>,
    pub(crate) shared: Arc<SessionShared>,
}

impl RudpSessionHandle {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Sends a message (copied) as `delivery` says. The limits are checked here, on the
    /// caller's thread: the bytes already on their way through the mailbox count against the
    /// session's send buffer with what it holds (as of its last turn).
    ///
    /// # Errors
    /// [`SendError::TooLarge`] past `RudpConfig::max_message` (the MTU for unreliable
    /// messages); [`SendError::Full`] when the mailbox and the send buffer hold
    /// `RudpConfig::send_buffer` bytes with this one; [`SendError::Closed`] once the session
    /// is closing or closed. Nothing is queued, and the refusal is counted in the session's
    /// [`RudpStats`] (`refused_full`, `refused_too_large`, `refused_closed`).
    pub fn send(&self, message: &[u8], delivery: Delivery) -> Result<(), SendError> {
        self.shared.admit(message.len(), delivery)?;
        self.mailbox
            .post(Command::Send(self.peer, message.to_vec(), delivery));
        Ok(())
    }

    /// An answer given once every reliable message the session accepted before this call
    /// (from this handle or its handler) was acknowledged by the peer: `Ok(())`, or the
    /// session's `CloseReason` if it ended first. Wait for it on a thread
    /// ([`Answer::wait`]) or `.await` it; it is dropped unanswered (`AnswerDropped`) if the
    /// socket is gone.
    pub fn flush(&self) -> Answer<Result<(), CloseReason>> {
        let (answerer, answer) = ark_reactor::answer();
        self.mailbox.post(Command::Flush(self.peer, answerer));
        answer
    }

    /// Closes the session gracefully (see [`RudpSession::close`]).
    pub fn close(&self) {
        self.mailbox.post(Command::Close(self.peer));
    }

    /// New rate limits of the session's own (see [`RudpSession::set_rate_limits`]), applied
    /// on the session's thread at its next turn (nothing if it has ended).
    pub fn set_rate_limits(&self, limits: RateLimits) {
        self.mailbox.post(Command::RateLimits(self.peer, limits));
    }
}
