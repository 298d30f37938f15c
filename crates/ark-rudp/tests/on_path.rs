//! An on-path attacker: it sees every datagram of an encrypted session both ways and can send
//! anything from either end's address. On the sans-IO core: it reads no payload, and every
//! datagram it forges, changes, replays or holds back past the replay window is counted and
//! dropped — nothing it sends is delivered, closes, stalls or refreshes a session. The
//! handshake is checked too: a forged answer, a client pinned to another key, a connect
//! token the server refuses, a plaintext client at an encrypted server.

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ark_rudp::{
    ClientProtection, CloseReason, Connection, Delivery, Event, Incoming, Listener, PacketError,
    Refusal, RudpConfig, ServerProtection, Timestamp,
};

const SECRET: &[u8] = b"the attacker must not read this sentence";

fn peer() -> SocketAddr {
    "127.0.0.1:40001".parse().unwrap()
}

/// Every datagram `from` sends now.
fn transmit(from: &mut Connection, now: Instant) -> Vec<Vec<u8>> {
    let mut out = vec![0u8; util::BUF];
    let mut all = Vec::new();
    while let Some(n) = from.poll_transmit(now, &mut out) {
        all.push(out[..n].to_vec());
    }
    all
}

/// A handshake by hand between a client protected as `client` and a listener protected as
/// `server`; every datagram on the way is in `seen`. The listener's last answer.
fn handshake(
    client: &mut Connection,
    listener: &mut Listener,
    now: Instant,
    seen: &mut Vec<Vec<u8>>,
) -> Option<Incoming> {
    let mut out = vec![0u8; util::BUF];
    let mut last = None;
    for _ in 0..3 {
        let hellos = transmit(client, now);
        let Some(hello) = hellos.last() else {
            break;
        };
        seen.push(hello.clone());
        let answer = listener.handle(at(now), peer(), hello, &mut out);
        match answer {
            Ok(Incoming::Reply(n)) | Ok(Incoming::Accept(_, n)) => {
                seen.push(out[..n].to_vec());
                let _ = client.handle_datagram(now, &out[..n]);
            }
            _ => {}
        }
        let done = matches!(answer, Ok(Incoming::Accept(..) | Incoming::Refused(_)));
        last = answer.ok();
        if done {
            break;
        }
    }
    last
}

fn protections() -> (ClientProtection, ServerProtection) {
    let server = ServerProtection::generated();
    let client = ClientProtection::Encrypted {
        server_key: server.public_key().unwrap(),
        token: Vec::new(),
    };
    (client, server)
}

/// An established encrypted pair, and what the attacker saw of its handshake.
fn pair(now: Instant) -> (Connection, Connection, Vec<Vec<u8>>) {
    let config = Arc::new(RudpConfig::default());
    let (client_protection, server_protection) = protections();
    let mut client = Connection::client(config.clone(), now, 0xA77A_C4E5, client_protection);
    let mut listener = Listener::new(config, server_protection);
    let mut seen = Vec::new();
    let Some(Incoming::Accept(server, _)) = handshake(&mut client, &mut listener, now, &mut seen)
    else {
        panic!("no session");
    };
    assert!(client.is_established() && client.is_encrypted());
    assert!(server.is_encrypted());
    (client, *server, seen)
}

/// Moves everything between the two ends until quiet, the attacker copying each datagram.
fn exchange(a: &mut Connection, b: &mut Connection, now: Instant, seen: &mut Vec<Vec<u8>>) {
    for _ in 0..100 {
        let (ab, ba) = (transmit(a, now), transmit(b, now));
        if ab.is_empty() && ba.is_empty() {
            return;
        }
        for d in ab {
            b.handle_datagram(now, &d).unwrap();
            seen.push(d);
        }
        for d in ba {
            a.handle_datagram(now, &d).unwrap();
            seen.push(d);
        }
    }
}

fn drain(conn: &mut Connection) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    while let Some(m) = conn.recv() {
        got.push(m);
    }
    got
}

#[test]
fn the_attacker_reads_no_payload_and_no_handshake_secret() {
    let now = Instant::now();
    let (mut client, mut server, mut seen) = pair(now);
    for delivery in [Delivery::Ordered, Delivery::Unordered, Delivery::Unreliable] {
        client.send(SECRET, delivery).unwrap();
        server.send(SECRET, delivery).unwrap();
    }
    client.send(&SECRET.repeat(100), Delivery::Ordered).unwrap();
    exchange(&mut client, &mut server, now, &mut seen);
    assert_eq!(drain(&mut server).len(), 4);
    assert_eq!(drain(&mut client).len(), 3);
    // Not the sentence, nor any 8 bytes of it, anywhere on the wire.
    for d in &seen {
        for piece in SECRET.windows(8) {
            assert!(
                !d.windows(8).any(|w| w == piece),
                "plaintext on the wire in {:02x?}",
                &d[..d.len().min(32)]
            );
        }
    }
    assert!(seen.len() > 10, "{} datagrams seen", seen.len());
}

