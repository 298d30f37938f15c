//! What a handler sees: [`RudpHandler`], [`RudpSession`], and [`RudpSessionHandle`] to reach
//! a session from any thread.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ark_reactor::{Deadlines, Mailbox, TimerId};
use ark_udp::UdpWaker;

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
    /// The sum of every session's counters (closed ones included), answered on the channel.
    Stats(mpsc::Sender<RudpStats>),
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

    /// Closes the session: a CLOSE goes to the peer, then `on_close(Local)`.
    pub fn close(&mut self) {
        self.conn.close();
    }

    /// The session's counters.
    pub fn stats(&self) -> RudpStats {
        self.conn.stats()
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
        }
    }
}

/// A cheap, cloneable, `Send` handle to one session: send to its peer or close it from any
/// thread. What it sends is applied on the session's thread at its next turn.
#[derive(Debug, Clone)]
pub struct RudpSessionHandle {
    pub(crate) peer: SocketAddr,
    pub(crate) mailbox: Arc<RudpShared>,
}

impl RudpSessionHandle {
    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Sends a message (copied) as `delivery` says. Refusals of the session (full, too large,
    /// closed) are not reported back to this thread: check with the handler when it matters.
    pub fn send(&self, message: &[u8], delivery: Delivery) {
        self.mailbox
            .post(Command::Send(self.peer, message.to_vec(), delivery));
    }

    /// Closes the session.
    pub fn close(&self) {
        self.mailbox.post(Command::Close(self.peer));
    }
}
