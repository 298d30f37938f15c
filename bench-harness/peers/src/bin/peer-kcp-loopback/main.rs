//! `peer-kcp-loopback`: the loopback echo benchmark on KCP (the `kcp` crate, a Rust port of
//! skywind3000's ikcp), the peer ark's reliable UDP (`--protocol rudp`) is compared with.
//!
//! ```text
//! peer-kcp-loopback --protocol rudp --payload 1024 --clients 16 --window 16 --link-loss 0.05
//! PEER_KCP_MODE=default peer-kcp-loopback --protocol rudp ...
//! ```
//!
//! It takes `ark-loopback`'s flags and prints the same JSON record: the run (phases,
//! messages, validation, round-trip timing, the `--link-*` relay, record) is
//! `ark_loopback::run::measure`, shared with ark; only the stack differs. Only `--protocol
//! rudp` runs (anything else is refused as unsupported); `--rudp-fec` is ignored: KCP has
//! no FEC (the record's `rudp.fec` is null).
//!
//! * Modes (`PEER_KCP_MODE`; the record's `implementation` says which): `fast` (default,
//!   `kcp-fast`) is KCP's turbo configuration `nodelay(1, 10, 2, 1)`: minimum RTO 30 ms,
//!   10 ms timer, fast retransmit after 2 later ACKs, no congestion window; `default`
//!   (`kcp-default`) is KCP as `Kcp::new` makes it, `nodelay(0, 100, 0, 0)`: minimum RTO
//!   100 ms, RTO doubling, 100 ms timer, no fast retransmit, congestion window on. Both:
//!   message mode (not stream), MTU 1400 (a 1024-byte payload is one segment), send and
//!   receive windows of twice the segments a client keeps in flight and at least 256 (KCP's
//!   defaults, 32 and 128, would be enough up to `--window 16` but could hold messages back
//!   beyond), one conversation per client (conv = client id + 1).
//! * Driving ([`link`]), the same in both modes, as strong as ark's: each socket is drained
//!   (`recv` until `WouldBlock`) into `input`, every completed message handled, then
//!   `flush()` at once, so data and ACKs leave in the same wake-up instead of at the next
//!   timer tick; `update(now)` runs when `check()` says, and a retransmission due between
//!   two ticks is flushed then. The modes differ only in KCP's protocol parameters.
//! * IO ([`worker`]): nonblocking UDP sockets (socket2, the flags' buffer sizes, as the other
//!   peers) on mio, one poller per IO thread, the poll timeout set by the earliest KCP timer.
//!   `--io-model shared --io-threads 1` (the matrix's) runs the server and every client on
//!   one thread; `shared N` spreads the clients round-robin over N threads, the server on
//!   the first; `sharded N` also gives each thread a `SO_REUSEPORT` server socket; `owned`
//!   gives every endpoint a thread of its own.
//! * Server ([`server`]): one unconnected socket, a KCP object per peer address made by its
//!   first datagram (conv read from it); every message is handed to `Echo::before_echo` and
//!   sent back with `send`; KCP's output writes each datagram with `send_to`.
//! * Clients ([`client`]): a connected socket each; `ark_loopback::clients::Core` fills,
//!   checks (content and exact order) and times every message, as for ark.
//!
//! The record's `rudp` object says the mode, KCP's settings, the data segments sent again
//! (`retransmissions`, by timeout or fast retransmit, both ends, warm-up to drain; counted
//! from the segment numbers KCP writes, as the crate keeps no such counter) and the datagrams
//! the kernel refused. `syscalls_per_message` is not measured (null); there are no batched
//! datagram calls.
//!
//! Tried: driving KCP by its timer alone (`update` every interval, flushing nothing in
//! between, as ikcp's examples do) makes every round trip wait for timer ticks: 16 clients ×
//! 16 in flight without a link gave 15.7 k round trips/s at p50 19 ms (`fast`) and 20/s at
//! p50 600 ms (`default`), against about 60 k/s at p50 4 ms with the flushes above — a
//! measure of the timer, not of the protocol. Flushing after input and after sends is what
//! latency-minded KCP users do (kcp-go with `ackNoDelay` and no write delay).

mod client;
mod link;
mod mode;
mod server;
mod stack;
mod worker;

use std::process::ExitCode;

use ark_testkit::CountingAllocator;
use stack::KcpStack;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const NAME: &str = "peer-kcp-loopback";
const ABOUT: &str = "Loopback echo benchmark on KCP for --protocol rudp (ark-loopback's flags and record; PEER_KCP_MODE=fast|default)";

fn main() -> ExitCode {
    match std::env::var("PEER_KCP_MODE").as_deref() {
        Ok("fast") | Err(std::env::VarError::NotPresent) => {
            ark_peers::peer_main::<KcpStack<mode::Fast>>(NAME, ABOUT)
        }
        Ok("default") => ark_peers::peer_main::<KcpStack<mode::Default>>(NAME, ABOUT),
        Ok(other) => {
            eprintln!("error: PEER_KCP_MODE={other:?}: expected fast or default");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: PEER_KCP_MODE: {e}");
            ExitCode::from(2)
        }
    }
}
