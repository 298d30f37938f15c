//! The endpoint on its own: handshakes through the listener, limits, replacement, and an
//! on-path attacker who completes a handshake of its own from a live session's address.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::proto::protection::{ClientProtection, ServerProtection};

struct Entry {
    conn: Connection,
    ended: bool,
}

impl EndpointEntry for Entry {
    fn connection(&self) -> &Connection {
        &self.conn
    }
    fn connection_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
    fn has_ended(&self) -> bool {
        self.ended
    }
}

fn make(_: SocketAddr, conn: Connection) -> Entry {
    Entry { conn, ended: false }
}

struct Fixture {
    endpoint: Endpoint<Entry>,
    key: crate::proto::crypto::RudpPublicKey,
    wall: SystemTime,
}

fn fixture(config: RudpConfig) -> Fixture {
    let config = Arc::new(config);
    let protection = ServerProtection::generated();
    let key = protection.public_key().unwrap();
    let listener = Listener::new(config.clone(), protection);
    Fixture {
        endpoint: Endpoint::server(config, listener),
        key,
        wall: SystemTime::now(),
    }
}

impl Fixture {
    /// A client with `nonce` at `peer` handshakes through the endpoint at `now`: the last
    /// route's answer and the client.
    fn handshake(&mut self, peer: SocketAddr, nonce: u64, now: Instant) -> (Routed, Connection) {
        let protection = ClientProtection::Encrypted {
            server_key: self.key,
            token: Vec::new(),
        };
        let mut client =
            Connection::client(Arc::new(RudpConfig::default()), now, nonce, protection);
        let (mut buf, mut out) = (vec![0u8; 2048], vec![0u8; 2048]);
        let mut last = Routed::Dropped;
        for _ in 0..2 {
            let n = client.poll_transmit(now, &mut buf).expect("a HELLO");
            let at = Timestamp {
                now,
                wall: self.wall,
            };
            let d = &buf[..n];
            last = match self.endpoint.replacement(at, peer, d) {
                Replacement::Refuse => return (Routed::Dropped, client),
                Replacement::Listen => self.endpoint.listen(at, peer, d, (&mut out, &mut make)),
                Replacement::Replace | Replacement::GiveWay => {
                    self.endpoint.remove(&peer);
                    self.endpoint.route(at, peer, d, (&mut out, &mut make))
                }
                _ => self.endpoint.route(at, peer, d, (&mut out, &mut make)),
            };
            match last {
                Routed::Reply(r) | Routed::Accepted(r) => {
                    client.handle_datagram(now, &out[..r]).unwrap();
                }
                _ => break,
            }
        }
        (last, client)
    }
}

fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
    SocketAddr::from((ip, port))
}

#[test]
fn a_handshake_makes_one_entry_and_its_datagrams_go_to_it() {
    let mut f = fixture(RudpConfig::default());
    let now = Instant::now();
    let peer = addr([127, 0, 0, 1], 4000);
    let (routed, mut client) = f.handshake(peer, 1, now);
    assert!(matches!(routed, Routed::Accepted(_)), "{routed:?}");
    assert!(client.is_established());
    client.send(b"hi", crate::Delivery::Ordered).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut out = vec![0u8; 64];
    while let Some(n) = client.poll_transmit(now, &mut buf) {
        let routed = f.endpoint.route(
            Timestamp { now, wall: f.wall },
            peer,
            &buf[..n],
            (&mut out, &mut make),
        );
        assert!(matches!(routed, Routed::Connection(Ok(()))), "{routed:?}");
    }
    let entry = f.endpoint.get_mut(&peer).unwrap();
    assert_eq!(entry.conn.recv().as_deref(), Some(&b"hi"[..]));
    assert_eq!(f.endpoint.peers(), vec![peer]);
}

