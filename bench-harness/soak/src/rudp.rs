//! Reliable UDP: a well-behaved link (an ark-rudp client, ordered messages), and the forger:
//! a client reached through a relay socket, so both ends take the relay's address for their
//! peer's. The relay is on the path: it sees every datagram of the session. While the echo
//! runs it sends to both ends, from that socket, forged packets (well-formed, with no token or
//! a guessed one), copies of datagrams it saw with one byte changed, and datagrams it saw
//! again (replays). Every echo must still come back, in order; every forgery and changed
//! datagram must be counted as unauthenticated, every replay as a replay, by the end it
//! reached.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use ark_link::{Towards, UdpForwarder};
use ark_rudp::{CloseReason, Delivery, RudpClient, RudpClientHandle, RudpHandler, RudpSession};

use crate::link::{IO_TIMEOUT, Link, Msg, Plan, exchange};
use crate::shared::{Ctx, Rng};
use crate::tally::{Ending, Fault, Proto};

/// How long a client's stop may take (its CLOSE goes out, `on_close` runs).
const STOP_WAIT: Duration = Duration::from_secs(3);
/// How long the forger waits after its last forgery before reading the client's counters.
const SETTLE: Duration = Duration::from_millis(100);
/// The relay's longest life.
const RELAY_LIMIT: Duration = Duration::from_secs(120);
/// A forgery to each end every this often, while forging.
const FORGE_EVERY: Duration = Duration::from_millis(5);

/// What the client's handler reports.
#[derive(Debug)]
enum Note {
    Open,
    Message(Vec<u8>),
    Closed(String),
}

/// The client's handler: everything goes to the link's channel.
#[derive(Debug)]
struct Forward(Sender<Note>);

impl RudpHandler for Forward {
    fn on_open(&mut self, _: &mut RudpSession<'_>) {
        let _ = self.0.send(Note::Open);
    }
    fn on_message(&mut self, _: &mut RudpSession<'_>, message: &[u8]) {
        let _ = self.0.send(Note::Message(message.to_vec()));
    }
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.0.send(Note::Closed(reason.to_string()));
    }
}

/// An ark-rudp client session to the echo server: ordered, reliable messages.
#[derive(Debug)]
pub struct RudpLink {
    client: Option<RudpClientHandle>,
    notes: Receiver<Note>,
}

/// The soak server's public key, which every client pins (set once the server said it).
static SERVER_KEY: std::sync::OnceLock<ark_rudp::RudpPublicKey> = std::sync::OnceLock::new();

/// Pins the soak server's public key for every client of the run.
pub fn pin_server_key(key: ark_rudp::RudpPublicKey) {
    let _ = SERVER_KEY.set(key);
}

/// The pinned key.
pub fn server_key() -> io::Result<ark_rudp::RudpPublicKey> {
    SERVER_KEY
        .get()
        .copied()
        .ok_or_else(|| io::Error::other("the soak server's rudp key was not pinned"))
}

impl RudpLink {
    /// Connects to the reliable-UDP echo server and waits for the handshake.
    pub fn connect(addr: SocketAddr) -> io::Result<RudpLink> {
        let (tx, notes) = mpsc::channel();
        let client = RudpClient::builder()
            .server_key(server_key()?)
            .connect(addr, Forward(tx))?;
        let link = RudpLink {
            client: Some(client),
            notes,
        };
        match link.next()? {
            Note::Open => Ok(link),
            other => Err(io::Error::other(format!("handshake: {other:?}"))),
        }
    }

    /// The handler's next note, waiting at most [`IO_TIMEOUT`].
    fn next(&self) -> io::Result<Note> {
        self.notes.recv_timeout(IO_TIMEOUT).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => io::ErrorKind::TimedOut.into(),
            mpsc::RecvTimeoutError::Disconnected => io::Error::other("the client is gone"),
        })
    }

    /// What the client counted so far: (unauthenticated, replays).
    fn counted(&self) -> Option<(u64, u64)> {
        let stats = self.client.as_ref()?.stats()?;
        Some((stats.unauthenticated, stats.replays))
    }
}

impl Link for RudpLink {
    fn send(&mut self, msg: &Msg) -> io::Result<()> {
        let client = self.client.as_ref().ok_or(io::ErrorKind::NotConnected)?;
        client
            .send(&msg.data, Delivery::Ordered)
            .map_err(io::Error::other)
    }

    fn recv(&mut self) -> io::Result<Msg> {
        match self.next()? {
            Note::Message(data) => Ok(Msg { text: false, data }),
            other => Err(io::Error::other(format!("waiting for an echo: {other:?}"))),
        }
    }

