//! `Lifecycle` and `Stopping`: the stop protocol every ark server and client shares.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

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
/// winding down on their own threads. [`wait`](Self::wait) or
/// [`wait_timeout`](Self::wait_timeout) for the end — members still there at the deadline
/// are closed at once, then a pool of the owner's own is stopped and its threads joined.
/// Dropping a `Stopping` waits as [`wait`](Self::wait) does.
#[derive(Debug)]
#[must_use = "a stop finishes (and an own pool is joined) when it is waited for or dropped"]
pub struct Stopping {
    life: Arc<Lifecycle>,
    /// Stops of the owner's parts (an agent's connections), waited for before its pool.
    parts: Vec<Stopping>,
    pool: Option<(Arc<ReactorPool>, bool)>,
    timeout: Duration,
    done: bool,
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
        Stopping {
            life,
            parts: Vec::new(),
            pool,
            timeout,
            done: false,
        }
    }

    /// One stop made of several already begun (an owner of many clients: each of its
    /// connections), all given the same deadline; `pool` is released after them.
    pub fn together(
        parts: Vec<Stopping>,
        pool: Option<(Arc<ReactorPool>, bool)>,
        timeout: Duration,
    ) -> Stopping {
        Stopping {
            life: Lifecycle::new(),
            parts,
            pool,
            timeout,
            done: false,
        }
    }

    /// Whether every member is gone.
    pub fn is_finished(&self) -> bool {
        self.life.live() == 0 && self.parts.iter().all(Stopping::is_finished)
    }

    /// Waits for the stop with the owner's default deadline (its sessions' close timeout).
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait(mut self) -> io::Result<()> {
        let timeout = self.timeout;
        self.finish(timeout).map(|_| ())
    }

    /// Waits at most `timeout` for the members; what is left is closed at once.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait_timeout(mut self, timeout: Duration) -> io::Result<()> {
        self.finish(timeout).map(|_| ())
    }

    /// As [`wait_timeout`](Self::wait_timeout); returns how many members (sessions, and a
    /// listener that had not yet closed) were still there at the deadline and were closed at
    /// once.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn wait_timeout_cut(mut self, timeout: Duration) -> io::Result<usize> {
        self.finish(timeout)
    }

    fn finish(&mut self, timeout: Duration) -> io::Result<usize> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(0);
        }
        let deadline = Instant::now() + timeout;
        let mut cut = 0;
        for mut part in std::mem::take(&mut self.parts) {
            let left = deadline.saturating_duration_since(Instant::now());
            cut += part.finish(left)?;
        }
        if !self.life.wait_idle(deadline) {
            cut = self.life.live();
            self.life.remove_all();
            self.life.wait_idle(Instant::now() + Duration::from_secs(1));
        }
        match self.pool.take() {
            Some((pool, owned)) => release_pool(pool, owned).map(|()| cut),
            None => Ok(cut),
        }
    }
}

impl Drop for Stopping {
    fn drop(&mut self) {
        let timeout = self.timeout;
        let _ = self.finish(timeout);
    }
}
