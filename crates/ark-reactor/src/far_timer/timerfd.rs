//! The Linux far timer: a timerfd on the monotonic clock in the poll set.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::time::{
    Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
    timerfd_settime,
};

use super::FAR_TIMER;

/// Deadlines at least this far away wake the poll through the timerfd.
pub(crate) const FAR: Duration = Duration::from_millis(10);

/// A timerfd on the monotonic clock (the clock `Instant` reads on Linux), registered for
/// readability, armed at the earliest far deadline or before it.
#[derive(Debug)]
pub(crate) struct FarTimer {
    fd: OwnedFd,
    /// When it is set to fire (`None`: not set, or fired).
    armed: Option<Instant>,
}

impl FarTimer {
    /// A timerfd registered in `registry`.
    pub(crate) fn new(registry: &mio::Registry) -> io::Result<FarTimer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        let raw = fd.as_raw_fd();
        registry.register(
            &mut mio::unix::SourceFd(&raw),
            FAR_TIMER,
            mio::Interest::READABLE,
        )?;
        Ok(FarTimer { fd, armed: None })
    }

    /// How long the poll may block for the next timer deadline `deadline`: `None` (no
    /// timeout) when it is far and the timerfd fires by then; the time left otherwise.
    pub(crate) fn timeout(&mut self, now: Instant, deadline: Instant) -> Option<Duration> {
        // Set at or before the deadline, it wakes the poll in time, however near the deadline
        // has come: a far deadline that draws near keeps the timerfd rather than giving every
        // poll of its last `FAR` a kernel timer of its own. (Sessions' 20 ms receive-buffer
        // release checks kept a near deadline pending most of the time: `epoll_wait` started
        // 0.04 kernel timers per message at TCP 16 KiB, owned model.) Set earlier, it fires
        // early: the poll finds nothing due and the deadline is handled again.
        if self.armed.is_some_and(|at| at <= deadline) {
            return None;
        }
        let left = deadline.saturating_duration_since(now);
        if left < FAR {
            return Some(left);
        }
        match self.set(left) {
            Ok(()) => {
                self.armed = Some(deadline);
                None
            }
            Err(_) => Some(left),
        }
    }

    /// The timerfd fired (its event came): clears it.
    pub(crate) fn fired(&mut self) {
        let mut expirations = [0u8; 8];
        // Nothing to read is fine: the count was read already.
        let _ = rustix::io::read(&self.fd, &mut expirations);
        self.armed = None;
    }

    fn set(&self, after: Duration) -> io::Result<()> {
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec {
            tv_sec: i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: after.subsec_nanos().into(),
        };
        let spec = Itimerspec {
            it_interval: zero,
            it_value: value,
        };
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `poll` until the timerfd's event comes (or `within` passes); when it came.
    fn fired_within(poll: &mut mio::Poll, within: Duration) -> Option<Instant> {
        let mut events = mio::Events::with_capacity(4);
        let end = Instant::now() + within;
        while Instant::now() < end {
            poll.poll(&mut events, Some(end - Instant::now())).unwrap();
            if events.iter().any(|e| e.token() == FAR_TIMER) {
                return Some(Instant::now());
            }
        }
        None
    }

    #[test]
    fn near_deadlines_go_to_the_poll_timeout_and_far_ones_to_the_timerfd() {
        let mut poll = mio::Poll::new().unwrap();
        let mut far = FarTimer::new(poll.registry()).unwrap();
        let now = Instant::now();
        let near = now + FAR / 2;
        assert_eq!(far.timeout(now, near), Some(FAR / 2));
        assert_eq!(far.armed, None, "a near deadline leaves the timerfd alone");
        let deadline = now + Duration::from_millis(40);
        assert_eq!(far.timeout(now, deadline), None, "the poll may block");
        assert_eq!(far.armed, Some(deadline));
        // A later deadline keeps the earlier setting; an earlier one moves it.
        assert_eq!(far.timeout(now, deadline + Duration::from_secs(1)), None);
        assert_eq!(far.armed, Some(deadline));
        let sooner = now + Duration::from_millis(30);
        assert_eq!(far.timeout(now, sooner), None);
        assert_eq!(far.armed, Some(sooner));
        // Drawn near, the same deadline keeps the timerfd; a nearer one takes the poll's timeout.
        let later = sooner - FAR / 2;
        assert_eq!(far.timeout(later, sooner), None);
        assert_eq!(far.timeout(later, later + FAR / 4), Some(FAR / 4));
        assert_eq!(far.armed, Some(sooner));
        let fired = fired_within(&mut poll, Duration::from_secs(5)).expect("the timerfd fires");
        assert!(fired >= sooner, "not before its deadline");
        far.fired();
        assert_eq!(far.armed, None);
        assert_eq!(
            fired_within(&mut poll, Duration::from_millis(100)),
            None,
            "once: cleared, and not periodic"
        );
    }
}
