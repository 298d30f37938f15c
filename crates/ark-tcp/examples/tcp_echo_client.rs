//! Run with `cargo run --release -p ark-tcp --example tcp_echo_client -- 127.0.0.1:7878 100000 16`
//! (server address, messages, window; defaults as shown) against the matching `*_echo_server` example.
//!
//! Sends 64-byte messages keeping `window` in flight, checks every echo, and prints the rate
//! and the write syscalls per message (sends are coalesced into one write per turn).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ark_tcp::{CloseReason, TcpClient, TcpHandler, TcpSession};

struct Pump {
    total: u64,
    window: u64,
    sent: u64,
    echoed: u64,
    payload: [u8; 64],
    done: mpsc::Sender<Result<u64, String>>,
}

impl Pump {
    fn fill(&mut self, session: &mut TcpSession<'_>) {
        while self.sent < self.total && self.sent - self.echoed < self.window {
            self.payload[..8].copy_from_slice(&self.sent.to_be_bytes());
            if let Err(e) = session.send(&self.payload) {
                let _ = self.done.send(Err(e.to_string()));
                session.close();
                return;
            }
            self.sent += 1;
        }
    }
}

impl TcpHandler for Pump {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        self.fill(session);
    }

    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        if message.get(..8) != Some(&self.echoed.to_be_bytes()[..]) {
            let _ = self
                .done
                .send(Err(format!("echo {} out of order", self.echoed)));
            session.abort();
            return;
        }
        self.echoed += 1;
        if self.echoed == self.total {
            let _ = self.done.send(Ok(self.echoed));
            session.close();
        } else {
            self.fill(session);
        }
    }

    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.done.send(Err(format!("closed: {reason}")));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:7878".into())
        .parse()?;
    let total: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let window: u64 = args.next().map_or(Ok(16), |s| s.parse())?;
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    let client = TcpClient::builder()
        .connect_timeout(Duration::from_secs(5))
        .connect(
            addr,
            Pump {
                total,
                window,
                sent: 0,
                echoed: 0,
                payload: [0; 64],
                done: tx,
            },
        )?;
    let outcome = rx.recv_timeout(Duration::from_secs(300))?;
    let elapsed = started.elapsed().as_secs_f64();
    let stats = client.stats();
    client.stop().wait()?;
    let echoed = outcome?;
    println!(
        "{echoed} echoes in {elapsed:.2} s = {:.0} msg/s; {} writes ({:.3} per message), {} reads",
        echoed as f64 / elapsed,
        stats.writes,
        stats.writes as f64 / echoed as f64,
        stats.reads
    );
    Ok(())
}
