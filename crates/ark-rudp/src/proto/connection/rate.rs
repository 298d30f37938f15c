//! A connection's rate limits (ark-reactor's [`Pace`]: its own buckets and its group's).
//!
//! Writes are paced: a DATA, PARITY or UNRELIABLE datagram (first transmission or
//! retransmission) that the write allowance does not cover waits, with its message in the send
//! buffer, and [`Connection::poll_timeout`] says when the tokens are there. Reads limit what
//! the peer may send: the window this end advertises is no larger than its read allowance in
//! fragments (the mean DATA datagram received), so the peer's sender slows down, and what
//! arrives within the window is taken. A window the read limit holds at zero gets an update
//! when a fragment's tokens are back, and opens by one fragment after [`ZERO_WINDOW_MAX`]
//! whatever the tokens, so that the peer's zero-window deadline never takes a rate-limited
//! session for one that takes nothing.
//!
//! A group ([`RateGroup`]) shares a bucket each way. Writes take from it in turn (a session
//! blocked by it wakes at a drawn instant, so none takes every datagram's worth first).
//! The read bucket is offered in shares: each session's peer is given at most the group's
//! allowance over the group's sessions whose peers sent data in the last
//! [`READER_SPAN`] (ENet divides a host's incoming bandwidth among its peers likewise), so
//! the peers together are never given more than the group holds; what one leaves unused
//! stays in the bucket, and the others' shares grow with it.
//!
//! What counts: every datagram after the handshake, whole (header and token; not the IP and
//! UDP headers), each way. ACKs, keep-alives, window probes and CLOSEs never wait (delaying
//! an acknowledgement would slow the peer and fake round trips) but spend tokens, and what
//! they take past the tokens is owed; so is what arrives past the read allowance.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ark_reactor::{
    Direction, EachWay, GroupLimits, Pace, RateLimitError, RateLimits, RateWindow, queue_delay,
};

use super::Connection;
use crate::config::RudpConfig;
use crate::proto::crypto::TAG_LEN;
use crate::proto::fec::Fec;
use crate::proto::packet::{AckBlock, DATA_HEADER, FEC_FIELDS, LANE_FIELDS, PARITY_HEADER, PREFIX};
use crate::proto::stats::RudpStats;

/// A window the read limit holds at zero opens by one fragment after this long, whatever the
/// tokens (the fragment is owed): a peer never sees a rate-limited window at zero for longer,
/// far inside its `zero_window_timeout` (30 s by default). So a session reads at least one
/// datagram a second, whatever its read limit.
pub(super) const ZERO_WINDOW_MAX: Duration = Duration::from_secs(1);

/// A session whose peer sent DATA within this long shares its group's read bucket.
pub(super) const READER_SPAN: Duration = Duration::from_secs(2);

/// Rate limits a group of sessions shares (a server's total), each way: one ark-reactor
/// [`GroupBucket`](ark_reactor::GroupBucket) per limited direction, and the count of the group's sessions whose
/// peers are sending, among which the read bucket is offered. Clones are the same group.
/// A server makes one from `RudpServerBuilder::group_rate_limits`; a sans-IO application
/// gives one to each of its connections ([`Connection::set_rate_group`]).
#[derive(Debug, Clone, Default)]
pub struct RateGroup {
    /// The group's buckets (ark-reactor's, as every ark server's group).
    limits: GroupLimits,
    /// Sessions whose peers sent DATA within [`READER_SPAN`].
    readers: Arc<AtomicUsize>,
}

impl RateGroup {
    /// A group with `limits` (`None`: that way unlimited, for good), its buckets full at
    /// `now`. A burst should hold the largest datagram (`RudpConfig::mtu` + 128 bytes; a
    /// server raises it to that): a datagram goes whole, so a smaller one is overdrawn.
    pub fn new(limits: RateLimits, now: Instant) -> RateGroup {
        RateGroup {
            limits: GroupLimits::new(limits, now),
            readers: Arc::default(),
        }
    }

