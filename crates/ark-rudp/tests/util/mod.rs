//! Helpers shared by the ark-rudp integration tests: a deterministic sans-IO simulation of a
//! client [`Connection`] and a server one (made by a [`Listener`]) joined by two ark-link
//! [`Conditioner`]s on a fake clock, and message generators.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ark_link::{Conditioner, GilbertElliott, LinkConfig};
use ark_rudp::{
    ClientProtection, Connection, Delivery, Event, Incoming, Listener, RudpConfig, RudpStats,
    SendError, ServerProtection, Timestamp,
};

/// A client protection pinning a key of its own (a client that never finds its server).
pub fn client_protection() -> ClientProtection {
    ClientProtection::Encrypted {
        server_key: ServerProtection::generated().public_key().unwrap(),
        token: Vec::new(),
    }
}

/// The client's address as the listener sees it.
pub fn client_addr() -> SocketAddr {
    "127.0.0.1:40001".parse().unwrap()
}

/// Datagram buffers: big enough for any datagram a connection writes.
pub const BUF: usize = 2048;

/// Takes a buffer from `pool` holding `bytes`.
fn pooled(pool: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    let mut b = pool.pop().unwrap_or_default();
    b.clear();
    b.extend_from_slice(bytes);
    b
}

/// A client and a server connection over two conditioned link directions, on a fake clock
/// that jumps to the next thing due. Everything is decided by the link seeds: the same
/// configuration gives the same run.
pub struct Sim {
    pub start: Instant,
    pub now: Instant,
    wall0: SystemTime,
    pub client: Connection,
    /// Made by the listener once the client's HELLO carries a valid cookie.
    pub server: Option<Connection>,
    pub listener: Listener,
    /// Client to server.
    pub up: Conditioner<Vec<u8>>,
    /// Server to client.
    pub down: Conditioner<Vec<u8>>,
    pub client_events: Vec<Event>,
    pub server_events: Vec<Event>,
    /// Listener answers: COOKIEs and accepted connections.
    pub cookie_replies: u32,
    pub accepts: u32,
    /// Turns where a connection's `poll_timeout` was in the past and nothing happened (the
    /// clock was pushed 1 ms on): a timer that never clears.
    pub spins: u64,
    pub turns: u64,
    /// The server is gone: what reaches it is swallowed and it sends nothing.
    pub server_gone: bool,
    buf: Vec<u8>,
    pool: Vec<Vec<u8>>,
}

impl Sim {
    /// A client with `client` settings and `nonce`, a listener with `server` settings, `up`
    /// and `down` as the two link directions.
    pub fn new(
        client: RudpConfig,
        server: RudpConfig,
        nonce: u64,
        up: LinkConfig,
        down: LinkConfig,
    ) -> Sim {
        Sim::new_at(Instant::now(), (client, server), nonce, (up, down))
    }

    /// The same in plaintext (session tokens, no encryption): for tests that play a peer
    /// who knows the token.
    pub fn plaintext(
        client: RudpConfig,
        server: RudpConfig,
        nonce: u64,
        up: LinkConfig,
        down: LinkConfig,
    ) -> Sim {
        let protection = (ClientProtection::Plaintext, ServerProtection::Plaintext);
        Sim::protected(
            Instant::now(),
            (client, server),
            nonce,
            (up, down),
            protection,
        )
    }

    /// The same, its clock starting at `start` (simulations that share buckets share a
    /// clock).
    pub fn new_at(
        start: Instant,
        configs: (RudpConfig, RudpConfig),
        nonce: u64,
        links: (LinkConfig, LinkConfig),
    ) -> Sim {
        let server = ServerProtection::generated();
        let client = ClientProtection::Encrypted {
            server_key: server.public_key().unwrap(),
            token: Vec::new(),
        };
        Sim::protected(start, configs, nonce, links, (client, server))
    }