#[test]
fn every_changed_datagram_is_counted_and_dropped() {
    let now = Instant::now();
    let (mut client, mut server, _) = pair(now);
    client.send(b"real", Delivery::Ordered).unwrap();
    client.send(b"real too", Delivery::Unreliable).unwrap();
    let sent = transmit(&mut client, now);
    let mut changed = 0;
    for d in &sent {
        // Each byte after the kind, flipped: the packet number, the body, the tag.
        for at in 1..d.len() {
            let mut m = d.clone();
            m[at] ^= 0x01;
            assert!(
                server.handle_datagram(now, &m).is_err(),
                "byte {at} changed"
            );
            changed += 1;
        }
        // Cut short, or lengthened.
        assert!(server.handle_datagram(now, &d[..d.len() - 1]).is_err());
        assert!(
            server
                .handle_datagram(now, &[&d[..], &[0]].concat())
                .is_err()
        );
        changed += 2;
    }
    let stats = server.stats();
    assert_eq!(stats.unauthenticated + stats.replays, changed, "{stats:?}");
    assert!(
        drain(&mut server).is_empty(),
        "nothing changed was delivered"
    );
    // The originals still open: nothing was spent by the forgeries.
    for d in &sent {
        server.handle_datagram(now, d).unwrap();
    }
    let mut got = drain(&mut server);
    got.sort();
    assert_eq!(got, vec![b"real".to_vec(), b"real too".to_vec()]);
}

#[test]
fn forgeries_of_every_kind_open_nothing_close_nothing_refresh_nothing() {
    let start = Instant::now();
    let (mut client, mut server, _) = pair(start);
    let mut forged = 0;
    for base in util::forgeries() {
        for trailer in [&[][..], &[0x5A; 8][..], &[0x5A; 16][..]] {
            let d = [&base[..], trailer].concat();
            assert!(server.handle_datagram(start, &d).is_err(), "{d:02x?}");
            assert!(client.handle_datagram(start, &d).is_err(), "{d:02x?}");
            forged += 1;
        }
    }
    assert_eq!(server.stats().unauthenticated, forged);
    assert_eq!(client.stats().unauthenticated, forged);
    assert!(server.is_established() && client.is_established());
    assert_eq!(server.poll_event(), Some(Event::Connected));
    assert_eq!(server.poll_event(), None, "no close");
    // Forged traffic does not keep a silent peer's session: it times out as if alone.
    let idle = RudpConfig::default().idle_timeout;
    let mut now = start;
    while !server.is_closed() && now < start + 2 * idle {
        now += Duration::from_millis(100);
        for base in util::forgeries() {
            let _ = server.handle_datagram(now, &base);
        }
        server.handle_timeout(now);
        let _ = transmit(&mut server, now);
    }
    assert_eq!(
        server.poll_event(),
        Some(Event::Closed(CloseReason::IdleTimeout(idle)))
    );
}

#[test]
fn every_replay_and_every_datagram_late_past_the_window_is_counted_and_dropped() {
    let now = Instant::now();
    let (mut client, mut server, _) = pair(now);
    // The client's acknowledgement of the ACCEPT goes first.
    for d in transmit(&mut client, now) {
        server.handle_datagram(now, &d).unwrap();
    }
    let mut first = Vec::new();
    for i in 0..3000u32 {
        client.send(&i.to_be_bytes(), Delivery::Unreliable).unwrap();
        first.extend(transmit(&mut client, now));
    }
    // The first datagram held back; everything after it arrives.
    let held = first.remove(0);
    for d in &first {
        server.handle_datagram(now, d).unwrap();
    }
    assert_eq!(drain(&mut server).len(), first.len());
    // Late by more than the replay window (2,048): dropped as a replay.
    assert!(matches!(
        server.handle_datagram(now, &held),
        Err(PacketError::Replayed { .. })
    ));
    // Every datagram again: each a replay, none delivered.
    for d in &first {
        assert!(server.handle_datagram(now, d).is_err());
    }
    assert!(drain(&mut server).is_empty());
    assert_eq!(server.stats().replays, first.len() as u64 + 1);
    // A CLOSE replayed after the session went on closes nothing either.
    client.close(now);
    let sent = transmit(&mut client, now);
    let close = sent
        .iter()
        .find(|d| d[0] & 0xF0 == 0x80)
        .expect("a CLOSE")
        .clone();
    server.handle_datagram(now, &close).unwrap();
    assert!(server.handle_datagram(now, &close).is_err());
}

