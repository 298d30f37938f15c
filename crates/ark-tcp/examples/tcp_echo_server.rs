//! Run with `cargo run --release -p ark-tcp --example tcp_echo_server -- 127.0.0.1:7878 30`
//! (address, then seconds to run; defaults 127.0.0.1:7878 and 30). Pair it with the
//! `tcp_echo_client` example.
//!
//! A length-prefixed echo server on a sharded pool of two reactors. It stops by itself after
//! the given time and prints its counters.

use std::net::SocketAddr;
use std::time::Duration;

use ark_reactor::IoModel;
use ark_tcp::{CloseReason, TcpHandler, TcpServer, TcpSession};

struct Echo;

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        if let Err(e) = session.send(message) {
            eprintln!("session {}: {e}; closing", session.id());
            session.close();
        }
    }

    fn on_close(&mut self, reason: &CloseReason) {
        if !matches!(reason, CloseReason::PeerClosed | CloseReason::Stopped) {
            eprintln!("session closed: {reason}");
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:7878".into())
        .parse()?;
    let seconds: u64 = args.next().map_or(Ok(30), |s| s.parse())?;
    let server = TcpServer::builder()
        .bind(addr)
        .io_model(IoModel::Sharded { reactors: 2 })
        .start(|_peer| Echo)?;
    println!("echo server on {} for {seconds} s", server.local_addr());
    std::thread::sleep(Duration::from_secs(seconds));
    let stats = server.stats();
    server.stop().wait()?;
    println!(
        "sessions {}, frames in {}, bytes in {}, reads {}, writes {}",
        stats.sessions_total, stats.frames_in, stats.bytes_in, stats.reads, stats.writes
    );
    Ok(())
}
