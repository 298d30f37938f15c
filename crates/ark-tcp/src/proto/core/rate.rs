//! A session's rate limits (ark-reactor's [`Pace`]) as its core applies them, and the rates
//! its stats report. Each turn refreshes the byte budgets of both directions from the
//! buckets; reads ask for no more than the read budget and pause when it is spent (the core's
//! next deadline is when tokens come back, and the driver reads again then); writes take no
//! more than the write budget (what is over it stays queued, under the usual backpressure).
//! Unlimited, every budget is `usize::MAX` and nothing is asked of a bucket.

use std::time::{Duration, Instant};

use ark_reactor::{EachWay, Pace, RateLimits, RateWindow};

use super::earliest;

/// A session's rate limits and measured rates.
#[derive(Debug)]
pub(crate) struct SessionRate {
    pace: Pace,
    /// Bytes the session may read and write until the buckets are asked again.
    read_budget: usize,
    write_budget: usize,
    /// Reading stopped on a spent budget: the driver reads again when it comes back.
    read_starved: bool,
    /// When a spent budget comes back, if one is spent and wanted.
    deadline: Option<Instant>,
    /// Bytes a second each way over the last whole second, and the totals they come from.
    window: RateWindow,
    totals: EachWay,
}

impl SessionRate {
    pub(crate) fn new(pace: Pace) -> SessionRate {
        SessionRate {
            pace,
            read_budget: usize::MAX,
            write_budget: usize::MAX,
            read_starved: false,
            deadline: None,
            window: RateWindow::default(),
            totals: EachWay::default(),
        }
    }

    /// Whether writes are limited (frames are then never written from where they were read:
    /// the budget decides how much of the queue goes).
    pub(crate) fn write_limited(&self) -> bool {
        self.pace.write.is_limited()
    }

    /// New limits of the session's own, from `now`.
    pub(crate) fn set_limits(&mut self, limits: RateLimits, now: Instant) {
        self.pace.set_limits(limits, now);
        self.refresh(now);
    }

    /// Asks the buckets for this turn's budgets. Returns whether reading may resume after it
    /// stopped on a spent budget.
    pub(crate) fn refresh(&mut self, now: Instant) -> bool {
        if !self.pace.is_limited() {
            // Lifted since the last turn: nothing waits for a bucket any more.
            self.read_budget = usize::MAX;
            self.write_budget = usize::MAX;
            self.deadline = None;
            return std::mem::take(&mut self.read_starved);
        }
        self.read_budget = self.pace.read.allowance(now);
        self.write_budget = self.pace.write.allowance(now);
        self.deadline = None;
        let resumed = std::mem::take(&mut self.read_starved) && self.read_budget > 0;
        if self.read_budget == 0 {
            self.starve_read(now);
        }
        resumed
    }

    /// Bytes a read may take now (0: reading waits for the budget).
    pub(crate) fn read_budget(&self) -> usize {
        self.read_budget
    }

    /// `n` bytes were read at `now`; a spent budget stops reading until it comes back.
    pub(crate) fn spend_read(&mut self, n: usize, now: Instant) {
        self.totals.inbound += n as u64;
        if self.read_budget != usize::MAX {
            self.read_budget = self.read_budget.saturating_sub(n);
            self.pace.read.spend(n);
            if self.read_budget == 0 {
                self.starve_read(now);
            }
        }
    }

    /// The read budget is spent: reading waits until the bucket gives a step's worth again
    /// (20 ms of the rate: `Direction::resume_quantum`), and the driver reads then.
    fn starve_read(&mut self, now: Instant) {
        self.read_starved = true;
        let want = self.pace.read.resume_quantum();
        let at = self.pace.read.blocked_until(want, now);
        self.deadline = earliest([self.deadline, at]);
    }

    /// How much of `queued` bytes a write may take now.
    pub(crate) fn write_cap(&self, queued: usize) -> usize {
        queued.min(self.write_budget)
    }

    /// With `queued` bytes waiting at `now` and the write budget spent, when writing may go
    /// on (one more deadline of the session).
    pub(crate) fn wait_to_write(&mut self, queued: usize, now: Instant) {
        if queued > 0 && self.write_budget == 0 {
            let want = queued.min(self.pace.write.resume_quantum());
            let at = self.pace.write.blocked_until(want, now);
            self.deadline = earliest([self.deadline, at]);
        }
    }

    /// `n` bytes were written; with `left` bytes still queued, a spent budget sets the
    /// deadline at which writing may go on.
    pub(crate) fn spend_write(&mut self, n: usize, left: usize, now: Instant) {
        self.totals.outbound += n as u64;
        if self.write_budget == usize::MAX {
            return;
        }
        self.write_budget = self.write_budget.saturating_sub(n);
        self.pace.write.spend(n);
        self.wait_to_write(left, now);
    }

    /// When a spent budget comes back (a deadline of the session).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Bytes a second each way over the last whole second, and the send queue's delay at the
    /// rate bytes leave now (`queued` bytes).
    pub(crate) fn measure(&mut self, now: Instant, queued: usize) -> Measured {
        let rates = self.window.record(self.totals, now);
        Measured {
            rates,
            queue_delay: ark_reactor::queue_delay(queued as u64, rates.outbound),
        }
    }
}

/// A session's rates, for its handles: bytes a second each way over the last whole second,
/// and how long what is queued waits at the rate bytes leave now.
pub(crate) struct Measured {
    pub(crate) rates: EachWay,
    pub(crate) queue_delay: Option<Duration>,
}
