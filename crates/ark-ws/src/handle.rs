//! `WsSessionHandle`: reach a WebSocket session from any thread.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use ark_reactor::Mailbox;
use ark_tcp::TcpSessionHandle;
use tungstenite::Message;

use crate::error::SendError;
use crate::proto::close::CloseCode;

/// Not open yet.
const PENDING: u8 = 0;
const OPEN: u8 = 1;
/// Closing or closed: sends are refused.
const ENDED: u8 = 2;

/// What a handle asks of its session, applied on the session's thread.
pub(crate) enum Command {
    Send(Message),
    Close(CloseCode, String),
}

/// What handles asked since the session last looked.
#[derive(Default)]
pub(crate) struct WsInbox {
    pub(crate) requests: VecDeque<Command>,
    /// `WsHandler::on_wake` is owed.
    pub(crate) wake: bool,
}

/// The state a WebSocket session shares with its handles.
pub(crate) struct WsShared {
    limit: usize,
    state: AtomicU8,
    /// What handles ask, waking the session through its TCP session's handle (attached once
    /// the TCP connection exists).
    mailbox: Mailbox<WsInbox, TcpSessionHandle>,
    /// Bytes of payload waiting in the mailbox.
    waiting: std::sync::atomic::AtomicUsize,
    /// Data messages in and out (added once per callback).
    messages: [std::sync::atomic::AtomicU64; 2],
}

impl std::fmt::Debug for WsShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsShared")
            .field("tcp", &self.tcp())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl WsShared {
    pub(crate) fn new(limit: usize) -> Arc<WsShared> {
        Arc::new(WsShared {
            limit,
            state: AtomicU8::new(PENDING),
            mailbox: Mailbox::new(),
            waiting: Default::default(),
            messages: Default::default(),
        })
    }

    /// Adds a callback's data messages in and out to the session's counts.
    pub(crate) fn count(&self, messages_in: u64, messages_out: u64) {
        for (total, n) in self.messages.iter().zip([messages_in, messages_out]) {
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    fn tcp(&self) -> Option<&TcpSessionHandle> {
        self.mailbox.waker()
    }

    /// The TCP session exists: its handle carries the wakes.
    pub(crate) fn attach(&self, tcp: TcpSessionHandle) {
        let _ = self.mailbox.attach(tcp);
    }

    pub(crate) fn set_open(&self) {
        let _ = self
            .state
            .compare_exchange(PENDING, OPEN, Ordering::SeqCst, Ordering::SeqCst);
    }

    pub(crate) fn set_ended(&self) {
        self.state.store(ENDED, Ordering::SeqCst);
    }

    pub(crate) fn is_open(&self) -> bool {
        self.state.load(Ordering::SeqCst) == OPEN
    }

    /// Takes what handles asked, if anything.
    pub(crate) fn take(&self) -> Option<WsInbox> {
        let inbox = self.mailbox.take()?;
        self.waiting.store(0, Ordering::SeqCst);
        Some(inbox)
    }
}

/// A client's current session state: replaced by each connection of a reconnecting client.
#[derive(Debug, Clone)]
pub(crate) struct CurrentSession(Arc<std::sync::Mutex<Arc<WsShared>>>);

impl CurrentSession {
    pub(crate) fn new(shared: Arc<WsShared>) -> Self {
        CurrentSession(Arc::new(std::sync::Mutex::new(shared)))
    }

    /// The current connection's state.
    pub(crate) fn get(&self) -> Arc<WsShared> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// A new connection: fresh state (what handles of the last one queued stays there).
    pub(crate) fn renew(&self, limit: usize) -> Arc<WsShared> {
        let fresh = WsShared::new(limit);
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fresh.clone();
        fresh
    }
}

/// A cheap, cloneable, `Send` handle to one WebSocket session: send to it or close it from
/// any thread — another session's callbacks included. Messages sent through a handle are
/// queued for the session and go out in order at its next turn, with the same checks as
/// [`WsSession::send`](crate::WsSession::send). Get one from
/// [`WsSession::handle`](crate::WsSession::handle), a server's
/// [`sessions`](crate::WsServerHandle::sessions) or a client handle.
#[derive(Clone)]
pub struct WsSessionHandle {
    shared: Arc<WsShared>,
}

impl std::fmt::Debug for WsSessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsSessionHandle")
            .field("tcp", &self.shared.tcp())
            .field("open", &self.is_open())
            .finish()
    }
}

