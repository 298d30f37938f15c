//! The stateless-cookie handshake: sans-IO against the `Listener`, then at the socket level
//! against a `RudpServer` flooded with garbage from a raw socket.

mod util;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use ark_rudp::{
    ClientProtection, CloseReason, Connection, Delivery, Event, Incoming, Listener, RudpClient,
    RudpConfig, RudpServer, ServerProtection, Timestamp,
};
use util::{Note, Reporter, next_note};

const HELLO: usize = 1200;
const KIND_COOKIE: u8 = 0x60;
const KIND_ACCEPT: u8 = 0x70;

fn config() -> Arc<RudpConfig> {
    Arc::new(RudpConfig::default())
}

/// The server of these tests: encrypted, one key pair for all of them.
fn server_protection() -> ServerProtection {
    static KEY: std::sync::OnceLock<ServerProtection> = std::sync::OnceLock::new();
    KEY.get_or_init(ServerProtection::generated).clone()
}

/// A client that pins the tests' server key.
fn client_protection() -> ClientProtection {
    ClientProtection::Encrypted {
        server_key: server_protection().public_key().unwrap(),
        token: Vec::new(),
    }
}

/// The HELLO a fresh client with `nonce` sends first (no cookie).
fn first_hello(nonce: u64, now: Instant) -> (Connection, Vec<u8>) {
    let mut client = Connection::client(config(), now, nonce, client_protection());
    let mut out = vec![0u8; util::BUF];
    let n = client.poll_transmit(now, &mut out).expect("a HELLO");
    out.truncate(n);
    (client, out)
}

fn peer(i: usize) -> SocketAddr {
    if i.is_multiple_of(2) {
        SocketAddr::from(([127, 0, 0, 1], 10_000 + i as u16))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 10_000 + i as u16))
    }
}

#[test]
fn a_hello_without_a_cookie_gets_a_smaller_cookie_and_the_listener_keeps_nothing() {
    let mut listener = Listener::new(config(), server_protection());
    let before = format!("{listener:?}");
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut out = [0u8; 64];
    for i in 0..1_000 {
        let nonce = 0x1000 + i as u64;
        let (_, hello) = first_hello(nonce, now);
        assert_eq!(hello.len(), HELLO, "a HELLO is padded");
        match listener.handle(Timestamp { now, wall }, peer(i), &hello, &mut out) {
            Ok(Incoming::Reply(n)) => {
                assert!(
                    n < hello.len(),
                    "{n}-byte answer to a {}-byte HELLO",
                    hello.len()
                );
                assert_eq!(out[0], KIND_COOKIE);
                assert_eq!(out[1..9], nonce.to_be_bytes(), "the cookie names the nonce");
            }
            other => panic!("HELLO {i} without a cookie: {other:?}"),
        }
    }
    assert_eq!(format!("{listener:?}"), before, "no state per HELLO");

    // What is not a HELLO gets nothing.
    let (_, hello) = first_hello(1, now);
    let not_hellos: [&[u8]; 7] = [
        &[0x20; 17],      // ACK
        &[0x13; 40],      // DATA
        &[0x60; 29],      // COOKIE
        &[0x70; 9],       // ACCEPT
        &[0x80, 0],       // CLOSE
        &[0x40, 1, 2, 3], // UNRELIABLE
        &[0x30; 60],      // PARITY (malformed or not)
    ];
    for d in not_hellos {
        let answer = listener.handle(Timestamp { now, wall }, peer(1), d, &mut out);
        assert!(
            matches!(answer, Ok(Incoming::Ignore) | Err(_)),
            "{:#04x}: {answer:?}",
            d[0]
        );
    }
    // A short HELLO (no padding: amplification) or another version: an error, no answer.
    assert!(
        listener
            .handle(
                Timestamp { now, wall },
                peer(1),
                &hello[..HELLO - 1],
                &mut out
            )
            .is_err()
    );
    let mut other_version = hello.clone();
    other_version[1] = 1; // the version before the session tokens
    assert!(
        listener
            .handle(Timestamp { now, wall }, peer(1), &other_version, &mut out)
            .is_err()
    );
    assert!(
        listener
            .handle(Timestamp { now, wall }, peer(1), &[], &mut out)
            .is_err()
    );
    assert_eq!(format!("{listener:?}"), before);
}

