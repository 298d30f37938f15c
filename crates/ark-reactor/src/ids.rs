//! The ids a reactor hands out: of sources (slab index and generation, allocated from any
//! thread) and of timers.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use crossbeam_channel::{Receiver, Sender};

/// Identifies a source registered with one reactor: a slab index plus a generation, so a
/// stale id (of a source that has closed) never reaches the source that reused its slot.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SourceId {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl SourceId {
    /// The `mio::Token` the source is registered with.
    pub(crate) fn token(self) -> mio::Token {
        mio::Token((u64::from(self.generation) << 32 | u64::from(self.index)) as usize)
    }

    pub(crate) fn from_token(token: mio::Token) -> Self {
        let raw = token.0 as u64;
        SourceId {
            index: raw as u32,
            generation: (raw >> 32) as u32,
        }
    }
}

impl fmt::Debug for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SourceId({}v{})", self.index, self.generation)
    }
}

/// Identifies a timer of one reactor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(pub(crate) u64);

/// Hands out source ids from any thread, so an insert made from a handler or another thread
/// knows its id at once: freed ids come back with their generation bumped (a stale id never
/// matches the source that reuses its slot), fresh ones extend the slab.
pub(crate) struct SourceIds {
    free_tx: Sender<SourceId>,
    free_rx: Receiver<SourceId>,
    next: AtomicU32,
}

impl SourceIds {
    pub(crate) fn new() -> Self {
        let (free_tx, free_rx) = crossbeam_channel::unbounded();
        SourceIds {
            free_tx,
            free_rx,
            next: AtomicU32::new(0),
        }
    }

    /// An id no live or reserved source has; `None` when the table is full (2^32 - 1 slots).
    pub(crate) fn reserve(&self) -> Option<SourceId> {
        if let Ok(id) = self.free_rx.try_recv() {
            return Some(id);
        }
        let index = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| {
                (i < u32::MAX - 1).then_some(i + 1)
            })
            .ok()?;
        Some(SourceId {
            index,
            generation: 0,
        })
    }

    /// Gives `id`'s slot back for reuse under the next generation.
    pub(crate) fn release(&self, id: SourceId) {
        let next = SourceId {
            index: id.index,
            generation: id.generation.wrapping_add(1),
        };
        // The receiving end lives as long as this struct.
        let _ = self.free_tx.send(next);
    }
}