    /// New limits for the group, from `now`: the tokens left are kept, up to the new burst.
    /// A direction that is `None` is lifted (its bucket stays, and never runs out).
    ///
    /// # Errors
    /// [`RateLimitError::NoGroupLimit`] when `limits` limits a direction the group was made
    /// without; nothing is changed then.
    pub fn set_limits(&self, limits: RateLimits, now: Instant) -> Result<(), RateLimitError> {
        self.limits.set_limits(limits, now)
    }

    /// Whether the group limits anything.
    pub fn is_limited(&self) -> bool {
        self.limits.is_limited()
    }
}

/// A session's place in its group's read bucket.
#[derive(Debug)]
struct Share {
    /// The group's read bucket alone (the session's `pace` spends from it).
    bucket: Direction,
    readers: Arc<AtomicUsize>,
    /// This session is counted in `readers`.
    counted: bool,
    last_data: Instant,
}

impl Share {
    /// The sessions the group's read bucket is shared by, this one among them, at `now`.
    fn divisor(&mut self, now: Instant) -> usize {
        if self.counted && now >= self.last_data + READER_SPAN {
            self.counted = false;
            self.readers.fetch_sub(1, Ordering::Relaxed);
        }
        let others =
            (self.readers.load(Ordering::Relaxed)).saturating_sub(usize::from(self.counted));
        others + 1
    }

