//! Rate limits: a [`TokenBucket`] per session and direction (sans-IO: time in, allowance and
//! the instant of the next tokens out), a [`GroupBucket`] shared by the sessions of a group (a
//! server's total), and [`Pace`], the two directions of one session with its group's, which
//! every ark transport applies the same way — reads take no more than the allowance and pause
//! until tokens come back (a timer, no busy loop, nothing buffered past what was read); writes
//! leave what is over the allowance queued, under the transport's usual backpressure.
//! libevent's `bufferevent_ratelim` and ENet's bandwidth limits are the models.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

const NANOS: u128 = 1_000_000_000;

/// A rate: `bytes_per_second` on average, with bursts of up to `burst` bytes (the bucket's
/// size: what a session that was idle may send or read at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Bytes per second (at least 1).
    pub bytes_per_second: u64,
    /// The most bytes at once (at least 1).
    pub burst: u64,
}

impl RateLimit {
    /// `bytes_per_second`, with a burst of a tenth of a second's worth (at least 16 KiB: a
    /// TLS record, a large datagram's worth).
    pub fn new(bytes_per_second: u64) -> RateLimit {
        RateLimit {
            bytes_per_second: bytes_per_second.max(1),
            burst: (bytes_per_second / 10).max(16 * 1024),
        }
    }

    /// The same rate with a burst of `burst` bytes.
    pub fn with_burst(mut self, burst: u64) -> RateLimit {
        self.burst = burst.max(1);
        self
    }
}

/// Rate limits of a session (or a group of sessions), each way; `None`: unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Bytes received (read from the socket).
    pub read: Option<RateLimit>,
    /// Bytes sent (written to the socket).
    pub write: Option<RateLimit>,
}

impl RateLimits {
    /// Both directions limited to `bytes_per_second` (default bursts).
    pub fn both(bytes_per_second: u64) -> RateLimits {
        let limit = Some(RateLimit::new(bytes_per_second));
        RateLimits {
            read: limit,
            write: limit,
        }
    }
}

