//! `TcpSessionHandle`: reach a session from any thread.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use ark_reactor::{EachWay, Mailbox, SourceRef};

use crate::encode::{EncodeInto, append_parts};
use crate::error::SendError;

const OPEN: u8 = 0;
const CLOSING: u8 = 1;
const CLOSED: u8 = 2;

/// What a handle asked of its session: applied on the session's thread at its next turn.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Encoded frames, in order.
    pub(crate) bytes: Vec<u8>,
    pub(crate) frames: u64,
    pub(crate) close: bool,
    pub(crate) abort: bool,
    /// `TcpHandler::on_wake` is owed.
    pub(crate) wake: bool,
    /// New rate limits of the session's own.
    pub(crate) rate_limits: Option<ark_reactor::RateLimits>,
}

/// The state a session shares with its handles.
pub(crate) struct TcpShared {
    id: u64,
    peer: SocketAddr,
    local: SocketAddr,
    encoder: Box<dyn EncodeInto + Send + Sync>,
    send_limit: usize,
    /// Bytes in the session's queue at its last turn.
    queued: AtomicUsize,
    state: AtomicU8,
    /// What handles ask; wakes where the session runs (no waker in a `Simulator`: it looks
    /// at the inbox itself).
    mailbox: Mailbox<Inbox>,
    /// The session's own counters: bytes in, bytes out, frames in, frames out (added once per
    /// turn).
    traffic: [AtomicU64; 4],
    /// Bytes a second in and out over the last whole second, and the send queue's delay in
    /// nanoseconds (`u64::MAX`: none measurable), published once per turn.
    rates: [AtomicU64; 3],
}

impl TcpShared {
    pub(crate) fn new(
        id: u64,
        (peer, local): (SocketAddr, SocketAddr),
        source: Option<SourceRef>,
        encoder: Box<dyn EncodeInto + Send + Sync>,
        send_limit: usize,
    ) -> Arc<TcpShared> {
        Arc::new(TcpShared {
            id,
            peer,
            local,
            encoder,
            send_limit,
            queued: AtomicUsize::new(0),
            state: AtomicU8::new(OPEN),
            mailbox: source.map_or_else(Mailbox::new, Mailbox::with_waker),
            traffic: Default::default(),
            rates: Default::default(),
        })
    }

    /// Publishes the session's rates (see `SessionRate::measure`).
    #[inline]
    pub(crate) fn set_rates(&self, rates: EachWay, queue_delay: Option<Duration>) {
        let delay = queue_delay.map_or(u64::MAX, |d| {
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
        });
        for (slot, value) in self
            .rates
            .iter()
            .zip([rates.inbound, rates.outbound, delay])
        {
            slot.store(value, Ordering::Relaxed);
        }
    }

