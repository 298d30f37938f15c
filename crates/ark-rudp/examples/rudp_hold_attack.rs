//! A memory probe, not an application: 50 reliable-UDP sessions that make a server hold as
//! much as its receive window allows, then vanish. Each client reaches the server through a
//! relay of its own that drops every DATA datagram carrying a message's first fragment, and
//! sends two 600 kB messages with congestion control off, so the server holds the rest of
//! them out of order (up to its 1024-fragment window, about 1.2 MB per session). After 3 s the
//! relays go silent; no CLOSE reaches the server, whose sessions end at their idle timeout.
//! `scripts/memory-after-attack.py` runs it against `ark-loopback --role server --protocol
//! rudp` and samples the server's RSS.
//!
//! Usage: `cargo run --release -p ark-rudp --example rudp_hold_attack -- SERVER_ADDR`
//! (a loopback address: the relays bind 127.0.0.1).

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ark_rudp::{Congestion, Delivery, RudpClient, RudpConfig, RudpHandler, RudpSession};

const SESSIONS: usize = 50;
const MESSAGE: usize = 600_000;

struct Quiet;
impl RudpHandler for Quiet {
    fn on_message(&mut self, _: &mut RudpSession<'_>, _: &[u8]) {}
}

/// Forwards between one client and `server`, dropping DATA datagrams that carry a first
/// fragment (kind 0x1_, flag FIRST), until `stop` (or 120 s).
fn relay(socket: UdpSocket, server: SocketAddr, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    thread::spawn(move || {
        let _ = socket.set_read_timeout(Some(Duration::from_millis(5)));
        let (mut client, mut buf) = (None, [0u8; 2048]);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            if from == server {
                if let Some(client) = client {
                    let _ = socket.send_to(&buf[..n], client);
                }
                continue;
            }
            client = Some(from);
            let first_fragment = buf[0] & 0xF0 == 0x10 && buf[0] & 0x1 != 0;
            if !first_fragment {
                let _ = socket.send_to(&buf[..n], server);
            }
        }
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server: SocketAddr = std::env::args()
        .nth(1)
        .ok_or("usage: rudp_hold_attack SERVER_ADDR")?
        .parse()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (mut clients, mut relays) = (Vec::new(), Vec::new());
    for _ in 0..SESSIONS {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        let addr = socket.local_addr()?;
        relays.push(relay(socket, server, stop.clone()));
        let mut config = RudpConfig::default();
        config.congestion = Congestion::Off; // only the server's receive window limits it
        config.send_buffer = 4 * MESSAGE;
        config.max_message = MESSAGE; // over the server's 256 KiB: refused only once whole
        clients.push(RudpClient::builder().config(config).connect(addr, Quiet)?);
    }
    thread::sleep(Duration::from_secs(1));
    let message = vec![7u8; MESSAGE];
    for client in &clients {
        client.send(&message, Delivery::Ordered);
        client.send(&message, Delivery::Ordered);
    }
    thread::sleep(Duration::from_secs(3));
    let sent = clients[0].stats().map_or(0, |s| s.data_sent);
    println!("client 0 sent {sent} DATA datagrams; the relays go silent");
    stop.store(true, Ordering::Relaxed);
    for relay in relays {
        let _ = relay.join();
    }
    // Vanish: the clients' CLOSE must not reach the server (the relays are gone anyway).
    std::mem::forget(clients);
    Ok(())
}
