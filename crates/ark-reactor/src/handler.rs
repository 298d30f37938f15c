//! What the reactor gives the code it runs and the threads around it: the [`Handler`]
//! contract a source implements, the [`Context`] of its turn, and the [`ReactorHandle`] any
//! thread holds to post work, wake sources and stop the reactor (with the state they share).
//!
//! The three are one knot of types: a handler gets a context, a context hands out a
//! reactor handle, and a handle inserts handlers and posts closures that run with the
//! [`Reactor`] itself; so this file and `reactor.rs` import each other (the one such pair in
//! the crate), and everything else sits below or above the two.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::ids::{SourceId, SourceIds, TimerId};
use crate::reactor::Reactor;
use crate::source::{CloseReason, Ready, Turn};
use crate::stats::{Counters, Stats};

/// Per-turn limits that keep one busy source from starving the others. A handler counts its
/// own operations and bytes against them and returns [`Turn::Again`](crate::Turn::Again) when
/// either is used up with work remaining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Operations (reads, receives, accepts, ...) per turn. Default 16.
    pub operations: u32,
    /// Bytes per turn. Default 1 MiB: sixteen full reads of the default 64 KiB scratch, so a
    /// session that keeps its socket full is limited by `operations`. (At 256 KiB, a window of
    /// sixteen 16 KiB WebSocket messages per connection, 256 KiB and a few header bytes, was
    /// cut just short of its last frame, which then waited behind every other ready session:
    /// p99 1.5 times the tokio program's.)
    pub bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            operations: 16,
            bytes: 1024 * 1024,
        }
    }
}

/// A change a handler asked for, applied by the reactor when the handler's turn ends.
pub(crate) enum Effect {
    SetTimer {
        id: TimerId,
        deadline: Instant,
        period: Option<Duration>,
    },
    CancelTimer(TimerId),
    Close,
    Wake(SourceId),
    Insert {
        id: SourceId,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    },
}

/// A handler's view of the reactor during one callback: the turn's time, the shared scratch
/// read buffer, counters, registration, timers and closing. Operations that change the
/// reactor (timers, close, new sources) take effect when the callback returns, in order.
pub struct Context<'a> {
    pub(crate) id: SourceId,
    pub(crate) now: Instant,
    pub(crate) scratch: &'a mut [u8],
    pub(crate) effects: &'a mut Vec<Effect>,
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) budget: Budget,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.id)
            .field("now", &self.now)
            .field("scratch_len", &self.scratch.len())
            .finish_non_exhaustive()
    }
}

impl Context<'_> {
    /// The source being served.
    #[inline]
    pub fn id(&self) -> SourceId {
        self.id
    }

    /// The time read once at the start of this loop turn.
    #[inline]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The scratch read buffer of the thread serving this source (64 KiB by default), lent
    /// for this callback only: read into it and handle the bytes before returning.
    #[inline]
    pub fn scratch(&mut self) -> &mut [u8] {
        self.scratch
    }

    /// The fairness budget for this turn.
    #[inline]
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Counters for reporting syscalls.
    #[inline]
    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// The registry, to change this source's interest:
    /// `cx.registry().reregister(socket, cx.token(), interest)`.
    #[inline]
    pub fn registry(&self) -> &mio::Registry {
        &self.shared.registry
    }

    /// The token this source is registered with (for `reregister`).
    #[inline]
    pub fn token(&self) -> mio::Token {
        self.id.token()
    }

    /// A handle to post work to this reactor or stop it.
    pub fn handle(&self) -> ReactorHandle {
        ReactorHandle::new(self.shared.clone())
    }

    /// Starts a timer for this source: `on_timer` runs after `delay`, then every `period` if
    /// one is given. The timer is cancelled when the source closes.
    pub fn set_timer(&mut self, delay: Duration, period: Option<Duration>) -> TimerId {
        let id = self.shared.next_timer_id();
        self.effects.push(Effect::SetTimer {
            id,
            deadline: self.now + delay,
            period,
        });
        id
    }

    /// Cancels a timer of this source; it will not fire after this callback returns.
    pub fn cancel_timer(&mut self, timer: TimerId) {
        self.effects.push(Effect::CancelTimer(timer));
    }

    /// Closes this source when the callback returns: it is deregistered, its timers are
    /// cancelled and `on_close(CloseReason::Closed)` runs.
    pub fn close(&mut self) {
        self.effects.push(Effect::Close);
    }

    /// Gives another source of this reactor a turn when the callback returns (its `on_ready`
    /// sees [`Ready::WAKE`](crate::Ready::WAKE)); see [`Reactor::wake`](crate::Reactor::wake).
    pub fn wake(&mut self, id: SourceId) {
        self.effects.push(Effect::Wake(id));
    }

    /// Registers a new source on this reactor when the callback returns (an accepted
    /// connection, say) and returns its id now. A registration failure reaches the new
    /// handler as `on_close(CloseReason::RegistrationFailed(kind))`; `None` if the source
    /// table is full (the handler is dropped).
    pub fn insert(
        &mut self,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> Option<SourceId> {
        let id = self.shared.ids.reserve()?;
        self.effects.push(Effect::Insert {
            id,
            handler,
            interest,
        });
        Some(id)
    }
}

/// The callbacks of a registered source. They run on the thread processing the source: the
/// reactor's thread, or in the shared IO model any of its threads, never two threads at once
/// for one source.
///
/// # Readiness contract (edge-triggered)
///
/// Readiness is reported once per change, so on `on_ready` a handler must perform operations
/// until they return `WouldBlock` — or until its [`Budget`](crate::Budget) is used, in which
/// case it returns [`Turn::Again`] and is called again in the same loop turn cycle, after the
/// other ready sources. A handler that returns `Done` without reaching `WouldBlock` may never
/// be woken for the remaining data. Readiness can be spurious: an operation may still return
/// `WouldBlock`, which is not an error.
pub trait Handler: Send + 'static {
    /// The mio source (socket) to register. Called on registration and removal.
    fn source(&mut self) -> &mut dyn mio::event::Source;

    /// The source is ready, was woken ([`Ready::WAKE`]), or is re-run after using its budget
    /// (with the readiness of that turn).
    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn;

    /// A timer set by this source fired.
    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        let _ = (cx, timer);
        Turn::Done
    }

    /// The source was removed; it has been deregistered and its timers cancelled.
    fn on_close(&mut self, reason: CloseReason) {
        let _ = reason;
    }
}

/// Work posted to a reactor, run on its thread.
pub(crate) type Posted = Box<dyn FnOnce(&mut Reactor) + Send>;

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
