//! What a hostile or broken peer can send: forged acknowledgements, and arbitrary bytes into a
//! connection (in every state) and into the listener. Nothing panics, nothing forged is
//! believed, the connection goes on.

mod util;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ark_link::LinkConfig;
use ark_rudp::{Connection, Fec, Incoming, Listener, RudpConfig, ServerProtection, Timestamp};
use proptest::prelude::*;
use util::{Flow, Side, Sim, sim_config};

/// An ACK datagram: `next`, the SACK bitmap, the window and the receive count.
fn ack(next: u32, bitmap: u64, window: u16, received: u16) -> Vec<u8> {
    let mut d = vec![0x20];
    d.extend_from_slice(&next.to_be_bytes());
    d.extend_from_slice(&bitmap.to_be_bytes());
    d.extend_from_slice(&window.to_be_bytes());
    d.extend_from_slice(&received.to_be_bytes());
    d
}

/// A DATA datagram (whole message, lane 0) at wire sequence `seq` carrying the ack block of
/// `ack`.
fn data(seq: u32, ack_block: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut d = vec![0x13];
    d.extend_from_slice(&seq.to_be_bytes());
    d.push(0); // lane 0
    d.extend_from_slice(&seq.to_be_bytes()); // its lane sequence: one lane, one order
    d.extend_from_slice(&ack_block[1..17]);
    d.extend_from_slice(payload);
    d
}

#[test]
fn forged_acknowledgements_for_unsent_data_are_counted_and_ignored() {
    const FIRST: u32 = 0x1000_0000;
    let nonce = 0x0BAD_0000_0000_0000 | u64::from(FIRST);
    let link = |seed| LinkConfig {
        loss: 0.05,
        delay: Duration::from_millis(5),
        seed,
        ..LinkConfig::default()
    };
    let config = sim_config(Fec::Off);
    // Plaintext: the test plays a hostile peer that writes datagrams with the session token.
    let mut sim = Sim::plaintext(config.clone(), config, nonce, link(101), link(102));
    let mut up = Flow::new(Side::Client, 500);
    let mut down = Flow::new(Side::Server, 500);
    let mut forged = [0u64; 2];
    sim.run(Duration::from_secs(60), 1_000_000, |sim| {
        up.pump(&mut sim.client);
        down.drain(&mut sim.client);
        if let Some(server) = sim.server.as_mut() {
            down.pump(server);
            up.drain(server);
        }
        let done = up.done() && down.done();
        if !done && sim.turns % 40 == 0 && sim.server.is_some() {
            let now = sim.now;
            for (i, side) in [Side::Client, Side::Server].into_iter().enumerate() {
                let conn = sim.conn(side).unwrap();
                let stats = conn.stats();
                // Fragments sent so far: the first unsent one is FIRST + this.
                let sent = (stats.data_sent - stats.retransmissions) as u32;
                let lies = [
                    ack(FIRST.wrapping_add(sent + 1), 0, u16::MAX, u16::MAX),
                    ack(FIRST.wrapping_add(1_000_000), u64::MAX, u16::MAX, 7),
                    // Past the receive window: the fragment is dropped, its ack block counted.
                    data(
                        FIRST.wrapping_add(3_000_000),
                        &ack(FIRST.wrapping_add(sent + 64), 0, 0, 0),
                        b"x",
                    ),
                ];
                // A hostile peer: it knows the session's token.
                for lie in lies {
                    let lie = util::hostile(conn, &lie, 1);
                    conn.handle_datagram(now, &lie).unwrap();
                    forged[i] += 1;
                }
            }
        }
        done
    });
    sim.run_for(Duration::from_secs(1), |sim| {
        down.drain(&mut sim.client);
        up.drain(sim.server());
    });
    let (client, server) = sim.stats();
    assert!(
        forged[0] >= 30,
        "{forged:?}: the forgeries went in during the transfer"
    );
    assert_eq!(client.forged_acks, forged[0], "{client:?}");
    assert_eq!(server.forged_acks, forged[1], "{server:?}");
    assert_eq!(
        (client.messages_delivered, server.messages_delivered),
        (500, 500)
    );
    assert!(sim.client.is_established() && sim.server().is_established());
    assert!(
        client.retransmissions > 0,
        "real losses still repaired: {client:?}"
    );
}

