//! Lanes on the sans-IO core, on a fake clock: a bulk lane does not hold back a small one
//! (head-of-line, measured in simulated time over a lossy link), sequenced lanes deliver only
//! what is newer, and lane fields no honest peer writes end only that session.

mod util;

use std::time::{Duration, Instant};

use ark_link::LinkConfig;
use ark_rudp::{CloseReason, Delivery, Event, Lane, RudpConfig, SendError};
use util::Sim;

/// One direction of the head-of-line link: 1 % loss, 10 ± 2 ms.
fn lossy(seed: u64) -> LinkConfig {
    LinkConfig {
        loss: 0.01,
        delay: Duration::from_millis(10),
        jitter: Duration::from_millis(2),
        seed,
        ..LinkConfig::default()
    }
}

/// Two lanes: small messages first (priority 0), bulk after (priority 1); room for 1 MiB
/// messages.
fn two_lanes() -> RudpConfig {
    let mut config = util::sim_config(ark_rudp::Fec::Off);
    config.lanes = vec![Lane::ordered(), Lane::ordered().priority(1)];
    config.max_message = 1 << 20;
    config.receive_window = 2048;
    config.send_buffer = 4 << 20;
    config
}

/// Where the bulk messages go, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bulk {
    None,
    /// On lane 1, beside the small messages' lane 0.
    OwnLane,
    /// On lane 0 with the small messages (one order: what a session without lanes does).
    SameLane,
}

/// What a head-of-line run measured.
#[derive(Debug)]
struct HolRun {
    /// Each small message's time from `send` to delivery, sorted.
    latencies: Vec<Duration>,
    /// Bulk bytes delivered.
    bulk_bytes: usize,
}

impl HolRun {
    fn p99(&self) -> Duration {
        self.latencies[self.latencies.len() * 99 / 100]
    }
}

/// 10 s of simulated time: a 64-byte message on lane 0 every 5 ms from the client, and with
/// `bulk` 1 MiB messages kept queued (two at a time) beside them.
fn head_of_line(bulk: Bulk, seed: u64) -> HolRun {
    const SMALL_EVERY: Duration = Duration::from_millis(5);
    const RUN: Duration = Duration::from_secs(10);
    let mut sim = Sim::new(two_lanes(), two_lanes(), seed, lossy(seed), lossy(seed + 1));
    sim.run(Duration::from_secs(5), 100_000, |sim| {
        sim.client.is_established() && sim.server.is_some()
    });
    let start = sim.now;
    let mut next_small = start;
    let mut sent_at: Vec<Instant> = Vec::new();
    let mut delivered: Vec<Option<Duration>> = Vec::new();
    let mut bulk_bytes = 0;
    let big = vec![0xB5u8; 1 << 20];
    let bulk_delivery = match bulk {
        Bulk::SameLane => Delivery::Ordered,
        _ => Delivery::Lane(1),
    };
    let mut turns = 0u64;
    while sim.now < start + RUN {
        turns += 1;
        assert!(turns < 5_000_000, "runaway turns");
        if sim.now >= next_small {
            let mut small = [0u8; 64];
            small[..4].copy_from_slice(&(sent_at.len() as u32).to_be_bytes());
            sim.client.send(&small, Delivery::Ordered).unwrap();
            sent_at.push(sim.now);
            delivered.push(None);
            next_small += SMALL_EVERY;
        }
        while bulk != Bulk::None && sim.client.buffered() < 2 << 20 {
            sim.client.send(&big, bulk_delivery).unwrap();
        }
        while let Some(m) = sim.server().recv() {
            if m.len() == 64 {
                let i = u32::from_be_bytes(m[..4].try_into().unwrap()) as usize;
                assert!(delivered[i].is_none(), "message {i} twice");
                assert!(
                    delivered[..i].iter().all(Option::is_some),
                    "message {i} before an earlier one: lane 0 is ordered"
                );
                delivered[i] = Some(sim.now - sent_at[i]);
            } else {
                assert_eq!(m.len(), 1 << 20);
                bulk_bytes += m.len();
            }
            sim.server().recycle(m);
        }
        if !sim.turn() {
            match sim.next_due() {
                Some(due) if due <= next_small => assert!(sim.advance()),
                _ => sim.now = next_small,
            }
        }
    }
    // Messages sent in the last 200 ms may still be on the way; with lanes every earlier one
    // arrived. One still waiting counts with its wait so far (a lower bound).
    let end = sim.now;
    let waiting = sent_at
        .iter()
        .zip(&delivered)
        .filter(|(t, d)| d.is_none() && **t + Duration::from_millis(200) <= end)
        .count();
    assert!(
        bulk == Bulk::SameLane || waiting == 0,
        "{bulk:?}: {waiting} of {} small messages still waiting",
        sent_at.len()
    );
    let mut latencies: Vec<Duration> = sent_at
        .iter()
        .zip(&delivered)
        .map(|(t, d)| d.unwrap_or(end - *t))
        .collect();
    latencies.sort();
    HolRun {
        latencies,
        bulk_bytes,
    }
}

