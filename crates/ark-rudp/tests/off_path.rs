//! An off-path attacker: a third party that can send datagrams with either end's address as
//! their source but sees none of their traffic. Tested deterministically on the sans-IO core,
//! where "with the victim's address" means handed to the victim's `Connection` as if from its
//! peer: well-formed CLOSE, UNRELIABLE, DATA, ACK and handshake packets, without the session's
//! token, with a guessed one, and with the token of the other direction (a reflection). None
//! may close, feed or refresh the session; each is counted.

mod util;

use std::time::Duration;

use ark_rudp::{CloseReason, Connection, Delivery, Event, Fec, RudpConfig};
use util::{Sim, forgeries, sim_config};

/// Each forgery bare, ending in a guessed token, and ending in `reflected` (a token the
/// victim itself sends).
fn attack(victim: &mut Connection, now: std::time::Instant, reflected: [u8; 8]) -> u64 {
    let mut sent = 0;
    for base in forgeries() {
        for trailer in [&[][..], &[0x5A; 8][..], &reflected[..]] {
            let mut d = base.clone();
            d.extend_from_slice(trailer);
            assert!(
                victim.handle_datagram(now, &d).is_err(),
                "{d:02x?} was believed"
            );
            sent += 1;
        }
    }
    sent
}

fn connected(config: RudpConfig) -> Sim {
    let link = |seed| util::link(seed, Duration::from_millis(5));
    // Plaintext, the weaker protection (tokens): an encrypted session meets the same forgeries
    // in tests/on_path.rs.
    let mut sim = Sim::plaintext(
        config.clone(),
        config,
        0x1234_5678_9ABC_DEF0,
        link(1),
        link(2),
    );
    sim.run(Duration::from_secs(5), 100_000, |sim| {
        sim.server.as_ref().is_some_and(|s| s.is_established()) && sim.client.is_established()
    });
    sim.run_for(Duration::from_millis(100), |_| {});
    sim
}

#[test]
fn forged_packets_with_the_peers_address_neither_close_nor_feed_a_session() {
    let mut sim = connected(sim_config(Fec::Off));
    let now = sim.now;
    // The token each side expects from its peer is the one the peer sends: reflecting the
    // victim's own token at it must fail too.
    let client_sends = sim.server().peer_token().unwrap();
    let server_sends = sim.client.peer_token().unwrap();
    assert_ne!(client_sends, server_sends, "one token per direction");
    let on_server = attack(sim.server(), now, server_sends);
    let on_client = attack(&mut sim.client, now, client_sends);
    let (client, server) = sim.stats();
    assert_eq!(server.unauthenticated, on_server, "{server:?}");
    assert_eq!(client.unauthenticated, on_client, "{client:?}");
    assert_eq!(server.malformed + client.malformed, 0);
    // Nothing was delivered, nothing closed, and the session still carries real messages.
    sim.client.send(b"real", Delivery::Ordered).unwrap();
    let mut got = Vec::new();
    sim.run_for(Duration::from_millis(200), |sim| {
        while let Some(m) = sim.server().recv() {
            got.push(m);
        }
    });
    assert_eq!(
        got,
        vec![b"real".to_vec()],
        "only the peer's message arrived"
    );
    assert!(sim.client.is_established() && sim.server().is_established());
    assert_eq!(sim.client_events, vec![Event::Connected]);
    assert_eq!(sim.server_events, vec![Event::Connected]);
}

#[test]
fn forged_packets_do_not_keep_a_dead_peers_session_alive() {
    let mut config = sim_config(Fec::Off);
    config.keep_alive = Duration::from_millis(100);
    config.idle_timeout = Duration::from_millis(600);
    let mut sim = connected(config);
    sim.server_gone = true;
    let reflected = sim.server().peer_token().unwrap();
    let gone_at = sim.now;
    let mut next = sim.now;
    sim.run(Duration::from_secs(10), 100_000, |sim| {
        if sim.now >= next && !sim.client.is_closed() {
            let now = sim.now;
            attack(&mut sim.client, now, reflected);
            next = now + Duration::from_millis(50);
        }
        sim.client.is_closed()
    });
    let idle = CloseReason::IdleTimeout(Duration::from_millis(600));
    assert_eq!(
        sim.client_events,
        vec![Event::Connected, Event::Closed(idle)]
    );
    let after = sim.now - gone_at;
    assert!(
        after <= Duration::from_millis(700),
        "closed {after:?} after the peer went, forgeries notwithstanding"
    );
    assert!(sim.client.stats().unauthenticated > 100);
}