    /// A simulation whose ends are protected as `protection` says.
    pub fn protected(
        start: Instant,
        (client, server): (RudpConfig, RudpConfig),
        nonce: u64,
        (up, down): (LinkConfig, LinkConfig),
        (client_protection, server_protection): (ClientProtection, ServerProtection),
    ) -> Sim {
        Sim {
            start,
            now: start,
            wall0: SystemTime::now(),
            client: Connection::client(Arc::new(client), start, nonce, client_protection),
            server: None,
            listener: Listener::new(Arc::new(server), server_protection),
            up: Conditioner::new(up),
            down: Conditioner::new(down),
            client_events: Vec::new(),
            server_events: Vec::new(),
            cookie_replies: 0,
            accepts: 0,
            spins: 0,
            turns: 0,
            server_gone: false,
            buf: vec![0; BUF],
            pool: Vec::new(),
        }
    }

    /// Simulated time so far.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    pub fn server(&mut self) -> &mut Connection {
        self.server.as_mut().expect("the server accepted")
    }

    /// The connection of `side`, if it exists.
    pub fn conn(&mut self, side: Side) -> Option<&mut Connection> {
        match side {
            Side::Client => Some(&mut self.client),
            Side::Server => self.server.as_mut(),
        }
    }

    /// One turn at `now`: due timers, everything both ends send onto the links, every datagram
    /// due off them. Whether anything moved.
    pub fn turn(&mut self) -> bool {
        let now = self.now;
        self.turns += 1;
        let mut moved = false;
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        if let Some(server) = &mut self.server
            && server.poll_timeout().is_some_and(|t| t <= now)
        {
            server.handle_timeout(now);
        }
        while let Some(n) = self.client.poll_transmit(now, &mut self.buf) {
            let d = pooled(&mut self.pool, &self.buf[..n]);
            self.up.offer(now, d);
            moved = true;
        }
        if let Some(server) = &mut self.server
            && !self.server_gone
        {
            while let Some(n) = server.poll_transmit(now, &mut self.buf) {
                let d = pooled(&mut self.pool, &self.buf[..n]);
                self.down.offer(now, d);
                moved = true;
            }
        }
        while let Some(d) = self.up.poll(now) {
            self.deliver_to_server(&d);
            self.give(d);
            moved = true;
        }
        while let Some(d) = self.down.poll(now) {
            let _ = self.client.handle_datagram(now, &d);
            self.give(d);
            moved = true;
        }
        while let Some(e) = self.client.poll_event() {
            self.client_events.push(e);
        }
        if let Some(server) = &mut self.server {
            while let Some(e) = server.poll_event() {
                self.server_events.push(e);
            }
        }
        moved
    }

    fn give(&mut self, d: Vec<u8>) {
        if self.pool.len() < 4096 {
            self.pool.push(d);
        }
    }

    /// A datagram reached the server's address: its connection, or the listener (as the
    /// driver does).
    fn deliver_to_server(&mut self, d: &[u8]) {
        let now = self.now;
        if self.server_gone {
            return;
        }
        if let Some(server) = &mut self.server {
            let _ = server.handle_datagram(now, d);
            return;
        }
        let wall = self.wall0 + (now - self.start);
        match self
            .listener
            .handle(Timestamp { now, wall }, client_addr(), d, &mut self.buf)
        {
            Ok(Incoming::Reply(n)) => {
                assert!(n < d.len(), "a COOKIE is smaller than the HELLO");
                self.cookie_replies += 1;
                let reply = pooled(&mut self.pool, &self.buf[..n]);
                self.down.offer(now, reply);
            }
            Ok(Incoming::Accept(conn, n)) => {
                self.accepts += 1;
                let reply = pooled(&mut self.pool, &self.buf[..n]);
                self.down.offer(now, reply);
                // The listener wrote the connection's ACCEPT (its first transmit).
                self.server = Some(*conn);
            }
            Ok(_) | Err(_) => {}
        }
    }

    /// The next instant something is due.
    pub fn next_due(&self) -> Option<Instant> {
        [
            self.up.next_release(),
            self.down.next_release(),
            self.client.poll_timeout(),
            self.server.as_ref().and_then(Connection::poll_timeout),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Moves the clock to the next thing due; `false` if nothing ever will be.
    pub fn advance(&mut self) -> bool {
        match self.next_due() {
            None => false,
            Some(t) if t > self.now => {
                self.now = t;
                true
            }
            Some(_) => {
                self.spins += 1;
                self.now += Duration::from_millis(1);
                true
            }
        }
    }

    /// Runs until `app` says it is done (called before every turn: it sends and drains).
    /// Panics past `limit` of simulated time or `max_turns` turns.
    pub fn run(&mut self, limit: Duration, max_turns: u64, mut app: impl FnMut(&mut Sim) -> bool) {
        let first = self.turns;
        loop {
            if app(self) {
                return;
            }
            assert!(
                self.elapsed() <= limit,
                "not done within {limit:?} of simulated time"
            );
            assert!(
                self.turns - first < max_turns,
                "not done within {max_turns} turns ({:?} simulated)",
                self.elapsed()
            );
            if !self.turn() {
                assert!(
                    self.advance(),
                    "nothing left to happen, and not done: client {:?}, server {:?}",
                    self.client_events,
                    self.server_events
                );
            }
        }
    }

    /// Runs `for_` more simulated time with `app` called at every turn.
    pub fn run_for(&mut self, for_: Duration, mut app: impl FnMut(&mut Sim)) {
        let end = self.now + for_;
        let mut turns = 0u64;
        while self.now < end {
            app(self);
            turns += 1;
            assert!(turns < 1_000_000, "runaway turns");
            if !self.turn() && !self.advance() {
                break;
            }
        }
        app(self);
    }

    /// Both ends' counters (the server's default before it exists).
    pub fn stats(&self) -> (RudpStats, RudpStats) {
        (
            self.client.stats(),
            self.server
                .as_ref()
                .map(Connection::stats)
                .unwrap_or_default(),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    fn tag(self) -> u8 {
        match self {
            Side::Client => 0xC0,
            Side::Server => 0x50,
        }
    }
}

/// Message sizes, in turn: empty ones, small ones, one MTU (1200) and around it, and messages
/// of two to four fragments.
const SIZES: [usize; 15] = [
    0, 1, 17, 100, 512, 1024, 1199, 1200, 1201, 2399, 2400, 3000, 3601, 40, 700,
];

/// The size of message `i`.
pub fn size_of(i: usize) -> usize {
    SIZES[i % SIZES.len()]
}

/// Writes message `i` of `side` into `out`: its size from [`size_of`], bytes that depend on
/// the side, the index and the position (so a swapped or spliced message differs).
pub fn message(side: Side, i: usize, out: &mut Vec<u8>) {
    out.clear();
    let seed = (i as u32).wrapping_mul(2_654_435_761) ^ u32::from(side.tag());
    out.extend((0..size_of(i)).map(|j| (seed.wrapping_add(j as u32 * 7) >> 3) as u8 ^ (j as u8)));
}

/// One direction's application: sends messages `0..total` in order as the send buffer
/// allows, and checks what the peer's application receives.
#[derive(Debug)]
pub struct Flow {
    pub side: Side,
    pub total: usize,
    pub sent: usize,
    pub received: usize,
    /// `SendError::Full` refusals seen (the application retried later).
    pub full: u64,
    scratch: Vec<u8>,
}

impl Flow {
    pub fn new(side: Side, total: usize) -> Flow {
        Flow {
            side,
            total,
            sent: 0,
            received: 0,
            full: 0,
            scratch: Vec::with_capacity(4096),
        }
    }

    /// Queues as many messages as `conn` takes.
    pub fn pump(&mut self, conn: &mut Connection) {
        while self.sent < self.total {
            message(self.side, self.sent, &mut self.scratch);
            match conn.send(&self.scratch, Delivery::Ordered) {
                Ok(()) => self.sent += 1,
                Err(SendError::Full { .. }) => {
                    self.full += 1;
                    return;
                }
                Err(e) => panic!("{:?} message {}: {e}", self.side, self.sent),
            }
        }
    }

    /// Takes what `receiver` delivered of this flow: each must be the next message, whole.
    pub fn drain(&mut self, receiver: &mut Connection) {
        while let Some(m) = receiver.recv() {
            assert!(
                self.received < self.total,
                "{:?}: a message past the {} sent (a duplicate)",
                self.side,
                self.total
            );
            message(self.side, self.received, &mut self.scratch);
            assert!(
                m == self.scratch,
                "{:?} message {} arrived wrong: {} bytes, want {} (lost, duplicated or out of order)",
                self.side,
                self.received,
                m.len(),
                self.scratch.len()
            );
            self.received += 1;
            receiver.recycle(m);
        }
    }

    pub fn done(&self) -> bool {
        self.received == self.total
    }
}

/// One direction's traffic in a simulation: queued by `pump`, checked as it arrives by
/// `drain`, finished when `done`.
pub trait Traffic {
    fn pump(&mut self, conn: &mut Connection);
    fn drain(&mut self, receiver: &mut Connection);
    fn done(&self) -> bool;
}

impl Traffic for Flow {
    fn pump(&mut self, conn: &mut Connection) {
        Flow::pump(self, conn);
    }
    fn drain(&mut self, receiver: &mut Connection) {
        Flow::drain(self, receiver);
    }
    fn done(&self) -> bool {
        Flow::done(self)
    }
}

impl Sim {
    /// Runs until `up` (client to server) and `down` (back) are both done; panics past
    /// `limit` of simulated time or `max_turns` turns.
    pub fn exchange<T: Traffic>(
        &mut self,
        (up, down): (&mut T, &mut T),
        limit: Duration,
        max_turns: u64,
    ) {
        self.run(limit, max_turns, |sim| {
            up.pump(&mut sim.client);
            down.drain(&mut sim.client);
            if let Some(server) = sim.server.as_mut() {
                down.pump(server);
                up.drain(server);
            }
            up.done() && down.done()
        });
    }

    /// Runs `for_` more, taking (and checking) whatever still arrives either way.
    pub fn settle<T: Traffic>(&mut self, (up, down): (&mut T, &mut T), for_: Duration) {
        self.run_for(for_, |sim| {
            down.drain(&mut sim.client);
            up.drain(sim.server());
        });
    }
}

/// A link direction with `delay` and the seed, otherwise clean.
pub fn link(seed: u64, delay: Duration) -> LinkConfig {
    LinkConfig {
        delay,
        seed,
        ..LinkConfig::default()
    }
}

/// The link scenarios of the delivery tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    Clean,
    RandomLoss,
    BurstyLoss,
    /// Reordering alone (5 % held back 5 ms): nothing is lost.
    Reorder,
    ReorderDuplicate,
}

impl Scenario {
    /// This scenario's link direction (10 ms one way, 1 ms jitter) with `seed`.
    pub fn link(self, seed: u64) -> LinkConfig {
        let base = LinkConfig {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(1),
            seed,
            ..LinkConfig::default()
        };
        match self {
            Scenario::Clean => base,
            Scenario::RandomLoss => LinkConfig { loss: 0.2, ..base },
            Scenario::BurstyLoss => LinkConfig {
                burst: Some(GilbertElliott::with_mean(0.1, 4.0)),
                ..base
            },
            Scenario::Reorder => LinkConfig {
                reorder: 0.05,
                reorder_gap: Duration::from_millis(5),
                ..base
            },
            Scenario::ReorderDuplicate => LinkConfig {
                reorder: 0.1,
                reorder_gap: Duration::from_millis(5),
                duplicate: 0.1,
                ..base
            },
        }
    }
}

/// Settings for the simulations: the handshake given time to survive lossy links.
pub fn sim_config(fec: ark_rudp::Fec) -> RudpConfig {
    let mut config = RudpConfig::default();
    config.fec = fec;
    config.handshake_timeout = Duration::from_secs(60);
    config
}

/// What one delivery run ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub client: RudpStats,
    pub server: RudpStats,
    pub up: ark_link::LinkCounters,
    pub down: ark_link::LinkCounters,
    pub elapsed: Duration,
    pub turns: u64,
}

/// Sends `total` ordered messages each way between a client and a server with `fec` over the
/// `scenario` link (seeds `seed`, `seed + 1`); checks each is delivered once, whole, in order,
/// and that nothing more arrives for 2 s after.
pub fn exchange(scenario: Scenario, fec: ark_rudp::Fec, seed: u64, total: usize) -> Outcome {
    let config = sim_config(fec);
    let mut sim = Sim::new(
        config.clone(),
        config,
        0x1234_5678_9ABC_DEF0 ^ seed,
        scenario.link(seed),
        scenario.link(seed + 1),
    );
    let mut up = Flow::new(Side::Client, total);
    let mut down = Flow::new(Side::Server, total);
    sim.exchange((&mut up, &mut down), Duration::from_secs(120), 3_000_000);
    sim.settle((&mut up, &mut down), Duration::from_secs(2));
    let label = format!("{scenario:?} {fec:?} seed {seed}");
    assert_eq!(sim.accepts, 1, "{label}: one connection");
    assert_eq!(sim.client_events, vec![Event::Connected], "{label}: client");
    assert_eq!(sim.server_events, vec![Event::Connected], "{label}: server");
    assert_eq!(sim.spins, 0, "{label}: a timer stayed in the past");
    let (client, server) = sim.stats();
    assert_eq!(client.messages_delivered, total as u64, "{label}");
    assert_eq!(server.messages_delivered, total as u64, "{label}");
    assert_eq!(client.forged_acks + server.forged_acks, 0, "{label}");
    assert_eq!(client.malformed + server.malformed, 0, "{label}");
    eprintln!(
        "{label}: {:?} simulated, {} turns\n  client {client:?}\n  server {server:?}",
        sim.elapsed(),
        sim.turns
    );
    Outcome {
        client,
        server,
        up: sim.up.counters(),
        down: sim.down.counters(),
        elapsed: sim.elapsed(),
        turns: sim.turns,
    }
}

/// What a socket-level handler saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    Open,
    Message(Vec<u8>),
    Timer(ark_rudp::TimerId),
    Stopping,
    Close(ark_rudp::CloseReason),
}

