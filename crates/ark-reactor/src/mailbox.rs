//! [`Mailbox`]: how other threads reach a source's handler — the one mechanism behind every
//! ark session handle.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::pool::SourceRef;

/// What gives a mailbox's owner a turn once something is posted.
pub trait Wake: Send + Sync {
    /// Gives the owner a turn soon.
    fn wake(&self);
}

impl Wake for SourceRef {
    fn wake(&self) {
        // A stopped reactor runs no more turns: nothing is left to wake.
        let _ = SourceRef::wake(self);
    }
}

/// Requests from any thread for the one thread that owns a source: `T` collects them (a
/// queue, flags, encoded bytes) under a lock, a flag says something is waiting, and the first
/// post after the owner last looked wakes it (through `W`, once attached).
///
/// The owner calls [`take`](Self::take) on its turns. That costs one atomic load while
/// nothing is waiting (no lock, no swap), which is why session turns can look every time.
///
/// ```
/// use ark_reactor::{Mailbox, Wake};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// /// Counts its wakes (a transport's waker gives its source a turn instead).
/// #[derive(Clone, Default)]
/// struct Counter(Arc<AtomicUsize>);
/// impl Wake for Counter {
///     fn wake(&self) {
///         self.0.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let wakes = Counter::default();
/// let mailbox: Mailbox<Vec<u32>, Counter> = Mailbox::new();
/// mailbox.attach(wakes.clone());
/// mailbox.post(|inbox| inbox.push(1));
/// mailbox.post(|inbox| inbox.push(2)); // already waiting: no second wake
/// assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
/// assert_eq!(mailbox.take(), Some(vec![1, 2]));
/// assert_eq!(mailbox.take(), None);
/// ```
pub struct Mailbox<T, W = SourceRef> {
    /// Something was posted since the owner last took.
    pending: AtomicBool,
    inbox: Mutex<T>,
    waker: OnceLock<W>,
}

impl<T: Default, W> Default for Mailbox<T, W> {
    fn default() -> Self {
        Mailbox::new()
    }
}

impl<T, W> fmt::Debug for Mailbox<T, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mailbox")
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .field("attached", &self.waker.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Default, W> Mailbox<T, W> {
    /// An empty mailbox without a waker (posts wait until one is attached, or the owner
    /// looks on its own).
    pub fn new() -> Self {
        Mailbox {
            pending: AtomicBool::new(false),
            inbox: Mutex::new(T::default()),
            waker: OnceLock::new(),
        }
    }

    /// An empty mailbox that wakes `waker`.
    pub fn with_waker(waker: W) -> Self {
        let mailbox = Mailbox::new();
        let _ = mailbox.waker.set(waker);
        mailbox
    }

    /// Attaches the waker (once the owner is registered); `false` if one was attached already.
    /// What was posted before is waiting: the owner is woken for it.
    pub fn attach(&self, waker: W) -> bool
    where
        W: Wake,
    {
        if self.waker.set(waker).is_err() {
            return false;
        }
        if self.pending.load(Ordering::SeqCst)
            && let Some(waker) = self.waker.get()
        {
            waker.wake();
        }
        true
    }

    /// The attached waker.
    pub fn waker(&self) -> Option<&W> {
        self.waker.get()
    }

    fn lock(&self) -> MutexGuard<'_, T> {
        // A poster that panicked left whole requests behind: they are still applied.
        self.inbox.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything waiting, if anything was posted since the last call (the owner's side).
    #[inline]
    pub fn take(&self) -> Option<T> {
        // A plain load first: most turns find nothing, and a load costs less than a swap.
        if !self.pending.load(Ordering::Acquire) || !self.pending.swap(false, Ordering::SeqCst) {
            return None;
        }
        Some(std::mem::take(&mut *self.lock()))
    }

    /// Reads the inbox under its lock (what is waiting, for a poster's own checks).
    pub fn peek<R>(&self, read: impl FnOnce(&T) -> R) -> R {
        read(&self.lock())
    }

    /// Everything waiting, whatever the flag says (an owner that is going away).
    pub fn drain(&self) -> T {
        self.pending.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.lock())
    }
}

impl<T: Default, W: Wake> Mailbox<T, W> {
    /// Applies `post` to the inbox under its lock, then wakes the owner if nothing was
    /// waiting before (one wake per batch, however many threads post).
    pub fn post<R>(&self, post: impl FnOnce(&mut T) -> R) -> R {
        let result = post(&mut self.lock());
        self.notify();
        result
    }

    /// As [`post`](Self::post), for a post that may refuse under the lock (a full queue): the
    /// owner is told only when it returns `Ok`.
    pub fn try_post<R, E>(&self, post: impl FnOnce(&mut T) -> Result<R, E>) -> Result<R, E> {
        let result = post(&mut self.lock())?;
        self.notify();
        Ok(result)
    }

    /// Marks the inbox as waiting; wakes the owner if it was not.
    fn notify(&self) {
        if !self.pending.swap(true, Ordering::SeqCst)
            && let Some(waker) = self.waker.get()
        {
            waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    #[derive(Default)]
    struct Count(AtomicUsize);
    impl Wake for Arc<Count> {
        fn wake(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn one_wake_per_batch_and_nothing_lost_between_threads() {
        let wakes = Arc::new(Count::default());
        let mailbox = Arc::new(Mailbox::<Vec<u64>, Arc<Count>>::with_waker(wakes.clone()));
        let posters: Vec<_> = (0..4u64)
            .map(|t| {
                let mailbox = mailbox.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000 {
                        mailbox.post(|inbox| inbox.push(t * 10_000 + i));
                    }
                })
            })
            .collect();
        let mut got = Vec::new();
        while posters.iter().any(|p| !p.is_finished()) {
            got.extend(mailbox.take().unwrap_or_default());
        }
        for poster in posters {
            poster.join().unwrap();
        }
        got.extend(mailbox.take().unwrap_or_default());
        got.sort_unstable();
        assert_eq!(got, (0..40_000).collect::<Vec<_>>());
        // Every wake came from a post that found the flag clear: never more than posts.
        let woken = wakes.0.load(Ordering::SeqCst);
        assert!((1..=40_000).contains(&woken), "{woken}");
    }

    #[test]
    fn posts_before_the_waker_wait_and_are_taken() {
        let mailbox = Mailbox::<Vec<u8>, Arc<Count>>::new();
        mailbox.post(|inbox| inbox.push(1));
        let wakes = Arc::new(Count::default());
        assert!(mailbox.attach(wakes.clone()));
        assert!(!mailbox.attach(wakes.clone()), "attached once");
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "woken for what waited");
        assert_eq!(mailbox.take(), Some(vec![1]));
        mailbox.post(|inbox| inbox.push(2));
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2);
        assert_eq!(mailbox.drain(), vec![2]);
        assert_eq!(mailbox.take(), None);
    }
}
