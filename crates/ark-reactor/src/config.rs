//! Reactor configuration.

use crate::handler::Budget;

/// Settings of one reactor, with documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReactorConfig {
    /// Capacity of the `mio::Events` buffer: readiness events taken per `poll`. Default 1024.
    pub events_capacity: usize,
    /// Size of the scratch read buffer lent to reading handlers, one per reactor thread (and
    /// per worker). Default 64 KiB: one read drains most socket receive queues, and sessions
    /// keep no receive buffer of their own until a frame spans two reads.
    pub scratch_bytes: usize,
    /// Fairness budget handed to every handler turn.
    pub budget: Budget,
}

impl Default for ReactorConfig {
    fn default() -> Self {
        ReactorConfig {
            events_capacity: 1024,
            scratch_bytes: 64 * 1024,
            budget: Budget::default(),
        }
    }
}
