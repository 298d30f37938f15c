//! A memory probe, not an application: 50 reliable-UDP sessions that make a server hold as
//! much as its receive window allows, then vanish. Each client reaches the server through a
//! relay of its own that drops every DATA datagram carrying a message's first fragment, and
//! sends two 600 kB messages with congestion control off, so the server holds the rest of
//! them out of order (up to its 1024-fragment window, about 1.2 MB per session). After 3 s the
//! relays go silent; no CLOSE reaches the server, whose sessions end at their idle timeout.
//! `scripts/memory-after-attack.py` runs it against `ark-loopback --role server --protocol
//! rudp` and samples the server's RSS.
//!
//! The relays need no key: a datagram's kind and flags are in its clear header (sealed
//! datagrams authenticate it, they do not hide it).
//!
//! Usage: `cargo run --release -p ark-rudp --example rudp_hold_attack -- SERVER_ADDR
//! [SERVER_KEY]` (a loopback address: the relays bind 127.0.0.1; the server's public key in
//! hex for an encrypted server, as `ark-loopback --role server` prints it; without it, a
//! plaintext server).

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use ark_link::{Towards, UdpForwarder};
use ark_rudp::{
    Congestion, Delivery, RudpClient, RudpConfig, RudpHandler, RudpPublicKey, RudpSession,
};

const SESSIONS: usize = 50;
const MESSAGE: usize = 600_000;

struct Quiet;
impl RudpHandler for Quiet {
    fn on_message(&mut self, _: &mut RudpSession<'_>, _: &[u8]) {}
}

/// Whether `datagram` is a DATA datagram that carries a message's first fragment (kind 0x1_,
/// flag FIRST).
fn first_fragment(datagram: &[u8]) -> bool {
    datagram
        .first()
        .is_some_and(|b| b & 0xF0 == 0x10 && b & 0x1 != 0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server: SocketAddr = std::env::args()
        .nth(1)
        .ok_or("usage: rudp_hold_attack SERVER_ADDR [SERVER_KEY]")?
        .parse()?;
    let key = match std::env::args().nth(2) {
        Some(hex) => Some(RudpPublicKey::from_hex(&hex)?),
        None => None,
    };
    let (mut clients, mut relays) = (Vec::new(), Vec::new());
    for _ in 0..SESSIONS {
        let keep =
            |towards, datagram: &[u8]| towards == Towards::Client || !first_fragment(datagram);
        let relay = UdpForwarder::start(server, Duration::from_secs(120), keep)?;
        let addr = relay.local_addr();
        relays.push(relay);
        let mut config = RudpConfig::default();
        config.congestion = Congestion::Off; // only the server's receive window limits it
        config.send_buffer = 4 * MESSAGE;
        config.max_message = MESSAGE; // over the server's 256 KiB: refused only once whole
        let builder = match key {
            Some(key) => RudpClient::builder().server_key(key),
            None => RudpClient::builder().plaintext(),
        };
        clients.push(builder.config(config).connect(addr, Quiet)?);
    }
    thread::sleep(Duration::from_secs(1));
    let message = vec![7u8; MESSAGE];
    for client in &clients {
        client.send(&message, Delivery::Ordered)?;
        client.send(&message, Delivery::Ordered)?;
    }
    thread::sleep(Duration::from_secs(3));
    let sent = clients[0].stats().map_or(0, |s| s.data_sent);
    println!("client 0 sent {sent} DATA datagrams; the relays go silent");
    for relay in relays {
        relay.stop();
    }
    // Vanish: the clients' CLOSE must not reach the server (the relays are gone anyway).
    std::mem::forget(clients);
    Ok(())
}
