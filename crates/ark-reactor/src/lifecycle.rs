//! `Lifecycle` and `Stopping`: the stop protocol every ark server and client shares.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::answer::{Answer, Answerer};

use crate::pool::{ReactorPool, SourceRef, release_pool};

/// The stop protocol shared by servers and clients. Members (sessions, sockets) join when they
/// are created — with the source that serves them — and leave when they are gone. A stop
/// raises a flag and wakes every member's source, so each sees the flag on its own thread and
/// winds down (a graceful close, a goodbye); the stopper waits until no member is left, or
/// until its deadline, and then removes what is left.
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
    stopping: AtomicBool,
    next: AtomicU64,
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
        let first = !self.stopping.swap(true, Ordering::SeqCst);
        for source in self.sources() {
            source.wake();
        }
        first
    }

    /// Whether a stop has begun.
    #[inline]
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
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
    answer: Option<Answer<io::Result<usize>>>,
    /// The lifecycles of this stop and of its parts, for [`is_finished`](Self::is_finished).
    lives: Vec<Arc<Lifecycle>>,
    timeout: Duration,
}

/// The rest of a stop: wait for the members (and parts), close what is left, release a pool.
#[derive(Debug)]
struct StopWork {
    life: Arc<Lifecycle>,
    /// Stops of the owner's parts (an agent's connections), waited for before its pool.
    parts: Vec<Stopping>,
    pool: Option<(Arc<ReactorPool>, bool)>,
}

impl StopWork {
    /// Waits at most `timeout` in all; returns how many members were closed at the deadline.
    fn finish(self, timeout: Duration) -> io::Result<usize> {
        let deadline = Instant::now() + timeout;
        let mut cut = 0;
        for part in self.parts {
            let left = deadline.saturating_duration_since(Instant::now());
            cut += part.finish_here(left)?;
        }
        if !self.life.wait_idle(deadline) {
            cut = self.life.live();
            self.life.remove_all();
            self.life.wait_idle(Instant::now() + Duration::from_secs(1));
        }
        match self.pool {
            Some((pool, owned)) => release_pool(pool, owned).map(|()| cut),
            None => Ok(cut),
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
        Stopping {
            work: Some(StopWork { life, parts, pool }),
            answer: None,
            lives,
            timeout,
        }
    }

    /// Whether every member is gone (an own pool may still be winding down).
    pub fn is_finished(&self) -> bool {
        self.lives.iter().all(|life| life.live() == 0)
    }

    /// Waits for the stop with the owner's default deadline (its sessions' close timeout).
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait(self) -> io::Result<()> {
        let timeout = self.timeout;
        self.finish_here(timeout).map(|_| ())
    }

    /// Waits at most `timeout` for the members; what is left is closed at once.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait_timeout(self, timeout: Duration) -> io::Result<()> {
        self.finish_here(timeout).map(|_| ())
    }

    /// As [`wait_timeout`](Self::wait_timeout); returns how many members (sessions, and a
    /// listener that had not yet closed) were still there at the deadline and were closed at
    /// once.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait_timeout_cut(self, timeout: Duration) -> io::Result<usize> {
        self.finish_here(timeout)
    }

    /// Finishes on this thread (or waits for the thread it was handed to, whose deadline was
    /// set when it was first polled).
    fn finish_here(mut self, timeout: Duration) -> io::Result<usize> {
        if let Some(work) = self.work.take() {
            return work.finish(timeout);
        }
        match self.answer.take() {
            Some(answer) => answer.wait().unwrap_or_else(|e| Err(io::Error::other(e))),
            None => Ok(0),
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
type Handed = Mutex<Option<(StopWork, Answerer<io::Result<usize>>)>>;

fn take(handed: &Handed) -> Option<(StopWork, Answerer<io::Result<usize>>)> {
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
