//! Run with `cargo run --release -p ark-udp --example udp_echo_server -- 127.0.0.1:7879 30 2`
//! (address, seconds to run, shards; defaults as shown). Pair it with the `udp_echo_client`
//! example.
//!
//! A UDP echo server with one `SO_REUSEPORT` socket per shard and batched syscalls. It stops by
//! itself after the given time and prints its counters and the kernel's loss counters.

use std::net::SocketAddr;
use std::time::Duration;

use ark_reactor::IoModel;
use ark_udp::{NetCounters, UdpHandler, UdpServer, UdpSession};

struct Echo;

impl UdpHandler for Echo {
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        // A full send queue drops the echo: UDP promises no delivery, and it is counted.
        let _ = session.send(datagram);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:7879".into())
        .parse()?;
    let seconds: u64 = args.next().map_or(Ok(30), |s| s.parse())?;
    let shards: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let before = NetCounters::snapshot();
    let server = UdpServer::builder()
        .bind(addr)
        .max_datagram(2048)
        .io_model(IoModel::Sharded { reactors: shards })
        .start(|_peer| Echo)?;
    println!(
        "UDP echo on {} ({shards} shards) for {seconds} s",
        server.local_addr()
    );
    std::thread::sleep(Duration::from_secs(seconds));
    let stats = server.stats();
    server.stop().wait()?;
    println!(
        "sessions {}, datagrams in {} / sent {}, receive syscalls {}, send syscalls {}, truncated {}",
        stats.sessions_opened,
        stats.datagrams_in,
        stats.datagrams_sent,
        stats.receives,
        stats.sends,
        stats.truncated
    );
    if let (Some(before), Some(after)) = (before, NetCounters::snapshot()) {
        let loss = after.since(&before);
        println!(
            "kernel: RcvbufErrors +{}, InErrors +{}",
            loss.udp_rcvbuf_errors, loss.udp_in_errors
        );
    }
    Ok(())
}