/// A token bucket: `burst` tokens at most, refilled at `bytes_per_second`; one token a byte.
/// Sans-IO: every call takes the time. Exact over any span (whole tokens are added and the
/// clock advanced by exactly their time, so no rounding accumulates). Bytes taken past the
/// tokens there (bytes that could not wait: a datagram that arrived, an acknowledgement) are
/// owed, up to a burst, and repaid from the next tokens.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    limit: RateLimit,
    tokens: u64,
    /// Bytes taken past the tokens, repaid before tokens count again (at most a burst; then
    /// `tokens` is 0).
    debt: u64,
    /// The instant the tokens were counted at.
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(limit: RateLimit, now: Instant) -> TokenBucket {
        TokenBucket {
            limit,
            tokens: limit.burst,
            debt: 0,
            at: now,
        }
    }

    /// The limit.
    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    /// A new limit from `now` (the tokens kept, up to its burst).
    pub fn set_limit(&mut self, limit: RateLimit, now: Instant) {
        self.refill(now);
        self.limit = limit;
        self.tokens = self.tokens.min(limit.burst);
        self.debt = self.debt.min(limit.burst);
    }

    fn refill(&mut self, now: Instant) {
        if self.tokens >= self.limit.burst {
            self.at = self.at.max(now);
            return;
        }
        let elapsed = now.saturating_duration_since(self.at).as_nanos();
        let rate = u128::from(self.limit.bytes_per_second);
        let added = elapsed * rate / NANOS;
        if added == 0 {
            return;
        }
        let room = u128::from(self.limit.burst - self.tokens) + u128::from(self.debt);
        if added >= room {
            self.tokens = self.limit.burst;
            self.debt = 0;
            self.at = now;
        } else {
            // Below the room: what repays the debt, then at most `burst - tokens`.
            let repaid = added.min(u128::from(self.debt)) as u64;
            self.debt -= repaid;
            self.tokens += (added - u128::from(repaid)) as u64;
            // Exactly the time those tokens took: the remainder counts towards the next.
            let spent = added * NANOS / rate;
            self.at += Duration::from_nanos(spent as u64);
        }
    }

    /// Tokens available at `now`.
    pub fn available(&mut self, now: Instant) -> u64 {
        self.refill(now);
        self.tokens
    }

    /// Spends `bytes` tokens (those of a read or write just made); what is past the tokens
    /// there is owed (up to a burst) and repaid from the next ones.
    pub fn take(&mut self, bytes: u64) {
        let short = bytes.saturating_sub(self.tokens);
        self.tokens = self.tokens.saturating_sub(bytes);
        self.debt = self.debt.saturating_add(short).min(self.limit.burst);
    }

    /// When `want` tokens (capped at the burst) will be there, counting from `now`.
    pub fn ready_at(&mut self, want: u64, now: Instant) -> Instant {
        self.refill(now);
        let want = want.clamp(1, self.limit.burst);
        if self.tokens >= want {
            return now;
        }
        let missing = u128::from(want - self.tokens) + u128::from(self.debt);
        let rate = u128::from(self.limit.bytes_per_second);
        let nanos = (missing * NANOS).div_ceil(rate);
        self.at + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// A token bucket shared by a group of sessions (a server's total), on any thread.
#[derive(Debug)]
pub struct GroupBucket(Mutex<TokenBucket>);

impl GroupBucket {
    /// A full shared bucket.
    pub fn new(limit: RateLimit, now: Instant) -> Arc<GroupBucket> {
        Arc::new(GroupBucket(Mutex::new(TokenBucket::new(limit, now))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TokenBucket> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new limit for the whole group.
    pub fn set_limit(&self, limit: RateLimit, now: Instant) {
        self.lock().set_limit(limit, now);
    }
}

/// The shared buckets of a group of sessions (a server's total), each way: made from the
/// group's [`RateLimits`] when the server starts; every session takes from them beside its
/// own. Clones are the same group.
#[derive(Debug, Clone, Default)]
pub struct GroupLimits {
    read: Option<Arc<GroupBucket>>,
    write: Option<Arc<GroupBucket>>,
}

/// What a group's lifted direction becomes: a bucket that never runs out (its sessions still
/// take from it).
const UNLIMITED: RateLimit = RateLimit {
    bytes_per_second: u64::MAX,
    burst: u64::MAX,
};

impl GroupLimits {
    /// The buckets of `limits` (none for a direction without a limit), full at `now`.
    pub fn new(limits: RateLimits, now: Instant) -> GroupLimits {
        GroupLimits {
            read: limits.read.map(|l| GroupBucket::new(l, now)),
            write: limits.write.map(|l| GroupBucket::new(l, now)),
        }
    }

    /// Whether the group limits anything.
    pub fn is_limited(&self) -> bool {
        self.read.is_some() || self.write.is_some()
    }

    /// Whether the group limits the bytes its sessions read.
    pub fn limits_read(&self) -> bool {
        self.read.is_some()
    }

    /// Whether the group limits the bytes its sessions write.
    pub fn limits_write(&self) -> bool {
        self.write.is_some()
    }

    /// The same group's read limit alone (its write side left out).
    pub fn read_only(&self) -> GroupLimits {
        GroupLimits {
            read: self.read.clone(),
            write: None,
        }
    }

    /// New limits for the group from `now` (the tokens left kept, up to the new burst); a
    /// direction given `None` is lifted (its bucket stays, and never runs out).
    ///
    /// # Errors
    /// [`RateLimitError::NoGroupLimit`] when `limits` limits a direction the group was made
    /// without (its sessions share no bucket that way); nothing is changed then.
    pub fn set_limits(&self, limits: RateLimits, now: Instant) -> Result<(), RateLimitError> {
        let ways = [
            ("read", &self.read, limits.read),
            ("write", &self.write, limits.write),
        ];
        if let Some((direction, ..)) = ways.iter().find(|w| w.1.is_none() && w.2.is_some()) {
            return Err(RateLimitError::NoGroupLimit { direction });
        }
        for (_, bucket, limit) in ways {
            if let Some(bucket) = bucket {
                bucket.set_limit(limit.unwrap_or(UNLIMITED), now);
            }
        }
        Ok(())
    }
}

/// Why a group's limits could not be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RateLimitError {
    /// The group (a server) was made without a limit this way, so its sessions share no
    /// bucket to change: set one on the builder (`group_rate_limits`).
    #[error("the group was made without a {direction} limit to change (set one on the builder)")]
    NoGroupLimit {
        /// `"read"` or `"write"`.
        direction: &'static str,
    },
}

/// The buckets of one direction of one session: its own and its group's.
#[derive(Debug, Clone, Default)]
pub struct Direction {
    own: Option<TokenBucket>,
    group: Option<Arc<GroupBucket>>,
}

impl Direction {
    /// Bytes this direction may move now (`usize::MAX`: unlimited).
    pub fn allowance(&mut self, now: Instant) -> usize {
        let own = self.own.as_mut().map_or(u64::MAX, |b| b.available(now));
        let group = self
            .group
            .as_ref()
            .map_or(u64::MAX, |g| g.lock().available(now));
        usize::try_from(own.min(group)).unwrap_or(usize::MAX)
    }

    /// `bytes` moved: the tokens are spent (what is past them is owed, up to a burst, and
    /// repaid from the next tokens).
    pub fn spend(&mut self, bytes: usize) {
        let bytes = bytes as u64;
        if let Some(own) = self.own.as_mut() {
            own.take(bytes);
        }
        if let Some(group) = &self.group {
            group.lock().take(bytes);
        }
    }

    /// When this direction may move `want` more bytes (a burst's worth at most): `None` if it
    /// may now.
    pub fn blocked_until(&mut self, want: usize, now: Instant) -> Option<Instant> {
        let want = want as u64;
        let own = self.own.as_mut().map(|b| b.ready_at(want, now));
        let group = self.group.as_ref().map(|g| g.lock().ready_at(want, now));
        own.into_iter().chain(group).max().filter(|&at| at > now)
    }

    /// Whether a limit applies.
    pub fn is_limited(&self) -> bool {
        self.own.is_some() || self.group.is_some()
    }

    /// What to wait for before moving again once the budget is spent: 20 ms of the slowest
    /// of this direction's rates (at least 1 byte, at most its smallest burst), so a limited
    /// session moves in steps of that size instead of waking for every few bytes.
    pub fn resume_quantum(&self) -> usize {
        let limits = self
            .own
            .as_ref()
            .map(TokenBucket::limit)
            .into_iter()
            .chain(self.group.as_ref().map(|g| g.lock().limit()));
        let quantum = limits
            .map(|l| (l.bytes_per_second / 50).clamp(1, l.burst))
            .min()
            .unwrap_or(usize::MAX as u64);
        usize::try_from(quantum).unwrap_or(usize::MAX)
    }
}

/// The rate limits of one session: each direction's own bucket and its group's.
#[derive(Debug, Clone, Default)]
pub struct Pace {
    /// Bytes received.
    pub read: Direction,
    /// Bytes sent.
    pub write: Direction,
}

impl Pace {
    /// A session's pace: its own `limits` and its `group`'s buckets (a session in no group
    /// takes `&GroupLimits::default()`).
    pub fn new(limits: RateLimits, group: &GroupLimits, now: Instant) -> Pace {
        Pace {
            read: Direction {
                own: limits.read.map(|l| TokenBucket::new(l, now)),
                group: group.read.clone(),
            },
            write: Direction {
                own: limits.write.map(|l| TokenBucket::new(l, now)),
                group: group.write.clone(),
            },
        }
    }

    /// New limits of the session's own (its group's stay), from `now`.
    pub fn set_limits(&mut self, limits: RateLimits, now: Instant) {
        set(&mut self.read.own, limits.read, now);
        set(&mut self.write.own, limits.write, now);
    }

    /// Whether any limit applies.
    pub fn is_limited(&self) -> bool {
        self.read.is_limited() || self.write.is_limited()
    }
}

fn set(bucket: &mut Option<TokenBucket>, limit: Option<RateLimit>, now: Instant) {
    match (bucket.as_mut(), limit) {
        (Some(b), Some(l)) => b.set_limit(l, now),
        (_, l) => *bucket = l.map(|l| TokenBucket::new(l, now)),
    }
}

/// Two byte figures of a session, one each way: running totals, or rates in bytes a second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EachWay {
    /// Received.
    pub inbound: u64,
    /// Sent.
    pub outbound: u64,
}

/// The rate a session moved bytes at, for its stats: bytes a second over the last whole
/// second (a window restarted each second; one comparison per call otherwise), each way.
#[derive(Debug, Clone, Copy, Default)]
pub struct RateWindow {
    /// The window's start, and the totals then.
    start: Option<(Instant, EachWay)>,
    /// Bytes a second over the last whole window.
    rates: EachWay,
}

impl RateWindow {
    /// The session's running `totals` at `now`; returns the rates of the last whole second,
    /// in bytes a second.
    pub fn record(&mut self, totals: EachWay, now: Instant) -> EachWay {
        match self.start {
            None => self.start = Some((now, totals)),
            Some((at, from)) => {
                let elapsed = now.saturating_duration_since(at);
                if elapsed >= Duration::from_secs(1) {
                    let per_second =
                        |bytes: u64| (u128::from(bytes) * NANOS / elapsed.as_nanos().max(1)) as u64;
                    self.rates = EachWay {
                        inbound: per_second(totals.inbound.saturating_sub(from.inbound)),
                        outbound: per_second(totals.outbound.saturating_sub(from.outbound)),
                    };
                    self.start = Some((now, totals));
                }
            }
        }
        self.rates
    }
}

/// How long bytes queued now wait before they leave at `rate` bytes a second (`None`: nothing
/// leaves, so no estimate; zero with nothing queued): what GameNetworkingSockets and renet
/// call the send queue's delay.
pub fn queue_delay(queued: u64, rate: u64) -> Option<Duration> {
    if queued == 0 {
        return Some(Duration::ZERO);
    }
    (rate > 0).then(|| Duration::from_nanos((u128::from(queued) * NANOS / u128::from(rate)) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates a reader that asks for `chunk` bytes every `every` for `for_`, spending what
    /// the bucket allows; returns the bytes moved.
    fn drain(limit: RateLimit, chunk: u64, every: Duration, for_: Duration) -> u64 {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(limit, start);
        let (mut now, mut moved) = (start, 0u64);
        while now < start + for_ {
            let take = bucket.available(now).min(chunk);
            bucket.take(take);
            moved += take;
            now += every;
        }
        moved
    }

    #[test]
    fn a_bucket_moves_its_rate_within_two_percent_plus_one_burst() {
        for (rate, chunk, every_us) in [
            (1_000_000, 64 * 1024, 1_000),
            (10_000, 1_500, 7_000),
            (123_457, 4_096, 333),
        ] {
            let limit = RateLimit::new(rate);
            let seconds = 10;
            let moved = drain(
                limit,
                chunk,
                Duration::from_micros(every_us),
                Duration::from_secs(seconds),
            );
            let expected = rate * seconds + limit.burst;
            let off = (moved as f64 - expected as f64).abs() / expected as f64;
            assert!(
                off < 0.02,
                "rate {rate}: moved {moved}, expected {expected}"
            );
        }
    }

    #[test]
    fn a_burst_is_bounded_by_the_bucket() {
        let start = Instant::now();
        let limit = RateLimit::new(1_000).with_burst(500);
        let mut bucket = TokenBucket::new(limit, start);
        // Idle for an hour: still no more than the burst at once.
        let later = start + Duration::from_secs(3600);
        assert_eq!(bucket.available(later), 500);
        bucket.take(500);
        assert_eq!(bucket.available(later), 0);
        // 100 tokens take 100 ms; 1,000 are capped at the burst.
        assert_eq!(
            bucket.ready_at(100, later),
            later + Duration::from_millis(100)
        );
        assert_eq!(
            bucket.ready_at(1_000, later),
            later + Duration::from_millis(500)
        );
        assert_eq!(bucket.available(later + Duration::from_millis(250)), 250);
    }

    #[test]
    fn bytes_past_the_tokens_are_owed_up_to_a_burst() {
        let start = Instant::now();
        let limit = RateLimit::new(1_000).with_burst(500);
        let mut bucket = TokenBucket::new(limit, start);
        bucket.take(700);
        assert_eq!(bucket.available(start), 0);
        // 200 owed: 300 tokens take 500 ms.
        assert_eq!(
            bucket.ready_at(300, start),
            start + Duration::from_millis(500)
        );
        assert_eq!(bucket.available(start + Duration::from_millis(100)), 0);
        assert_eq!(bucket.available(start + Duration::from_millis(250)), 50);
        // Never more than a burst owed: 2,000 past the tokens cost 500.
        bucket.take(2_050);
        let later = start + Duration::from_millis(250);
        assert_eq!(
            bucket.ready_at(1, later),
            later + Duration::from_millis(501)
        );
        assert_eq!(bucket.available(later + Duration::from_secs(10)), 500);
    }

    #[test]
    fn a_group_bucket_is_shared_by_its_sessions() {
        let start = Instant::now();
        let limits = RateLimits {
            read: Some(RateLimit::new(1_000).with_burst(1_000)),
            write: None,
        };
        let group = GroupLimits::new(limits, start);
        let mut one = Pace::new(RateLimits::default(), &group, start);
        let mut two = Pace::new(RateLimits::default(), &group, start);
        assert_eq!(one.read.allowance(start), 1_000);
        one.read.spend(700);
        assert_eq!(two.read.allowance(start), 300);
        two.read.spend(300);
        assert_eq!(
            one.read.blocked_until(100, start),
            Some(start + Duration::from_millis(100))
        );
        assert_eq!(one.write.allowance(start), usize::MAX);
        assert!(!one.write.is_limited());
    }

    #[test]
    fn a_window_gives_the_rate_of_the_last_whole_second() {
        let start = Instant::now();
        let mut window = RateWindow::default();
        let way = |inbound, outbound| EachWay { inbound, outbound };
        assert_eq!(window.record(way(0, 0), start), way(0, 0));
        // Half a second in: no whole window yet.
        let half = start + Duration::from_millis(500);
        assert_eq!(window.record(way(5_000, 100), half), way(0, 0));
        let second = start + Duration::from_millis(1_250);
        assert_eq!(window.record(way(12_500, 250), second), way(10_000, 200));
        assert_eq!(queue_delay(20_000, 10_000), Some(Duration::from_secs(2)));
        assert_eq!(queue_delay(0, 0), Some(Duration::ZERO));
        assert_eq!(queue_delay(1, 0), None);
    }
}
