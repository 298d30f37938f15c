//! A game lobby on ark-rudp's lanes: players join and download the lobby's map (256 KiB on a
//! bulk lane of its own, of a lower priority), chat reliably (every player sees every line,
//! in order, on the chat lane) and send their positions on a sequenced lane (the newest
//! matters: a lost one is not sent again, an older one arriving late is dropped). A chat line
//! does not wait for the map download before it: each lane has its own order. The server
//! relays chat and positions to the other players through session handles, and a
//! per-session timer sends each player the lobby's size every 100 ms, on a fixed cadence
//! (each tick is due 100 ms after the last one was due, counted from the turn's time, so a
//! busy turn does not push every later tick back).
//!
//! ```text
//! cargo run --release -p ark-rudp --example rudp_lobby
//! ```
//!
//! Messages: `C<text>` a chat line, `P<x>,<y>` a position, `N<count>` the lobby's size,
//! `M<bytes>` the map.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ark_rudp::{
    CloseReason, Delivery, Lane, RudpClient, RudpConfig, RudpHandler, RudpServer, RudpSession,
    RudpSessionHandle, TimerId,
};

/// The lanes, as both ends configure them ([`lobby_config`]).
const CHAT: u8 = 0;
const POSITIONS: u8 = 1;
const MAP: u8 = 2;

/// The map a joining player downloads.
const MAP_BYTES: usize = 256 * 1024;

/// The lobby's settings, the same at both ends: chat and positions first, the map download
/// with what is left.
fn lobby_config() -> RudpConfig {
    let mut config = RudpConfig::default();
    config.lanes = vec![
        Lane::ordered(),             // CHAT
        Lane::sequenced(),           // POSITIONS
        Lane::ordered().priority(1), // MAP
    ];
    config.max_message = MAP_BYTES + 1;
    config
}

/// Every player's session handle, by address.
type Players = Arc<Mutex<HashMap<SocketAddr, RudpSessionHandle>>>;

/// How often each player hears the lobby's size.
const TICK: Duration = Duration::from_millis(100);

/// The server's side of one player.
struct Player {
    me: SocketAddr,
    players: Players,
    /// When the next size tick is due.
    next_tick: Option<Instant>,
}

impl Player {
    /// Sets the tick timer for `due` (at once if that has passed).
    fn schedule(&mut self, session: &mut RudpSession<'_>, due: Instant) {
        self.next_tick = Some(due);
        session.set_timer(due.saturating_duration_since(session.now()));
    }

    fn others(&self, me: SocketAddr) -> Vec<RudpSessionHandle> {
        let players = self.players.lock().unwrap_or_else(PoisonError::into_inner);
        players
            .iter()
            .filter(|(addr, _)| **addr != me)
            .map(|(_, h)| h.clone())
            .collect()
    }
}

impl RudpHandler for Player {
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        let mut players = self.players.lock().unwrap_or_else(PoisonError::into_inner);
        players.insert(session.peer_addr(), session.handle());
        drop(players);
        let mut map = vec![0u8; MAP_BYTES + 1];
        map[0] = b'M';
        // Refused only if the session closed already; nothing to do then.
        let _ = session.send_on(MAP, &map);
        self.schedule(session, session.now() + TICK);
    }

    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        let delivery = match message.first() {
            Some(b'C') => Delivery::Lane(CHAT),
            Some(b'P') => Delivery::Lane(POSITIONS),
            _ => return, // not a lobby message: ignored
        };
        for other in self.others(session.peer_addr()) {
            // A player whose buffer is full (or who left) misses this line; the refusal is
            // counted in its session's stats.
            let _ = other.send(message, delivery);
        }
    }

    fn on_timer(&mut self, session: &mut RudpSession<'_>, _: TimerId) {
        let count = self
            .players
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        let _ = session.send_unreliable(format!("N{count}").as_bytes());
        let due = self.next_tick.unwrap_or(session.now()) + TICK;
        self.schedule(session, due);
    }

    fn on_close(&mut self, reason: &CloseReason) {
        let mut players = self.players.lock().unwrap_or_else(PoisonError::into_inner);
        players.remove(&self.me);
        println!("{} left ({reason}), {} still in", self.me, players.len());
    }
}

/// What a player's client hears.
struct Client {
    name: &'static str,
    heard: mpsc::Sender<(String, String)>,
}

impl RudpHandler for Client {
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        let _ = session.send_on(CHAT, format!("C{} joined", self.name).as_bytes());
    }

    fn on_message(&mut self, _: &mut RudpSession<'_>, message: &[u8]) {
        let text = match message.first() {
            Some(b'M') => format!("M{}", message.len() - 1),
            _ => String::from_utf8_lossy(message).into_owned(),
        };
        let _ = self.heard.send((self.name.to_string(), text));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let players: Players = Arc::default();
    let registry = players.clone();
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .config(lobby_config())
        .start(move |peer| Player {
            me: peer,
            players: registry.clone(),
            next_tick: None,
        })?;
    // Encrypted: each player pins the server's public key (a real game ships it with the
    // client, or gets it from its matchmaker beside the address).
    let server_key = server
        .public_key()
        .ok_or("the server is encrypted by default")?;
    let (tx, rx) = mpsc::channel();
    let mut clients = Vec::new();
    for name in ["ada", "bob", "cy"] {
        let client = RudpClient::builder()
            .server_key(server_key)
            .config(lobby_config())
            .connect(
                server.local_addr(),
                Client {
                    name,
                    heard: tx.clone(),
                },
            )?;
        clients.push(client);
    }
    // Everyone moves, and ada says something once all three are in.
    std::thread::sleep(Duration::from_millis(300));
    for (i, client) in clients.iter().enumerate() {
        client.send(
            format!("P{i},{}", i * 2).as_bytes(),
            Delivery::Lane(POSITIONS),
        )?;
    }
    clients[0].send(b"Cada: hello, lobby", Delivery::Lane(CHAT))?;
    // Listen for a second (the lobby's size keeps coming every 100 ms).
    let (mut chat, mut sizes, mut maps) = (0, 0, 0);
    let end = std::time::Instant::now() + Duration::from_secs(1);
    while let Ok((who, text)) =
        rx.recv_timeout(end.saturating_duration_since(std::time::Instant::now()))
    {
        match text.as_bytes().first() {
            Some(b'N') => sizes += 1,
            Some(b'M') => {
                maps += 1;
                println!("{who} downloaded the map ({} bytes)", &text[1..]);
            }
            Some(b'C') => {
                chat += 1;
                println!("{who} heard {text}");
            }
            _ => println!("{who} heard {text}"),
        }
    }
    println!("{chat} chat lines delivered, {maps} maps, {sizes} lobby sizes");
    for client in clients {
        client.stop().wait()?;
    }
    server.stop().wait()?;
    Ok(())
}
