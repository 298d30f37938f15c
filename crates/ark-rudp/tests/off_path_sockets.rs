//! The off-path attack over real sockets (127.0.0.1): the client reaches the server through a
//! forwarding socket, so both ends see that socket's address as their peer's; from the same
//! socket a third party sends well-formed forged packets to both ends — with the victim's
//! peer's address as their source, as a spoofing attacker would, but without the session's
//! token. The session must go on, deliver only what the peer sent, and count the forgeries.

mod util;

use std::thread;
use std::time::{Duration, Instant};

use ark_link::{Towards, UdpForwarder};
use ark_rudp::{Delivery, RudpClient, RudpConfig};
use util::{Note, Reporter, forgeries, next_note};

const WAIT: Duration = Duration::from_secs(10);

/// Every forgery of `util::forgeries`, bare and ending in a guessed token.
fn forged() -> Vec<Vec<u8>> {
    forgeries()
        .into_iter()
        .flat_map(|f| {
            let mut guessed = f.clone();
            guessed.extend_from_slice(&[0xA5; 8]);
            [f, guessed]
        })
        .collect()
}

#[test]
fn forged_packets_from_the_peers_address_are_dropped_over_sockets() {
    let (server, server_notes) = util::reporting_server(RudpConfig::default(), true);
    let relay =
        UdpForwarder::start(server.local_addr(), Duration::from_secs(60), |_, _| true).unwrap();
    let (handler, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(relay.local_addr(), handler)
        .unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Open);
    client.send(b"before", Delivery::Ordered).unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Message(b"before".to_vec()));
    assert!(relay.client().is_some(), "the client wrote");
    // Paced, a round at a time, so that loopback drops none of them even on a loaded
    // machine: then every forgery must be counted, exactly.
    let rounds = 50;
    let counted = || {
        (
            server.stats().map_or(0, |s| s.unauthenticated),
            client.stats().map_or(0, |s| s.unauthenticated),
        )
    };
    for round in 1..=rounds {
        for f in forged() {
            assert!(relay.inject(Towards::Server, &f).unwrap());
            assert!(relay.inject(Towards::Client, &f).unwrap());
        }
        let want = (round * forged().len()) as u64;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline && counted() != (want, want) {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(counted(), (want, want), "round {round}: (server, client)");
    }
    client.send(b"after", Delivery::Ordered).unwrap();
    assert_eq!(
        next_note(&notes, WAIT),
        Note::Message(b"after".to_vec()),
        "the session goes on, and nothing forged was delivered before the echo"
    );
    assert_eq!(next_note(&server_notes, WAIT), Note::Open);
    for expected in [b"before".to_vec(), b"after".to_vec()] {
        assert_eq!(next_note(&server_notes, WAIT), Note::Message(expected));
    }
    assert!(
        server_notes
            .recv_timeout(Duration::from_millis(100))
            .is_err(),
        "no forged message, no close on the server"
    );
    assert!(notes.recv_timeout(Duration::from_millis(100)).is_err());
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    relay.stop();
}
