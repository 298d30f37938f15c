//! What a handler sees: `UdpSession`, `UdpHandler` (its errors and close reasons are in
//! `error.rs`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_reactor::{Deadlines, RateLimits, TimerId, TimerSlot};

use crate::error::{CloseReason, DatagramError, SendError};
use crate::handle::{UdpSessionHandle, UdpShared};
use crate::limits::max_payload;
use crate::proto::batch::SendBatch;
use crate::proto::rate::{Released, SessionRate};
use crate::stats::UdpSessionStats;

/// Deadlines, each owned by a session: `(peer, serial)`, so a deadline of a closed session
/// never reaches a later session of the same peer.
#[derive(Debug, Default)]
pub(crate) struct OwnedDeadlines {
    deadlines: Deadlines,
    owners: HashMap<TimerId, (SocketAddr, u64)>,
}

impl OwnedDeadlines {
    pub(crate) fn set(&mut self, at: Instant, owner: (SocketAddr, u64)) -> TimerId {
        let timer = self.deadlines.insert(at);
        self.owners.insert(timer, owner);
        timer
    }

    fn cancel(&mut self, timer: TimerId) -> bool {
        self.owners.remove(&timer);
        self.deadlines.cancel(timer)
    }

    /// The earliest deadline.
    #[inline]
    fn earliest(&self) -> Option<Instant> {
        self.deadlines.earliest()
    }

    /// A deadline due at `now`, with its owner.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(TimerId, (SocketAddr, u64))> {
        let timer = self.deadlines.pop_due(now)?;
        let owner = self.owners.remove(&timer)?;
        Some((timer, owner))
    }
}

/// The timers of a socket's sessions: their handlers' timers, the wake-ups of datagrams
/// waiting for a write allowance, a client's end of a read pause, and the socket's one
/// reactor timer at the earliest of them.
#[derive(Debug, Default)]
pub(crate) struct SessionTimers {
    /// The handlers' timers.
    pub(crate) handlers: OwnedDeadlines,
    /// When sessions' waiting datagrams may leave.
    pub(crate) releases: OwnedDeadlines,
    /// When a client's or cast socket's paused reading may go on.
    pub(crate) read_resume: Option<Instant>,
    pub(crate) slot: TimerSlot,
}

impl SessionTimers {
    /// The earliest deadline.
    #[inline]
    pub(crate) fn earliest(&self) -> Option<Instant> {
        let handlers = self.handlers.earliest();
        let releases = self.releases.earliest();
        [handlers, releases, self.read_resume]
            .into_iter()
            .flatten()
            .min()
    }
}

/// What every session view of a socket lends: the send queue, the timers, the handles' state,
/// the turn's time and counts.
pub(crate) struct SessionIo {
    pub(crate) out: SendBatch,
    pub(crate) timers: SessionTimers,
    pub(crate) shared: Arc<UdpShared>,
    pub(crate) send_limit: usize,
    pub(crate) now: Instant,
    pub(crate) datagrams_out: u64,
    /// Bytes waiting for sessions' write allowances (every session of the socket), bounded by
    /// `send_limit` apart from the send queue.
    pub(crate) held_bytes: usize,
    /// Datagrams that waited for a write allowance, since the driver last took the count.
    pub(crate) rate_delayed: u64,
    /// Where `send_with` writes a datagram a write rate limit may hold back (reused).
    pub(crate) scratch: Vec<u8>,
}

/// A handler's view of its peer during a callback.
pub struct UdpSession<'a> {
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) connected: bool,
    /// The session's serial (its timers carry it).
    pub(crate) serial: u64,
    pub(crate) io: &'a mut SessionIo,
    /// The receive batch's buffer while its datagrams are delivered (empty otherwise): a
    /// datagram sent back unchanged from it is queued by its place there, not copied.
    pub(crate) received: &'a [u8],
    /// The session's rate limits, waiting datagrams and counters.
    pub(crate) rate: &'a mut SessionRate,
}

impl std::fmt::Debug for UdpSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSession")
            .field("peer", &self.peer)
            .finish_non_exhaustive()
    }
}

