//! `Lifecycle` and `Stopping`: the stop protocol every ark server and client shares.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::answer::{Answer, Answerer};

use crate::pool::{ReactorPool, SourceRef, release_pool};

/// The stop protocol shared by servers and clients. Members (sessions, sockets) join when they
/// are created — with the source that serves them — and leave when they are gone. A stop
/// raises a flag and wakes every member's source, so each sees the flag on its own thread and
/// winds down (a graceful close, a goodbye); the stopper waits until no member is left, or
/// until its deadline, and then removes what is left. A drain comes before a stop: the phase
/// becomes [`Phase::Draining`] and every member is woken to see it (sessions go on serving
/// until their peers are done); the stop follows at the drain's deadline.
///
/// ```
/// use std::time::{Duration, Instant};
/// use ark_reactor::Lifecycle;
///
/// let life = Lifecycle::new();
/// let member = life.join(None);
/// assert!(life.begin_stop());
/// assert!(life.is_stopping());
/// // The member is still there: the wait ends at its deadline.
/// assert!(!life.wait_idle(Instant::now() + Duration::from_millis(5)));
/// drop(member);
/// assert!(life.wait_idle(Instant::now() + Duration::from_secs(1)));
/// ```
#[derive(Debug, Default)]
pub struct Lifecycle {
    members: Mutex<HashMap<u64, Option<SourceRef>>>,
    idle: Condvar,
    /// The [`Phase`], as its `u8`.
    phase: AtomicU8,
    next: AtomicU64,
}

/// Where a [`Lifecycle`] is: running, draining (no new members; those there finish their
/// work), or stopping (members wind down now). It only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Serving.
    Running = 0,
    /// A drain began: take no new work, finish what is under way.
    Draining = 1,
    /// A stop began: wind down now.
    Stopping = 2,
}

/// A member's place in a [`Lifecycle`]; dropping it leaves.
#[derive(Debug)]
pub struct Member {
    life: Arc<Lifecycle>,
    key: u64,
}

impl Member {
    /// Records the source serving this member (woken at a stop, removed past its deadline).
    pub fn set_source(&self, source: SourceRef) {
        self.life.members().insert(self.key, Some(source));
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let mut members = self.life.members();
        members.remove(&self.key);
        if members.is_empty() {
            self.life.idle.notify_all();
        }
    }
}

impl Lifecycle {
    /// A lifecycle with no members, not stopping.
    pub fn new() -> Arc<Lifecycle> {
        Arc::new(Lifecycle::default())
    }

    fn members(&self) -> MutexGuard<'_, HashMap<u64, Option<SourceRef>>> {
        // A panic elsewhere while holding the lock leaves the map usable.
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a member (served by `source`, if known yet) until the returned guard is dropped.
    pub fn join(self: &Arc<Self>, source: Option<SourceRef>) -> Member {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.members().insert(key, source);
        Member {
            life: self.clone(),
            key,
        }
    }

    /// Members now.
    pub fn live(&self) -> usize {
        self.members().len()
    }

    /// Raises the stop flag and wakes every member's source; `true` the first time.
    pub fn begin_stop(&self) -> bool {
        self.advance(Phase::Stopping)
    }

    /// Enters [`Phase::Draining`] (unless a stop has begun) and wakes every member's source;
    /// `true` if the phase changed.
    pub fn begin_drain(&self) -> bool {
        self.advance(Phase::Draining)
    }

    /// Moves the phase forward to `to` (never back) and wakes every member; `true` if it moved.
    fn advance(&self, to: Phase) -> bool {
        let before = self.phase.fetch_max(to as u8, Ordering::SeqCst);
        for source in self.sources() {
            source.wake();
        }
        before < to as u8
    }