#[test]
fn a_valid_cookie_accepts_once_and_replays_and_other_addresses_are_refused() {
    let now = Instant::now();
    let wall = SystemTime::now();
    let mut listener = Listener::new(config(), server_protection());
    let mut out = [0u8; 64];
    let nonce = 0xC0FF_EE00_0000_0001;
    let (mut client, hello) = first_hello(nonce, now);
    let Ok(Incoming::Reply(n)) =
        listener.handle(Timestamp { now, wall }, peer(0), &hello, &mut out)
    else {
        panic!("no cookie");
    };
    client.handle_datagram(now, &out[..n]).unwrap();
    assert!(!client.is_established(), "a cookie alone does not connect");
    let mut buf = vec![0u8; util::BUF];
    let len = client
        .poll_transmit(now, &mut buf)
        .expect("the HELLO with the cookie, at once");
    let hello2 = buf[..len].to_vec();
    assert_eq!(hello2.len(), HELLO);
    assert_ne!(hello2, hello, "it carries the cookie");

    // A cookie for another address, or from another server, is not accepted.
    let elsewhere = listener.handle(Timestamp { now, wall }, peer(2), &hello2, &mut out);
    assert!(matches!(elsewhere, Ok(Incoming::Reply(_))), "{elsewhere:?}");
    let mut other_server = Listener::new(config(), ServerProtection::generated());
    let other = other_server.handle(Timestamp { now, wall }, peer(0), &hello2, &mut out);
    assert!(matches!(other, Ok(Incoming::Reply(_))), "{other:?}");
    // Nor one whose nonce was changed.
    let mut renamed = hello2.clone();
    renamed[9] ^= 1;
    let renamed = listener.handle(Timestamp { now, wall }, peer(0), &renamed, &mut out);
    assert!(matches!(renamed, Ok(Incoming::Reply(_))), "{renamed:?}");
    // Nor a stale one.
    let later = wall + Duration::from_secs(15);
    let stale = listener.handle(Timestamp { now, wall: later }, peer(0), &hello2, &mut out);
    assert!(matches!(stale, Ok(Incoming::Reply(_))), "{stale:?}");

    // The real one: a connection, and an ACCEPT smaller than the HELLO.
    let Ok(Incoming::Accept(mut server, n)) =
        listener.handle(Timestamp { now, wall }, peer(0), &hello2, &mut out)
    else {
        panic!("the cookie round trip did not accept");
    };
    assert!(n < hello2.len());
    assert_eq!(out[0] & 0xF0, KIND_ACCEPT);
    assert_eq!(server.nonce(), nonce);
    assert!(server.is_established());
    assert_eq!(server.poll_event(), Some(Event::Connected));
    let accept = out[..n].to_vec();

    // Replays of the accepted HELLO make nothing, from anywhere.
    for i in 0..10 {
        let replay = listener.handle(Timestamp { now, wall }, peer(0), &hello2, &mut out);
        assert!(
            matches!(replay, Ok(Incoming::Ignore)),
            "replay {i}: {replay:?}"
        );
    }

    client.handle_datagram(now, &accept).unwrap();
    assert!(client.is_established());
    assert_eq!(client.poll_event(), Some(Event::Connected));
    assert_eq!(client.poll_event(), None);
    // The pair talks.
    client.send(b"hi", Delivery::Ordered).unwrap();
    let len = client.poll_transmit(now, &mut buf).unwrap();
    server.handle_datagram(now, &buf[..len]).unwrap();
    assert_eq!(server.recv().as_deref(), Some(&b"hi"[..]));
}

#[test]
fn an_unanswered_client_retries_with_backoff_then_times_out() {
    let start = Instant::now();
    let mut config = RudpConfig::default();
    config.handshake_timeout = Duration::from_secs(5);
    let mut client = Connection::client(Arc::new(config), start, 9, client_protection());
    let mut now = start;
    let mut buf = vec![0u8; util::BUF];
    let mut hellos = Vec::new();
    for _ in 0..100 {
        while let Some(n) = client.poll_transmit(now, &mut buf) {
            assert_eq!(n, HELLO);
            hellos.push(now - start);
        }
        if let Some(Event::Closed(reason)) = client.poll_event() {
            assert_eq!(
                reason,
                CloseReason::HandshakeTimeout(Duration::from_secs(5))
            );
            break;
        }
        let Some(next) = client.poll_timeout() else {
            break;
        };
        now = next.max(now);
        client.handle_timeout(now);
    }
    assert!(client.is_closed());
    assert_eq!(now - start, Duration::from_secs(5));
    assert!((3..=20).contains(&hellos.len()), "{hellos:?}");
    let gaps: Vec<Duration> = hellos.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "backoff: {gaps:?}");
    assert_eq!(
        client.poll_transmit(now, &mut buf),
        None,
        "no CLOSE: never connected"
    );
    assert_eq!(client.poll_event(), None, "closed once");
}

/// A tiny deterministic generator for garbage.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn raw_hello(nonce: u64, cookie: [u8; 20]) -> Vec<u8> {
    let mut d = vec![0u8; HELLO];
    d[0] = 0x50;
    d[1] = 5; // the protocol version
    d[2..10].copy_from_slice(&nonce.to_be_bytes());
    d[10..30].copy_from_slice(&cookie);
    d
}

/// Reads what arrives at `socket` within `wait`.
fn replies(socket: &UdpSocket, wait: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + wait;
    let mut got = Vec::new();
    let mut buf = [0u8; 2048];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        socket
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match socket.recv(&mut buf) {
            Ok(n) => got.push(buf[..n].to_vec()),
            Err(_) => break,
        }
    }
    got
}

