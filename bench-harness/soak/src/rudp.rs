//! Reliable UDP: a well-behaved link (an ark-rudp client, ordered messages), and the forger:
//! a client reached through a relay socket, so both ends take the relay's address for their
//! peer's, and from that socket forged packets to both ends (well-formed, with no token or a
//! guessed one) while the echo runs. Every echo must still come back, in order, and every
//! forgery must be counted as unauthenticated.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
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

    /// What the client counted as unauthenticated so far.
    fn unauthenticated(&self) -> Option<u64> {
        self.client.as_ref()?.stats().map(|s| s.unauthenticated)
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

/// What the forging thread and the exchange share.
#[derive(Debug, Default)]
struct Forging {
    on: AtomicBool,
    stop: AtomicBool,
    to_server: AtomicU64,
    to_client: AtomicU64,
}

/// While `forging.on`, sends a forgery from the relay's socket to each end every
/// [`FORGE_EVERY`] (once the client is known). Ends at `forging.stop` (or [`RELAY_LIMIT`]).
fn forge(relay: &UdpForwarder, forging: &Forging, mut rng: Rng) {
    let deadline = Instant::now() + RELAY_LIMIT;
    while !forging.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        thread::sleep(FORGE_EVERY);
        if !forging.on.load(Ordering::Relaxed) || relay.client().is_none() {
            continue;
        }
        if let Ok(true) = relay.inject(Towards::Server, &forgery(&mut rng)) {
            forging.to_server.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(true) = relay.inject(Towards::Client, &forgery(&mut rng)) {
            forging.to_client.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Reliable UDP forger: a client through a relay echoes 20–300 messages while the relay
/// forges packets to both ends; then the client must have counted every forgery sent to it.
pub fn forger(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let relay = match UdpForwarder::start(ctx.addrs.rudp, RELAY_LIMIT, |_, _| true) {
        Ok(relay) => relay,
        Err(e) => return Ending::failed("relay failed", started, format!("start: {e}")),
    };
    let forging = Forging::default();
    let forger_rng = Rng::new(rng.next_u64(), 0);
    let result = thread::scope(|s| {
        s.spawn(|| forge(&relay, &forging, forger_rng));
        let result = forged_exchange(ctx, rng, relay.local_addr(), &forging);
        forging.stop.store(true, Ordering::Relaxed);
        result
    });
    relay.stop();
    let (to_server, to_client) = (
        forging.to_server.load(Ordering::Relaxed),
        forging.to_client.load(Ordering::Relaxed),
    );
    let t = &ctx.tally;
    t.forged.to_server.fetch_add(to_server, Ordering::Relaxed);
    t.forged.to_clients.fetch_add(to_client, Ordering::Relaxed);
    judge_forged(ctx, result, to_client, started)
}

/// The forger's exchange through the relay at `relay_addr`: returns the echoes checked and
/// what the client counted as unauthenticated.
fn forged_exchange(
    ctx: &Ctx,
    rng: &mut Rng,
    relay_addr: SocketAddr,
    forging: &Forging,
) -> Result<(u64, u64), Fault> {
    let mut link = RudpLink::connect(relay_addr).map_err(|e| Fault::broken(0, "connect", e))?;
    let plan = Plan {
        count: rng.range(20, 300),
        window: rng.range(1, 8) as usize,
        pace_ms: (0, 0),
        text_every: 0,
    };
    let echoes = Proto::default();
    forging.on.store(true, Ordering::Relaxed);
    let result = exchange(&mut link, &plan, rng, ctx, &echoes);
    forging.on.store(false, Ordering::Relaxed);
    result?;
    thread::sleep(SETTLE);
    let counted = link.unauthenticated().unwrap_or(0);
    link.leave()?;
    // Let the client's CLOSE pass the relay before it goes.
    thread::sleep(SETTLE);
    Ok((echoes.messages.load(Ordering::Relaxed), counted))
}

/// The forger's ending: every echo, and every forgery sent to the client counted by it.
fn judge_forged(
    ctx: &Ctx,
    result: Result<(u64, u64), Fault>,
    sent: u64,
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
    ctx.tally
        .forged
        .counted_by_clients
        .fetch_add(counted, Ordering::Relaxed);
    let ending = Ending {
        messages: echoes,
        ..Ending::new("every echo, every forgery counted", started)
    };
    if counted == sent {
        return ending;
    }
    Ending {
        problem: Some(format!(
            "the client counted {counted} unauthenticated packets, {sent} forgeries were sent to it"
        )),
        outcome: "forgeries not counted".into(),
        ..ending
    }
}
