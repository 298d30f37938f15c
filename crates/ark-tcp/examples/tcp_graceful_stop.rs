//! A TCP service that stops without losing an answer: on SIGTERM or Ctrl-C it drains — no new
//! connections, every client told to finish and still served until it goes — and whoever is
//! still connected after the drain's 10 s is stopped and counted.
//!
//! Run: `cargo run --release -p ark-tcp --example tcp_graceful_stop -- 127.0.0.1:7000`, talk
//! to it with `nc 127.0.0.1 7000` (lines are echoed), then press Ctrl-C (or `kill` it): the
//! clients get `* draining: ...`; it exits when they have gone, or after 10 s.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ark_tcp::{Delimiter, StopReport, TcpHandler, TcpServer, TcpServerHandle, TcpSession};

/// What a client hears when the drain begins.
pub const DRAINING: &[u8] = b"* draining: finish what you are doing and reconnect later";

/// How long clients get to finish.
pub const DRAIN: Duration = Duration::from_secs(10);

/// Echoes every line; tells its client when the service drains.
pub struct Echo;

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'_>, line: &[u8]) {
        if session.send(line).is_err() {
            // The client sends faster than it reads: it has no answer coming, so it goes.
            session.close();
        }
    }

    fn on_drain(&mut self, session: &mut TcpSession<'_>) {
        let _ = session.send(DRAINING);
    }
}

/// The service on `addr`: a line (`\n`) per message, lines up to 64 KiB.
pub fn start(addr: SocketAddr) -> io::Result<TcpServerHandle> {
    let lines = Delimiter::new(b"\n").map_err(io::Error::other)?;
    TcpServer::builder()
        .bind(addr)
        .framing(lines.with_max_frame_len(64 * 1024))
        .start(|_peer| Echo)
}

/// Drains `server` and waits for the end: how many clients the deadline cut off.
pub fn drain(server: TcpServerHandle) -> io::Result<StopReport> {
    server.drain(DRAIN).report()
}

#[allow(dead_code)] // the tests use the rest
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7000".into())
        .parse()?;
    // SIGTERM (a service manager, `kill`) or SIGINT (Ctrl-C) raise the flag instead of killing.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let server = start(addr)?;
    println!("echoing lines on {}", server.local_addr());
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    println!("draining for up to {DRAIN:?}");
    let report = drain(server)?;
    println!(
        "stopped: {} clients were still there at the drain's end, {} had to be cut at once",
        report.undrained, report.forced
    );
    Ok(())
}
