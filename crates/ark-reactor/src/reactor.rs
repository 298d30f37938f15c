//! `Reactor`: one readiness loop over a `mio::Poll`.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use crate::config::ReactorConfig;
use crate::context::{Context, Effect};
use crate::handle::{Posted, ReactorHandle, Shared};
use crate::source::{CloseReason, Handler, Ready, SourceId, Turn};
use crate::stats::Stats;
use crate::timer::{Target, TimerId, Timers};
use crate::worker::{Done, Job, Work};

/// Token of the reactor's waker (never a source token: source indexes stay below 2^32 - 1).
const WAKER: mio::Token = mio::Token(u32::MAX as usize);

/// A registered source's slot.
struct Slot {
    generation: u32,
    /// `None` while a worker holds the handler (shared IO model) or while it runs.
    handler: Option<Box<dyn Handler>>,
    occupied: bool,
    /// Work that arrived while the handler was out, delivered when it returns.
    pending_ready: Ready,
    pending_timers: Vec<TimerId>,
    /// Timers this source owns, cancelled when it closes.
    timers: Vec<TimerId>,
    /// The source asked to close while a worker held it.
    closing: bool,
    /// How long the source's last turn took (shared model: decides inline or lent).
    last_turn: Duration,
}

/// The link to the worker threads of the shared IO model.
pub(crate) struct WorkerLink {
    pub(crate) jobs: Sender<Job>,
    pub(crate) done: Receiver<Done>,
    /// Handlers currently held by workers (running or queued).
    pub(crate) lent: usize,
}

/// One readiness loop: a `mio::Poll`, its events, a slab of sources with their handlers,
/// timers, posted work and a scratch read buffer.
///
/// # Threads
///
/// A `Reactor` is driven by one thread calling [`run`](Self::run). In the shared IO model
/// (see [`ReactorPool`](crate::ReactorPool)) that thread only polls and dispatches: handlers run
/// on worker threads, one at a time per source, and their events are delivered in order.
/// Posted closures and callback timers always run on the reactor's own thread.
///
/// # Draining readiness and fairness
///
/// Events are edge-triggered: a handler drains its source until `WouldBlock`, or until its
/// [`Budget`](crate::Budget) is used and it returns [`Turn::Again`]. Sources that returned
/// `Again` are served again in the next turn, after the new events, and the reactor does not
/// sleep while any are waiting. Readiness may be spurious.
///
/// # Time
///
/// The clock is read once per loop turn; handlers see it as [`Context::now`].
///
/// # Stopping
///
/// [`ReactorHandle::stop`] (any thread) or [`Reactor::stop`] ends `run` at the end of the current
/// turn. Every source is deregistered and gets `on_close(CloseReason::Stopped)`; pending timers
/// are dropped without firing; posts still queued are dropped without running. An idle reactor
/// blocks in `poll` with no timeout: it uses no CPU.
pub struct Reactor {
    poll: mio::Poll,
    events: mio::Events,
    slots: Vec<Slot>,
    free: Vec<u32>,
    timers: Timers,
    shared: Arc<Shared>,
    posts: Receiver<Posted>,
    scratch: Vec<u8>,
    effects: Vec<Effect>,
    again: Vec<(SourceId, Ready)>,
    again_next: Vec<(SourceId, Ready)>,
    /// This turn's ready sources (new events, then sources over budget before), reused.
    batch: Vec<(SourceId, Ready)>,
    workers: Option<WorkerLink>,
    config: ReactorConfig,
    now: Instant,
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("sources", &self.source_count())
            .field("timers", &self.timers.len())
            .field("workers", &self.workers.is_some())
            .finish_non_exhaustive()
    }
}

