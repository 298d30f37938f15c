//! What packet protection costs per datagram, without a socket: two sans-IO `Connection`s
//! (a client and the server connection its `Listener` made) echo 1 KiB ordered messages,
//! encrypted (Noise NK keys, AES-128-GCM on every datagram: sealed by the sender, opened by
//! the receiver) and in plaintext (an 8-byte session token compared instead). Each round trip
//! is two DATA datagrams (the echo carries the acknowledgement of the message) and one ACK;
//! the difference of the two, over the datagrams a round trip moves, is protection's cost
//! per datagram (seal and open, both ends' share). `cargo bench -p ark-rudp`.

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ark_rudp::{
    ClientProtection, Connection, Delivery, Incoming, Listener, RudpConfig, ServerProtection,
    Timestamp,
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const MESSAGE: usize = 1024;

/// A client and a server connection, handshake done, and a buffer for datagrams.
struct Pair {
    client: Connection,
    server: Connection,
    buf: Vec<u8>,
    now: Instant,
}

impl Pair {
    fn new(encrypted: bool) -> Pair {
        let config = Arc::new(RudpConfig::default());
        let (client_protection, server_protection) = if encrypted {
            let server = ServerProtection::generated();
            let client = ClientProtection::Encrypted {
                server_key: server.public_key().expect("a key"),
                token: Vec::new(),
            };
            (client, server)
        } else {
            (ClientProtection::Plaintext, ServerProtection::Plaintext)
        };
        let now = Instant::now();
        let peer: SocketAddr = "127.0.0.1:40001".parse().expect("an address");
        let mut client = Connection::client(config.clone(), now, 0xBE4C, client_protection);
        let mut listener = Listener::new(config, server_protection);
        let (mut buf, mut reply) = (vec![0; 2048], vec![0; 2048]);
        for _ in 0..4 {
            let Some(n) = client.poll_transmit(now, &mut buf) else {
                continue;
            };
            match listener.handle(at(now), peer, &buf[..n], &mut reply) {
                Ok(Incoming::Reply(n)) => client.handle_datagram(now, &reply[..n]).ok(),
                Ok(Incoming::Accept(server, n)) => {
                    client.handle_datagram(now, &reply[..n]).ok();
                    let mut pair = Pair {
                        client,
                        server: *server,
                        buf,
                        now,
                    };
                    pair.round_trip();
                    return pair;
                }
                other => panic!("handshake: {other:?}"),
            };
        }
        panic!("no handshake in four HELLOs");
    }

    /// Every datagram `from` has due, into `to`; how many.
    fn shuttle(from: &mut Connection, to: &mut Connection, buf: &mut [u8], now: Instant) -> u32 {
        let mut moved = 0;
        while let Some(n) = from.poll_transmit(now, buf) {
            to.handle_datagram(now, &buf[..n])
                .expect("a datagram of the session");
            moved += 1;
        }
        moved
    }

    /// One message to the server and its echo back; the datagrams it took.
    fn round_trip(&mut self) -> u32 {
        self.now += Duration::from_micros(10);
        let (now, message) = (self.now, [0x5A; MESSAGE]);
        self.client
            .send(&message, Delivery::Ordered)
            .expect("room for it");
        let mut moved = Self::shuttle(&mut self.client, &mut self.server, &mut self.buf, now);
        while let Some(m) = self.server.recv() {
            self.server.send(&m, Delivery::Ordered).expect("room");
            self.server.recycle(m);
        }
        moved += Self::shuttle(&mut self.server, &mut self.client, &mut self.buf, now);
        let echo = self.client.recv().expect("the echo");
        black_box(&echo);
        self.client.recycle(echo);
        // The client's acknowledgement of the echo.
        moved + Self::shuttle(&mut self.client, &mut self.server, &mut self.buf, now)
    }
}

fn protection(c: &mut Criterion) {
    let mut group = c.benchmark_group("rudp_echo_1k");
    for (name, encrypted) in [("encrypted", true), ("plaintext", false)] {
        let mut pair = Pair::new(encrypted);
        let datagrams = pair.round_trip();
        assert_eq!(datagrams, 3, "two DATA and an ACK per round trip");
        group.throughput(Throughput::Elements(u64::from(datagrams)));
        group.bench_function(name, |b| b.iter(|| pair.round_trip()));
    }
    group.finish();
}

criterion_group!(benches, protection);
criterion_main!(benches);

/// `now` by both clocks (the system clock read now).
fn at(now: Instant) -> Timestamp {
    Timestamp {
        now,
        wall: SystemTime::now(),
    }
}