    /// The phase now (one atomic load: cheap enough for every turn of every member). An
    /// acquire: a member that sees a phase also sees what its stopper did before it (the
    /// messages it queued before `stop()`, say).
    #[inline]
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Running,
            1 => Phase::Draining,
            _ => Phase::Stopping,
        }
    }

    /// Whether a stop has begun.
    #[inline]
    pub fn is_stopping(&self) -> bool {
        self.phase() == Phase::Stopping
    }

    fn sources(&self) -> Vec<SourceRef> {
        self.members().values().flatten().cloned().collect()
    }

    /// Waits until no member is left or `deadline` passes; `true` if none is left.
    pub fn wait_idle(&self, deadline: Instant) -> bool {
        let mut members = self.members();
        while !members.is_empty() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            members = self
                .idle
                .wait_timeout(members, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Removes every member's source at once (each gets `on_close(Closed)` on its own thread).
    pub fn remove_all(&self) {
        for source in self.sources() {
            source.remove();
        }
    }
}

/// A stop under way, returned by the `stop()` of ark's servers and clients: members are
/// winding down on their own threads. Then, by one of three ways:
/// - [`wait`](Self::wait) or [`wait_timeout`](Self::wait_timeout) on this thread for the end —
///   members still there at the deadline are closed at once, then a pool of the owner's own is
///   stopped and its threads joined;
/// - `.await` it (it is a [`Future`], on any runtime): the same work runs on a thread of its
///   own, which wakes the task when it is done, so no executor thread blocks;
/// - drop it: the same work finishes on a thread of its own, in the background. Dropping
///   never blocks for longer than it takes to start that thread.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// use std::time::Duration;
/// use ark_reactor::{Lifecycle, Stopping};
///
/// let life = Lifecycle::new();
/// let member = life.join(None);
/// let stop = Stopping::begin(life.clone(), None, Duration::from_secs(5));
/// assert!(!stop.is_finished());
/// drop(member); // the member wound down on its own thread
/// assert!(stop.is_finished());
/// stop.wait()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a stop finishes (and an own pool is joined) when it is waited for or awaited; dropped, it finishes in the background"]
pub struct Stopping {
    /// What is left to do, until it is done here or handed to a thread of its own.
    work: Option<StopWork>,
    /// The thread's result, once the work was handed to one (polled as a future).
    answer: Option<Answer<io::Result<StopReport>>>,
    /// The lifecycles of this stop and of its parts, for [`is_finished`](Self::is_finished).
    lives: Vec<Arc<Lifecycle>>,
    timeout: Duration,
}

/// What a stop found at its deadlines: [`Stopping::report`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopReport {
    /// Members (sessions) still there when a drain's deadline passed: the stop then wound them
    /// down (each handler's `on_stopping`, a graceful close), cutting off whatever their peers
    /// had still to ask. Always 0 for a stop without a drain.
    pub undrained: usize,
    /// Members still there at the stop's deadline, closed at once (what they had queued was
    /// dropped).
    pub forced: usize,
}

impl std::ops::AddAssign for StopReport {
    fn add_assign(&mut self, other: StopReport) {
        self.undrained += other.undrained;
        self.forced += other.forced;
    }
}

/// The rest of a stop: wait for a drain, stop, wait for the members (and parts), close what is
/// left, release a pool.
#[derive(Debug)]
struct StopWork {
    life: Arc<Lifecycle>,
    /// Stops of the owner's parts (an agent's connections), waited for before its pool.
    parts: Vec<Stopping>,
    pool: Option<(Arc<ReactorPool>, bool)>,
    /// A drain's deadline: until then members finish their work; then the stop begins.
    drain_until: Option<Instant>,
}

impl StopWork {
    /// Waits at most `timeout` in all; reports what was cut at the deadlines.
    fn finish(self, timeout: Duration) -> io::Result<StopReport> {
        let deadline = Instant::now() + timeout;
        let mut report = StopReport::default();
        for part in self.parts {
            let left = deadline.saturating_duration_since(Instant::now());
            report += part.finish_here(left)?;
        }
        if let Some(until) = self.drain_until
            && !self.life.wait_idle(until.min(deadline))
        {
            report.undrained = self.life.live();
            self.life.begin_stop();
        }
        if !self.life.wait_idle(deadline) {
            report.forced = self.life.live();
            self.life.remove_all();
            self.life.wait_idle(Instant::now() + Duration::from_secs(1));
        }
        match self.pool {
            Some((pool, owned)) => release_pool(pool, owned).map(|()| report),
            None => Ok(report),
        }
    }
}