    /// DATA arrived at `now`: counted as a reader.
    fn on_data(&mut self, now: Instant) {
        self.last_data = now;
        if !self.counted {
            self.counted = true;
            self.readers.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if self.counted {
            self.readers.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The rate-limit state of a connection.
#[derive(Debug)]
pub(super) struct Rates {
    pace: Pace,
    /// The session's own limits (bursts raised to a datagram).
    limits: RateLimits,
    /// The paced datagram due next waits for tokens until then.
    write_wake: Option<Instant>,
    /// A window update is due then: the read limit holds the advertised window at zero.
    read_wake: Option<Instant>,
    /// Since when the read limit holds the advertised window at zero (reset by each DATA
    /// datagram received).
    zero_since: Option<Instant>,
    /// A fragment of the window in bytes: the mean DATA datagram received, whole (1/16 of
    /// each new one: steady, since a window that shrinks strands credit already in flight).
    fragment: usize,
    window: RateWindow,
    /// Bytes a second over the last whole second: received, sent.
    rates: EachWay,
    /// Writes share a group's bucket.
    write_group: bool,
    /// The group's read bucket, if reads share one.
    share: Option<Share>,
    /// The state of the draws that spread a group's waiting sessions (splitmix64, seeded by
    /// the nonce).
    draw: u64,
}

impl Rates {
    /// `config.rate_limits`, from `now`, in no group; `nonce` seeds the draws.
    pub(super) fn new(config: &RudpConfig, now: Instant, nonce: u64) -> Rates {
        let limits = config.clamp_limits(config.rate_limits);
        Rates {
            pace: Pace::new(limits, &GroupLimits::default(), now),
            limits,
            write_wake: None,
            read_wake: None,
            zero_since: None,
            // The larger of the two suffixes (an encrypted session's tag).
            fragment: config.mtu + DATA_HEADER + TAG_LEN,
            window: RateWindow::default(),
            rates: EachWay::default(),
            write_group: false,
            share: None,
            draw: nonce,
        }
    }

    /// A group-blocked session's wake: the tokens are there at `at`; it wakes between `at`
    /// and `at` plus the wait again, drawn. Sessions of a group blocked until the same
    /// instant would otherwise wake in the same order each time, and the first would take
    /// every datagram's worth of tokens. Rate-neutral: the tokens wait in the bucket.
    fn spread(&mut self, now: Instant, at: Instant) -> Instant {
        self.draw = self.draw.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.draw;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let fraction = u128::from((z ^ (z >> 31)) >> 32);
        let wait = at.saturating_duration_since(now).as_nanos();
        at + Duration::from_nanos(((wait * fraction) >> 32) as u64)
    }

    /// Whether writes are limited (the one branch per datagram sent without limits).
    pub(super) fn paces_writes(&self) -> bool {
        self.pace.write.is_limited()
    }

    /// Whether reads are limited.
    pub(super) fn limits_reads(&self) -> bool {
        self.pace.read.is_limited()
    }

    /// When a paced datagram may go, or a window update is due.
    pub(super) fn deadline(&self) -> Option<Instant> {
        match (self.write_wake, self.read_wake) {
            (Some(w), Some(r)) => Some(w.min(r)),
            (w, r) => w.or(r),
        }
    }
}

/// Rate limits.
impl Connection {
    /// This connection's own rate limits, each way (bursts as applied: at least the largest
    /// datagram, `RudpConfig::mtu` + 128 bytes).
    pub fn rate_limits(&self) -> RateLimits {
        self.rates.limits
    }

    /// New rate limits of this connection's own (its group's stay), from `now`: the tokens
    /// left are kept, up to the new burst; a burst under the largest datagram is raised to
    /// it. The peer hears the read limit's window at the next transmit.
    pub fn set_rate_limits(&mut self, limits: RateLimits, now: Instant) {
        let limits = self.config.clamp_limits(limits);
        self.rates.limits = limits;
        self.rates.pace.set_limits(limits, now);
        self.rates.write_wake = None;
        self.rates.read_wake = None;
        self.ack_pending = true;
    }

    /// Puts this connection in `group` (a server's total), whose limits apply on top of the
    /// connection's own. Its own buckets start full again: call it before traffic.
    pub fn set_rate_group(&mut self, group: &RateGroup, now: Instant) {
        let r = &mut self.rates;
        r.write_group = group.limits.limits_write();
        r.share = group.limits.limits_read().then(|| Share {
            bucket: Pace::new(RateLimits::default(), &group.limits.read_only(), now).read,
            readers: group.readers.clone(),
            counted: false,
            last_data: now,
        });
        // The group's read window goes to the peer at the next transmit.
        self.ack_pending |= r.share.is_some();
        r.pace = Pace::new(r.limits, &group.limits, now);
        r.write_wake = None;
    }

    /// Whether the paced datagram due next may go now (`data`: the fragment `next_to_send`
    /// chose, when no parity comes first); if not, when it may is kept for `poll_timeout`.
    /// A blocked connection tries again at that time, not before (transmits in between, for
    /// acknowledgements, would let the session of a group that just sent, whose peer
    /// acknowledges, take every datagram's worth of tokens first).
    pub(super) fn write_allowed(&mut self, data: Option<u64>, now: Instant) -> bool {
        if self.rates.write_wake.is_some_and(|at| now < at) {
            return false;
        }
        self.rates.write_wake = None;
        let fec = if self.config.fec == Fec::Off {
            0
        } else {
            FEC_FIELDS
        };
        let size = match (self.fec_tx.parity.front(), data) {
            (Some(parity), _) => PARITY_HEADER + parity.4.len(),
            (None, Some(seq)) => self
                .send
                .get(seq)
                .map_or(0, |o| DATA_HEADER + fec + o.data.len()),
            (None, None) => self.unreliable.front().map_or(0, |(lane, m)| {
                PREFIX + m.len() + lane.map_or(0, |_| LANE_FIELDS)
            }),
        };
        if size == 0 {
            return true;
        }
        let size = size + self.suffix_len();
        let write = &mut self.rates.pace.write;
        if write.allowance(now) >= size {
            return true;
        }
        // `None`: the tokens are there (another session of the group may have taken them
        // between the two calls): go.
        let Some(at) = write.blocked_until(size, now) else {
            return true;
        };
        let at = if self.rates.write_group {
            self.rates.spread(now, at)
        } else {
            at
        };
        self.rates.write_wake = Some(at);
        false
    }

    /// A datagram of `len` bytes (whole) sent at `now`: counted, and spent.
    pub(super) fn count_sent(&mut self, len: usize, now: Instant) {
        self.stats.bytes_sent += len as u64;
        if self.rates.paces_writes() {
            self.rates.pace.write.spend(len);
        }
        self.record_rates(now);
    }

    /// The rates each way over the last whole second, from the byte totals at `now`.
    fn record_rates(&mut self, now: Instant) {
        let totals = EachWay {
            inbound: self.stats.bytes_received,
            outbound: self.stats.bytes_sent,
        };
        self.rates.rates = self.rates.window.record(totals, now);
    }

    /// An authenticated, fresh datagram of `len` bytes (whole) received at `now` (`data`: a
    /// DATA one): counted, and spent.
    pub(super) fn count_received(&mut self, len: usize, data: bool, now: Instant) {
        self.stats.bytes_received += len as u64;
        let r = &mut self.rates;
        if r.limits_reads() {
            r.pace.read.spend(len);
            if data {
                r.fragment = (r.fragment * 15 + len) / 16;
                r.zero_since = None;
                if let Some(share) = &mut r.share {
                    share.on_data(now);
                }
            }
        }
        self.record_rates(now);
    }

    /// The read limit on the window `ack` advertises: no more fragments than the read
    /// allowance holds (and than this session's share of its group's). A window it holds at
    /// zero gets an update when the tokens are back, and opens by one after
    /// [`ZERO_WINDOW_MAX`] whatever the tokens.
    pub(super) fn limit_window(&mut self, ack: &mut AckBlock, now: Instant) {
        let r = &mut self.rates;
        r.read_wake = None;
        let per = r.fragment.max(1);
        let mut allowed = r.pace.read.allowance(now) / per;
        let mut tokens = r.pace.read.blocked_until(per, now);
        if let Some(share) = &mut r.share {
            let want = per * share.divisor(now);
            allowed = allowed.min(share.bucket.allowance(now) / want);
            tokens = tokens.max(share.bucket.blocked_until(want, now));
        }
        if allowed == 0 && tokens.is_none() {
            allowed = 1; // full buckets smaller than a fragment (a share): one at a time
        }
        if allowed > 0 {
            r.zero_since = None;
            ack.window = ack.window.min(allowed.min(usize::from(u16::MAX)) as u16);
            return;
        }
        if ack.window == 0 {
            return; // held by the application, not the limit
        }
        let since = *r.zero_since.get_or_insert(now);
        let floor = since + ZERO_WINDOW_MAX;
        if now >= floor {
            ack.window = 1;
            return;
        }
        ack.window = 0;
        let mut at = tokens.unwrap_or(floor);
        if r.share.is_some() {
            at = r.spread(now, at); // the group's sessions reopen in turn
        }
        r.read_wake = Some(at.min(floor));
    }

    /// Time passed: a window update due (the read limit's window reopens).
    pub(super) fn on_rate_timeout(&mut self, now: Instant) {
        if self.rates.read_wake.is_some_and(|t| t <= now) {
            self.rates.read_wake = None;
            self.ack_pending = true;
        }
    }

    /// The rates and the send queue's delay, into `stats`.
    pub(super) fn rate_stats(&self, stats: &mut RudpStats) {
        (stats.receive_rate, stats.send_rate) =
            (self.rates.rates.inbound, self.rates.rates.outbound);
        let unreliable: usize = self.unreliable.iter().map(|(_, m)| m.len()).sum();
        let queued = (self.send.unsent_bytes + unreliable) as u64;
        let rate = self
            .rates
            .limits
            .write
            .map_or(self.rates.rates.outbound, |l| l.bytes_per_second);
        stats.send_queue_delay = queue_delay(queued, rate);
    }
}