#[test]
fn limits_refuse_and_count_and_a_drain_takes_no_new_session() {
    let mut f = fixture(RudpConfig {
        max_sessions_per_ip: 1,
        max_sessions: 2,
        ..RudpConfig::default()
    });
    let now = Instant::now();
    assert!(matches!(
        f.handshake(addr([127, 0, 0, 1], 1), 1, now).0,
        Routed::Accepted(_)
    ));
    let (second, _) = f.handshake(addr([127, 0, 0, 1], 2), 2, now);
    assert!(matches!(second, Routed::Full), "{second:?}");
    assert_eq!(f.endpoint.closed_stats().refused_per_ip, 1);
    assert!(matches!(
        f.handshake(addr([127, 0, 0, 2], 1), 3, now).0,
        Routed::Accepted(_)
    ));
    let (third, _) = f.handshake(addr([127, 0, 0, 3], 1), 4, now);
    assert!(matches!(third, Routed::Full), "{third:?}");
    assert_eq!(f.endpoint.closed_stats().refused_sessions, 1);
    f.endpoint.remove(&addr([127, 0, 0, 2], 1)).unwrap();
    f.endpoint.close_to_new();
    let (drained, _) = f.handshake(addr([127, 0, 0, 3], 1), 5, now);
    assert!(matches!(drained, Routed::Dropped), "{drained:?}");
    assert_eq!(f.endpoint.peers().len(), 1);
}

#[test]
fn an_on_path_attacker_cannot_replace_a_live_session_and_a_restarted_client_can() {
    let mut f = fixture(RudpConfig::default());
    let now = Instant::now();
    let peer = addr([127, 0, 0, 1], 4000);
    // The attacker sees the path and sends from the victim's address: it takes a cookie
    // for that address before the victim connects (a cookie lives 10 s)...
    let protection = ClientProtection::Encrypted {
        server_key: f.key,
        token: Vec::new(),
    };
    let mut attacker = Connection::client(Arc::new(RudpConfig::default()), now, 666, protection);
    let (mut buf, mut out) = (vec![0u8; 2048], vec![0u8; 2048]);
    let n = attacker.poll_transmit(now, &mut buf).unwrap();
    let routed = f.endpoint.route(
        Timestamp { now, wall: f.wall },
        peer,
        &buf[..n],
        (&mut out, &mut make),
    );
    let Routed::Reply(r) = routed else {
        panic!("{routed:?}")
    };
    attacker.handle_datagram(now, &out[..r]).unwrap();
    let (routed, _victim) = f.handshake(peer, 1, now);
    assert!(matches!(routed, Routed::Accepted(_)));
    // ...then completes a handshake of its own with it: the live session stays.
    let later = now + Duration::from_millis(500);
    let n = attacker.poll_transmit(later, &mut buf).unwrap();
    let at = Timestamp {
        now: later,
        wall: f.wall,
    };
    assert_eq!(
        f.endpoint.replacement(at, peer, &buf[..n]),
        Replacement::Refuse
    );
    assert_eq!(f.endpoint.closed_stats().refused_replacements, 1);
    // A HELLO of its own without a cookie gets no cookie while the session is live: the
    // session counts it as not its own.
    let (attack, _) = f.handshake(peer, 667, later);
    assert!(
        matches!(
            attack,
            Routed::Connection(Err(PacketError::Unauthenticated(_)))
        ),
        "{attack:?}"
    );
    assert_eq!(f.endpoint.get(&peer).unwrap().conn.nonce(), 1);
    // Silent for two keep-alive intervals (its client restarted): the new client gets a
    // cookie (the old connection stays until it proves its address), then replaces it.
    let later = now + 2 * RudpConfig::default().keep_alive;
    let (replaced, client) = f.handshake(peer, 2, later);
    assert!(matches!(replaced, Routed::Accepted(_)), "{replaced:?}");
    assert!(client.is_established());
    assert_eq!(f.endpoint.get(&peer).unwrap().conn.nonce(), 2);
    assert_eq!(f.endpoint.peers().len(), 1);
}
