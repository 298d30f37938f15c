//! Cross-thread posting and stopping.

mod util;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_reactor::{IoModel, Reactor, ReactorConfig, ReactorPool};

#[test]
fn a_post_from_another_thread_runs_on_the_reactor_thread() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let handle = reactor.handle();
    let reactor_thread = std::thread::current().id();
    let poster = std::thread::spawn(move || {
        // The reactor is idle in poll with no timeout: the post must wake it.
        std::thread::sleep(Duration::from_millis(20));
        handle.post(move |r| {
            assert_eq!(std::thread::current().id(), reactor_thread);
            r.stop();
        })
    });
    let started = Instant::now();
    reactor.run().unwrap();
    assert!(poster.join().unwrap(), "post accepted");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(reactor.stats().wakeups >= 1);
}

#[test]
fn one_hundred_thousand_posts_from_four_threads_all_run_once() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 25_000;
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let handle = reactor.handle();
    // Each post adds its own distinct value: the sum proves each ran exactly once.
    let sum = Arc::new(AtomicU64::new(0));
    let count = Arc::new(AtomicU64::new(0));
    let posters: Vec<_> = (0..THREADS)
        .map(|t| {
            let (handle, sum, count) = (handle.clone(), sum.clone(), count.clone());
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let value = t * PER_THREAD + i + 1;
                    let (sum, count) = (sum.clone(), count.clone());
                    assert!(handle.post(move |_| {
                        sum.fetch_add(value, Ordering::Relaxed);
                        count.fetch_add(1, Ordering::Relaxed);
                    }));
                }
            })
        })
        .collect();
    let stopper = {
        let (handle, count) = (handle.clone(), count.clone());
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(30);
            while count.load(Ordering::Relaxed) < THREADS * PER_THREAD && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            handle.stop();
        })
    };
    reactor.run().unwrap();
    for p in posters {
        p.join().unwrap();
    }
    stopper.join().unwrap();
    let n = THREADS * PER_THREAD;
    assert_eq!(count.load(Ordering::Relaxed), n);
    assert_eq!(sum.load(Ordering::Relaxed), n * (n + 1) / 2);
    assert!(!handle.post(|_| ()), "a stopped reactor refuses posts");
}

#[test]
fn stop_of_an_idle_pool_returns_quickly_and_joins_every_thread() {
    for model in [
        IoModel::Shared { threads: 1 },
        IoModel::Shared { threads: 4 },
        IoModel::Sharded { reactors: 4 },
    ] {
        let pool = ReactorPool::start(model, ReactorConfig::default()).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let started = Instant::now();
        pool.stop().unwrap(); // joins every thread of the pool
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(100),
            "{model:?}: stop took {took:?}"
        );
    }
}
