//! Congestion control: NewReno (RFC 6582 / RFC 9002 section 7) over fragments.
//!
//! Why NewReno: it is the loss-based controller every other reliable transport here is
//! measured against, simple enough to verify, and fair to TCP on a shared bottleneck. Two
//! choices adapt it to a lossy link: losses FEC repairs never reach it (the receiver
//! acknowledges recovered fragments), and the window never falls below a floor
//! (`RudpConfig::min_window`), so random, non-congestive loss cannot starve a flow. `Off` leaves
//! only the peer's flow-control window (as KCP's `nc`).

use std::time::Instant;

/// Which controller a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Congestion {
    /// NewReno: slow start, additive increase, halving once per loss episode.
    NewReno,
    /// None: only the peer's receive window limits what is in flight.
    Off,
}

/// NewReno's state, in fragments.
#[derive(Debug, Clone)]
pub(crate) struct Controller {
    kind: Congestion,
    window: f64,
    ssthresh: f64,
    min_window: f64,
    /// Losses of fragments sent before this instant belong to the episode already handled.
    recovery_start: Option<Instant>,
}

impl Controller {
    pub(crate) fn new(kind: Congestion, initial: u32, min: u32) -> Self {
        Controller {
            kind,
            window: f64::from(initial.max(min)),
            ssthresh: f64::INFINITY,
            min_window: f64::from(min.max(1)),
            recovery_start: None,
        }
    }

    /// Fragments that may be in flight.
    pub(crate) fn window(&self) -> usize {
        match self.kind {
            Congestion::NewReno => self.window as usize,
            Congestion::Off => usize::MAX,
        }
    }

    /// `n` fragments sent at `sent` were acknowledged.
    pub(crate) fn on_ack(&mut self, n: usize, sent: Instant) {
        if self.recovery_start.is_some_and(|r| sent <= r) {
            return; // no growth for what was in flight when the episode began
        }
        let n = n as f64;
        if self.window < self.ssthresh {
            self.window += n;
        } else {
            self.window += n / self.window;
        }
        self.window = self.window.min(1e6);
    }

    /// A fragment sent at `sent` was lost (detected at `now`).
    pub(crate) fn on_loss(&mut self, sent: Instant, now: Instant) {
        if self.recovery_start.is_some_and(|r| sent <= r) {
            return; // one reduction per episode
        }
        self.recovery_start = Some(now);
        self.window = (self.window / 2.0).max(self.min_window);
        self.ssthresh = self.window;
    }

    /// The retransmission timer expired: persistent congestion, back to the floor.
    pub(crate) fn on_timeout(&mut self, now: Instant) {
        self.recovery_start = Some(now);
        self.ssthresh = (self.window / 2.0).max(self.min_window);
        self.window = self.min_window;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn slow_start_then_one_halving_per_episode_never_below_the_floor() {
        let t0 = Instant::now();
        let mut cc = Controller::new(Congestion::NewReno, 10, 4);
        cc.on_ack(10, t0);
        assert_eq!(cc.window(), 20, "slow start doubles per round");
        let t1 = t0 + Duration::from_millis(10);
        cc.on_loss(t0, t1);
        assert_eq!(cc.window(), 10);
        cc.on_loss(t0, t1 + Duration::from_millis(1));
        assert_eq!(cc.window(), 10, "a loss of the same episode");
        cc.on_ack(10, t1 + Duration::from_millis(2));
        assert_eq!(cc.window(), 11, "congestion avoidance: one per window");
        cc.on_timeout(t1 + Duration::from_millis(3));
        assert_eq!(cc.window(), 4);
        assert_eq!(Controller::new(Congestion::Off, 1, 1).window(), usize::MAX);
    }
}