impl Stopping {
    /// Begins a stop of `life`'s members; `pool` (and whether it is owned) is released at the
    /// end; `timeout` is how long [`wait`](Self::wait) gives the members.
    pub fn begin(
        life: Arc<Lifecycle>,
        pool: Option<(Arc<ReactorPool>, bool)>,
        timeout: Duration,
    ) -> Stopping {
        life.begin_stop();
        Stopping::of(life, Vec::new(), pool, timeout)
    }

    /// Begins a drain of `life`'s members ([`Phase::Draining`]): for `drain` from now they go
    /// on with their work and leave when it is done; then the stop begins for those still
    /// there, which get `close_timeout` more to wind down. The drain's deadline runs from now,
    /// whenever the stop is waited for; [`wait`](Self::wait) gives `drain + close_timeout` in
    /// all, [`wait_timeout`](Self::wait_timeout) ends the drain early if its own deadline
    /// comes first.
    pub fn drain(
        life: Arc<Lifecycle>,
        pool: Option<(Arc<ReactorPool>, bool)>,
        drain: Duration,
        close_timeout: Duration,
    ) -> Stopping {
        life.begin_drain();
        let mut stopping = Stopping::of(life, Vec::new(), pool, drain + close_timeout);
        if let Some(work) = stopping.work.as_mut() {
            work.drain_until = Some(Instant::now() + drain);
        }
        stopping
    }

    /// One stop made of several already begun (an owner of many clients: each of its
    /// connections), all given the same deadline; `pool` is released after them.
    pub fn together(
        parts: Vec<Stopping>,
        pool: Option<(Arc<ReactorPool>, bool)>,
        timeout: Duration,
    ) -> Stopping {
        Stopping::of(Lifecycle::new(), parts, pool, timeout)
    }

    fn of(
        life: Arc<Lifecycle>,
        parts: Vec<Stopping>,
        pool: Option<(Arc<ReactorPool>, bool)>,
        timeout: Duration,
    ) -> Stopping {
        let mut lives = vec![life.clone()];
        lives.extend(parts.iter().flat_map(|p| p.lives.iter().cloned()));
        let work = StopWork {
            life,
            parts,
            pool,
            drain_until: None,
        };
        Stopping {
            work: Some(work),
            answer: None,
            lives,
            timeout,
        }
    }

    /// Whether every member is gone (an own pool may still be winding down).
    pub fn is_finished(&self) -> bool {
        self.lives.iter().all(|life| life.live() == 0)
    }

    /// Waits for the stop with the owner's default deadline (its sessions' close timeout;
    /// for a drain, the drain's time and then the close timeout).
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait(self) -> io::Result<()> {
        self.report().map(|_| ())
    }

    /// Waits at most `timeout` for the members; what is left is closed at once.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait_timeout(self, timeout: Duration) -> io::Result<()> {
        self.report_timeout(timeout).map(|_| ())
    }

    /// As [`wait`](Self::wait), and says what was cut: members still there when a drain
    /// ended, and members closed at once at the deadline.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn report(self) -> io::Result<StopReport> {
        let timeout = self.timeout;
        self.finish_here(timeout)
    }

    /// As [`wait_timeout`](Self::wait_timeout), and says what was cut (see
    /// [`report`](Self::report)).
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn report_timeout(self, timeout: Duration) -> io::Result<StopReport> {
        self.finish_here(timeout)
    }

    /// Finishes on this thread (or waits for the thread it was handed to, whose deadline was
    /// set when it was first polled).
    fn finish_here(mut self, timeout: Duration) -> io::Result<StopReport> {
        if let Some(work) = self.work.take() {
            return work.finish(timeout);
        }
        match self.answer.take() {
            Some(answer) => answer.wait().unwrap_or_else(|e| Err(io::Error::other(e))),
            None => Ok(StopReport::default()),
        }
    }

    /// Hands the work to a thread of its own (once); its result comes as the answer.
    fn hand_off(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        let (answerer, answer) = crate::answer();
        let timeout = self.timeout;
        let shared = Arc::new(Mutex::new(Some((work, answerer))));
        let for_thread = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("ark-stopping".into())
            .spawn(move || {
                if let Some((work, answerer)) = take(&for_thread) {
                    answerer.give(work.finish(timeout));
                }
            });
        // No thread to be had (the process is out of them): finish here rather than never.
        if spawned.is_err()
            && let Some((work, answerer)) = take(&shared)
        {
            answerer.give(work.finish(timeout));
        }
        self.answer = Some(answer);
    }
}

