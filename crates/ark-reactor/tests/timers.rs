//! Timers: deadline order, periodic repetition, cancellation, source timers.

mod util;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_reactor::{Reactor, ReactorConfig};
use util::{Tally, TimerSource};

#[test]
fn callback_timers_fire_in_deadline_order() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let fired = Arc::new(Mutex::new(Vec::new()));
    // Inserted out of order: 200 distinct deadlines, 200 µs apart, spread over 40 ms, each
    // delay measured from one common start (so slow inserts, as in a debug build, do not
    // reorder them).
    let start = Instant::now();
    for i in 0..200u64 {
        let fired = fired.clone();
        let offset = Duration::from_micros((i * 7919) % 200 * 200);
        let delay = (start + offset).saturating_duration_since(Instant::now());
        reactor.add_timer(delay, None, move |_| fired.lock().unwrap().push(offset));
    }
    reactor.add_timer(Duration::from_millis(60), None, |r| r.stop());
    let started = Instant::now();
    reactor.run().unwrap();
    let fired = fired.lock().unwrap();
    assert_eq!(fired.len(), 200);
    assert!(
        fired.windows(2).all(|w| w[0] <= w[1]),
        "not in deadline order"
    );
    assert!(started.elapsed() >= Duration::from_millis(60));
}

#[test]
fn periodic_timers_repeat_and_cancelled_timers_never_fire() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let ticks = Arc::new(Mutex::new(0u32));
    let cancelled_fired = Arc::new(Mutex::new(0u32));
    let t = ticks.clone();
    let periodic = reactor.add_timer(
        Duration::from_millis(5),
        Some(Duration::from_millis(5)),
        move |_| {
            *t.lock().unwrap() += 1;
        },
    );
    let c = cancelled_fired.clone();
    let doomed = reactor.add_timer(Duration::from_millis(20), None, move |_| {
        *c.lock().unwrap() += 1
    });
    assert!(reactor.cancel_timer(doomed));
    assert!(!reactor.cancel_timer(doomed), "second cancel finds nothing");
    // A timer cancelled by another timer that fires first.
    let c = cancelled_fired.clone();
    let later = reactor.add_timer(Duration::from_millis(30), None, move |_| {
        *c.lock().unwrap() += 1
    });
    reactor.add_timer(Duration::from_millis(10), None, move |r| {
        assert!(r.cancel_timer(later));
    });
    reactor.add_timer(Duration::from_millis(60), None, move |r| {
        r.cancel_timer(periodic);
    });
    reactor.add_timer(Duration::from_millis(100), None, |r| r.stop());
    reactor.run().unwrap();
    let ticks = *ticks.lock().unwrap();
    // At most 12 in 60 ms; at least a few even on a loaded machine (no burst catch-up).
    assert!(
        (3..=12).contains(&ticks),
        "periodic 5 ms timer over 60 ms ticked {ticks} times"
    );
    assert_eq!(*cancelled_fired.lock().unwrap(), 0);
    assert_eq!(reactor.timer_count(), 0);
}

#[test]
fn thousands_of_timers() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let count = Arc::new(Mutex::new(0u32));
    let mut ids = Vec::new();
    for i in 0..10_000u64 {
        let count = count.clone();
        ids.push(
            reactor.add_timer(Duration::from_micros(i % 5000), None, move |_| {
                *count.lock().unwrap() += 1
            }),
        );
    }
    for id in ids.iter().step_by(2) {
        assert!(reactor.cancel_timer(*id));
    }
    reactor.add_timer(Duration::from_millis(20), None, |r| r.stop());
    reactor.run().unwrap();
    assert_eq!(*count.lock().unwrap(), 5_000);
}

#[test]
fn source_timers_fire_for_their_source_and_die_with_it() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let fired = Arc::new(Mutex::new(Vec::new()));
    let tally = Arc::new(Tally::default());
    let periodic = Arc::new(Mutex::new(None));
    let p = periodic.clone();
    let (socket, addr) = util::udp();
    let handler = TimerSource {
        socket,
        fired: fired.clone(),
        tally: tally.clone(),
        on_first_ready: Some(Box::new(move |cx| {
            *p.lock().unwrap() =
                Some(cx.set_timer(Duration::from_millis(10), Some(Duration::from_millis(10))));
            let doomed = cx.set_timer(Duration::from_millis(5), None);
            cx.cancel_timer(doomed);
        })),
    };
    let id = reactor
        .insert(Box::new(handler), mio::Interest::READABLE)
        .unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sender.send_to(b"wake", addr).unwrap();
    reactor.add_timer(Duration::from_millis(55), None, move |r| {
        assert!(r.remove(id));
        assert!(!r.remove(id), "a stale id is refused");
    });
    reactor.add_timer(Duration::from_millis(100), None, |r| r.stop());
    reactor.run().unwrap();
    let periodic = periodic.lock().unwrap().expect("the source became ready");
    let fired = fired.lock().unwrap();
    assert!(
        fired.iter().all(|&t| t == periodic),
        "only the periodic timer fires: {fired:?}"
    );
    assert!(
        (2..=6).contains(&fired.len()),
        "10 ms periodic over ~45 ms fired {} times",
        fired.len()
    );
    assert_eq!(tally.closed.load(Ordering::SeqCst), 1);
    assert_eq!(tally.stopped.load(Ordering::SeqCst), 0);
    assert_eq!(reactor.timer_count(), 0, "the source's timers died with it");
}