impl Reactor {
    /// A reactor with its poll instance, waker and scratch buffer.
    ///
    /// # Errors
    /// Creating the poll instance or the waker failed.
    pub fn new(config: ReactorConfig) -> io::Result<Reactor> {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), WAKER)?;
        let registry = poll.registry().try_clone()?;
        let (posts_tx, posts_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            registry,
            waker,
            posts: posts_tx,
            counters: Default::default(),
            stop: AtomicBool::new(false),
            polling: AtomicBool::new(false),
            timer_ids: AtomicU64::new(0),
            sources: AtomicUsize::new(0),
        });
        Ok(Reactor {
            poll,
            events: mio::Events::with_capacity(config.events_capacity.max(1)),
            slots: Vec::new(),
            free: Vec::new(),
            timers: Timers::default(),
            shared,
            posts: posts_rx,
            scratch: vec![0; config.scratch_bytes],
            effects: Vec::new(),
            again: Vec::new(),
            again_next: Vec::new(),
            batch: Vec::new(),
            workers: None,
            config,
            now: Instant::now(),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn attach_workers(&mut self, link: WorkerLink) {
        self.workers = Some(link);
    }

    /// The configuration.
    pub fn config(&self) -> &ReactorConfig {
        &self.config
    }

    /// A handle for other threads.
    pub fn handle(&self) -> ReactorHandle {
        ReactorHandle::new(self.shared.clone())
    }

    /// The time read at the start of the current turn.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A copy of the counters.
    pub fn stats(&self) -> Stats {
        self.shared.counters.snapshot()
    }

    /// Registered sources.
    pub fn source_count(&self) -> usize {
        self.shared.sources.load(Ordering::Relaxed)
    }

    /// Pending timers (of sources and callbacks).
    pub fn timer_count(&self) -> usize {
        self.timers.len()
    }

    /// Registers `handler`'s source with `interest` and returns its id.
    ///
    /// # Errors
    /// The registration failed; the handler is dropped.
    pub fn insert(
        &mut self,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> io::Result<SourceId> {
        self.try_insert(handler, interest).map_err(|(e, _)| e)
    }

    /// As [`insert`](Self::insert), but a failed registration is reported to the handler as
    /// `on_close(CloseReason::RegistrationFailed(kind))` before it is dropped.
    ///
    /// # Errors
    /// The registration failed.
    pub fn insert_or_close(
        &mut self,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> io::Result<SourceId> {
        self.try_insert(handler, interest)
            .map_err(|(e, mut handler)| {
                handler.on_close(CloseReason::RegistrationFailed(e.kind()));
                e
            })
    }

    /// As [`insert`](Self::insert), giving the handler back on failure.
    fn try_insert(
        &mut self,
        mut handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> Result<SourceId, (io::Error, Box<dyn Handler>)> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => match u32::try_from(self.slots.len())
                .ok()
                .filter(|&i| i < u32::MAX)
            {
                Some(index) => {
                    self.slots.push(Slot {
                        generation: 0,
                        handler: None,
                        occupied: false,
                        pending_ready: Ready::EMPTY,
                        pending_timers: Vec::new(),
                        timers: Vec::new(),
                        closing: false,
                        last_turn: Duration::ZERO,
                    });
                    index
                }
                None => return Err((io::Error::other("reactor source table is full"), handler)),
            },
        };
        let slot = &mut self.slots[index as usize];
        let id = SourceId {
            index,
            generation: slot.generation,
        };
        if let Err(e) = self
            .shared
            .registry
            .register(handler.source(), id.token(), interest)
        {
            self.free.push(index);
            return Err((e, handler));
        }
        slot.handler = Some(handler);
        slot.occupied = true;
        slot.closing = false;
        slot.last_turn = Duration::ZERO;
        self.shared.sources.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }

    /// Removes a source: deregisters it, cancels its timers and calls
    /// `on_close(CloseReason::Closed)`. Returns `false` for an unknown id. A source held by a
    /// worker is removed when the worker returns it.
    pub fn remove(&mut self, id: SourceId) -> bool {
        self.close_source(id, CloseReason::Closed)
    }

    /// Gives a source a turn soon (`on_ready` with [`Ready::EMPTY`]), for work that reached it
    /// other than through its socket — a stop request, data queued from another thread.
    /// Returns `false` for an unknown id.
    pub fn wake(&mut self, id: SourceId) -> bool {
        let known = self
            .slots
            .get(id.index as usize)
            .is_some_and(|slot| slot.occupied && slot.generation == id.generation);
        if known {
            self.again_next.push((id, Ready::EMPTY));
        }
        known
    }

    /// Runs `callback` on this thread after `delay`, then every `period` if given.
    pub fn add_timer<F>(
        &mut self,
        delay: Duration,
        period: Option<Duration>,
        callback: F,
    ) -> TimerId
    where
        F: FnMut(&mut Reactor) + Send + 'static,
    {
        let id = self.shared.next_timer_id();
        let deadline = Instant::now() + delay;
        self.timers.insert(
            id,
            deadline,
            period,
            Target::Callback(Some(Box::new(callback))),
        );
        id
    }

    /// Cancels a timer; `true` if it was pending. A cancelled timer never fires.
    pub fn cancel_timer(&mut self, id: TimerId) -> bool {
        self.timers.cancel(id)
    }

    /// Stops the loop at the end of the current turn.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }

    /// Runs the loop until stopped, then closes every source.
    ///
    /// # Errors
    /// `poll` failed (other than by interruption).
    pub fn run(&mut self) -> io::Result<()> {
        let result = loop {
            if self.shared.stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            if let Err(e) = self.turn(None) {
                break Err(e);
            }
        };
        self.shutdown();
        result
    }

    /// One loop turn: waits for readiness (at most `max_wait`, and never past the next timer;
    /// not at all while sources wait to run again or work is queued), then serves events,
    /// sources over budget, due timers, posts and worker results.
    ///
    /// # Errors
    /// `poll` failed (other than by interruption).
    pub fn turn(&mut self, max_wait: Option<Duration>) -> io::Result<()> {
        let mut timeout = if self.again_next.is_empty() {
            let until_timer = self
                .timers
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            match (until_timer, max_wait) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            Some(Duration::ZERO)
        };
        self.shared.polling.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !self.posts.is_empty()
            || self.workers.as_ref().is_some_and(|w| !w.done.is_empty())
            || self.shared.stop.load(Ordering::SeqCst)
        {
            timeout = Some(Duration::ZERO);
        }
        let polled = self.poll.poll(&mut self.events, timeout);
        self.shared.polling.store(false, Ordering::SeqCst);
        match polled {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        self.now = Instant::now();
        let counters = &self.shared.counters;
        counters.add_turns(1);

        // Sources over budget before this poll run after this turn's new events; sources that
        // go over budget now are collected afresh in `again_next`.
        std::mem::swap(&mut self.again, &mut self.again_next);
        let mut batch = std::mem::take(&mut self.batch);
        for event in self.events.iter() {
            if event.token() == WAKER {
                counters.add_wakeups(1);
                continue;
            }
            batch.push((
                SourceId::from_token(event.token()),
                Ready::from_event(event),
            ));
        }
        counters.add_events(batch.len() as u64);
        batch.append(&mut self.again);
        // With workers, the polling thread serves the turn's last source itself and lends the
        // others: a lone request/response exchange then never changes threads (no handoff per
        // event), while a busy turn still spreads over the workers.
        let last = batch.len().wrapping_sub(1);
        for (i, (id, ready)) in batch.drain(..).enumerate() {
            self.dispatch(id, Work::Ready(ready), i == last);
        }
        self.batch = batch;

        while let Some(timer) = self.timers.pop_due(self.now) {
            self.fire_timer(timer);
        }
        self.run_posts();
        self.collect_done(false);
        Ok(())
    }

    fn run_posts(&mut self) {
        // Bounded by what is queued now: posts made by posts run next turn.
        for _ in 0..self.posts.len() {
            match self.posts.try_recv() {
                Ok(post) => post(self),
                Err(_) => break,
            }
        }
    }

    fn fire_timer(&mut self, timer: TimerId) {
        let Some(entry) = self.timers.get_mut(timer) else {
            return;
        };
        match &mut entry.target {
            Target::Source(id) => {
                let id = *id;
                self.dispatch(id, Work::Timer(timer), false);
            }
            Target::Callback(callback) => {
                let Some(mut callback) = callback.take() else {
                    return;
                };
                callback(self);
                // Put it back unless it was cancelled meanwhile; a one-shot is finished.
                if let Some(entry) = self.timers.get_mut(timer) {
                    entry.target = Target::Callback(Some(callback));
                }
                self.timers.finish(timer);
            }
        }
    }

    /// Serves `work` for `id`: on this thread (no workers, or `inline`), or through a worker,
    /// or later if a worker holds it.
    fn dispatch(&mut self, id: SourceId, work: Work, inline: bool) {
        let Some(slot) = self.slots.get_mut(id.index as usize) else {
            return;
        };
        if !slot.occupied || slot.generation != id.generation {
            // A stale event or timer of a closed source.
            if let Work::Timer(timer) = work {
                self.timers.cancel(timer);
            }
            return;
        }
        let Some(mut handler) = slot.handler.take() else {
            // Held by a worker: deliver when it comes back, in order.
            match work {
                Work::Ready(ready) => slot.pending_ready |= ready,
                Work::Timer(timer) => slot.pending_timers.push(timer),
            }
            return;
        };
        if let Work::Timer(timer) = work {
            // Cancelled after firing but before delivery: skip it.
            if !self.timers.contains(timer) {
                slot.handler = Some(handler);
                return;
            }
            self.timers.finish(timer);
            if !self.timers.contains(timer) {
                slot.timers.retain(|&t| t != timer);
            }
        }
        let cheap = slot.last_turn < self.config.inline_below;
        if let Some(workers) = self.workers.as_mut().filter(|_| !inline && !cheap) {
            workers.lent += 1;
            let job = Job {
                id,
                handler,
                work,
                now: self.now,
            };
            if let Err(crossbeam_channel::SendError(job)) = workers.jobs.send(job) {
                // No worker left (they only exit after the reactor stops): keep the handler.
                workers.lent -= 1;
                self.slots[id.index as usize].handler = Some(job.handler);
            }
            return;
        }
        // Timed only where it decides something: with workers.
        let started = self.workers.is_some().then(Instant::now);
        let mut cx = Context {
            id,
            now: self.now,
            scratch: &mut self.scratch,
            effects: &mut self.effects,
            shared: &self.shared,
            budget: self.config.budget,
        };
        let turn = match work {
            Work::Ready(ready) => handler.on_ready(&mut cx, ready),
            Work::Timer(timer) => handler.on_timer(&mut cx, timer),
        };
        let ready = match work {
            Work::Ready(ready) => ready,
            Work::Timer(_) => Ready::EMPTY,
        };
        let slot = &mut self.slots[id.index as usize];
        slot.handler = Some(handler);
        if let Some(started) = started {
            slot.last_turn = started.elapsed();
        }
        let mut effects = std::mem::take(&mut self.effects);
        self.finish_turn(id, turn, ready, &mut effects);
        self.effects = effects;
    }

    /// Applies a handler's effects and schedules it again if it used its budget.
    fn finish_turn(&mut self, id: SourceId, turn: Turn, ready: Ready, effects: &mut Vec<Effect>) {
        let mut close = false;
        for effect in effects.drain(..) {
            match effect {
                Effect::SetTimer {
                    id: timer,
                    deadline,
                    period,
                } => {
                    self.timers
                        .insert(timer, deadline, period, Target::Source(id));
                    if let Some(slot) = self.slots.get_mut(id.index as usize) {
                        slot.timers.push(timer);
                    }
                }
                Effect::CancelTimer(timer) => {
                    self.timers.cancel(timer);
                    if let Some(slot) = self.slots.get_mut(id.index as usize) {
                        slot.timers.retain(|&t| t != timer);
                    }
                }
                Effect::Close => close = true,
                Effect::Insert { handler, interest } => {
                    // A failure is reported to the new handler itself.
                    let _ = self.insert_or_close(handler, interest);
                }
            }
        }
        if close {
            self.close_source(id, CloseReason::Closed);
        } else if turn == Turn::Again {
            self.again_next.push((id, ready));
        }
    }

    /// Takes back handlers from workers, applies their effects, and re-dispatches work that
    /// arrived meanwhile. With `block`, waits for at least one.
    pub(crate) fn collect_done(&mut self, block: bool) {
        let Some(workers) = &self.workers else { return };
        if block
            && workers.lent > 0
            && let Ok(done) = workers.done.recv_timeout(Duration::from_millis(100))
        {
            self.return_handler(done);
        }
        while let Some(done) = self.workers.as_ref().and_then(|w| w.done.try_recv().ok()) {
            self.return_handler(done);
        }
    }

    fn return_handler(&mut self, done: Done) {
        let Done {
            id,
            handler,
            turn,
            ready,
            mut effects,
            took,
        } = done;
        if let Some(workers) = &mut self.workers {
            workers.lent -= 1;
        }
        let slot = &mut self.slots[id.index as usize];
        slot.handler = Some(handler);
        slot.last_turn = took;
        self.finish_turn(id, turn, ready, &mut effects);
        let slot = &mut self.slots[id.index as usize];
        if !slot.occupied || slot.generation != id.generation {
            return;
        }
        if slot.closing {
            self.close_source(id, CloseReason::Closed);
            return;
        }
        // Deliver what arrived while the worker held it: timers first (they fired earlier
        // than the readiness merged since), then the merged readiness.
        if let Some(timer) = slot.pending_timers.first().copied() {
            slot.pending_timers.remove(0);
            self.dispatch(id, Work::Timer(timer), false);
            return;
        }
        let mut ready = std::mem::take(&mut slot.pending_ready);
        if !ready.is_empty() {
            // If it also asked to run again, that run is merged into this one.
            self.again_next.retain(|&(again, again_ready)| {
                if again == id {
                    ready |= again_ready;
                }
                again != id
            });
            self.dispatch(id, Work::Ready(ready), false);
        }
    }

    fn close_source(&mut self, id: SourceId, reason: CloseReason) -> bool {
        let Some(slot) = self.slots.get_mut(id.index as usize) else {
            return false;
        };
        if !slot.occupied || slot.generation != id.generation {
            return false;
        }
        let Some(mut handler) = slot.handler.take() else {
            // Held by a worker: close when it is returned.
            slot.closing = true;
            return true;
        };
        let _ = self.shared.registry.deregister(handler.source());
        for timer in slot.timers.drain(..) {
            self.timers.cancel(timer);
        }
        slot.pending_timers.clear();
        slot.pending_ready = Ready::EMPTY;
        slot.occupied = false;
        slot.closing = false;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id.index);
        self.shared.sources.fetch_sub(1, Ordering::Relaxed);
        self.again_next.retain(|(again, _)| *again != id);
        handler.on_close(reason);
        true
    }

    /// Closes everything after the loop ends.
    fn shutdown(&mut self) {
        // Wait for workers to hand every source back (bounded: each wait is 100 ms and a
        // handler turn is short).
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.workers.as_ref().is_some_and(|w| w.lent > 0) && Instant::now() < deadline {
            self.collect_done(true);
        }
        for index in 0..self.slots.len() {
            let slot = &self.slots[index];
            if slot.occupied {
                let id = SourceId {
                    index: index as u32,
                    generation: slot.generation,
                };
                self.close_source(id, CloseReason::Stopped);
            }
        }
        self.timers.clear();
        self.again_next.clear();
        // Dropped, not run.
        while self.posts.try_recv().is_ok() {}
        // Disconnect the workers.
        self.workers = None;
    }
}

/// Hooks for the crate's deterministic delivery tests: the test thread plays the worker and
/// injects events, so no sleep or race decides what a test sees.
#[cfg(test)]
impl Reactor {
    /// Attaches a worker link whose other end the test holds.
    pub(crate) fn test_manual_workers(&mut self) -> (Receiver<Job>, Sender<Done>) {
        let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        self.attach_workers(WorkerLink {
            jobs: jobs_tx,
            done: done_rx,
            lent: 0,
        });
        (jobs_rx, done_tx)
    }

    /// Pretends the source's last turn took `took` (decides inline or lent).
    pub(crate) fn test_set_last_turn(&mut self, id: SourceId, took: Duration) {
        self.slots[id.index as usize].last_turn = took;
    }

    /// A one-shot timer of `id`, as if its handler had set it, due at the next turn.
    pub(crate) fn test_source_timer(&mut self, id: SourceId) -> TimerId {
        let timer = self.shared.next_timer_id();
        let mut effects = vec![Effect::SetTimer {
            id: timer,
            deadline: self.now,
            period: None,
        }];
        self.finish_turn(id, Turn::Done, Ready::EMPTY, &mut effects);
        timer
    }

    /// Readiness for `id`, as the next poll would report it.
    pub(crate) fn test_inject(&mut self, id: SourceId, ready: Ready) {
        self.again_next.push((id, ready));
    }
}