    /// Adds a turn's counts to the session's own.
    #[inline]
    pub(crate) fn count(&self, tally: &crate::TcpStats) {
        let counts = [
            tally.bytes_in,
            tally.bytes_out,
            tally.frames_in,
            tally.frames_out,
        ];
        for (total, n) in self.traffic.iter().zip(counts) {
            if n > 0 {
                total.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Takes what handles left for the session, if anything.
    #[inline]
    pub(crate) fn take(&self) -> Option<Inbox> {
        self.mailbox.take()
    }

    /// Publishes the session's queue length (for the handles' `Full` check).
    #[inline]
    pub(crate) fn set_queued(&self, queued: usize) {
        self.queued.store(queued, Ordering::Relaxed);
    }

    /// The session is closing: handles' sends are refused from now on.
    #[inline]
    pub(crate) fn set_closing(&self) {
        let _ = self
            .state
            .compare_exchange(OPEN, CLOSING, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The session is gone; returns the bytes handles had queued that were not taken.
    pub(crate) fn set_closed(&self) -> usize {
        self.state.store(CLOSED, Ordering::SeqCst);
        self.mailbox.drain().bytes.len()
    }
}

/// A cheap, cloneable, `Send` handle to one TCP session: send to it, close or abort it, or
/// wake its handler, from any thread — another session's callbacks included. Requests reach
/// the session through its reactor (a wake); the session's own turns take no lock. Get one
/// from [`TcpSession::handle`](crate::TcpSession::handle), a server's
/// [`sessions`](crate::TcpServerHandle::sessions) or a client handle.
///
/// ```
/// use ark_tcp::{TcpSession, TcpConfig, Simulator, TcpHandler};
///
/// struct Quiet;
/// impl TcpHandler for Quiet {
///     fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
/// }
///
/// let mut sim = Simulator::with_handler(Quiet, TcpConfig::default());
/// let handle = sim.with_session(|_, session| session.handle());
/// std::thread::spawn(move || handle.send(b"from another thread").unwrap())
///     .join()
///     .unwrap();
/// sim.poll_handles();
/// assert_eq!(&sim.peer_read()[4..], b"from another thread");
/// ```
#[derive(Clone)]
pub struct TcpSessionHandle {
    shared: Arc<TcpShared>,
}

impl std::fmt::Debug for TcpSessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSessionHandle")
            .field("id", &self.shared.id)
            .field("peer", &self.shared.peer)
            .field("open", &self.is_open())
            .finish()
    }
}

/// A layer above a session (ark-ws) keeps its own [`Mailbox`] and wakes the session's
/// handler with its handle: [`TcpHandler::on_wake`](crate::TcpHandler::on_wake) runs.
impl ark_reactor::Wake for TcpSessionHandle {
    fn wake(&self) {
        TcpSessionHandle::wake(self);
    }
}

impl TcpSessionHandle {
    pub(crate) fn new(shared: Arc<TcpShared>) -> Self {
        TcpSessionHandle { shared }
    }

    /// The session's id (unique within its server or client).
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.shared.peer
    }

    /// The local address of the session's socket.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// Bytes the session had queued and not written at its last turn, plus what handles have
    /// queued since.
    pub fn queued_bytes(&self) -> usize {
        let inbox = self.shared.mailbox.peek(|inbox| inbox.bytes.len());
        self.shared.queued.load(Ordering::Relaxed) + inbox
    }

    /// Whether the session still takes sends (not closing or closed).
    pub fn is_open(&self) -> bool {
        self.shared.state.load(Ordering::SeqCst) == OPEN
    }

    /// Queues `payload` as one frame for the session, as [`TcpSession::send`] does: the frame is
    /// encoded here, and the session writes it at its next turn. `Ok` means queued: like any
    /// send, it is lost if the session ends before writing it.
    ///
    /// [`TcpSession::send`]: crate::TcpSession::send
    ///
    /// # Errors
    /// [`SendError::Closed`] once the session is closing or gone; [`SendError::Full`] when its
    /// queue (as of its last turn) plus what handles queued would pass the limit;
    /// [`SendError::Encode`] when the payload cannot be framed. Nothing is queued on error.
    pub fn send(&self, payload: &[u8]) -> Result<(), SendError> {
        if !self.is_open() {
            return Err(SendError::Closed);
        }
        let (header, trailer) = self.shared.encoder.frame(payload)?;
        let parts = [header.as_slice(), payload, trailer];
        let needed = parts.iter().map(|p| p.len()).sum();
        let shared = &self.shared;
        shared.mailbox.try_post(|inbox| {
            let queued = shared.queued.load(Ordering::Relaxed) + inbox.bytes.len();
            if queued > 0 && queued + needed > shared.send_limit {
                return Err(SendError::Full {
                    queued,
                    needed,
                    limit: shared.send_limit,
                });
            }
            append_parts(&mut inbox.bytes, &parts);
            inbox.frames += 1;
            Ok(())
        })
    }

    /// Closes the session gracefully (as [`TcpSession::close`](crate::TcpSession::close)), after
    /// what handles queued before.
    pub fn close(&self) {
        self.shared.set_closing();
        self.shared.mailbox.post(|inbox| inbox.close = true);
    }

    /// Closes the session at once, dropping what is queued (as
    /// [`TcpSession::abort`](crate::TcpSession::abort)).
    pub fn abort(&self) {
        self.shared.set_closing();
        self.shared.mailbox.post(|inbox| inbox.abort = true);
    }

    /// The session's counters (as of the end of its last turn).
    pub fn stats(&self) -> crate::TcpSessionStats {
        let [bytes_in, bytes_out, messages_in, messages_out] = self
            .shared
            .traffic
            .each_ref()
            .map(|n| n.load(Ordering::Relaxed));
        let [bytes_in_per_second, bytes_out_per_second, delay] = self
            .shared
            .rates
            .each_ref()
            .map(|n| n.load(Ordering::Relaxed));
        crate::TcpSessionStats {
            bytes_in,
            bytes_out,
            messages_in,
            messages_out,
            queued_bytes: self.shared.queued.load(Ordering::Relaxed) as u64,
            bytes_in_per_second,
            bytes_out_per_second,
            queue_delay: (delay != u64::MAX).then(|| Duration::from_nanos(delay)),
        }
    }

    /// Sets the session's own rate limits (each way; `None`: unlimited) from its next turn:
    /// see [`TcpSession::set_rate_limits`](crate::TcpSession::set_rate_limits).
    pub fn set_rate_limits(&self, limits: ark_reactor::RateLimits) {
        self.shared
            .mailbox
            .post(|inbox| inbox.rate_limits = Some(limits));
    }

    /// Gives the session's handler a turn: [`TcpHandler::on_wake`] runs on the session's
    /// thread (several wakes before it runs merge into one). For applications that pass work
    /// to a session their own way.
    ///
    /// [`TcpHandler::on_wake`]: crate::TcpHandler::on_wake
    pub fn wake(&self) {
        self.shared.mailbox.post(|inbox| inbox.wake = true);
    }
}
