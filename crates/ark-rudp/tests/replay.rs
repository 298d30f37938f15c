//! Replays: an attacker who captured a session's datagrams (sealed: they open under the
//! session's keys) sends them again. Each kind is taken once: a replayed UNRELIABLE message is not delivered again, a
//! replayed window-0 ACK does not stall the sender, replayed DATA, PARITY and CLOSE
//! datagrams do nothing; each replay is counted (`RudpStats::replays`). On the sans-IO core.

mod util;

use std::time::Duration;

use ark_rudp::{CloseReason, Connection, Delivery, Event, Fec, PacketError, RudpConfig};
use util::{Sim, sim_config};

fn connected(config: RudpConfig) -> Sim {
    let link = |seed| util::link(seed, Duration::from_millis(5));
    let mut sim = Sim::new(config.clone(), config, 0x5E_9A1A_0000, link(3), link(4));
    sim.run(Duration::from_secs(5), 100_000, |sim| {
        sim.server.as_ref().is_some_and(|s| s.is_established()) && sim.client.is_established()
    });
    sim.run_for(Duration::from_millis(50), |_| {});
    sim
}

/// Everything `from` sends now, as datagrams.
fn transmit(from: &mut Connection, now: std::time::Instant) -> Vec<Vec<u8>> {
    let mut out = vec![0u8; util::BUF];
    let mut all = Vec::new();
    while let Some(n) = from.poll_transmit(now, &mut out) {
        all.push(out[..n].to_vec());
    }
    all
}

/// Feeds `d` to `to` `times` times: each must be refused as a replay.
fn replay(to: &mut Connection, now: std::time::Instant, d: &[u8], times: usize) {
    for _ in 0..times {
        assert!(
            matches!(
                to.handle_datagram(now, d),
                Err(PacketError::Replayed { .. })
            ),
            "a replay of {:#04x} was taken",
            d[0]
        );
    }
}

/// A regression test: 20 replays of an UNRELIABLE datagram were 20 more deliveries.
#[test]
fn a_replayed_unreliable_message_is_delivered_once() {
    let mut sim = connected(sim_config(Fec::Off));
    let now = sim.now;
    sim.server().send(b"once", Delivery::Unreliable).unwrap();
    let sent = transmit(sim.server(), now);
    let [d] = &sent[..] else {
        panic!("one datagram: {sent:?}")
    };
    sim.client.handle_datagram(now, d).unwrap();
    replay(&mut sim.client, now, d, 20);
    let mut got = Vec::new();
    while let Some(m) = sim.client.recv() {
        got.push(m);
    }
    assert_eq!(got, vec![b"once".to_vec()]);
    assert_eq!(sim.client.stats().replays, 20);
}

/// A regression test: a captured ACK advertising a window of 0, replayed, closed the sender's
/// window again each time (about a second's stall per replay, until its next probe).
#[test]
fn a_replayed_window_0_ack_is_ignored() {
    let mut sim = connected(sim_config(Fec::Off));
    let now = sim.now;
    // The server once advertised a window of 0 (as a receiver that took nothing would):
    // what an on-path attacker captures is that sealed ACK.
    sim.server().advertise_zero_window(true);
    sim.client.send(b"fill", Delivery::Ordered).unwrap();
    for d in transmit(&mut sim.client, now) {
        sim.server().handle_datagram(now, &d).unwrap();
    }
    let zero = transmit(sim.server(), now);
    let [zero] = &zero[..] else {
        panic!("one ACK: {zero:?}")
    };
    assert_eq!(zero[0] & 0xF0, 0x20, "an ACK");
    sim.client.handle_datagram(now, zero).unwrap();
    sim.client.send(b"stalled", Delivery::Ordered).unwrap();
    assert!(
        transmit(&mut sim.client, now)
            .iter()
            .all(|d| d[0] & 0xF0 != 0x10),
        "the window is 0: no DATA"
    );
    // The window opens (the server's next DATA carries its window), the DATA flows; then the
    // window-0 ACK is replayed: it must not close the window again.
    sim.server().advertise_zero_window(false);
    sim.server().send(b"x", Delivery::Ordered).unwrap();
    for d in transmit(sim.server(), now) {
        sim.client.handle_datagram(now, &d).unwrap();
    }
    replay(&mut sim.client, now, zero, 5);
    let sent = transmit(&mut sim.client, now);
    assert!(
        sent.iter().any(|d| d[0] & 0xF0 == 0x10),
        "the replayed window 0 stalled the sender"
    );
    assert_eq!(sim.client.stats().replays, 5);
}