/// A datagram: arbitrary bytes, or a real kind byte and arbitrary fields, or a HELLO-sized one.
fn datagram() -> impl Strategy<Value = Vec<u8>> {
    let kinds = vec![
        0x10u8, 0x13, 0x17, 0x1B, 0x1F, 0x20, 0x21, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80,
    ];
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1400),
        (
            prop::sample::select(kinds),
            prop::collection::vec(any::<u8>(), 0..64)
        )
            .prop_map(|(kind, mut rest)| {
                rest.insert(0, kind);
                rest
            }),
        (any::<u8>(), prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(flags, head)| {
            let mut d = vec![0u8; 1200];
            d[0] = 0x50 | (flags & 0x0F);
            d[1] = 1;
            d[2..2 + head.len()].copy_from_slice(&head);
            d
        }),
    ]
}

/// A DATA or PARITY datagram near sequence `first` (in the receive window), fields otherwise
/// arbitrary.
fn near(first: u32) -> impl Strategy<Value = Vec<u8>> {
    (
        (0u32..80, 0u32..2000),
        0u8..16,
        any::<[u8; 16]>(),
        any::<bool>(),
        (any::<u8>(), 0u8..4, 0u8..4, 0u8..4),
        prop::collection::vec(any::<u8>(), 0..300),
    )
        .prop_map(
            move |((offset, pn), flags, ack, parity, (group, k, m, index), body)| {
                let mut d = Vec::new();
                if parity {
                    d.push(0x30);
                    d.extend_from_slice(&pn.to_be_bytes());
                    d.extend_from_slice(&ack);
                    d.extend_from_slice(&u32::from(group % 4).to_be_bytes());
                    d.extend_from_slice(&[k, m, index]);
                } else {
                    d.push(0x10 | flags);
                    d.extend_from_slice(&pn.to_be_bytes());
                    d.extend_from_slice(&first.wrapping_add(offset).to_be_bytes());
                    d.extend_from_slice(&ack);
                    if flags & 0x8 != 0 {
                        d.extend_from_slice(&u32::from(group % 4).to_be_bytes());
                        d.push(index);
                    }
                }
                d.extend_from_slice(&body);
                d
            },
        )
}

/// Feeds `datagrams` to `conn`, then runs its output and timers a little: nothing panics.
fn feed(conn: &mut Connection, now: Instant, datagrams: &[Vec<u8>]) {
    let mut out = vec![0u8; util::BUF];
    for (i, d) in datagrams.iter().enumerate() {
        let at = now + Duration::from_millis(i as u64);
        let _ = conn.handle_datagram(at, d);
        for _ in 0..10_000 {
            if conn.poll_transmit(at, &mut out).is_none() {
                break;
            }
        }
        while let Some(m) = conn.recv() {
            conn.recycle(m);
        }
        while conn.poll_event().is_some() {}
    }
    let mut at = now + Duration::from_millis(datagrams.len() as u64);
    for _ in 0..50 {
        let Some(t) = conn.poll_timeout() else { break };
        at = at.max(t);
        conn.handle_timeout(at);
        for _ in 0..10_000 {
            if conn.poll_transmit(at, &mut out).is_none() {
                break;
            }
        }
    }
}