/// Where `part` lies in `buf`, if it is a slice of it (only addresses are compared).
fn offset_in(buf: &[u8], part: &[u8]) -> Option<usize> {
    let offset = (part.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
    (offset.checked_add(part.len())? <= buf.len()).then_some(offset)
}

impl UdpSession<'_> {
    /// The peer's address (the session's key).
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The local address of the socket serving the session.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Queues one datagram to the peer. Datagrams queued during a readiness turn go out
    /// together at its end (one `sendmmsg` per batch when batching is on), or before the
    /// socket's next receive call. A datagram sent back unchanged from `on_message` (an echo)
    /// is not copied: it is sent from where it was received.
    ///
    /// # Errors
    /// [`SendError::TooLarge`] over the UDP maximum for the address family (never truncated);
    /// [`SendError::Full`] when the queue is at its limit.
    pub fn send(&mut self, payload: &[u8]) -> Result<(), SendError> {
        let peer = self.peer;
        self.queue(peer, payload)
    }

    /// Queues one datagram to any address (unconnected sockets: servers and [`UdpCast`]).
    /// Broadcast and multicast destinations work only where the socket enabled them.
    ///
    /// [`UdpCast`]: crate::UdpCast
    ///
    /// # Errors
    /// As [`send`](Self::send), plus [`SendError::Connected`] on a client's connected socket.
    pub fn send_to(&mut self, to: std::net::SocketAddr, payload: &[u8]) -> Result<(), SendError> {
        if self.connected {
            return Err(SendError::Connected);
        }
        self.queue(to, payload)
    }

    /// Queues the datagram `write` writes, in place in the socket's send queue (no copy), to
    /// `to` (`None`: the connected peer). `write` gets up to `max` bytes and returns the
    /// datagram's length (0: none, nothing queued). The protocol-on-top's call: a sealed
    /// datagram is written once, where it leaves from. Under a write rate limit that holds
    /// it back the datagram is written to a scratch buffer and waits (copied) as
    /// [`send`](Self::send)'s would.
    ///
    /// # Errors
    /// [`SendError::TooLarge`] when `max` is over the UDP maximum for the address;
    /// [`SendError::Full`] when the queue has no room for `max` more bytes;
    /// [`SendError::Connected`] for an address on a client's connected socket. `write` is
    /// not called then.
    pub fn send_with(
        &mut self,
        to: Option<SocketAddr>,
        max: usize,
        write: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<usize, SendError> {
        if self.connected && to.is_some() {
            return Err(SendError::Connected);
        }
        let addr = to.unwrap_or(self.peer);
        let limit = max_payload(&addr);
        if max > limit {
            return Err(SendError::TooLarge {
                len: max,
                max: limit,
            });
        }
        let to = (!self.connected).then_some(addr);
        if self.rate.write_limited() {
            let mut scratch = std::mem::take(&mut self.io.scratch);
            scratch.resize(max, 0);
            let len = write(&mut scratch).min(max);
            let queued = if len > 0 {
                self.queue(addr, &scratch[..len])
            } else {
                Ok(())
            };
            self.io.scratch = scratch;
            return queued.map(|()| len);
        }
        self.check_room(max)?;
        let len = self.io.out.push_with(to, max, write);
        if len > 0 {
            self.io.datagrams_out += 1;
            self.rate.send_now(len, self.io.now);
        }
        Ok(len)
    }

    /// Queues `payload` as a train of datagrams of `segment` bytes each (the last may be
    /// shorter) to the peer: with GSO (see [`UdpConfig::gso`]) they leave as messages of up
    /// to 64 datagrams that the kernel cuts, otherwise datagram by datagram. The peer
    /// receives the same datagrams either way. The bulk sender's call: one call and one copy
    /// for a whole window of fragments.
    ///
    /// [`UdpConfig::gso`]: crate::UdpConfig::gso
    ///
    /// # Errors
    /// [`SendError::TooLarge`] when `segment` is 0 or over the UDP maximum;
    /// [`SendError::Full`] when the whole train does not fit the queue (nothing is queued).
    pub fn send_train(&mut self, payload: &[u8], segment: usize) -> Result<(), SendError> {
        let peer = self.peer;
        self.queue_train(peer, payload, segment)
    }

    /// [`send_train`](Self::send_train) to any address (unconnected sockets).
    ///
    /// # Errors
    /// As [`send_train`](Self::send_train), plus [`SendError::Connected`] on a client's
    /// connected socket.
    pub fn send_train_to(
        &mut self,
        to: SocketAddr,
        payload: &[u8],
        segment: usize,
    ) -> Result<(), SendError> {
        if self.connected {
            return Err(SendError::Connected);
        }
        self.queue_train(to, payload, segment)
    }

    fn queue_train(
        &mut self,
        to: SocketAddr,
        payload: &[u8],
        segment: usize,
    ) -> Result<(), SendError> {
        let max = max_payload(&to);
        if segment == 0 || segment > max {
            return Err(SendError::TooLarge { len: segment, max });
        }
        self.check_room(payload.len())?;
        let to = (!self.connected).then_some(to);
        if self.rate.write_limited() {
            // The whole train may have to wait: it must fit both budgets.
            self.check_wait_room(payload.len())?;
            for datagram in payload.chunks(segment) {
                if self.rate.may_send_now(datagram.len(), self.io.now) {
                    self.push_now(to, datagram, false);
                } else {
                    self.hold(to, datagram);
                }
            }
            return Ok(());
        }
        for datagram in payload.chunks(segment) {
            self.push_now(to, datagram, false);
        }
        Ok(())
    }

    /// The time of the current turn (the reactor's clock, read once per turn): what a
    /// protocol on top takes as "now" instead of reading the clock per datagram.
    pub fn now(&self) -> Instant {
        self.io.now
    }

    /// Refuses `len` more bytes when the send queue holds some and they would take it past its
    /// limit (an empty queue takes any datagram, so one larger than the limit still goes).
    fn check_room(&self, len: usize) -> Result<(), SendError> {
        let queued = self.io.out.bytes();
        if queued > 0 && queued + len > self.io.send_limit {
            return Err(SendError::Full {
                queued,
                limit: self.io.send_limit,
            });
        }
        Ok(())
    }

    /// Refuses `len` more bytes to wait for a write allowance when some wait and they would
    /// take the socket's waiting bytes past the send-queue limit (a budget of its own, apart
    /// from the send queue's).
    fn check_wait_room(&self, len: usize) -> Result<(), SendError> {
        let waiting = self.io.held_bytes;
        if waiting > 0 && waiting + len > self.io.send_limit {
            return Err(SendError::Full {
                queued: waiting,
                limit: self.io.send_limit,
            });
        }
        Ok(())
    }

    fn queue(&mut self, to: SocketAddr, payload: &[u8]) -> Result<(), SendError> {
        let max = max_payload(&to);
        if payload.len() > max {
            return Err(SendError::TooLarge {
                len: payload.len(),
                max,
            });
        }
        let to = (!self.connected).then_some(to);
        if self.rate.write_limited() && !self.rate.may_send_now(payload.len(), self.io.now) {
            self.check_wait_room(payload.len())?;
            self.hold(to, payload);
            return Ok(());
        }
        self.check_room(payload.len())?;
        self.push_now(to, payload, true);
        Ok(())
    }

    /// Puts a datagram in the socket's send queue (`by_place`: by its place in the receive
    /// batch if it lies there, not copied).
    #[inline]
    fn push_now(&mut self, to: Option<SocketAddr>, payload: &[u8], by_place: bool) {
        match offset_in(self.received, payload).filter(|_| by_place) {
            Some(offset) => self.io.out.push_received(to, offset, payload.len()),
            None => self.io.out.push(to, payload),
        }
        self.io.datagrams_out += 1;
        self.rate.send_now(payload.len(), self.io.now);
    }

    /// Keeps a datagram waiting for the write allowance, and sets the session's wake-up if it
    /// had none.
    fn hold(&mut self, to: Option<SocketAddr>, payload: &[u8]) {
        self.io.held_bytes += payload.len();
        self.io.datagrams_out += 1;
        self.io.rate_delayed += 1;
        if let Some(at) = self.rate.hold(to, payload, self.io.now) {
            self.io.timers.releases.set(at, (self.peer, self.serial));
        }
    }

    /// A handle's datagram (its size checked by the handle): into the send queue, or to
    /// wait for the write allowance.
    pub(crate) fn queue_from_handle(&mut self, to: Option<SocketAddr>, payload: &[u8]) {
        if self.rate.may_send_now(payload.len(), self.io.now) {
            self.push_now(to, payload, false);
        } else {
            self.hold(to, payload);
        }
    }

    /// The session's wake-up for its waiting datagrams: what the allowance covers leaves.
    pub(crate) fn release(&mut self) {
        let released = self.rate.release(self.io.now, &mut self.io.out);
        self.released(released);
    }

    /// Every waiting datagram leaves, whatever the allowance.
    pub(crate) fn release_all(&mut self) {
        self.io.held_bytes -= self.rate.release_all(self.io.now, &mut self.io.out);
    }

    /// Datagrams left the wait: the socket's count of waiting bytes follows, and the next
    /// wake-up is set.
    fn released(&mut self, released: Released) {
        self.io.held_bytes -= released.bytes;
        if let Some(at) = released.next {
            self.io.timers.releases.set(at, (self.peer, self.serial));
        }
    }

    /// Sets this session's own rate limits from now, each way (`None`: unlimited); a
    /// server's group limits still apply. A new limit starts with a full bucket unless the
    /// direction was limited already (its tokens are kept, up to the new burst). Datagrams
    /// waiting for the write allowance leave as the new one covers them (all at once when no
    /// write limit is left). See docs/udp.md, "Rate limits".
    pub fn set_rate_limits(&mut self, limits: RateLimits) {
        let released = self.rate.set_limits(limits, self.io.now, &mut self.io.out);
        self.released(released);
    }

    /// This session's own rate limits (the builder's `rate_limits` unless set since).
    pub fn rate_limits(&self) -> RateLimits {
        self.rate.limits()
    }

    /// This session's counters, rates (bytes a second each way over the last whole second)
    /// and what waits for its write allowance.
    pub fn stats(&mut self) -> UdpSessionStats {
        self.rate.stats(self.io.now)
    }

    /// A handle to this session, to send to its peer or close it from anywhere.
    pub fn handle(&self) -> UdpSessionHandle {
        UdpSessionHandle::new(self.io.shared.clone(), self.peer, self.connected)
    }

    /// Starts a timer: [`UdpHandler::on_timer`] runs with its id once `after` has passed
    /// (one-shot; set it again to repeat — a retransmission, say). Timers end with the session.
    pub fn set_timer(&mut self, after: Duration) -> TimerId {
        let at = self.io.now + after;
        self.io.timers.handlers.set(at, (self.peer, self.serial))
    }

    /// Cancels a timer of this session; `true` if it was pending.
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.io.timers.handlers.cancel(timer)
    }
}