impl WsSessionHandle {
    /// A handle to a session whose TCP connection exists (`shared` is attached).
    pub(crate) fn new(shared: Arc<WsShared>) -> Self {
        debug_assert!(shared.tcp().is_some());
        WsSessionHandle { shared }
    }

    fn tcp(&self) -> Option<&TcpSessionHandle> {
        self.shared.tcp()
    }

    /// The session's id (its TCP session's).
    pub fn id(&self) -> u64 {
        self.tcp().map_or(u64::MAX, TcpSessionHandle::id)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.tcp().map_or(
            SocketAddr::from(([0, 0, 0, 0], 0)),
            TcpSessionHandle::peer_addr,
        )
    }

    /// Whether the session is open (handshake done, not closing).
    pub fn is_open(&self) -> bool {
        self.shared.is_open()
    }

    /// The session's counters (as of its last callback).
    pub fn stats(&self) -> crate::WsSessionStats {
        let [messages_in, messages_out] = self
            .shared
            .messages
            .each_ref()
            .map(|n| n.load(Ordering::Relaxed));
        crate::WsSessionStats {
            messages_in,
            messages_out,
            tcp: self.tcp().map(TcpSessionHandle::stats).unwrap_or_default(),
        }
    }

    /// Queues `message` for the session. `Ok` means queued: it is lost if the session ends
    /// before sending it.
    ///
    /// # Errors
    /// [`SendError::Closed`] when the session is not open (not yet, or no more);
    /// [`SendError::Full`] when the session's queue plus what handles queued would pass the
    /// write-buffer limit.
    pub fn send(&self, message: Message) -> Result<(), SendError> {
        if !self.is_open() {
            return Err(SendError::Closed);
        }
        let shared = &self.shared;
        let tcp = shared.tcp().map_or(0, TcpSessionHandle::queued_bytes);
        let waiting = shared.waiting.load(Ordering::SeqCst);
        let queued = tcp + waiting;
        if queued > 0 && queued + message.len() > shared.limit {
            return Err(SendError::Full {
                queued,
                limit: shared.limit,
            });
        }
        shared.waiting.fetch_add(message.len(), Ordering::SeqCst);
        shared
            .mailbox
            .post(|inbox| inbox.requests.push_back(Command::Send(message)));
        Ok(())
    }

    /// Queues a binary message (the payload is copied).
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn send_binary(&self, data: &[u8]) -> Result<(), SendError> {
        self.send(Message::binary(data.to_vec()))
    }

    /// Queues a text message.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn send_text(&self, text: &str) -> Result<(), SendError> {
        self.send(Message::text(text))
    }

    /// Starts the close handshake with `code` and `reason`, after what was queued before.
    pub fn close(&self, code: CloseCode, reason: &str) {
        let close = Command::Close(code, reason.to_string());
        self.shared
            .mailbox
            .post(|inbox| inbox.requests.push_back(close));
    }

    /// Changes the session's own rate limits, each way (bytes on the wire; see
    /// [`WsConfig::rate_limits`](crate::WsConfig::rate_limits)); they take effect at the
    /// session's next turn. Nothing happens once the connection is gone.
    pub fn set_rate_limits(&self, limits: ark_reactor::RateLimits) {
        if let Some(tcp) = self.tcp() {
            tcp.set_rate_limits(limits);
        }
    }

    /// Gives the session's handler a turn: [`WsHandler::on_wake`](crate::WsHandler::on_wake)
    /// runs on its thread (several wakes before it runs merge into one).
    pub fn wake(&self) {
        self.shared.mailbox.post(|inbox| inbox.wake = true);
    }
}
