//! `ReactorHandle`: a `Send + Clone` handle to post work to a reactor, stop it and read its
//! counters from any thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};

use crossbeam_channel::{Receiver, Sender};

use crate::reactor::Reactor;
use crate::source::{Handler, SourceId};
use crate::stats::{Counters, Stats};
use crate::timer::TimerId;

/// Work posted to a reactor, run on its thread.
pub(crate) type Posted = Box<dyn FnOnce(&mut Reactor) + Send>;

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

/// State shared between a reactor, the threads that run it and its handles.
pub(crate) struct Shared {
    pub(crate) registry: mio::Registry,
    pub(crate) waker: mio::Waker,
    pub(crate) posts: Sender<Posted>,
    /// Sources woken from other threads.
    pub(crate) wakes: Sender<SourceId>,
    /// Posts and wakes sent and not yet taken: the reactor looks at the queues only when it
    /// is not zero (one load per turn instead of the channels' length checks).
    pub(crate) inbound: AtomicUsize,
    pub(crate) ids: SourceIds,
    pub(crate) counters: Counters,
    pub(crate) stop: AtomicBool,
    /// Set while the reactor is (about to be) blocked in `poll`: only then does a producer
    /// need to wake it.
    pub(crate) polling: AtomicBool,
    pub(crate) timer_ids: AtomicU64,
    pub(crate) sources: AtomicUsize,
}

impl Shared {
    pub(crate) fn next_timer_id(&self) -> TimerId {
        TimerId(self.timer_ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Wakes the reactor if it is blocked in `poll`. Call after publishing work (a post, a
    /// wake, the stop flag, a sooner timer). Pairs with the reactor's store of `polling` followed by
    /// its check of the queues: one of the two sides always sees the other.
    pub(crate) fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.polling.load(Ordering::SeqCst) {
            // A failed wake means the poll instance is gone: the reactor has stopped, and
            // there is nobody left to wake.
            let _ = self.waker.wake();
        }
    }
}

/// A handle to one reactor: post closures to run on its thread, stop it, read its counters.
/// Cheap to clone, `Send` and `Sync`.
///
/// Posting never blocks. A post to an idle reactor wakes it at once; posts to a busy reactor
/// are picked up at the end of its current turn without a wakeup syscall.
#[derive(Clone)]
pub struct ReactorHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ReactorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReactorHandle")
            .field("stopped", &self.is_stopped())
            .field("sources", &self.source_count())
            .finish()
    }
}

impl ReactorHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        ReactorHandle { shared }
    }

    /// Runs `f` with the reactor, on its thread (in the shared model with several threads, on
    /// the one that polls). Returns `false` (and drops `f`) if the reactor has stopped. Posts
    /// still queued when the reactor stops are dropped without running.
    pub fn post<F>(&self, f: F) -> bool
    where
        F: FnOnce(&mut Reactor) + Send + 'static,
    {
        self.shared.inbound.fetch_add(1, Ordering::SeqCst);
        if self.is_stopped() || self.shared.posts.send(Box::new(f)).is_err() {
            self.shared.inbound.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        self.shared.notify();
        true
    }

    /// Gives source `id` a turn soon: its handler's `on_ready` sees [`Ready::WAKE`]. For work
    /// that reached the source other than through its socket (data queued for it from another
    /// thread, a stop request). Wakes never get lost: one that arrives while the source is busy
    /// (running on another thread, say) is delivered when it is free; several before a turn merge into one.
    /// Returns `false` if the reactor has stopped. A stale id is ignored.
    ///
    /// [`Ready::WAKE`]: crate::Ready::WAKE
    pub fn wake(&self, id: SourceId) -> bool {
        self.shared.inbound.fetch_add(1, Ordering::SeqCst);
        if self.is_stopped() || self.shared.wakes.send(id).is_err() {
            self.shared.inbound.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        self.shared.notify();
        true
    }

    /// Registers `handler`'s source with `interest` on this reactor and returns its id at
    /// once; the registration happens on the reactor's thread, and a failure reaches the
    /// handler as `on_close(CloseReason::RegistrationFailed(kind))`. `None` if the reactor has
    /// stopped (the handler is dropped) or its source table is full.
    pub fn insert(&self, handler: Box<dyn Handler>, interest: mio::Interest) -> Option<SourceId> {
        self.insert_with(|_| handler, interest)
    }

    /// As [`insert`](Self::insert), with the handler made by `make` from its source's id (a
    /// handler that hands out references to itself needs it).
    pub fn insert_with(
        &self,
        make: impl FnOnce(SourceId) -> Box<dyn Handler>,
        interest: mio::Interest,
    ) -> Option<SourceId> {
        let id = self.shared.ids.reserve()?;
        let handler = make(id);
        let posted = self.post(move |reactor| {
            // A failure is reported to the handler itself.
            let _ = reactor.install(id, handler, interest);
        });
        posted.then_some(id)
    }

    /// Asks the reactor to stop: `run` returns after every source got
    /// `on_close(CloseReason::Stopped)`. Idempotent; callable from any thread.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Unconditional: a stop must never be missed, and it happens once.
        let _ = self.shared.waker.wake();
    }

    /// Whether `stop` has been called.
    pub fn is_stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    /// A copy of the reactor's counters.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// The live counters (transports bump the syscall counters through them).
    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Sources currently registered (the pool's "least loaded" measure).
    pub fn source_count(&self) -> usize {
        self.shared.sources.load(Ordering::Relaxed)
    }
}
