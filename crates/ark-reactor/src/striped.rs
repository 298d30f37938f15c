//! Counters that many threads add to, without a cache line they all write.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One `T` per thread slot, each on a cache line of its own: a thread adds to the copy of its
/// slot ([`local`](Self::local)) and a reader sums the copies ([`iter`](Self::iter)).
///
/// Counters that every thread of a pool bumps, kept in one place, make their cache line
/// bounce between the cores: with two reactor threads, the `lock`ed adds of a TCP server's
/// per-turn counters took 2 % of all cycles of a 64 B echo, and a field read beside them
/// missed the cache on every turn (perf). Threads are numbered in the order they first touch
/// any `Striped` value and take copy `number % stripes`, so no two of the first
/// [`stripes`](Self::stripes) threads share one; later threads may, which stays correct (add
/// to the copies atomically) and only costs speed.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use ark_reactor::Striped;
///
/// let sent: Striped<AtomicU64> = Striped::default();
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| sent.local().fetch_add(10, Ordering::Relaxed));
///     }
/// });
/// let total: u64 = sent.iter().map(|c| c.load(Ordering::Relaxed)).sum();
/// assert_eq!(total, 40);
/// ```
#[derive(Debug)]
pub struct Striped<T> {
    stripes: Box<[Padded<T>]>,
}

/// A value alone on its cache line (128 bytes: two 64-byte lines, which adjacent-line
/// prefetchers fetch together).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T: Default> Default for Striped<T> {
    /// `stripe_count()` copies of `T::default()`.
    fn default() -> Self {
        Striped {
            stripes: (0..stripe_count()).map(|_| Padded::default()).collect(),
        }
    }
}

impl<T> Striped<T> {
    /// The calling thread's copy.
    #[inline]
    pub fn local(&self) -> &T {
        // `stripes` is a power of two: the mask keeps the index in range.
        &self.stripes[thread_number() & (self.stripes.len() - 1)].0
    }

    /// Every copy, to sum them.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.stripes.iter().map(|padded| &padded.0)
    }

    /// How many copies there are (a power of two).
    pub fn stripes(&self) -> usize {
        self.stripes.len()
    }
}

/// Copies per [`Striped`] value: twice the available parallelism, rounded up to a power of
/// two, at most 64 (a process rarely keeps many more threads busy than it has cores).
fn stripe_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (cores * 2).next_power_of_two().min(64)
    })
}

/// The calling thread's number: threads are numbered in the order they first ask.
#[inline]
fn thread_number() -> usize {
    const UNSET: usize = usize::MAX;
    thread_local! {
        static NUMBER: Cell<usize> = const { Cell::new(UNSET) };
    }
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    NUMBER.with(|number| match number.get() {
        UNSET => {
            let assigned = NEXT.fetch_add(1, Ordering::Relaxed) % (UNSET / 2);
            number.set(assigned);
            assigned
        }
        assigned => assigned,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[test]
    fn each_thread_adds_to_the_copy_of_its_number_and_no_add_is_lost() {
        let striped: Striped<AtomicU64> = Striped::default();
        let copies: Vec<usize> = striped.iter().map(|c| c as *const _ as usize).collect();
        // More threads than copies, adding at once: some share copies.
        let threads = striped.stripes() * 2;
        let barrier = std::sync::Barrier::new(threads);
        let seen: Vec<(usize, usize)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        let local = striped.local();
                        for _ in 0..10_000 {
                            local.fetch_add(1, Ordering::Relaxed);
                        }
                        (thread_number(), local as *const AtomicU64 as usize)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let total: u64 = striped.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 10_000 * threads as u64);
        for &(number, copy) in &seen {
            assert_eq!(copy, copies[number % striped.stripes()], "thread {number}");
        }
        let mut numbers: Vec<usize> = seen.iter().map(|&(number, _)| number).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(
            numbers.len(),
            threads,
            "every thread has a number of its own"
        );
    }

    #[test]
    fn each_copy_has_a_cache_line_of_its_own() {
        let striped: Striped<AtomicU64> = Striped::default();
        let addresses: Vec<usize> = striped.iter().map(|c| c as *const _ as usize).collect();
        assert!(addresses.windows(2).all(|w| w[1] - w[0] >= 128));
        assert!(addresses.iter().all(|a| a % 128 == 0));
    }
}
