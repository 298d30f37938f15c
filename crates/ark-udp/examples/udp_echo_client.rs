//! Run with `cargo run --release -p ark-udp --example udp_echo_client -- 127.0.0.1:7879 100000 1`
//! (server address, datagrams, window; defaults as shown) against the matching `*_echo_server` example.
//!
//! Sends 1,024-byte datagrams keeping `window` in flight and prints the echo rate and the
//! syscalls per datagram. A lost datagram would stall a window, so the run is bounded by a
//! timeout and reports how far it got.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_udp::{UdpClient, UdpHandler, UdpSession};

struct Pump {
    total: u64,
    window: u64,
    sent: u64,
    echoed: Arc<AtomicU64>,
    payload: [u8; 1024],
}

impl Pump {
    fn fill(&mut self, session: &mut UdpSession<'_>) {
        let echoed = self.echoed.load(Ordering::Relaxed);
        while self.sent < self.total && self.sent - echoed < self.window {
            if session.send(&self.payload).is_err() {
                return;
            }
            self.sent += 1;
        }
    }
}

impl UdpHandler for Pump {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        self.fill(session);
    }

    fn on_message(&mut self, session: &mut UdpSession<'_>, _: &[u8]) {
        self.echoed.fetch_add(1, Ordering::Relaxed);
        self.fill(session);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:7879".into())
        .parse()?;
    let total: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let window: u64 = args.next().map_or(Ok(1), |s| s.parse())?;
    let echoed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let client = UdpClient::builder().max_datagram(2048).connect(
        addr,
        Pump {
            total,
            window,
            sent: 0,
            echoed: echoed.clone(),
            payload: [0x42; 1024],
        },
    )?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = (0, Instant::now());
    while echoed.load(Ordering::Relaxed) < total && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        let now = echoed.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(1) {
            break; // a lost datagram stalled the window
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let stats = client.stats();
    client.stop().wait()?;
    let done = echoed.load(Ordering::Relaxed);
    println!(
        "{done}/{total} echoes in {elapsed:.2} s = {:.0} msg/s; {:.3} receive and {:.3} send syscalls per datagram",
        done as f64 / elapsed,
        stats.receives as f64 / done.max(1) as f64,
        stats.sends as f64 / done.max(1) as f64
    );
    Ok(())
}
