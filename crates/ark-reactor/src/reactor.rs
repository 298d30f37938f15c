//! `Reactor`: one readiness loop over a `mio::Poll`.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::config::ReactorConfig;
use crate::far_timer::{FAR_TIMER, FarTimer};
use crate::handler::{Context, Effect, Handler, Posted, ReactorHandle, Shared};
use crate::ids::{SourceId, SourceIds, TimerId};
use crate::lending::{LONG_TURN, Lending, TURNS_PER_POLL};
use crate::slot::Slot;
use crate::source::{CloseReason, Ready, Turn};
use crate::stats::Stats;
use crate::timer::{Target, Timers};
use crate::turn::{Done, Job, Work, run_turn};

/// A callback timer: runs on the reactor thread with the reactor.
pub(crate) type TimerCallback = Box<dyn FnMut(&mut Reactor) + Send>;

/// Token of the reactor's waker (never a source token: source indexes stay below 2^32 - 1).
const WAKER: mio::Token = mio::Token(u32::MAX as usize);

/// One readiness loop: a `mio::Poll`, its events, a slab of sources with their handlers,
/// timers, posted work and a scratch read buffer.
///
/// # Threads
///
/// A `Reactor` is driven by one thread calling [`run`](Self::run). In the shared IO model with
/// several threads (see [`ReactorPool`](crate::ReactorPool)) its threads take turns: the one
/// that polls gathers the ready sources, and any thread takes a ready source's handler out of
/// its slot, runs its turn without holding the reactor, and gives it back; a source is never
/// on two threads at once. Posted closures and callback timers run on the thread that polls,
/// with the reactor held.
///
/// # Delivery
///
/// Everything that reaches a source — readiness, a [wake](Self::wake), a fired timer, a re-run
/// after its budget — is first merged into the source's pending work, and delivered from
/// there in one place: after every turn of its handler (on this thread or lent to another),
/// the reactor delivers what became pending meanwhile, timers in the order they fired, then the
/// merged readiness. Nothing that arrives while a handler is lent is lost, and a source runs
/// at most once per loop turn for its readiness, however many edges arrive.
///
/// # Draining readiness and fairness
///
/// Events are edge-triggered: a handler drains its source until `WouldBlock`, or until its
/// [`Budget`](crate::Budget) is used and it returns [`Turn::Again`]. Sources that returned
/// `Again` run again in the next loop turn, after the new events, and the reactor does not
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
    /// `None` in the shared model with several threads, whose threads hold it in turn.
    poll: Option<mio::Poll>,
    events: mio::Events,
    slots: Vec<Slot>,
    timers: Timers<TimerCallback>,
    shared: Arc<Shared>,
    posts: Receiver<Posted>,
    wakes: Receiver<SourceId>,
    scratch: Vec<u8>,
    effects: Vec<Effect>,
    /// Sources with pending work, each once (`Slot::queued`), served at the end of the turn.
    queue: Vec<SourceId>,
    /// The queue being served (reused storage).
    serving: Vec<SourceId>,
    /// Sources that returned `Turn::Again`, each once (`Slot::again`): run next turn.
    again: Vec<SourceId>,
    /// The shared model with several threads: turns lent to them.
    lending: Option<Lending>,
    /// Wakes the poll for far timer deadlines, so it blocks without a timeout.
    far_timer: FarTimer,
    config: ReactorConfig,
    now: Instant,
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("sources", &self.source_count())
            .field("timers", &self.timers.len())
            .field("lending", &self.lending.is_some())
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
        let far_timer = FarTimer::new(poll.registry())?;
        let registry = poll.registry().try_clone()?;
        let (posts_tx, posts_rx) = crossbeam_channel::unbounded();
        let (wakes_tx, wakes_rx) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            registry,
            waker,
            posts: posts_tx,
            wakes: wakes_tx,
            inbound: AtomicUsize::new(0),
            ids: SourceIds::new(),
            counters: Default::default(),
            stop: AtomicBool::new(false),
            polling: AtomicBool::new(false),
            timer_ids: AtomicU64::new(0),
            sources: AtomicUsize::new(0),
        });
        Ok(Reactor {
            poll: Some(poll),
            events: mio::Events::with_capacity(config.events_capacity.max(1)),
            slots: Vec::new(),
            timers: Timers::default(),
            shared,
            posts: posts_rx,
            wakes: wakes_rx,
            scratch: vec![0; config.scratch_bytes],
            effects: Vec::new(),
            queue: Vec::new(),
            serving: Vec::new(),
            again: Vec::new(),
            lending: None,
            far_timer,
            config,
            now: Instant::now(),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Makes this reactor the core of a shared model with several threads: every turn is lent
    /// (see [`crate::shared`]), and the poll instance goes to the threads.
    pub(crate) fn lend_every_turn(&mut self) -> Option<mio::Poll> {
        self.lending = Some(Lending::default());
        self.poll.take()
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

    /// The live slot of `id`, if `id` is current.
    #[inline]
    fn slot_mut(&mut self, id: SourceId) -> Option<&mut Slot> {
        self.slots
            .get_mut(id.index as usize)
            .filter(|slot| slot.occupied && slot.generation == id.generation)
    }

    /// Registers `handler`'s source with `interest` and returns its id.
    ///
    /// # Errors
    /// The source table is full, or the registration failed; the handler is dropped.
    pub fn insert(
        &mut self,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> io::Result<SourceId> {
        let id = self.reserve_id()?;
        self.try_install(id, handler, interest).map_err(|(e, _)| e)
    }

    /// As [`insert`](Self::insert), but a failed registration is reported to the handler as
    /// `on_close(CloseReason::RegistrationFailed(kind))` before it is dropped.
    ///
    /// # Errors
    /// The source table is full, or the registration failed.
    pub fn insert_or_close(
        &mut self,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> io::Result<SourceId> {
        match self.reserve_id() {
            Ok(id) => self.install(id, handler, interest).map(|()| id),
            Err(e) => {
                let mut handler = handler;
                handler.on_close(CloseReason::RegistrationFailed(e.kind()));
                Err(e)
            }
        }
    }

    /// Reserves the id of a source to [`install`](Self::install) later (a handler that hands
    /// out references to itself needs its id before it is registered).
    ///
    /// # Errors
    /// The source table is full.
    pub fn reserve_id(&self) -> io::Result<SourceId> {
        self.shared
            .ids
            .reserve()
            .ok_or_else(|| io::Error::other("reactor source table is full"))
    }

    /// Registers a source under an id from [`reserve_id`](Self::reserve_id); a failure is
    /// reported to the handler as `on_close(CloseReason::RegistrationFailed(kind))`.
    ///
    /// # Errors
    /// The registration failed.
    pub fn install(
        &mut self,
        id: SourceId,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> io::Result<()> {
        match self.try_install(id, handler, interest) {
            Ok(_) => Ok(()),
            Err((e, mut handler)) => {
                handler.on_close(CloseReason::RegistrationFailed(e.kind()));
                Err(e)
            }
        }
    }

    /// Registers a source under a reserved id, giving the handler back on failure.
    fn try_install(
        &mut self,
        id: SourceId,
        mut handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> Result<SourceId, (io::Error, Box<dyn Handler>)> {
        let index = id.index as usize;
        if self.slots.len() <= index {
            self.slots.resize_with(index + 1, Slot::default);
        }
        if let Err(e) = self
            .shared
            .registry
            .register(handler.source(), id.token(), interest)
        {
            self.shared.ids.release(id);
            return Err((e, handler));
        }
        self.slots[index].occupy(id.generation, handler);
        self.shared.sources.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }

    /// Removes a source: deregisters it, cancels its timers and calls
    /// `on_close(CloseReason::Closed)`. Returns `false` for an unknown id. A source whose
    /// handler is lent is removed when the handler is given back.
    pub fn remove(&mut self, id: SourceId) -> bool {
        self.close_source(id, CloseReason::Closed)
    }

    /// Gives a source a turn soon: its `on_ready` sees [`Ready::WAKE`]. For work that reached
    /// it other than through its socket (a stop request, data queued from another thread).
    /// A wake is never lost: one that arrives while the handler is lent is delivered
    /// when it comes back. Returns `false` for an unknown id.
    pub fn wake(&mut self, id: SourceId) -> bool {
        self.add_ready(id, Ready::WAKE)
    }

    /// Merges readiness into a source's pending work and schedules it.
    #[inline]
    fn add_ready(&mut self, id: SourceId, ready: Ready) -> bool {
        let Some(slot) = self.slot_mut(id) else {
            return false;
        };
        slot.pending.ready |= ready;
        if !std::mem::replace(&mut slot.queued, true) {
            self.queue.push(id);
        }
        true
    }

    /// Puts a source with pending work in the run queue (once).
    #[inline]
    fn schedule(&mut self, id: SourceId) {
        if let Some(slot) = self.slot_mut(id)
            && !slot.queued
        {
            slot.queued = true;
            self.queue.push(id);
        }
    }

    /// Runs `callback` with the reactor after `delay`, then every `period` if given (on the
    /// reactor's thread; in the shared model with several threads, on the one that polls).
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
    /// not at all while sources wait to run or work is queued), then gathers this turn's work —
    /// new events, sources over budget before, due timers, posts and wakes — and serves every
    /// source that has some.
    ///
    /// # Errors
    /// `poll` failed (other than by interruption).
    pub fn turn(&mut self, max_wait: Option<Duration>) -> io::Result<()> {
        let Some(mut poll) = self.poll.take() else {
            return Err(io::Error::other(
                "this reactor's poll instance belongs to its shared model's threads",
            ));
        };
        let mut events = std::mem::replace(&mut self.events, mio::Events::with_capacity(0));
        let timeout = self.begin_poll(max_wait);
        let polled = poll.poll(&mut events, timeout);
        let result = self.end_poll(&mut events, polled);
        self.poll = Some(poll);
        self.events = events;
        result
    }

    /// Before a poll: how long it may block (at most `max_wait`, and never past the next timer;
    /// not at all while sources wait to run or work is queued). From here to
    /// [`end_poll`](Self::end_poll) producers wake the poll when they publish work.
    pub(crate) fn begin_poll(&mut self, max_wait: Option<Duration>) -> Option<Duration> {
        let idle = self.queue.is_empty()
            && self.again.is_empty()
            && self.lending.as_ref().is_none_or(|l| l.jobs.is_empty());
        let now = Instant::now();
        let mut timeout = if idle {
            let far_timer = &mut self.far_timer;
            let until_timer = self
                .timers
                .next_deadline()
                .and_then(|deadline| far_timer.timeout(now, deadline));
            match (until_timer, max_wait) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            Some(Duration::ZERO)
        };
        self.shared.polling.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.shared.inbound.load(Ordering::SeqCst) != 0
            || self.shared.stop.load(Ordering::SeqCst)
        {
            timeout = Some(Duration::ZERO);
        }
        if let Some(lending) = &mut self.lending {
            lending.polling = true;
            lending.poll_until = timeout.map(|t| now + t);
        }
        timeout
    }

    /// After a poll: gathers this turn's work — the new events, sources over budget before,
    /// due timers, posts and wakes — and serves every source that has some.
    ///
    /// # Errors
    /// `poll` failed (other than by interruption).
    pub(crate) fn end_poll(
        &mut self,
        events: &mut mio::Events,
        polled: io::Result<()>,
    ) -> io::Result<()> {
        self.shared.polling.store(false, Ordering::SeqCst);
        if let Some(lending) = &mut self.lending {
            lending.polling = false;
            lending.taken_since_poll = 0;
        }
        match polled {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        self.now = Instant::now();
        self.shared.counters.add_turns(1);
        self.take_events(events);
        // Sources over budget before this poll run after this turn's new events.
        self.take_again();
        while let Some(timer) = self.timers.pop_due(self.now) {
            self.fire_timer(timer);
        }
        self.run_posts();
        self.serve_queue();
        Ok(())
    }

    fn take_events(&mut self, events: &mut mio::Events) {
        let mut count = 0;
        for event in events.iter() {
            if event.token() == WAKER {
                self.shared.counters.add_wakeups(1);
                continue;
            }
            if event.token() == FAR_TIMER {
                self.far_timer.fired();
                continue;
            }
            count += 1;
            self.add_ready(
                SourceId::from_token(event.token()),
                Ready::from_event(event),
            );
        }
        events.clear();
        self.shared.counters.add_events(count);
    }

    fn take_again(&mut self) {
        let mut again = std::mem::take(&mut self.again);
        for id in again.drain(..) {
            if let Some(slot) = self.slot_mut(id)
                && let Some(ready) = slot.again.take()
            {
                slot.pending.ready |= ready;
                slot.pending.rerun = true;
                self.schedule(id);
            }
        }
        self.again = again;
    }

    fn run_posts(&mut self) {
        // Bounded by what was sent before this turn: posts made by posts run next turn.
        let inbound = self.shared.inbound.load(Ordering::SeqCst);
        if inbound == 0 {
            return;
        }
        let mut taken = 0;
        while taken < inbound {
            if let Ok(post) = self.posts.try_recv() {
                taken += 1;
                post(self);
            } else if let Ok(id) = self.wakes.try_recv() {
                taken += 1;
                self.wake(id);
            } else {
                // Counted, not yet in a queue (a sender between its count and its send).
                break;
            }
        }
        self.shared.inbound.fetch_sub(taken, Ordering::SeqCst);
    }

    fn fire_timer(&mut self, timer: TimerId) {
        let Some(entry) = self.timers.get_mut(timer) else {
            return;
        };
        match &mut entry.target {
            Target::Source(id) => {
                let id = *id;
                match self.slot_mut(id) {
                    Some(slot) => {
                        slot.pending.timers.push_back(timer);
                        self.schedule(id);
                    }
                    // A timer of a closed source.
                    None => {
                        self.timers.cancel(timer);
                    }
                }
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

    /// Serves every queued source (in the shared model with several threads: lends each turn).
    /// Work queued while serving waits for the next turn.
    fn serve_queue(&mut self) {
        // This turn's queue is served from `batch`; `self.queue` collects work for the next.
        let mut batch = std::mem::take(&mut self.serving);
        std::mem::swap(&mut batch, &mut self.queue);
        for id in batch.drain(..) {
            if let Some(slot) = self.slot_mut(id) {
                slot.queued = false;
                self.serve(id);
            }
        }
        self.serving = batch;
    }

    /// Delivers a source's pending work, in order, until none is left or its handler is lent
    /// (the rest follows when it is given back): the one place work reaches handlers.
    fn serve(&mut self, id: SourceId) {
        loop {
            let Some(slot) = self.slot_mut(id) else {
                return;
            };
            if slot.handler.is_none() {
                return;
            }
            if slot.closing {
                self.close_source(id, CloseReason::Closed);
                return;
            }
            let Some(work) = self.next_work(id) else {
                return;
            };
            if !self.lend(id, work) {
                self.run_inline(id, work);
            }
        }
    }

    /// The next piece of a source's pending work: a fired timer not cancelled since, else the
    /// merged readiness.
    fn next_work(&mut self, id: SourceId) -> Option<Work> {
        let Reactor { slots, timers, .. } = self;
        let slot = &mut slots[id.index as usize];
        while let Some(timer) = slot.pending.timers.pop_front() {
            if !timers.contains(timer) {
                continue; // cancelled after it fired
            }
            timers.finish(timer);
            if !timers.contains(timer) {
                slot.timers.retain(|&t| t != timer);
            }
            return Some(Work::Timer(timer));
        }
        slot.pending.take_ready().map(Work::Ready)
    }

    /// In the shared model with several threads, takes the handler out of its slot and queues
    /// its turn for a thread; `false` (the turn runs here) otherwise.
    fn lend(&mut self, id: SourceId, work: Work) -> bool {
        let Some(lending) = &mut self.lending else {
            return false;
        };
        let slot = &mut self.slots[id.index as usize];
        let Some(handler) = slot.handler.take() else {
            return false;
        };
        lending.jobs.push_back(Job {
            id,
            handler,
            work,
            now: self.now,
            long: slot.last_turn >= LONG_TURN,
        });
        true
    }

    /// Runs one turn of the handler on this thread and applies its effects.
    fn run_inline(&mut self, id: SourceId, work: Work) {
        let index = id.index as usize;
        let Some(mut handler) = self.slots[index].handler.take() else {
            return;
        };
        let mut cx = Context {
            id,
            now: self.now,
            scratch: &mut self.scratch,
            effects: &mut self.effects,
            shared: &self.shared,
            budget: self.config.budget,
        };
        let (turn, ready) = run_turn(handler.as_mut(), &mut cx, work);
        self.slots[index].handler = Some(handler);
        let mut effects = std::mem::take(&mut self.effects);
        match turn {
            Some(turn) => self.finish_turn(id, turn, ready, &mut effects),
            None => {
                // What a panicking turn asked for is not to be trusted.
                effects.clear();
                self.close_source(id, CloseReason::Panicked);
            }
        }
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
                    if let Some(slot) = self.slot_mut(id) {
                        slot.timers.push(timer);
                    }
                }
                Effect::CancelTimer(timer) => {
                    self.timers.cancel(timer);
                    if let Some(slot) = self.slot_mut(id) {
                        slot.timers.retain(|&t| t != timer);
                    }
                }
                Effect::Close => close = true,
                Effect::Wake(other) => {
                    self.wake(other);
                }
                Effect::Insert {
                    id: new,
                    handler,
                    interest,
                } => {
                    // A failure is reported to the new handler itself.
                    let _ = self.install(new, handler, interest);
                }
            }
        }
        if close {
            self.close_source(id, CloseReason::Closed);
        } else if turn == Turn::Again
            && let Some(slot) = self.slot_mut(id)
        {
            if slot.again.is_none() {
                self.again.push(id);
            }
            let slot = &mut self.slots[id.index as usize];
            slot.again = Some(slot.again.unwrap_or_default() | ready);
        }
    }

    /// Shared model: the oldest lent turn waiting for a thread.
    pub(crate) fn take_job(&mut self) -> Option<Job> {
        let lending = self.lending.as_mut()?;
        let job = lending.jobs.pop_front()?;
        lending.taken_since_poll += 1;
        Some(job)
    }

    /// Shared model: nobody polls and the threads have taken [`TURNS_PER_POLL`] turns since the
    /// last poll; the next free thread polls (without blocking) before it takes another.
    pub(crate) fn poll_overdue(&self) -> bool {
        self.lending
            .as_ref()
            .is_some_and(|l| !l.polling && l.taken_since_poll >= TURNS_PER_POLL)
    }

    /// The shared model's bookkeeping (created on first use).
    pub(crate) fn lending_mut(&mut self) -> &mut Lending {
        self.lending.get_or_insert_with(Lending::default)
    }

    /// Shared model: takes back a handler after its lent turn, applies what it asked for, and
    /// lends what arrived for it (or for sources it woke) meanwhile. Wakes the polling thread
    /// if its poll would now block too long: a source over budget waits for it, or a timer set
    /// in this turn is due before the poll ends. Returns the turn's effects list, emptied, for
    /// the thread's next turn.
    pub(crate) fn give_back(&mut self, done: Done) -> Vec<Effect> {
        // Turns lent from here start from the clock the returning turn read last, not from the
        // last poll's (which may be many turns old).
        self.now = self.now.max(done.ended);
        let effects = self.return_handler(done);
        self.serve_queue();
        self.wake_poller_if_late();
        effects
    }

    /// Shared model: wakes the polling thread if a source over budget waits for the next poll
    /// or a timer is due before that poll would end.
    fn wake_poller_if_late(&mut self) {
        let Some(lending) = &self.lending else { return };
        let timer_sooner = match (self.timers.next_deadline(), lending.poll_until) {
            (Some(timer), Some(until)) => timer < until,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if lending.polling && (timer_sooner || !self.again.is_empty()) {
            self.shared.notify();
        }
    }

    /// Puts the handler back and applies its turn; gives back the turn's emptied effects list
    /// for the thread's next turn (a turn that sets a timer then allocates nothing).
    fn return_handler(&mut self, done: Done) -> Vec<Effect> {
        let Done {
            id,
            handler,
            turn,
            ready,
            mut effects,
            took,
            panicked,
            ..
        } = done;
        let slot = &mut self.slots[id.index as usize];
        slot.handler = Some(handler);
        slot.last_turn = took;
        if panicked {
            // What a panicking turn asked for is not to be trusted.
            effects.clear();
            self.close_source(id, CloseReason::Panicked);
            return effects;
        }
        self.finish_turn(id, turn, ready, &mut effects);
        if let Some(slot) = self.slot_mut(id) {
            if slot.closing {
                self.close_source(id, CloseReason::Closed);
            } else if !slot.pending.is_empty() {
                self.schedule(id);
            }
        }
        effects
    }

    fn close_source(&mut self, id: SourceId, reason: CloseReason) -> bool {
        if self.slot_mut(id).is_none() {
            return false;
        }
        let slot = &mut self.slots[id.index as usize];
        let Some(mut handler) = slot.handler.take() else {
            // Lent: closed when it is given back.
            slot.closing = true;
            return true;
        };
        let _ = self.shared.registry.deregister(handler.source());
        for timer in slot.timers.drain(..) {
            self.timers.cancel(timer);
        }
        slot.pending.clear();
        slot.occupied = false;
        slot.closing = false;
        slot.queued = false;
        slot.again = None;
        self.shared.ids.release(id);
        self.shared.sources.fetch_sub(1, Ordering::Relaxed);
        // A panic in `on_close` ends only this source's close.
        let closing = std::panic::AssertUnwindSafe(|| handler.on_close(reason));
        let _ = std::panic::catch_unwind(closing);
        true
    }

    /// Closes everything after the loop ends (in the shared model, once every thread has given
    /// back the turn it ran; turns still waiting for a thread are dropped unrun).
    pub(crate) fn shutdown(&mut self) {
        while let Some(job) = self.take_job() {
            self.slots[job.id.index as usize].handler = Some(job.handler);
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
        self.queue.clear();
        self.again.clear();
        // Dropped, not run.
        while self.posts.try_recv().is_ok() {}
    }
}

/// Hooks for the crate's deterministic delivery tests: the test thread plays the shared
/// model's other threads (it takes lent turns and gives them back when it likes) and injects
/// events, so no sleep or race decides what a test sees.
#[cfg(test)]
impl Reactor {
    /// Lends every turn, as in the shared model, but keeps the poll instance for
    /// [`turn`](Self::turn).
    pub(crate) fn test_lend_every_turn(&mut self) {
        self.lending = Some(Lending::default());
    }

    /// Pretends the source's last lent turn took `took`.
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
        self.add_ready(id, ready);
    }
}
