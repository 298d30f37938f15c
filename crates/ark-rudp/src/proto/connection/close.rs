//! How a connection ends: a graceful close or stop (what was queued is delivered, then a CLOSE
//! repeated until answered), the peer's CLOSE (answered, and answered again while draining),
//! abrupt ends (timeouts, protocol violations: reported at once, their CLOSE repeated too),
//! and the zero-window deadline.

use std::time::{Duration, Instant};

use super::{CloseReason, Connection, Event, Protection, State};

/// CLOSE code: an orderly close.
pub(super) const CLOSE_NORMAL: u8 = 0;
/// A CLOSE goes at most this many times before the close is given up as unanswered.
const CLOSE_SENDS: u32 = 5;
/// Repeated CLOSEs are the RTO apart, doubling, but never more than this.
const CLOSE_INTERVAL_MAX: Duration = Duration::from_millis(500);
/// A connection the peer closed answers its repeated CLOSEs for 15 RTOs (the span of the
/// peer's repeats, if its RTO is ours), at most this long.
const DRAIN_MAX: Duration = Duration::from_secs(2);

/// The peer's window is zero while data waits (see [`Connection::update_persist`]).
#[derive(Debug, Clone)]
pub(super) struct Persist {
    since: Instant,
    next_probe: Instant,
    probes: u32,
    /// A probe is due at the next transmit.
    due: bool,
}

impl Persist {
    /// Whether a probe is due (then no longer).
    pub(super) fn take_probe(&mut self) -> bool {
        std::mem::take(&mut self.due)
    }

    /// When something happens next: a probe, or the end (`timeout` after it began).
    pub(super) fn deadline(&self, timeout: Duration) -> Instant {
        self.next_probe.min(self.since + timeout)
    }
}

impl Connection {
    /// Closes the connection gracefully: sends are refused from now on; what was queued is
    /// sent, and repeated, until the peer acknowledged all of it or `RudpConfig::close_timeout`
    /// passed; then a CLOSE goes, repeated until the peer answers (at most 5 times). Then
    /// [`Event::Closed`] with [`CloseReason::Local`], or [`CloseReason::Cut`] if the deadline
    /// cut data. Before the handshake finished: closed at once.
    pub fn close(&mut self, now: Instant) {
        self.finish(now, CloseReason::Local);
    }

    /// As [`close`](Self::close), for a server or client that stops: the event says
    /// [`CloseReason::Stopped`] (or `Cut` around it).
    pub fn stop(&mut self, now: Instant) {
        self.finish(now, CloseReason::Stopped);
    }

    fn finish(&mut self, now: Instant, reason: CloseReason) {
        match self.state {
            State::Handshaking { .. } => self.close_now(now, reason, false),
            State::Established => {
                let deadline = now + self.config.close_timeout;
                self.state = State::Finishing { reason, deadline };
                self.progress_close(now);
            }
            _ => {}
        }
    }

    /// Ends at once with `reason`, reported now; what was queued is dropped and counted as
    /// cut. With `send_close` (and a peer that can authenticate it) a CLOSE goes, repeated
    /// until answered as a graceful close's is.
    pub(super) fn close_now(&mut self, now: Instant, reason: CloseReason, send_close: bool) {
        if matches!(
            self.state,
            State::Closed | State::Draining { .. } | State::CloseSent { reason: None, .. }
        ) {
            return;
        }
        let handshaking = matches!(self.state, State::Handshaking { .. });
        self.drop_queued();
        self.state =
            if send_close && !handshaking && !matches!(self.protection, Protection::Pending) {
                State::CloseSent {
                    reason: None,
                    sent: 0,
                    next: now,
                }
            } else {
                State::Closed
            };
        self.events.push_back(Event::Closed(reason));
    }

    /// An abrupt end noticed at `now` (a timeout, a protocol violation): reported at once, a
    /// CLOSE to the peer (repeated until answered).
    pub(super) fn abort(&mut self, now: Instant, reason: CloseReason) {
        if matches!(reason, CloseReason::ZeroWindow(_)) {
            self.stats.zero_window_closes += 1;
        }
        self.close_now(now, reason, true);
    }