#[test]
fn a_bulk_lane_does_not_hold_back_a_small_one_over_a_lossy_link() {
    let alone = head_of_line(Bulk::None, 0x1A7E);
    let lanes = head_of_line(Bulk::OwnLane, 0x1A7E);
    let one_lane = head_of_line(Bulk::SameLane, 0x1A7E);
    let report = format!(
        "small messages' p99: alone {:?}, bulk on its own lane {:?} ({} MiB moved), \
         bulk on the same lane {:?} ({} MiB moved)",
        alone.p99(),
        lanes.p99(),
        lanes.bulk_bytes >> 20,
        one_lane.p99(),
        one_lane.bulk_bytes >> 20,
    );
    println!("{report}");
    assert!(lanes.p99() <= alone.p99() * 2, "{report}");
    assert!(
        lanes.bulk_bytes >= 4 << 20,
        "the bulk lane moved on beside it: {report}"
    );
    assert!(
        one_lane.p99() > alone.p99() * 2,
        "without lanes the small messages wait for the bulk ones (what the test would \
         catch): {report}"
    );
}

#[test]
fn a_sequenced_lane_delivers_only_what_is_newer_and_counts_the_rest() {
    let mut config = util::sim_config(ark_rudp::Fec::Off);
    config.lanes = vec![Lane::ordered(), Lane::sequenced()];
    let reorder = |seed| LinkConfig {
        loss: 0.05,
        reorder: 0.2,
        reorder_gap: Duration::from_millis(4),
        delay: Duration::from_millis(10),
        seed,
        ..LinkConfig::default()
    };
    let mut sim = Sim::new(config.clone(), config, 0x5E0, reorder(71), reorder(72));
    sim.run(Duration::from_secs(5), 100_000, |sim| {
        sim.client.is_established() && sim.server.is_some()
    });
    let (mut sent, mut newest, mut got) = (0u32, None::<u32>, 0);
    sim.run_for(Duration::from_secs(3), |sim| {
        if sent < 2_000 {
            sim.client
                .send(&sent.to_be_bytes(), Delivery::Lane(1))
                .unwrap();
            sent += 1;
        }
        if let Some(server) = sim.server.as_mut() {
            while let Some(m) = server.recv() {
                let n = u32::from_be_bytes(m[..4].try_into().unwrap());
                assert!(newest.is_none_or(|p| n > p), "{n} after {newest:?}");
                newest = Some(n);
                got += 1;
            }
        }
    });
    let stale = sim.server().stats().stale_sequenced;
    assert!(got > 1_000 && got < 2_000, "{got} of 2,000 delivered");
    assert!(stale > 0, "reordered positions were dropped as stale");
    assert_eq!(sim.spins, 0);
}

#[test]
fn a_peer_on_a_lane_this_end_lacks_ends_only_its_session() {
    let mut client = util::sim_config(ark_rudp::Fec::Off);
    client.lanes = vec![Lane::ordered(), Lane::ordered(), Lane::unordered()];
    let server = util::sim_config(ark_rudp::Fec::Off);
    let clean = |seed| util::link(seed, Duration::from_millis(5));
    let mut sim = Sim::new(client, server, 0xBAD1, clean(81), clean(82));
    sim.run(Duration::from_secs(5), 100_000, |sim| {
        sim.client.is_established() && sim.server.is_some()
    });
    assert_eq!(
        sim.server().send(b"x", Delivery::Lane(1)),
        Err(SendError::NoLane { lane: 1, lanes: 1 })
    );
    assert_eq!(sim.server().stats().refused_no_lane, 1);
    sim.client.send(b"fine", Delivery::Ordered).unwrap();
    sim.client.send(b"bad", Delivery::Lane(2)).unwrap();
    sim.run(Duration::from_secs(10), 100_000, |sim| {
        sim.client.is_closed()
    });
    assert_eq!(sim.server().recv().as_deref(), Some(&b"fine"[..]));
    assert_eq!(
        sim.server().recv(),
        None,
        "nothing of the bad lane delivered"
    );
    assert!(
        sim.server_events
            .contains(&Event::Closed(CloseReason::ProtocolViolation(
                "a fragment on a lane the session does not have"
            ))),
        "{:?}",
        sim.server_events
    );
    assert!(
        sim.client_events
            .contains(&Event::Closed(CloseReason::PeerClosed)),
        "{:?}",
        sim.client_events
    );
}
