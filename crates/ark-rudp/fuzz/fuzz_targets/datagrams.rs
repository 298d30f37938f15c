//! Arbitrary datagrams into an established client/server pair and into the listener,
//! interleaved with real traffic and time: nothing panics, and the pair still carries
//! messages both ways between the forged datagrams. The pair is encrypted (every datagram
//! meets the AEAD and the replay window) or, for one input in two, plaintext with half the
//! forgeries ending in the session token (a hostile peer), so the parsers behind it are
//! reached too.
#![no_main]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ark_rudp::{
    ClientProtection, Connection, Delivery, Fec, Incoming, Listener, RudpConfig, ServerProtection,
    Timestamp,
};
use libfuzzer_sys::fuzz_target;

/// A client and the server connection its handshake made.
fn pair(
    config: &Arc<RudpConfig>,
    (listener, protection): (&mut Listener, ClientProtection),
    now: Instant,
) -> (Connection, Connection) {
    let peer: SocketAddr = "127.0.0.1:4000".parse().expect("address");
    let mut client = Connection::client(config.clone(), now, 0x1234_5678_FFFF_FFF0, protection);
    let (mut buf, mut reply) = (vec![0u8; 2048], vec![0u8; 64]);
    for _ in 0..2 {
        let n = client.poll_transmit(now, &mut buf).expect("hello");
        match listener.handle(at(now), peer, &buf[..n], &mut reply) {
            Ok(Incoming::Reply(r)) => client.handle_datagram(now, &reply[..r]).expect("cookie"),
            Ok(Incoming::Accept(server, r)) => {
                client.handle_datagram(now, &reply[..r]).expect("accept");
                return (client, *server);
            }
            other => panic!("handshake: {other:?}"),
        }
    }
    panic!("no connection after two hellos")
}

/// Moves every datagram `from` has to `to`.
fn exchange(from: &mut Connection, to: &mut Connection, now: Instant, buf: &mut [u8]) {
    for _ in 0..1000 {
        let Some(n) = from.poll_transmit(now, buf) else {
            return;
        };
        let _ = to.handle_datagram(now, &buf[..n]);
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, mut rest)) = input.split_first() else {
        return;
    };
    let mut config = RudpConfig::default();
    config.fec = match mode % 3 {
        0 => Fec::Off,
        1 => Fec::Fixed { k: 4, m: 2 },
        _ => Fec::Adaptive,
    };
    config.receive_window = 64;
    let config = Arc::new(config);
    let (server_protection, client_protection) = if mode & 4 == 0 {
        let server = ServerProtection::generated();
        let server_key = server.public_key().expect("encrypted");
        let token = Vec::new();
        (server, ClientProtection::Encrypted { server_key, token })
    } else {
        (ServerProtection::Plaintext, ClientProtection::Plaintext)
    };
    let mut listener = Listener::new(config.clone(), server_protection);
    let mut now = Instant::now();
    let (mut client, mut server) = pair(&config, (&mut listener, client_protection), now);
    let mut buf = vec![0u8; 2048];
    let peer: SocketAddr = "127.0.0.1:4001".parse().expect("address");
    let mut step = 0u32;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        let (datagram, tail) = tail.split_at(n);
        rest = tail;
        step += 1;
        // Every other forgery ends in the token its receiver expects (a hostile peer, not
        // only an off-path one), so the parsers behind the token check are reached too.
        let sealed = |conn: &Connection| {
            let mut d = datagram.to_vec();
            if step % 2 == 0 {
                d.extend_from_slice(&conn.peer_token().unwrap_or_default());
            }
            d
        };
        let _ = match step % 3 {
            0 => server.handle_datagram(now, &sealed(&server)),
            1 => client.handle_datagram(now, &sealed(&client)),
            _ => listener
                .handle(at(now), peer, datagram, &mut buf)
                .map(|_| ()),
        };
        let _ = client.send(&datagram[..n.min(3000)], Delivery::Ordered);
        let _ = server.send(datagram, Delivery::Unordered);
        exchange(&mut client, &mut server, now, &mut buf);
        exchange(&mut server, &mut client, now, &mut buf);
        while let Some(m) = server.recv() {
            server.recycle(m);
        }
        while let Some(m) = client.recv() {
            client.recycle(m);
        }
        now += Duration::from_millis(u64::from(len % 50));
        client.handle_timeout(now);
        server.handle_timeout(now);
    }
});

/// `now` by both clocks (the system clock read now).
fn at(now: Instant) -> Timestamp {
    Timestamp {
        now,
        wall: SystemTime::now(),
    }
}