    fn leave(&mut self) -> Result<(), Fault> {
        if let Some(client) = self.client.take() {
            client
                .stop()
                .wait_timeout(STOP_WAIT)
                .map_err(|e| Fault::broken(0, "stopping", e))?;
        }
        match self.notes.try_recv() {
            Ok(Note::Closed(why)) if why == CloseReason::Stopped.to_string() => Ok(()),
            Ok(Note::Message(m)) => Err(Fault::Wrong(format!(
                "a {}-byte message after the last echo",
                m.len()
            ))),
            Ok(other) => Err(Fault::broken(0, "closing", format!("{other:?}"))),
            Err(e) => Err(Fault::broken(0, "closing", format!("no on_close: {e}"))),
        }
    }
}

/// A well-formed forged packet: any kind, the handshake ones with a random nonce, the rest
/// with no token or (half the time) a guessed one.
fn forgery(rng: &mut Rng) -> Vec<u8> {
    let kind = rng.range(0, 7);
    let body = rng.range(1, 512) as usize;
    let mut packet = match kind {
        0 => vec![0x80, rng.range(0, 255) as u8],
        1 => [&[0x40][..], &rng.bytes(body % 64 + 1)].concat(),
        2 => {
            let mut p = vec![0x13];
            p.extend_from_slice(&(rng.range(0, 64) as u32).to_be_bytes());
            p.extend_from_slice(&rng.bytes(5)); // lane, lane sequence
            p.extend_from_slice(&rng.bytes(16)); // ack block
            p.extend_from_slice(&rng.bytes(body));
            p
        }
        3 => [&[0x20 | rng.range(0, 1) as u8][..], &rng.bytes(16)].concat(),
        4 => [
            &[0x30][..],
            &rng.bytes(16),
            &[0, 0, 0, 0, 4, 2, 4],
            &rng.bytes(64),
        ]
        .concat(),
        5 => {
            let mut p = vec![0x50, 5]; // HELLO of the current version
            p.extend_from_slice(&rng.bytes(8 + 20));
            p.resize(1200, 0);
            p
        }
        6 => [&[0x60][..], &rng.bytes(8 + 20)].concat(),
        _ => [&[0x70][..], &rng.bytes(8)].concat(),
    };
    if kind <= 4 && rng.range(0, 1) == 1 {
        packet.extend_from_slice(&rng.bytes(8));
    }
    packet
}

/// What one direction's end was sent by the forger.
#[derive(Debug, Default)]
struct Sent {
    /// Forged packets and changed copies: each must be counted unauthenticated.
    unauthenticated: AtomicU64,
    /// Of those, changed copies of datagrams the relay saw.
    changed: AtomicU64,
    /// Datagrams the relay saw, sent again: each must be counted as a replay.
    replays: AtomicU64,
}

/// The datagrams the relay saw lately, each way (captured while `on`: after the handshake).
#[derive(Debug, Default)]
struct Tap {
    on: AtomicBool,
    seen: Mutex<[VecDeque<Vec<u8>>; 2]>,
}

/// How many datagrams the tap keeps each way.
const TAP_KEEP: usize = 64;

impl Tap {
    fn index(towards: Towards) -> usize {
        usize::from(towards == Towards::Client)
    }

    /// The relay's keep function: every datagram goes on; one seen while `on` is kept.
    fn saw(&self, towards: Towards, datagram: &[u8]) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let way = &mut seen[Tap::index(towards)];
        if way.len() == TAP_KEEP {
            way.pop_front();
        }
        way.push_back(datagram.to_vec());
    }

    /// A datagram seen going `towards`, chosen by `rng`, if any.
    fn pick(&self, towards: Towards, rng: &mut Rng) -> Option<Vec<u8>> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let way = &seen[Tap::index(towards)];
        if way.is_empty() {
            return None;
        }
        way.get(rng.range(0, way.len() as u64 - 1) as usize)
            .cloned()
    }
}

/// What the forging thread and the exchange share.
#[derive(Debug, Default)]
struct Forging {
    stop: AtomicBool,
    tap: Arc<Tap>,
    to_server: Sent,
    to_client: Sent,
}