/// Replayed DATA: not a duplicate fragment, nothing delivered twice, nothing acknowledged
/// anew.
#[test]
fn replayed_data_is_harmless() {
    let mut sim = connected(sim_config(Fec::Off));
    let now = sim.now;
    sim.server().send(&[9; 3000], Delivery::Ordered).unwrap();
    let sent = transmit(sim.server(), now);
    assert_eq!(sent.len(), 3);
    for d in &sent {
        sim.client.handle_datagram(now, d).unwrap();
    }
    let before = sim.client.stats();
    for d in &sent {
        replay(&mut sim.client, now, d, 3);
    }
    assert_eq!(sim.client.recv(), Some(vec![9; 3000]));
    assert_eq!(sim.client.recv(), None);
    let after = sim.client.stats();
    assert_eq!(
        after.duplicates, before.duplicates,
        "dropped before the window"
    );
    assert_eq!(after.replays, 9);
}

/// Replayed PARITY: dropped before the FEC decoder.
#[test]
fn replayed_parity_is_harmless() {
    let mut config = sim_config(Fec::Fixed { k: 2, m: 1 });
    config.fec_max_delay = Duration::from_millis(1);
    let mut sim = connected(config);
    let now = sim.now;
    sim.server().send(&[4; 2000], Delivery::Ordered).unwrap();
    let sent = transmit(sim.server(), now);
    let parity: Vec<&Vec<u8>> = sent.iter().filter(|d| d[0] & 0xF0 == 0x30).collect();
    assert_eq!(
        parity.len(),
        1,
        "a full group of 2 gets its parity: {sent:?}"
    );
    for d in &sent {
        sim.client.handle_datagram(now, d).unwrap();
    }
    replay(&mut sim.client, now, parity[0], 4);
    assert_eq!(sim.client.recv(), Some(vec![4; 2000]));
    assert_eq!(sim.client.recv(), None);
    assert_eq!(sim.client.stats().fec_recovered, 0);
    assert_eq!(sim.client.stats().replays, 4);
}

/// Replayed CLOSE: the peer that closed answers the first; the replays get no answer and
/// change nothing.
#[test]
fn a_replayed_close_is_harmless() {
    let mut sim = connected(sim_config(Fec::Off));
    let now = sim.now;
    // What the server had to send first (a keep-alive due) goes before its CLOSE.
    for d in transmit(sim.server(), now) {
        sim.client.handle_datagram(now, &d).unwrap();
    }
    let _ = transmit(&mut sim.client, now);
    sim.server().close(now);
    let sent = transmit(sim.server(), now);
    let [close] = &sent[..] else {
        panic!("one CLOSE: {sent:?}")
    };
    sim.client.handle_datagram(now, close).unwrap();
    assert_eq!(transmit(&mut sim.client, now).len(), 1, "the answer");
    replay(&mut sim.client, now, close, 3);
    assert!(
        transmit(&mut sim.client, now).is_empty(),
        "no answer to a replay"
    );
    let mut events = Vec::new();
    while let Some(e) = sim.client.poll_event() {
        events.push(e);
    }
    assert_eq!(events, vec![Event::Closed(CloseReason::PeerClosed)]);
    assert_eq!(sim.client.stats().replays, 3);
}