/// A plaintext server: the raw socket plays a client by hand (an encrypted handshake needs
/// the Noise messages: `tests/on_path.rs`).
#[test]
fn garbage_opens_no_session_and_a_real_client_still_connects() {
    let sessions = Arc::new(AtomicUsize::new(0));
    let (echo, server_notes) = Reporter::new(true);
    let made = sessions.clone();
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .plaintext()
        .start(move |_| {
            made.fetch_add(1, Ordering::SeqCst);
            echo.clone()
        })
        .unwrap();
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    raw.connect(server.local_addr()).unwrap();
    let mut rng = Lcg(0x5EED);
    let mut hellos = 0u64;
    let mut answers = Vec::new();
    for i in 0..1_000u64 {
        let d = match i % 8 {
            0 => {
                let len = (rng.next() % 1400) as usize;
                rng.bytes(len)
            }
            // Truncated headers of every kind, HELLO included.
            1 => {
                let kind = [0x10u8, 0x20, 0x30, 0x50, 0x60, 0x70, 0x80][(i / 8 % 7) as usize];
                let len = (rng.next() % 21) as usize;
                let mut d = rng.bytes(len.max(1));
                d[0] = kind;
                d
            }
            2 => {
                let mut d = raw_hello(i, [0; 20]);
                d.truncate(HELLO - 1 - (rng.next() % 1000) as usize);
                d
            }
            // DATA and ACK for a session that does not exist.
            3 => {
                let len = 21 + (rng.next() % 200) as usize;
                let mut d = rng.bytes(len);
                d[0] = 0x13;
                d
            }
            4 => {
                let mut d = rng.bytes(17);
                d[0] = 0x20;
                d
            }
            5 => {
                let mut d = rng.bytes(2);
                d[0] = 0x80;
                d
            }
            // HELLOs without a cookie, or with a made-up one.
            6 => {
                hellos += 1;
                raw_hello(i, [0; 20])
            }
            _ => {
                hellos += 1;
                let cookie: [u8; 20] = rng.bytes(20).try_into().unwrap();
                raw_hello(i, cookie)
            }
        };
        raw.send(&d).unwrap();
        if i % 25 == 24 {
            // Pace the flood so the kernel keeps it, and read the answers.
            answers.extend(replies(&raw, Duration::from_millis(2)));
        }
    }
    answers.extend(replies(&raw, Duration::from_millis(300)));
    assert!(
        !answers.is_empty() && answers.len() as u64 <= hellos,
        "{} answers",
        answers.len()
    );
    for a in &answers {
        assert_eq!(
            (a[0], a.len()),
            (KIND_COOKIE, 29),
            "only COOKIEs, smaller than a HELLO"
        );
        let nonce = u64::from_be_bytes(a[1..9].try_into().unwrap());
        assert!(nonce % 8 >= 6, "answered a non-HELLO: nonce {nonce}");
    }
    assert_eq!(sessions.load(Ordering::SeqCst), 0, "no session opened");
    let stats = server.stats().expect("running");
    assert_eq!((stats.data_sent, stats.acks_sent), (0, 0), "{stats:?}");

    // A real client connects and echoes.
    let (client_handler, client_notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .plaintext()
        .connect(server.local_addr(), client_handler)
        .unwrap();
    assert_eq!(
        next_note(&client_notes, Duration::from_secs(10)),
        Note::Open
    );
    client.send(b"still here", Delivery::Ordered).unwrap();
    assert_eq!(
        next_note(&client_notes, Duration::from_secs(10)),
        Note::Message(b"still here".to_vec())
    );
    assert_eq!(sessions.load(Ordering::SeqCst), 1);

    // The cookie round trip by hand from the raw socket: one session; the replayed HELLO only
    // repeats the ACCEPT.
    let nonce = 0xABCD;
    raw.send(&raw_hello(nonce, [0; 20])).unwrap();
    let cookie = replies(&raw, Duration::from_millis(500));
    assert_eq!(cookie.len(), 1);
    let hello = raw_hello(nonce, cookie[0][9..29].try_into().unwrap());
    raw.send(&hello).unwrap();
    raw.send(&hello).unwrap();
    let accepts = replies(&raw, Duration::from_millis(500));
    assert!(!accepts.is_empty());
    for a in &accepts {
        assert_eq!(a[..], [&[KIND_ACCEPT][..], &nonce.to_be_bytes()].concat());
    }
    // The same HELLO from another address: a cookie for that one, no session.
    let thief = UdpSocket::bind("127.0.0.1:0").unwrap();
    thief.connect(server.local_addr()).unwrap();
    thief.send(&hello).unwrap();
    let stolen = replies(&thief, Duration::from_millis(300));
    assert_eq!(stolen.len(), 1);
    assert_eq!((stolen[0][0], stolen[0].len()), (KIND_COOKIE, 29));
    assert_eq!(
        sessions.load(Ordering::SeqCst),
        2,
        "one more session: the hand-made one"
    );

    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    let mut closes = 0;
    while let Ok(note) = server_notes.recv_timeout(Duration::from_millis(100)) {
        closes += usize::from(matches!(note, Note::Close(_)));
    }
    assert_eq!(closes, 2, "each opened session closed once");
}