/// While the tap is on, sends from the relay's socket to each end every [`FORGE_EVERY`] (once
/// the client is known) a forgery, then a seen datagram again or changed in one byte past its
/// clear prefix (kind and packet number: the change is in what the AEAD protects, and stays
/// a datagram of its kind). Ends at `forging.stop` (or [`RELAY_LIMIT`]).
fn forge(relay: &UdpForwarder, forging: &Forging, mut rng: Rng) {
    let deadline = Instant::now() + RELAY_LIMIT;
    while !forging.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        thread::sleep(FORGE_EVERY);
        if !forging.tap.on.load(Ordering::Relaxed) || relay.client().is_none() {
            continue;
        }
        for (towards, sent) in [
            (Towards::Server, &forging.to_server),
            (Towards::Client, &forging.to_client),
        ] {
            if let Ok(true) = relay.inject(towards, &forgery(&mut rng)) {
                sent.unauthenticated.fetch_add(1, Ordering::Relaxed);
            }
            let Some(mut seen) = forging.tap.pick(towards, &mut rng) else {
                continue;
            };
            let change = rng.range(0, 1) == 1 && seen.len() > 5;
            if change {
                let at = rng.range(5, seen.len() as u64 - 1) as usize;
                seen[at] ^= 1 << rng.range(0, 7);
            }
            if let Ok(true) = relay.inject(towards, &seen) {
                let count = if change {
                    sent.changed.fetch_add(1, Ordering::Relaxed);
                    &sent.unauthenticated
                } else {
                    &sent.replays
                };
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Reliable UDP forger: a client through a relay echoes 20–300 messages while the relay
/// forges packets to both ends; then the client must have counted every forgery sent to it.
pub fn forger(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let forging = Forging::default();
    let tap = forging.tap.clone();
    let keep = move |towards, datagram: &[u8]| {
        tap.saw(towards, datagram);
        true
    };
    let relay = match UdpForwarder::start(ctx.addrs.rudp, RELAY_LIMIT, keep) {
        Ok(relay) => relay,
        Err(e) => return Ending::failed("relay failed", started, format!("start: {e}")),
    };
    let forger_rng = Rng::new(rng.next_u64(), 0);
    let result = thread::scope(|s| {
        s.spawn(|| forge(&relay, &forging, forger_rng));
        let result = forged_exchange(ctx, rng, relay.local_addr(), &forging);
        forging.stop.store(true, Ordering::Relaxed);
        result
    });
    relay.stop();
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let (server, client) = (&forging.to_server, &forging.to_client);
    let f = &ctx.tally.forged;
    f.to_server
        .fetch_add(get(&server.unauthenticated), Ordering::Relaxed);
    f.changed_to_server
        .fetch_add(get(&server.changed), Ordering::Relaxed);
    f.replayed_to_server
        .fetch_add(get(&server.replays), Ordering::Relaxed);
    f.to_clients
        .fetch_add(get(&client.unauthenticated), Ordering::Relaxed);
    f.replayed_to_clients
        .fetch_add(get(&client.replays), Ordering::Relaxed);
    let sent = (get(&client.unauthenticated), get(&client.replays));
    judge_forged(ctx, result, sent, started)
}

/// The forger's exchange through the relay at `relay_addr`: returns the echoes checked and
/// what the client counted (unauthenticated, replays).
fn forged_exchange(
    ctx: &Ctx,
    rng: &mut Rng,
    relay_addr: SocketAddr,
    forging: &Forging,
) -> Result<(u64, (u64, u64)), Fault> {
    let mut link = RudpLink::connect(relay_addr).map_err(|e| Fault::broken(0, "connect", e))?;
    let plan = Plan {
        count: rng.range(20, 300),
        window: rng.range(1, 8) as usize,
        pace_ms: (0, 0),
        text_every: 0,
    };
    let echoes = Proto::default();
    forging.tap.on.store(true, Ordering::Relaxed);
    let result = exchange(&mut link, &plan, rng, ctx, &echoes);
    forging.tap.on.store(false, Ordering::Relaxed);
    result?;
    thread::sleep(SETTLE);
    let counted = link.counted().unwrap_or_default();
    link.leave()?;
    // Let the client's CLOSE pass the relay before it goes.
    thread::sleep(SETTLE);
    Ok((echoes.messages.load(Ordering::Relaxed), counted))
}

/// The forger's ending: every echo, and every forgery, changed datagram and replay sent to
/// the client counted by it (`sent`: unauthenticated, replays).
fn judge_forged(
    ctx: &Ctx,
    result: Result<(u64, (u64, u64)), Fault>,
    sent: (u64, u64),
    started: Instant,
) -> Ending {
    let (echoes, counted) = match result {
        Ok(r) => r,
        Err(Fault::Wrong(what)) => {
            return Ending {
                wrong: 1,
                ..Ending::failed("wrong echo", started, what)
            };
        }
        Err(Fault::Broken { lost, why }) => {
            return Ending {
                lost,
                ..Ending::failed("session broken", started, why)
            };
        }
    };
    let f = &ctx.tally.forged;
    f.counted_by_clients.fetch_add(counted.0, Ordering::Relaxed);
    f.replays_counted_by_clients
        .fetch_add(counted.1, Ordering::Relaxed);
    let ending = Ending {
        messages: echoes,
        ..Ending::new("every echo, forgery and replay counted", started)
    };
    if counted == sent {
        return ending;
    }
    Ending {
        problem: Some(format!(
            "the client counted {} unauthenticated datagrams and {} replays; {} forged or \
             changed and {} replayed were sent to it",
            counted.0, counted.1, sent.0, sent.1
        )),
        outcome: "forgeries or replays not counted".into(),
        ..ending
    }
}
