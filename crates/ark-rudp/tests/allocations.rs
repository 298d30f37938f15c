//! Zero allocations per message in steady state: a sans-IO client and server echoing 1024-byte
//! messages over a clean simulated link (the link's buffers pooled), allocations counted on
//! the test's thread. Its own test binary for the counting allocator.

mod util;

use std::time::Duration;

use ark_rudp::{Delivery, Fec};
use util::{Sim, link, sim_config};

#[global_allocator]
static GLOBAL: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;

const WARMUP: u64 = 1_000;
const MEASURED: u64 = 10_000;
/// Messages the client keeps unanswered.
const WINDOW: u64 = 32;

/// Allocation calls on this thread while `MEASURED` messages of 1024 bytes went to the
/// server and back, after `WARMUP` of them.
fn allocations_per_run(fec: Fec) -> u64 {
    let config = sim_config(fec);
    let ms = Duration::from_millis(1);
    let mut sim = Sim::new(config.clone(), config, 0xA110C, link(1, ms), link(2, ms));
    let payload = [0x5Au8; 1024];
    let total = WARMUP + MEASURED;
    let (mut sent, mut echoed) = (0u64, 0u64);
    let (mut start, mut end) = (0u64, 0u64);
    sim.run(Duration::from_secs(600), 20_000_000, |sim| {
        let Some(server) = sim.server.as_mut() else {
            return false;
        };
        while let Some(m) = server.recv() {
            server.send(&m, Delivery::Ordered).unwrap();
            server.recycle(m);
        }
        while let Some(m) = sim.client.recv() {
            assert!(m == payload, "echo {echoed} altered");
            echoed += 1;
            sim.client.recycle(m);
            if echoed == WARMUP {
                start = ark_testkit::thread_allocations();
            }
        }
        if echoed == total {
            end = ark_testkit::thread_allocations();
            return true;
        }
        while sent < total && sent - echoed < WINDOW {
            sim.client.send(&payload, Delivery::Ordered).unwrap();
            sent += 1;
        }
        false
    });
    let (client, server) = sim.stats();
    assert_eq!(
        client.retransmissions + server.retransmissions,
        0,
        "a clean link"
    );
    assert_eq!(sim.spins, 0);
    let count = end - start;
    eprintln!(
        "{fec:?}: {count} allocations for {MEASURED} messages echoed ({} parity datagrams sent)",
        client.parity_sent + server.parity_sent
    );
    count
}

#[test]
fn no_allocation_per_message_without_fec() {
    assert_eq!(allocations_per_run(Fec::Off), 0);
}

#[test]
fn no_allocation_per_message_with_adaptive_fec_on_a_clean_link() {
    assert_eq!(allocations_per_run(Fec::Adaptive), 0);
}

/// Fixed FEC encodes and keeps every group, reusing the codec, the shards and the groups.
#[test]
fn no_allocation_per_message_with_fixed_fec() {
    assert_eq!(allocations_per_run(Fec::Fixed { k: 8, m: 2 }), 0);
}
