//! A registered source's slot in the reactor's slab, with the work waiting for its handler.

use std::collections::VecDeque;
use std::time::Duration;

use crate::handler::Handler;
use crate::ids::TimerId;
use crate::source::Ready;

/// Work that reached a source and waits for its handler: merged readiness (wakes included),
/// timers in the order they fired, and a re-run owed after the budget ran out. Everything
/// that arrives while the handler is lent lands here and is delivered when the handler
/// is back, in one place ([`Reactor::serve`](crate::Reactor)).
#[derive(Default)]
pub(crate) struct Pending {
    pub(crate) ready: Ready,
    /// `on_ready` is owed even if `ready` is empty (a re-run after a timer turn over budget).
    pub(crate) rerun: bool,
    pub(crate) timers: VecDeque<TimerId>,
}

impl Pending {
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ready.is_empty() && !self.rerun && self.timers.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.ready = Ready::EMPTY;
        self.rerun = false;
        self.timers.clear();
    }

    /// Takes the merged readiness if a turn is owed.
    #[inline]
    pub(crate) fn take_ready(&mut self) -> Option<Ready> {
        if self.ready.is_empty() && !self.rerun {
            return None;
        }
        self.rerun = false;
        Some(std::mem::take(&mut self.ready))
    }
}

/// One entry of the slab.
#[derive(Default)]
pub(crate) struct Slot {
    pub(crate) generation: u32,
    pub(crate) occupied: bool,
    /// `None` while the handler is lent (shared IO model) or while it runs.
    pub(crate) handler: Option<Box<dyn Handler>>,
    pub(crate) pending: Pending,
    /// In the reactor's run queue.
    pub(crate) queued: bool,
    /// Returned `Turn::Again` with this readiness: runs again in the next loop turn.
    pub(crate) again: Option<Ready>,
    /// Timers this source owns, cancelled when it closes.
    pub(crate) timers: Vec<TimerId>,
    /// Asked to close while its handler was lent.
    pub(crate) closing: bool,
    /// Shared model: how long its last lent turn took, from lend to its end.
    pub(crate) last_turn: Duration,
}

impl Slot {
    /// Makes the slot a fresh source's, keeping nothing of its previous occupant.
    pub(crate) fn occupy(&mut self, generation: u32, handler: Box<dyn Handler>) {
        *self = Slot {
            generation,
            occupied: true,
            handler: Some(handler),
            pending: std::mem::take(&mut self.pending),
            timers: std::mem::take(&mut self.timers),
            ..Slot::default()
        };
        self.pending.clear();
        self.timers.clear();
    }
}
