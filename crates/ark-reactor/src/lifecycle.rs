//! `Lifecycle`: the stop protocol every ark server and client shares.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

/// The stop protocol shared by servers and clients: members (sessions) join when they are
/// created and leave when they are gone; a stop raises a flag members see on their next turn;
/// the stopper waits until no member is left, or until its deadline.
///
/// ```
/// use std::time::{Duration, Instant};
/// use ark_reactor::Lifecycle;
///
/// let life = Lifecycle::new();
/// let member = life.join();
/// assert!(life.begin_stop());
/// assert!(life.is_stopping());
/// // The member is still there: the wait ends at its deadline.
/// assert!(!life.wait_idle(Instant::now() + Duration::from_millis(5)));
/// drop(member);
/// assert!(life.wait_idle(Instant::now() + Duration::from_secs(1)));
/// ```
#[derive(Debug, Default)]
pub struct Lifecycle {
    live: Mutex<usize>,
    idle: Condvar,
    stopping: AtomicBool,
}

/// A member's place in a [`Lifecycle`]; dropping it leaves.
#[derive(Debug)]
pub struct Member {
    life: Arc<Lifecycle>,
}

impl Drop for Member {
    fn drop(&mut self) {
        let mut live = self
            .life
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *live -= 1;
        if *live == 0 {
            self.life.idle.notify_all();
        }
    }
}

impl Lifecycle {
    /// A lifecycle with no members, not stopping.
    pub fn new() -> Arc<Lifecycle> {
        Arc::new(Lifecycle::default())
    }

    /// Adds a member until the returned guard is dropped.
    pub fn join(self: &Arc<Self>) -> Member {
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Member { life: self.clone() }
    }

    /// Members now.
    pub fn live(&self) -> usize {
        *self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Raises the stop flag; `true` the first time.
    pub fn begin_stop(&self) -> bool {
        !self.stopping.swap(true, Ordering::SeqCst)
    }

    /// Whether a stop has begun.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Waits until no member is left or `deadline` passes; `true` if none is left.
    pub fn wait_idle(&self, deadline: Instant) -> bool {
        let mut live = self.live.lock().unwrap_or_else(PoisonError::into_inner);
        while *live > 0 {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            live = self
                .idle
                .wait_timeout(live, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}