#[test]
fn a_forged_answer_does_not_finish_the_handshake_and_the_real_one_still_does() {
    let now = Instant::now();
    let config = Arc::new(RudpConfig::default());
    let (client_protection, server_protection) = protections();
    let mut client = Connection::client(config.clone(), now, 0xF0_0D, client_protection);
    let mut listener = Listener::new(config, server_protection);
    let mut out = vec![0u8; util::BUF];
    let hello = transmit(&mut client, now).pop().unwrap();
    let Ok(Incoming::Reply(n)) = listener.handle(at(now), peer(), &hello, &mut out) else {
        panic!("no cookie")
    };
    client.handle_datagram(now, &out[..n]).unwrap();
    let hello = transmit(&mut client, now).pop().unwrap();
    let Ok(Incoming::Accept(_, n)) = listener.handle(at(now), peer(), &hello, &mut out) else {
        panic!("no accept")
    };
    let accept = out[..n].to_vec();
    // The attacker answers first, with the right nonce (it saw the HELLO) and a Noise answer
    // of its own making, or the real one changed.
    let mut forged = accept.clone();
    forged[9..].fill(0x42);
    let mut changed = accept.clone();
    changed[20] ^= 1;
    for bad in [&forged, &changed, &accept[..9].to_vec()] {
        assert!(client.handle_datagram(now, bad).is_err());
        assert!(!client.is_established());
    }
    assert_eq!(client.stats().unauthenticated, 3);
    client.handle_datagram(now, &accept).unwrap();
    assert!(client.is_established() && client.is_encrypted());
}

#[test]
fn a_client_pinned_to_another_key_gets_no_session_and_learns_nothing() {
    let now = Instant::now();
    let config = Arc::new(RudpConfig::default());
    let impostor = ServerProtection::generated();
    let (client_protection, _) = protections();
    let mut client = Connection::client(config.clone(), now, 0xBAD, client_protection);
    let mut listener = Listener::new(config, impostor);
    let last = handshake(&mut client, &mut listener, now, &mut Vec::new());
    assert!(
        matches!(last, Some(Incoming::Refused(Refusal::Handshake(_)))),
        "{last:?}"
    );
    assert!(!client.is_established());
}

#[test]
fn a_plaintext_client_at_an_encrypted_server_is_refused() {
    let now = Instant::now();
    let config = Arc::new(RudpConfig::default());
    let (_, server_protection) = protections();
    let mut client = Connection::client(config.clone(), now, 7, ClientProtection::Plaintext);
    let mut listener = Listener::new(config, server_protection);
    let last = handshake(&mut client, &mut listener, now, &mut Vec::new());
    assert!(
        matches!(last, Some(Incoming::Refused(Refusal::Protection { .. }))),
        "{last:?}"
    );
}

#[test]
fn the_connect_token_reaches_the_check_encrypted_and_a_refused_one_gets_no_session() {
    let now = Instant::now();
    let config = Arc::new(RudpConfig::default());
    let key = Arc::new(ark_rudp::RudpServerKey::generate());
    let check: ark_rudp::TokenCheck = Arc::new(|_, token: &[u8]| token == b"ticket-42");
    let server = || ServerProtection::Encrypted {
        key: key.clone(),
        check: Some(check.clone()),
    };
    let client = |token: &[u8]| ClientProtection::Encrypted {
        server_key: key.public(),
        token: token.to_vec(),
    };
    let mut seen = Vec::new();
    let mut good = Connection::client(config.clone(), now, 1, client(b"ticket-42"));
    let mut listener = Listener::new(config.clone(), server());
    let Some(Incoming::Accept(session, _)) = handshake(&mut good, &mut listener, now, &mut seen)
    else {
        panic!("the good token was refused")
    };
    assert_eq!(session.connect_token(), b"ticket-42");
    assert!(
        !seen.iter().any(|d| d.windows(9).any(|w| w == b"ticket-42")),
        "the token crossed the wire readable"
    );
    let mut bad = Connection::client(config.clone(), now, 2, client(b"ticket-43"));
    let last = handshake(&mut bad, &mut listener, now, &mut Vec::new());
    assert!(
        matches!(last, Some(Incoming::Refused(Refusal::Token))),
        "{last:?}"
    );
}

#[test]
fn a_live_session_cannot_be_replaced_by_a_new_handshake_from_its_address() {
    let now = Instant::now();
    let (_, server, _) = pair(now);
    assert!(!server.is_replaceable(now), "just heard from");
    let keep_alive = RudpConfig::default().keep_alive;
    assert!(!server.is_replaceable(now + keep_alive));
    assert!(
        server.is_replaceable(now + 2 * keep_alive),
        "a silent one gives way"
    );
}

/// `now` by both clocks (the system clock read now).
fn at(now: Instant) -> Timestamp {
    Timestamp {
        now,
        wall: SystemTime::now(),
    }
}