/// The callbacks of a UDP session (one peer). One handler value per session; callbacks run on
/// the thread serving the socket, never two at once.
pub trait UdpHandler: Send + 'static {
    /// The first datagram from this peer arrived (server), or the client socket is ready.
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        let _ = session;
    }

    /// A whole datagram arrived (empty datagrams included). The slice is lent for this call.
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]);

    /// A timer set with [`UdpSession::set_timer`] fired.
    fn on_timer(&mut self, session: &mut UdpSession<'_>, timer: TimerId) {
        let _ = (session, timer);
    }

    /// The server or client is stopping: the last moment to send a goodbye (it leaves before
    /// the socket closes); `on_close(Stopped)` follows (for a handler that
    /// [`lingers`](Self::lingers), once it is done).
    fn on_stopping(&mut self, session: &mut UdpSession<'_>) {
        let _ = session;
    }

    /// The server or client drains (`drain` on its handle): the moment to tell the peer to
    /// finish. Plain UDP has no end of a conversation to wait for: the socket closes after
    /// this, unless a client's or cast socket's handler [`lingers`](Self::lingers); at the
    /// drain's deadline the stop follows (`on_stopping`).
    fn on_drain(&mut self, session: &mut UdpSession<'_>) {
        let _ = session;
    }

    /// Client and cast sockets: while the socket drains or stops, whether this handler still
    /// has work under way — a protocol on UDP that delivers what it accepted (reliable UDP,
    /// retransmitting until acknowledged) or waits for its peers to finish. While it says so
    /// the socket goes on (datagrams, timers, wakes, turn ends); it closes at the first turn
    /// after it says no, or at the stop's deadline. Asked after every turn of a draining or
    /// stopping socket. Default `false`: the socket closes at once.
    fn lingers(&self) -> bool {
        false
    }

    /// Client and cast sockets: the turn is ending and what was queued is about to leave
    /// (after a batch of `on_message` calls, a timer or a wake). The place to send what a
    /// whole batch produced — one acknowledgement for the batch, say.
    fn on_turn_end(&mut self, session: &mut UdpSession<'_>) {
        let _ = session;
    }

    /// Client and cast sockets: woken from another thread by [`UdpSocketHandle::wake`] (or a
    /// [`UdpWaker`]); runs on the socket's thread.
    ///
    /// [`UdpSocketHandle::wake`]: crate::UdpSocketHandle::wake
    /// [`UdpWaker`]: crate::UdpWaker
    fn on_wake(&mut self, session: &mut UdpSession<'_>) {
        let _ = session;
    }

    /// A datagram from this peer could not be delivered whole.
    fn on_datagram_error(&mut self, session: &mut UdpSession<'_>, error: &DatagramError) {
        let _ = (session, error);
    }

    /// The session ended.
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = reason;
    }
}
