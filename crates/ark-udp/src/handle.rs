//! `UdpSessionHandle`: send to a UDP session, close it, change its rate limits or read its
//! stats, from any thread.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ark_reactor::{Answer, Answerer, Mailbox, RateLimits, SourceRef};

use crate::error::SendError;
use crate::limits::max_payload;
use crate::stats::UdpSessionStats;

/// What handles asked of a socket's sessions, applied on the socket's thread.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// Datagrams to send, with their destination (`None`: a connected socket's peer).
    pub(crate) datagrams: VecDeque<(Option<SocketAddr>, Vec<u8>)>,
    /// Sessions to close, by peer.
    pub(crate) closes: Vec<SocketAddr>,
    /// New rate limits of sessions, by peer, in the order asked.
    pub(crate) rate_limits: Vec<(SocketAddr, RateLimits)>,
    /// Sessions' stats asked for, by peer (`None` answered: no such session).
    pub(crate) stats: Vec<(SocketAddr, Answerer<Option<UdpSessionStats>>)>,
    /// A client's or cast socket's handler asked to be woken ([`UdpHandler::on_wake`]).
    ///
    /// [`UdpHandler::on_wake`]: crate::UdpHandler::on_wake
    pub(crate) wake: bool,
}

/// The state a socket shares with its sessions' handles.
#[derive(Debug)]
pub(crate) struct UdpShared {
    send_limit: usize,
    /// Bytes in the socket's send queue at its last turn.
    queued: AtomicUsize,
    /// Payload bytes waiting in `requests`.
    waiting: AtomicUsize,
    /// Bytes waiting for sessions' write allowances at the socket's last turn.
    held: AtomicUsize,
    closed: AtomicBool,
    /// What handles ask; wakes the socket once it is registered.
    mailbox: Mailbox<Requests>,
}

impl UdpShared {
    pub(crate) fn new(send_limit: usize) -> Arc<UdpShared> {
        Arc::new(UdpShared {
            send_limit,
            queued: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            mailbox: Mailbox::new(),
        })
    }

    /// The socket is registered: wakes go to `source`.
    pub(crate) fn attach(&self, source: SourceRef) {
        let _ = self.mailbox.attach(source);
    }

    /// Takes what handles asked since the last call, if anything.
    #[inline]
    pub(crate) fn take(&self) -> Option<Requests> {
        let requests = self.mailbox.take()?;
        self.waiting.store(0, Ordering::SeqCst);
        Some(requests)
    }

    /// The socket's send queue and the bytes waiting for write allowances, at a turn's end.
    #[inline]
    pub(crate) fn set_queued(&self, queued: usize, held: usize) {
        self.queued.store(queued, Ordering::Relaxed);
        self.held.store(held, Ordering::Relaxed);
    }

    pub(crate) fn set_closed(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn push(&self, f: impl FnOnce(&mut Requests)) {
        self.mailbox.post(f);
    }
}

/// A cheap, cloneable, `Send` handle to one UDP session (a peer of a server, or a client's
/// connection): send to the peer or close the session from any thread. Datagrams sent
/// through it leave from the session's socket at its next turn. Get one from
/// [`UdpSession::handle`](crate::UdpSession::handle) or a client handle.
#[derive(Debug, Clone)]
pub struct UdpSessionHandle {
    shared: Arc<UdpShared>,
    peer: SocketAddr,
    /// A client's connected socket sends without a destination.
    connected: bool,
}

impl UdpSessionHandle {
    pub(crate) fn new(shared: Arc<UdpShared>, peer: SocketAddr, connected: bool) -> Self {
        UdpSessionHandle {
            shared,
            peer,
            connected,
        }
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Queues one datagram to the peer (the payload is copied). A session with a write limit
    /// keeps it waiting for its allowance, as a send from a callback.
    ///
    /// # Errors
    /// [`SendError::TooLarge`] over the UDP maximum; [`SendError::Full`] when the socket's
    /// queue, or the bytes its sessions keep waiting for their write allowances, plus what
    /// handles queued would pass its limit; [`SendError::Closed`] once the socket is closed.
    pub fn send(&self, payload: &[u8]) -> Result<(), SendError> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(SendError::Closed);
        }
        let max = max_payload(&self.peer);
        if payload.len() > max {
            return Err(SendError::TooLarge {
                len: payload.len(),
                max,
            });
        }
        // The datagram joins the send queue, or waits for a write allowance if its session
        // has one: it must fit both budgets, as a handle cannot tell which.
        let waiting = shared.waiting.load(Ordering::SeqCst);
        for budget in [&shared.queued, &shared.held] {
            let queued = budget.load(Ordering::Relaxed) + waiting;
            if queued > 0 && queued + payload.len() > shared.send_limit {
                return Err(SendError::Full {
                    queued,
                    limit: shared.send_limit,
                });
            }
        }
        shared.waiting.fetch_add(payload.len(), Ordering::SeqCst);
        let to = (!self.connected).then_some(self.peer);
        shared.push(|r| r.datagrams.push_back((to, payload.to_vec())));
        Ok(())
    }

    /// Closes the session (`on_close(CloseReason::Local)`); a server makes a new one if the
    /// peer sends again.
    pub fn close(&self) {
        let peer = self.peer;
        self.shared.push(|r| r.closes.push(peer));
    }

    /// Sets the session's own rate limits at the socket's next turn, as
    /// [`UdpSession::set_rate_limits`](crate::UdpSession::set_rate_limits) (nothing happens if
    /// the session has ended).
    pub fn set_rate_limits(&self, limits: RateLimits) {
        let peer = self.peer;
        self.shared.push(|r| r.rate_limits.push((peer, limits)));
    }

    /// The session's stats, answered at the socket's next turn ([`Answer::wait`] on a
    /// thread, or `.await`): `None` if the session has ended, or
    /// [`AnswerDropped`](ark_reactor::AnswerDropped) if the socket closed before its turn.
    /// Never wait on the socket's own thread (in a callback use
    /// [`UdpSession::stats`](crate::UdpSession::stats)).
    pub fn stats(&self) -> Answer<Option<UdpSessionStats>> {
        let (answerer, answer) = ark_reactor::answer();
        if self.shared.closed.load(Ordering::SeqCst) {
            answerer.give(None);
            return answer;
        }
        let peer = self.peer;
        self.shared.push(|r| r.stats.push((peer, answerer)));
        answer
    }
}
