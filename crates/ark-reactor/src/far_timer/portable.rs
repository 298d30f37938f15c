//! The portable far timer: no source of its own, every deadline goes to the poll's timeout
//! (kqueue and Windows' IOCP take a timeout per wait as epoll does; only Linux has the
//! timerfd that lets the poll block without one).

use std::io;
use std::time::{Duration, Instant};

/// Hands every deadline to the poll's timeout.
#[derive(Debug)]
pub(crate) struct FarTimer;

impl FarTimer {
    /// Nothing to register: the poll's timeout does the work.
    pub(crate) fn new(_registry: &mio::Registry) -> io::Result<FarTimer> {
        Ok(FarTimer)
    }

    /// How long the poll may block for the next timer deadline `deadline`: the time left.
    pub(crate) fn timeout(&mut self, now: Instant, deadline: Instant) -> Option<Duration> {
        Some(deadline.saturating_duration_since(now))
    }

    /// Never called: no event carries the far timer's token on this path.
    pub(crate) fn fired(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_deadline_is_the_poll_timeout() {
        let poll = mio::Poll::new().unwrap();
        let mut far = FarTimer::new(poll.registry()).unwrap();
        let now = Instant::now();
        for left in [
            Duration::ZERO,
            Duration::from_millis(5),
            Duration::from_secs(3600),
        ] {
            assert_eq!(far.timeout(now, now + left), Some(left));
        }
        assert_eq!(
            far.timeout(now + Duration::from_secs(1), now),
            Some(Duration::ZERO)
        );
    }
}
