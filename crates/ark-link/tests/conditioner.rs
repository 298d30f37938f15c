//! The conditioner without sockets: reproducible from its seed, and every counter matches
//! what came out.

use std::time::{Duration, Instant};

use ark_link::{Conditioner, GilbertElliott, LinkConfig, LinkCounters};

/// Offers `n` numbered packets of `size` bytes, one every `gap`, polling as time goes; returns
/// (number, sent at, released at) of every packet out, and the counters.
fn run(
    config: LinkConfig,
    n: u32,
    size: usize,
    gap: Duration,
) -> (Vec<(u32, Duration, Duration)>, LinkCounters) {
    let mut link = Conditioner::new(config);
    let start = Instant::now();
    let mut out = Vec::new();
    let drain = |link: &mut Conditioner<Vec<u8>>, now: Instant, out: &mut Vec<_>| {
        while let Some(packet) = link.poll(now) {
            let number = u32::from_be_bytes(packet[..4].try_into().unwrap());
            let sent = u64::from_be_bytes(packet[4..12].try_into().unwrap());
            out.push((number, Duration::from_nanos(sent), now - start));
        }
    };
    for i in 0..n {
        let now = start + gap * i;
        // Release what is due up to now, at the times it is due.
        while let Some(at) = link.next_release().filter(|at| *at <= now) {
            drain(&mut link, at, &mut out);
        }
        let mut packet = vec![0u8; size.max(12)];
        packet[..4].copy_from_slice(&i.to_be_bytes());
        packet[4..12].copy_from_slice(&((gap * i).as_nanos() as u64).to_be_bytes());
        link.offer(now, packet);
    }
    while let Some(at) = link.next_release() {
        drain(&mut link, at, &mut out);
    }
    (out, link.counters())
}

fn every_impairment(seed: u64) -> LinkConfig {
    LinkConfig {
        loss: 0.05,
        burst: Some(GilbertElliott::with_mean(0.02, 4.0)),
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(5),
        reorder: 0.01,
        duplicate: 0.01,
        rate_bits_per_second: Some(100_000_000),
        seed,
        ..LinkConfig::default()
    }
}

#[test]
fn the_same_seed_makes_the_same_decisions_and_another_seed_others() {
    let gap = Duration::from_micros(50);
    let (a, counters_a) = run(every_impairment(7), 20_000, 1200, gap);
    let (b, counters_b) = run(every_impairment(7), 20_000, 1200, gap);
    assert_eq!(a, b);
    assert_eq!(counters_a, counters_b);
    let (c, _) = run(every_impairment(8), 20_000, 1200, gap);
    assert_ne!(a, c);
}

#[test]
fn the_counters_add_up_to_what_came_out() {
    let (out, c) = run(every_impairment(3), 20_000, 1200, Duration::from_micros(50));
    assert_eq!(c.offered, 20_000);
    assert_eq!(c.delivered as usize, out.len());
    assert_eq!(c.offered - c.dropped() + c.duplicated, c.delivered);
    assert_eq!(c.delivered_bytes, c.delivered * 1200);
    // Out of order as the receiver sees it: released after a packet offered later.
    let mut highest = None;
    let mut late = 0;
    for (number, _, _) in &out {
        match highest {
            Some(h) if *number < h => late += 1,
            _ => highest = Some(*number),
        }
    }
    assert_eq!(c.out_of_order, late);
    assert!(c.reordered > 0 && c.duplicated > 0 && c.dropped_burst > 0 && c.dropped_random > 0);
}

#[test]
fn independent_loss_is_near_its_probability() {
    let config = LinkConfig {
        loss: 0.05,
        seed: 11,
        ..LinkConfig::default()
    };
    let (out, c) = run(config, 100_000, 16, Duration::from_micros(1));
    let loss = c.dropped_random as f64 / c.offered as f64;
    assert!((0.045..0.055).contains(&loss), "{loss}");
    assert_eq!(out.len() as u64, c.offered - c.dropped_random);
    assert_eq!(c.out_of_order, 0);
}