/// A handler that reports everything on a channel; with `echo`, it sends every message back.
#[derive(Debug, Clone)]
pub struct Reporter {
    pub notes: std::sync::mpsc::Sender<Note>,
    pub echo: bool,
}

impl Reporter {
    pub fn new(echo: bool) -> (Reporter, std::sync::mpsc::Receiver<Note>) {
        let (notes, rx) = std::sync::mpsc::channel();
        (Reporter { notes, echo }, rx)
    }
}

impl ark_rudp::RudpHandler for Reporter {
    fn on_open(&mut self, _: &mut ark_rudp::RudpSession<'_>) {
        let _ = self.notes.send(Note::Open);
    }
    fn on_message(&mut self, session: &mut ark_rudp::RudpSession<'_>, message: &[u8]) {
        if self.echo {
            session
                .send(message)
                .expect("the echo fits the send buffer");
        }
        let _ = self.notes.send(Note::Message(message.to_vec()));
    }
    fn on_timer(&mut self, _: &mut ark_rudp::RudpSession<'_>, timer: ark_rudp::TimerId) {
        let _ = self.notes.send(Note::Timer(timer));
    }
    fn on_stopping(&mut self, _: &mut ark_rudp::RudpSession<'_>) {
        let _ = self.notes.send(Note::Stopping);
    }
    fn on_close(&mut self, reason: &ark_rudp::CloseReason) {
        let _ = self.notes.send(Note::Close(reason.clone()));
    }
}