    /// Frees the send side: what was queued and not acknowledged is counted as cut.
    fn drop_queued(&mut self) -> usize {
        let bytes = self.send.clear();
        self.unreliable.clear();
        self.stats.cut_bytes += bytes as u64;
        self.persist = None;
        self.rto_deadline = None;
        bytes
    }

    /// The peer's CLOSE (`answer`: its answer to ours) arrived at `now`.
    pub(super) fn on_close(&mut self, now: Instant, answer: bool) {
        let reason = match &mut self.state {
            State::CloseSent { reason, .. } => reason.take(),
            State::Closed | State::Draining { .. } => return,
            _ if answer => return, // an answer to a CLOSE never sent
            _ => Some(CloseReason::PeerClosed),
        };
        if answer {
            self.state = State::Closed;
            self.events.extend(reason.map(Event::Closed));
            return;
        }
        // The peer closed (or both closed at once): what it sent is delivered, the CLOSE
        // answered, and answered again while its repeats may come.
        self.drop_queued();
        self.close_out = Some(true);
        let drain = (self.rtt.rto() * 15).min(DRAIN_MAX);
        self.state = State::Draining { until: now + drain };
        self.events.extend(reason.map(Event::Closed));
    }

    /// The steps of a graceful close at `now`: from finishing to the CLOSE once everything
    /// was acknowledged or the deadline passed; the CLOSE's repeats; giving up.
    pub(super) fn progress_close(&mut self, now: Instant) {
        if let State::Finishing { reason, deadline } = &self.state {
            let done = self.send.is_empty() && self.unreliable.is_empty();
            if !done && now < *deadline {
                return;
            }
            let mut reason = reason.clone();
            let bytes = self.drop_queued();
            if !done {
                let timeout = self.config.close_timeout;
                let cause = Box::new(reason);
                reason = CloseReason::Cut {
                    cause,
                    bytes,
                    timeout,
                };
            }
            self.state = State::CloseSent {
                reason: Some(reason),
                sent: 0,
                next: now,
            };
        }
        let rto = self.rtt.rto();
        if let State::CloseSent { reason, sent, next } = &mut self.state
            && now >= *next
        {
            if *sent >= CLOSE_SENDS {
                let reason = reason.take();
                self.stats.closes_unanswered += 1;
                self.state = State::Closed;
                self.events.extend(reason.map(Event::Closed));
                return;
            }
            self.stats.close_retries += u64::from(*sent > 0);
            *next = now + (rto * (1 << (*sent).min(8))).min(CLOSE_INTERVAL_MAX);
            *sent += 1;
            self.close_out = Some(false);
        }
    }

    /// When the close's next step is due.
    pub(super) fn close_deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Finishing { deadline, .. } => Some(*deadline),
            State::CloseSent { next, .. } => Some(*next),
            _ => None,
        }
    }

    /// Starts or ends the zero-window watch: data waits, nothing is in flight, and the peer's
    /// window admits nothing.
    pub(super) fn update_persist(&mut self, now: Instant) {
        let open = matches!(self.state, State::Established | State::Finishing { .. });
        if !open || !self.send.window_closed() {
            self.persist = None;
        } else if self.persist.is_none() {
            self.persist = Some(Persist {
                since: now,
                next_probe: now + self.rtt.rto(),
                probes: 0,
                due: false,
            });
        }
    }

    /// The zero-window watch at `now`: a probe when due (the RTO apart, doubling up to
    /// `max_rto`), the end past `zero_window_timeout`. Whether the connection ended.
    pub(super) fn persist_expired(&mut self, now: Instant) -> bool {
        self.update_persist(now);
        let timeout = self.config.zero_window_timeout;
        let (rto, max) = (self.rtt.rto(), self.config.max_rto);
        let Some(p) = &mut self.persist else {
            return false;
        };
        if now >= p.since + timeout {
            self.abort(now, CloseReason::ZeroWindow(timeout));
            return true;
        }
        if now >= p.next_probe {
            p.due = true;
            p.probes += 1;
            p.next_probe = now + (rto * (1 << p.probes.min(16))).min(max.max(rto));
        }
        false
    }
}