/// The work and where its result goes, taken once by whoever runs it.
type Handed = Mutex<Option<(StopWork, Answerer<io::Result<StopReport>>)>>;

fn take(handed: &Handed) -> Option<(StopWork, Answerer<io::Result<StopReport>>)> {
    handed.lock().unwrap_or_else(PoisonError::into_inner).take()
}

impl Future for Stopping {
    type Output = io::Result<()>;

    /// The first poll hands the rest of the stop (with the owner's default deadline) to a
    /// thread of its own; the task is woken when it is done.
    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        self.hand_off();
        let Some(answer) = self.answer.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let result = std::task::ready!(Pin::new(answer).poll(cx));
        self.answer = None;
        Poll::Ready(match result {
            Ok(finished) => finished.map(|_| ()),
            Err(dropped) => Err(io::Error::other(dropped)),
        })
    }
}

impl Drop for Stopping {
    /// Finishes in the background: the members were told to stop when it began; a thread of
    /// its own waits for them (closing what is left at the deadline) and joins an own pool.
    fn drop(&mut self) {
        self.hand_off();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member on a thread of its own: it leaves when `leave_at` says so for the phase it sees
    /// (polled every millisecond, at most 10 s).
    fn member(life: &Arc<Lifecycle>, leave_at: Phase) -> std::thread::JoinHandle<Phase> {
        let member = life.join(None);
        let life = life.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(10);
            while life.phase() < leave_at && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            drop(member);
            life.phase()
        })
    }

    #[test]
    fn a_drain_that_its_members_finish_cuts_nothing() {
        let life = Lifecycle::new();
        let finishing = member(&life, Phase::Draining);
        let stop = Stopping::drain(life.clone(), None, Duration::from_secs(5), Duration::ZERO);
        let report = stop.report().unwrap();
        assert_eq!(report, StopReport::default());
        // The member left in the drain; the stop never began.
        assert_eq!(finishing.join().unwrap(), Phase::Draining);
        assert_eq!(life.phase(), Phase::Draining);
    }

    #[test]
    fn a_drain_stops_at_its_deadline_what_is_left_and_reports_it() {
        let life = Lifecycle::new();
        let stays = member(&life, Phase::Stopping);
        let begun = Instant::now();
        let stop = Stopping::drain(
            life.clone(),
            None,
            Duration::from_millis(50),
            Duration::from_secs(5),
        );
        let report = stop.report().unwrap();
        assert!(begun.elapsed() >= Duration::from_millis(50));
        // Stopped at the drain's deadline, it wound down within the close timeout.
        assert_eq!(
            report,
            StopReport {
                undrained: 1,
                forced: 0
            }
        );
        assert_eq!(stays.join().unwrap(), Phase::Stopping);
    }

    #[test]
    fn phases_only_move_forward() {
        let life = Lifecycle::new();
        assert_eq!(life.phase(), Phase::Running);
        assert!(life.begin_drain());
        assert!(!life.begin_drain());
        assert!(life.begin_stop());
        assert!(!life.begin_drain());
        assert_eq!(life.phase(), Phase::Stopping);
        assert!(life.is_stopping());
    }
}