#[test]
fn bursty_loss_comes_in_bursts_of_the_mean_length() {
    let config = LinkConfig {
        burst: Some(GilbertElliott::with_mean(0.05, 5.0)),
        seed: 5,
        ..LinkConfig::default()
    };
    let (out, c) = run(config, 200_000, 16, Duration::from_micros(1));
    let loss = c.dropped_burst as f64 / c.offered as f64;
    assert!((0.04..0.06).contains(&loss), "{loss}");
    // Runs of consecutive missing numbers.
    let mut runs = Vec::new();
    let mut expected = 0u32;
    for (number, _, _) in &out {
        if *number > expected {
            runs.push(number - expected);
        }
        expected = number + 1;
    }
    let mean = runs.iter().map(|r| f64::from(*r)).sum::<f64>() / runs.len() as f64;
    assert!((4.0..6.0).contains(&mean), "mean burst {mean}");
}

#[test]
fn delay_and_jitter_keep_order_and_stay_in_their_bounds() {
    let config = LinkConfig {
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(5),
        seed: 9,
        ..LinkConfig::default()
    };
    let (out, c) = run(config, 10_000, 64, Duration::from_millis(1));
    assert_eq!(out.len(), 10_000);
    assert_eq!(c.out_of_order, 0);
    let mut spread = (Duration::MAX, Duration::ZERO);
    for window in out.windows(2) {
        assert!(window[0].0 < window[1].0 && window[0].2 <= window[1].2);
    }
    for (_, sent, released) in &out {
        let delay = *released - *sent;
        spread = (spread.0.min(delay), spread.1.max(delay));
        assert!(delay >= Duration::from_millis(15), "{delay:?}");
    }
    // Order is kept by holding a packet behind the one before it: at 1 ms apart with ±5 ms
    // of jitter, a delay rarely passes 25 ms by more than a few ms.
    assert!(spread.0 < Duration::from_millis(16), "{spread:?}");
    assert!(spread.1 < Duration::from_millis(35), "{spread:?}");
}

#[test]
fn duplicates_are_exact_copies() {
    let config = LinkConfig {
        duplicate: 0.1,
        seed: 2,
        ..LinkConfig::default()
    };
    let (out, c) = run(config, 10_000, 32, Duration::from_micros(10));
    assert!((800..1200).contains(&c.duplicated), "{}", c.duplicated);
    assert_eq!(out.len() as u64, 10_000 + c.duplicated);
    let mut numbers: Vec<u32> = out.iter().map(|o| o.0).collect();
    numbers.dedup();
    assert_eq!(
        numbers,
        (0..10_000).collect::<Vec<_>>(),
        "a copy follows its original"
    );
}

#[test]
fn the_rate_limit_spaces_packets_and_its_queue_drops_past_its_limit() {
    // 1 Mbit/s and 1250-byte packets: 10 ms each on the link; 100 ms of queue holds 10.
    let config = LinkConfig {
        rate_bits_per_second: Some(1_000_000),
        queue_limit: Duration::from_millis(100),
        seed: 4,
        ..LinkConfig::default()
    };
    let (out, c) = run(config, 50, 1250, Duration::ZERO);
    assert_eq!(c.dropped_queue, 50 - out.len() as u64);
    assert_eq!(out.len(), 11, "one on the link, ten waiting");
    for (i, (_, _, released)) in out.iter().enumerate() {
        assert_eq!(*released, Duration::from_millis(10 * (i as u64 + 1)));
    }
}

#[test]
fn packets_in_flight_are_bounded() {
    let config = LinkConfig {
        delay: Duration::from_secs(10),
        max_in_flight: 100,
        seed: 6,
        ..LinkConfig::default()
    };
    let mut link = Conditioner::new(config);
    let now = Instant::now();
    for _ in 0..1000 {
        link.offer(now, vec![0u8; 8]);
    }
    assert_eq!(link.in_flight(), 100);
    assert_eq!(link.counters().dropped_queue, 900);
}