/// A server on 127.0.0.1 (a free port) whose sessions are [`Reporter`]s (`echo`: each sends
/// every message back), and the channel of their notes.
pub fn reporting_server(
    config: RudpConfig,
    echo: bool,
) -> (ark_rudp::RudpServerHandle, std::sync::mpsc::Receiver<Note>) {
    let (reporter, notes) = Reporter::new(echo);
    let server = ark_rudp::RudpServer::builder()
        .bind("127.0.0.1:0")
        .config(config)
        .start(move |_| reporter.clone())
        .expect("the server starts on loopback");
    (server, notes)
}

/// The next note within `timeout` (panics without one).
pub fn next_note(rx: &std::sync::mpsc::Receiver<Note>, timeout: Duration) -> Note {
    rx.recv_timeout(timeout)
        .unwrap_or_else(|e| panic!("no note within {timeout:?}: {e}"))
}

/// Skips messages until a note that is not one.
pub fn next_event(rx: &std::sync::mpsc::Receiver<Note>, timeout: Duration) -> Note {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match next_note(rx, left) {
            Note::Message(_) => {}
            note => return note,
        }
    }
}

/// Every well-formed packet kind an off-path attacker can write without knowing anything
/// secret: CLOSE, UNRELIABLE, DATA, ACK (with PING), HELLO, COOKIE and ACCEPT, none with a
/// session token or the session's nonce.
pub fn forgeries() -> Vec<Vec<u8>> {
    let mut data = vec![0x13]; // DATA, first and last fragment of a message
    data.extend_from_slice(&0u32.to_be_bytes());
    data.extend_from_slice(&[0; 5]); // lane 0, lane sequence 0
    data.extend_from_slice(&[0; 16]); // ack block
    data.extend_from_slice(b"evil");
    let mut ack = vec![0x21]; // ACK with PING
    ack.extend_from_slice(&[0; 16]);
    let mut hello = vec![0u8; 1200];
    hello[0] = 0x50;
    hello[1] = 5; // this version: parsed, then refused for its nonce
    let mut cookie = vec![0x60];
    cookie.extend_from_slice(&[7; 8 + 20]);
    let mut accept = vec![0x70];
    accept.extend_from_slice(&[7; 8]);
    let mut unreliable = vec![0x40];
    unreliable.extend_from_slice(b"evil");
    vec![vec![0x80, 0], unreliable, data, ack, hello, cookie, accept]
}

