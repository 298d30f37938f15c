//! Rate limits for log events a remote peer can trigger at will (a dropped datagram, a refused
//! handshake, a malformed request, a connection's open and close): [`LogLimit`] and the
//! [`log_limited!`](crate::log_limited) macro every ark crate logs such events with, so that
//! logging can stay on under a flood.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Events a call site of [`log_limited!`](crate::log_limited) writes per interval.
pub const LOG_BURST: u32 = 10;

/// The interval of [`LOG_BURST`].
pub const LOG_INTERVAL: Duration = Duration::from_secs(1);

/// A rate limit for one kind of log event: at most `burst` events per `interval` are let
/// through; the rest are counted, and the next event let through says how many were left out
/// (its `suppressed` field). Lock-free; one `Instant::now()` per event asked about. A
/// `static` per call site, as [`log_limited!`](crate::log_limited) makes it.
///
/// ```
/// use std::time::Duration;
/// use ark_reactor::LogLimit;
///
/// static LIMIT: LogLimit = LogLimit::new(2, Duration::from_secs(60));
/// assert_eq!(LIMIT.admit(), Some(0));
/// assert_eq!(LIMIT.admit(), Some(0));
/// // Over the burst: left out, and counted.
/// assert_eq!(LIMIT.admit(), None);
/// assert_eq!(LIMIT.admit(), None);
/// assert_eq!(LIMIT.suppressed(), 2);
/// ```
#[derive(Debug)]
pub struct LogLimit {
    burst: u32,
    interval_ms: u64,
    /// The current interval: its start in ms since [`epoch`] (high 40 bits) and the events
    /// asked about in it (low 24 bits, saturating), changed together.
    window: AtomicU64,
    /// Events left out since the last one let through.
    suppressed: AtomicU64,
}

/// Bits of [`LogLimit::window`] that count events.
const COUNT_BITS: u32 = 24;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;

/// The instant every limit's clock counts from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl LogLimit {
    /// At most `burst` events per `interval`.
    pub const fn new(burst: u32, interval: Duration) -> LogLimit {
        LogLimit {
            burst,
            interval_ms: interval.as_millis() as u64,
            window: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// [`LOG_BURST`] events per [`LOG_INTERVAL`]: what `log_limited!` uses.
    pub const fn standard() -> LogLimit {
        LogLimit::new(LOG_BURST, LOG_INTERVAL)
    }

    /// Whether to write an event now: `Some(n)` to write it, `n` being how many were left out
    /// since the last one written; `None` to leave it out (it is counted).
    pub fn admit(&self) -> Option<u64> {
        // +1: a window starting at 0 is "none yet".
        let now = epoch().elapsed().as_millis() as u64 + 1;
        let mut current = self.window.load(Ordering::Relaxed);
        let count = loop {
            let (start, count) = (current >> COUNT_BITS, current & COUNT_MAX);
            let next = if start == 0 || now.saturating_sub(start) >= self.interval_ms {
                (now << COUNT_BITS) | 1
            } else {
                (start << COUNT_BITS) | (count + 1).min(COUNT_MAX)
            };
            match self.window.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break next & COUNT_MAX,
                Err(seen) => current = seen,
            }
        };
        if count <= u64::from(self.burst) {
            Some(self.suppressed.swap(0, Ordering::Relaxed))
        } else {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// Events left out since the last one written.
    pub fn suppressed(&self) -> u64 {
        self.suppressed.load(Ordering::Relaxed)
    }
}

/// Writes a `tracing` event at most [`LOG_BURST`] times per [`LOG_INTERVAL`] from this call
/// site; the events left out are counted, and the next one written carries their number in
/// its `suppressed` field. For every event a remote peer can trigger at will. The calling crate
/// needs `tracing` as a dependency (ark's crates: their `tracing` feature).
///
/// ```ignore
/// ark_reactor::log_limited!(tracing::Level::DEBUG, %peer, %error, "rudp datagram dropped");
/// ```
#[macro_export]
macro_rules! log_limited {
    ($level:expr, $($event:tt)+) => {{
        static LIMIT: $crate::LogLimit = $crate::LogLimit::standard();
        if ::tracing::enabled!($level)
            && let ::std::option::Option::Some(suppressed) = LIMIT.admit()
        {
            ::tracing::event!($level, suppressed, $($event)+);
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_per_interval_then_a_count_of_what_was_left_out() {
        let limit = LogLimit::new(3, Duration::from_millis(50));
        let first: Vec<_> = (0..10).map(|_| limit.admit()).collect();
        assert_eq!(first[..3], [Some(0), Some(0), Some(0)]);
        assert!(first[3..].iter().all(Option::is_none));
        std::thread::sleep(Duration::from_millis(60));
        // The next interval's first event says how many the last one left out.
        assert_eq!(limit.admit(), Some(7));
        assert_eq!(limit.admit(), Some(0));
    }

    #[test]
    fn threads_together_get_one_burst_per_interval() {
        static LIMIT: LogLimit = LogLimit::new(5, Duration::from_secs(3600));
        let admitted: usize = (0..4)
            .map(|_| std::thread::spawn(|| (0..1000).filter(|_| LIMIT.admit().is_some()).count()))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum();
        assert_eq!(admitted, 5);
        assert_eq!(LIMIT.suppressed(), 3995);
    }
}