/// A pair connected over a clean link, with a few messages exchanged and some in flight.
fn established(fec: Fec) -> Sim {
    let link = |seed| util::link(seed, Duration::from_millis(5));
    let config = sim_config(fec);
    let nonce = 0xAB_0000_0000 | u64::from(u32::MAX - 3);
    let mut sim = Sim::new(config.clone(), config, nonce, link(1), link(2));
    let mut up = Flow::new(Side::Client, 20);
    sim.run(Duration::from_secs(10), 100_000, |sim| {
        up.pump(&mut sim.client);
        if let Some(server) = sim.server.as_mut() {
            up.drain(server);
        }
        up.done()
    });
    for _ in 0..5 {
        sim.client
            .send(&[1; 3000], ark_rudp::Delivery::Ordered)
            .unwrap();
        sim.server()
            .send(&[2; 100], ark_rudp::Delivery::Unordered)
            .unwrap();
    }
    sim.turn();
    sim
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_datagrams_never_panic_a_connection(
        datagrams in prop::collection::vec(datagram(), 1..12),
        structured in prop::collection::vec(near(u32::MAX - 3), 0..12),
        fec in prop::sample::select(vec![Fec::Off, Fec::Fixed { k: 2, m: 1 }, Fec::Adaptive]),
    ) {
        let now = Instant::now();
        // A client in its handshake, before and after its HELLO left.
        let config = Arc::new(sim_config(fec));
        let mut fresh = Connection::client(config.clone(), now, 5, util::client_protection());
        feed(&mut fresh, now, &datagrams);
        let mut hello = Connection::client(config, now, 6, util::client_protection());
        let mut out = vec![0u8; util::BUF];
        hello.poll_transmit(now, &mut out);
        feed(&mut hello, now, &datagrams);
        // Both ends of an established connection.
        let mut sim = established(fec);
        let at = sim.now;
        let mixed: Vec<Vec<u8>> = datagrams.iter().chain(&structured).cloned().collect();
        feed(&mut sim.client, at, &mixed);
        feed(sim.server(), at, &mixed);
        // And the pair still runs (what it delivers after garbage is not checked).
        sim.run_for(Duration::from_millis(500), |sim| {
            while let Some(m) = sim.client.recv() {
                sim.client.recycle(m);
            }
        });
    }

    #[test]
    fn arbitrary_datagrams_never_panic_the_listener_nor_open_a_connection(
        datagrams in prop::collection::vec(datagram(), 1..40),
        port in 1u16..,
        v6 in any::<bool>(),
    ) {
        let mut listener = Listener::new(Arc::new(RudpConfig::default()), ServerProtection::generated());
        let ip = if v6 { IpAddr::V6(Ipv6Addr::LOCALHOST) } else { IpAddr::V4(Ipv4Addr::LOCALHOST) };
        let peer = SocketAddr::new(ip, port);
        let mut out = vec![0u8; 64];
        for d in &datagrams {
            let wall = SystemTime::now();
            let _ = listener.is_new_handshake(wall, peer, d);
            match listener.handle(Timestamp { now: Instant::now(), wall }, peer, d, &mut out) {
                Ok(Incoming::Accept(..)) => prop_assert!(false, "accepted without a cookie"),
                Ok(Incoming::Reply(n)) => {
                    prop_assert!(n < d.len(), "a {n}-byte answer to {} bytes", d.len());
                    prop_assert_eq!(out[0], 0x60, "only COOKIEs");
                    prop_assert_eq!(d[0] & 0xF0, 0x50, "only HELLOs are answered");
                }
                Ok(_) | Err(_) => {}
            }
        }
    }
}

/// Regression: a peer's message over this end's `max_message` (the peer's own limit is larger)
/// was reassembled whole and delivered. Now it is dropped, the connection closes with
/// `MessageTooLarge`, and the peer is told.
#[test]
fn a_message_over_the_receivers_max_message_closes_the_session_undelivered() {
    let link = |seed| util::link(seed, Duration::from_millis(5));
    let mut big = sim_config(Fec::Off);
    big.max_message = 600_000;
    let small = sim_config(Fec::Off);
    let max = small.max_message;
    let mut sim = Sim::new(big, small, 0x5150_0000_0000, link(31), link(32));
    sim.run(Duration::from_secs(5), 100_000, |sim| {
        sim.server.is_some() && sim.client.is_established()
    });
    sim.client
        .send(&vec![7; 300_000], ark_rudp::Delivery::Ordered)
        .expect("within the client's own limit");
    let mut delivered = 0;
    sim.run(Duration::from_secs(10), 1_000_000, |sim| {
        while let Some(m) = sim.server.as_mut().and_then(Connection::recv) {
            delivered += m.len();
        }
        sim.client.is_closed()
    });
    assert_eq!(delivered, 0, "nothing of it reached the application");
    let too_large = ark_rudp::CloseReason::MessageTooLarge { len: 300_000, max };
    assert_eq!(
        sim.server_events,
        vec![
            ark_rudp::Event::Connected,
            ark_rudp::Event::Closed(too_large)
        ]
    );
    assert_eq!(
        sim.client_events.last(),
        Some(&ark_rudp::Event::Closed(ark_rudp::CloseReason::PeerClosed))
    );
}
