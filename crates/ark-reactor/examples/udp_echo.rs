//! Run with `cargo run --release -p ark-reactor --example udp_echo`.
//!
//! A UDP echo source on 127.0.0.1 served by a two-reactor sharded pool, and a client thread that
//! sends 1,000 datagrams and waits for each echo. Everything stops by itself.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use ark_reactor::{Context, Handler, IoModel, ReactorConfig, ReactorPool, Ready, Turn};
use mio::net::UdpSocket;

/// Echoes every datagram back to its sender.
struct Echo {
    socket: UdpSocket,
}

impl Handler for Echo {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        if !ready.is_readable() {
            return Turn::Done;
        }
        for _ in 0..cx.budget().operations {
            let received = self.socket.recv_from(cx.scratch());
            cx.counters().add_receives(1); // every syscall counts, WouldBlock included
            let (n, peer): (usize, SocketAddr) = match received {
                Ok(received) => received,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Done,
                Err(e) => {
                    eprintln!("recv_from: {e}");
                    return Turn::Done;
                }
            };
            // A reply that would block is dropped: UDP makes no delivery promise.
            let _ = self.socket.send_to(&cx.scratch()[..n], peer);
            cx.counters().add_sends(1);
        }
        Turn::Again
    }
}

fn main() -> io::Result<()> {
    let pool = ReactorPool::start(IoModel::Sharded { reactors: 2 }, ReactorConfig::default())?;
    let socket = UdpSocket::bind("127.0.0.1:0".parse().expect("valid address"))?;
    let server = socket.local_addr()?;
    pool.insert(Box::new(Echo { socket }), mio::Interest::READABLE)
        .expect("the pool is running");

    let client = std::net::UdpSocket::bind("127.0.0.1:0")?;
    client.set_read_timeout(Some(Duration::from_secs(1)))?;
    let mut echoed = 0;
    let mut buf = [0u8; 64];
    for i in 0..1000u32 {
        client.send_to(&i.to_be_bytes(), server)?;
        if let Ok(n) = client.recv(&mut buf) {
            echoed += usize::from(buf[..n] == i.to_be_bytes());
        }
    }
    let stats = pool.stats();
    pool.stop()?;
    println!(
        "{echoed}/1000 echoes; reactor turns {}, receive syscalls {}, send syscalls {}",
        stats.turns, stats.receives, stats.sends
    );
    Ok(())
}
