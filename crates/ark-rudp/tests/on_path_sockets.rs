//! The on-path attacker over real sockets (127.0.0.1): the client reaches an encrypted server
//! (the default) through an ark-link forwarder that sees every datagram both ways — as a
//! router on the path would — and sends from the same address as the ends' peer. It reads no
//! payload; every datagram it replays, changes or cuts short is counted by the end it reached
//! and dropped; the session goes on and delivers only what its peer sent.

mod util;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ark_link::{Towards, UdpForwarder};
use ark_rudp::{Delivery, RudpClient, RudpConfig, RudpStats};
use util::{Note, Reporter, next_note};

const WAIT: Duration = Duration::from_secs(10);
const SECRET: &[u8] = b"nobody on the path may read this line";

/// Every datagram the forwarder saw, with the way it went.
type Seen = Arc<Mutex<Vec<(Towards, Vec<u8>)>>>;

/// What an end counted as forged or replayed.
fn dropped(stats: Option<RudpStats>) -> u64 {
    stats.map_or(0, |s| s.unauthenticated + s.replays)
}

#[test]
fn the_relay_reads_nothing_and_what_it_replays_changes_or_cuts_is_counted_and_dropped() {
    let (server, server_notes) = util::reporting_server(RudpConfig::default(), true);
    let seen: Seen = Arc::default();
    let tap = seen.clone();
    let relay = UdpForwarder::start(server.local_addr(), Duration::from_secs(60), move |t, d| {
        tap.lock().unwrap().push((t, d.to_vec()));
        true
    })
    .unwrap();
    let (handler, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(relay.local_addr(), handler)
        .unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Open);
    assert_eq!(next_note(&server_notes, WAIT), Note::Open);
    for delivery in [Delivery::Ordered, Delivery::Unreliable] {
        client.send(SECRET, delivery).unwrap();
        assert_eq!(
            next_note(&server_notes, WAIT),
            Note::Message(SECRET.to_vec())
        );
        assert_eq!(next_note(&notes, WAIT), Note::Message(SECRET.to_vec()));
    }
    thread::sleep(Duration::from_millis(100));
    let captured: Vec<(Towards, Vec<u8>)> = seen.lock().unwrap().clone();
    assert!(captured.len() >= 8, "{} datagrams seen", captured.len());
    for (_, d) in &captured {
        for piece in SECRET.windows(8) {
            assert!(
                !d.windows(8).any(|w| w == piece),
                "payload readable on the path"
            );
        }
    }
    // Every datagram after the handshake, again, changed in its body and cut short: paced a
    // datagram's three at a time so that loopback drops none and every one must be counted.
    let after: Vec<&(Towards, Vec<u8>)> = captured
        .iter()
        .filter(|(_, d)| !matches!(d[0] & 0xF0, 0x50 | 0x60 | 0x70))
        .collect();
    let before = (dropped(server.stats()), dropped(client.stats()));
    let mut sent = (0u64, 0u64);
    for (towards, d) in &after {
        let mut changed = d.clone();
        let at = changed.len() / 2;
        changed[at] ^= 0x40;
        for bad in [d.clone(), changed, d[..d.len() - 1].to_vec()] {
            assert!(relay.inject(*towards, &bad).unwrap());
        }
        match towards {
            Towards::Server => sent.0 += 3,
            Towards::Client => sent.1 += 3,
        }
        let want = (before.0 + sent.0, before.1 + sent.1);
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline
            && (dropped(server.stats()), dropped(client.stats())) != want
        {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            (dropped(server.stats()), dropped(client.stats())),
            want,
            "(server, client) after {} injected",
            sent.0 + sent.1
        );
    }
    assert!(sent.0 > 0 && sent.1 > 0, "{sent:?}");
    // The session goes on; nothing injected was delivered or closed anything.
    client.send(b"after", Delivery::Ordered).unwrap();
    assert_eq!(
        next_note(&server_notes, WAIT),
        Note::Message(b"after".to_vec())
    );
    assert_eq!(next_note(&notes, WAIT), Note::Message(b"after".to_vec()));
    assert!(
        server_notes
            .recv_timeout(Duration::from_millis(100))
            .is_err()
    );
    assert!(notes.recv_timeout(Duration::from_millis(100)).is_err());
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    relay.stop();
}