/// What a hostile peer (one that knows the session's token) sends `victim`: `packet` (a kind
/// byte and the kind's fields, without packet number) with a packet number `victim` has not
/// seen, `ahead` past the largest it took (1: the honest peer's next datagram is then dropped
/// as a replay, and repaired like a loss; more: the honest peer's numbers below it stay
/// fresh, within the replay window) and the token.
pub fn hostile(victim: &Connection, packet: &[u8], ahead: u32) -> Vec<u8> {
    let mut d = vec![packet[0]];
    let number = victim.fresh_peer_number().wrapping_add(ahead - 1);
    d.extend_from_slice(&number.to_be_bytes());
    d.extend_from_slice(&packet[1..]);
    d.extend_from_slice(&victim.peer_token().expect("established"));
    d
}

/// A client played by the test over a std UDP socket: the sans-IO [`Connection`] does the
/// protocol (a proper handshake, acknowledgements, keep-alive pings), and with `zero_window`
/// every acknowledgement block it sends advertises a receive window of 0 (a peer that
/// acknowledges everything and takes nothing).
pub struct RawPeer {
    pub socket: std::net::UdpSocket,
    pub conn: Connection,
    pub zero_window: bool,
    buf: Vec<u8>,
}

impl RawPeer {
    /// A peer bound to `local` (port 0 picks one) for the server at `server`, whose public
    /// key is `key` (`None`: a plaintext server).
    pub fn new(
        local: &str,
        (server, key): (SocketAddr, Option<ark_rudp::RudpPublicKey>),
        zero_window: bool,
        nonce: u64,
    ) -> RawPeer {
        let socket = std::net::UdpSocket::bind(local).expect("bind");
        socket.connect(server).expect("connect");
        socket.set_nonblocking(true).expect("nonblocking");
        let protection = match key {
            Some(server_key) => ClientProtection::Encrypted {
                server_key,
                token: Vec::new(),
            },
            None => ClientProtection::Plaintext,
        };
        let config = Arc::new(RudpConfig::default());
        let mut conn = Connection::client(config, Instant::now(), nonce, protection);
        conn.advertise_zero_window(zero_window);
        RawPeer {
            socket,
            conn,
            zero_window,
            buf: vec![0; 65_536],
        }
    }

    /// One round: what arrived, due timers, what is to send. Messages are taken and dropped.
    pub fn pump(&mut self) {
        let now = Instant::now();
        while let Ok(n) = self.socket.recv(&mut self.buf) {
            let _ = self.conn.handle_datagram(now, &self.buf[..n]);
        }
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        while let Some(m) = self.conn.recv() {
            self.conn.recycle(m);
        }
        while let Some(n) = self.conn.poll_transmit(now, &mut self.buf) {
            let _ = self.socket.send(&self.buf[..n]);
        }
    }
}
