//! The shared IO model with several threads: one reactor, served by all of its threads in turn
//! (leader/followers, as tokio's multi-thread scheduler does with its IO driver).
//!
//! The reactor sits behind a mutex. A thread that finds no turn waiting becomes the poller: it
//! releases the reactor, blocks in `poll`, takes the reactor again and gathers the turn's work.
//! Every turn is lent: the handler leaves its slot with its work (a [`Job`]), and whichever
//! thread takes the job runs it without holding the reactor, then gives the handler back and
//! applies what it asked for. A thread that takes a job while more are waiting wakes an idle
//! thread, unless one is on its way already (or the poller, if none is idle), so a poll that
//! finds many ready sources spreads them over the threads one wake at a time, and a poll that
//! finds one serves it on the polling thread without a handoff. A turn expected to be long
//! (its source's last one took [`LONG_TURN`](crate::lending::LONG_TURN) or more) hands the polling to an idle thread
//! first, so other sources' events are not held up behind it. A source's handler is in one
//! place at a time — its slot, the job queue or one running thread — so it is never on two
//! threads at once, and what reaches it while it is out waits in its slot's pending work.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::config::ReactorConfig;
use crate::handler::Shared;
use crate::lending::{Wake, spread};
use crate::reactor::Reactor;
use crate::turn::serve_job;

/// One reactor and what its threads share.
pub(crate) struct SharedLoop {
    reactor: Mutex<Reactor>,
    /// Threads with nothing to do while another polls wait here.
    idle: Condvar,
    /// The poll instance and its events, held by the polling thread only.
    poll: Mutex<(mio::Poll, mio::Events)>,
    shared: Arc<Shared>,
    config: ReactorConfig,
}

impl SharedLoop {
    /// The shared model's core around `reactor`, which lends every turn from now on.
    pub(crate) fn new(mut reactor: Reactor) -> io::Result<SharedLoop> {
        let poll = reactor.lend_every_turn().ok_or_else(|| {
            io::Error::other("the reactor's poll instance is already held elsewhere")
        })?;
        let config = *reactor.config();
        Ok(SharedLoop {
            shared: reactor.shared().clone(),
            reactor: Mutex::new(reactor),
            idle: Condvar::new(),
            poll: Mutex::new((
                poll,
                mio::Events::with_capacity(config.events_capacity.max(1)),
            )),
            config,
        })
    }

    /// Counts a thread about to run [`run_thread`](Self::run_thread) (before it is spawned, so
    /// the last one out knows it is last).
    pub(crate) fn add_thread(&self) {
        self.lock().lending_mut().running += 1;
    }

    /// Takes back a thread counted by [`add_thread`](Self::add_thread) that never started.
    pub(crate) fn remove_thread(&self) {
        self.lock().lending_mut().running -= 1;
    }

    fn lock(&self) -> MutexGuard<'_, Reactor> {
        // A panic with the reactor held can only come from a posted closure or a callback timer
        // (handlers run unlocked and their panics are caught); the reactor's own state is
        // consistent between its steps, so the other threads carry on.
        self.reactor.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One thread's loop: run waiting turns, else poll if nobody does, else wait. The last
    /// thread to leave after a stop closes every source.
    ///
    /// # Errors
    /// `poll` failed (other than by interruption); the other threads stop too.
    pub(crate) fn run_thread(&self) -> io::Result<()> {
        let mut scratch = vec![0u8; self.config.scratch_bytes];
        // Room for a turn's few effects from the start: the first timer a lent turn set on
        // this thread allocated otherwise, at any time in a run (tests/allocations.rs in
        // ark-tcp counted it in the measured phase now and then).
        let mut effects = Vec::with_capacity(8);
        let mut reactor = self.lock();
        let result = loop {
            if self.shared.stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            // An overdue poll comes before the next turn.
            let job = if reactor.poll_overdue() {
                None
            } else {
                reactor.take_job()
            };
            if let Some(job) = job {
                let lending = reactor.lending_mut();
                let wake = spread(lending, !lending.jobs.is_empty(), job.long);
                drop(reactor);
                self.wake(wake);
                let done = serve_job(
                    job,
                    &mut scratch,
                    &mut effects,
                    &self.shared,
                    self.config.budget,
                );
                reactor = self.lock();
                effects = reactor.give_back(done);
            } else if !reactor.lending_mut().polling {
                let polled;
                (reactor, polled) = self.poll_once(reactor);
                if let Err(e) = polled {
                    self.shared.stop.store(true, Ordering::SeqCst);
                    break Err(e);
                }
            } else {
                reactor.lending_mut().idle += 1;
                reactor = self.idle.wait(reactor).unwrap_or_else(|e| e.into_inner());
                let lending = reactor.lending_mut();
                lending.idle -= 1;
                // A spurious wakeup takes a notification's place: at worst a later turn
                // notifies once more than it had to.
                lending.notified = false;
            }
        };
        self.leave(reactor);
        result
    }

    /// Makes the wake [`spread`] chose, once the reactor is unlocked: a thread woken while
    /// the waker still held it blocked again at once on the reactor's mutex (half of the
    /// condition variable's wakes at TCP 64 B, four threads on two cores), costing a second
    /// sleep and a second wake.
    fn wake(&self, wake: Wake) {
        match wake {
            Wake::Nobody => {}
            Wake::Idle => self.idle.notify_one(),
            Wake::Poller => self.shared.notify(),
        }
    }

    /// Polls without holding the reactor, then gathers what the poll found.
    fn poll_once<'a>(
        &'a self,
        mut reactor: MutexGuard<'a, Reactor>,
    ) -> (MutexGuard<'a, Reactor>, io::Result<()>) {
        let timeout = reactor.begin_poll(None);
        let mut poll = self.poll.lock().unwrap_or_else(|e| e.into_inner());
        drop(reactor);
        let (instance, events) = &mut *poll;
        let polled = instance.poll(events, timeout);
        let mut reactor = self.lock();
        let gathered = reactor.end_poll(events, polled);
        (reactor, gathered)
    }

    /// A thread leaves after a stop: it wakes the others so they see it too, and the last one
    /// out closes every source (every running turn has been given back by then).
    fn leave(&self, mut reactor: MutexGuard<'_, Reactor>) {
        self.idle.notify_all();
        // A poller blocked in `poll` sees the stop through the waker.
        self.shared.notify();
        let lending = reactor.lending_mut();
        lending.running -= 1;
        if lending.running == 0 {
            reactor.shutdown();
        }
    }
}
