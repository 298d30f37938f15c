//! `peer-tokio-loopback`: the loopback echo benchmark written as a plain tokio program, the
//! peer ark's figures are compared with in the same run.
//!
//! ```text
//! peer-tokio-loopback --protocol tcp --payload 1024 --clients 16 --window 16
//! ```
//!
//! It takes `ark-loopback`'s flags and prints the same JSON record (`implementation:
//! "tokio"`): the run (phases, messages, validation, round-trip timing, record) is
//! `ark_loopback::run::measure`, shared with ark; only the endpoints differ. They are what a
//! competent tokio user would write:
//!
//! * IO models: `--io-model shared --io-threads 1` is a current-thread runtime, `shared N` a
//!   multi-thread runtime with N workers, `sharded N` N current-thread runtimes, one thread
//!   each, with connections and clients spread round-robin over them.
//! * TCP: `Framed`/`FramedRead`/`FramedWrite` with tokio-util's `LengthDelimitedCodec` (4-byte
//!   big-endian prefix, as ark's), `TCP_NODELAY` on both ends; the server is
//!   `FramedRead.map_ok(freeze).forward(FramedWrite)` over `into_split` halves, which echoes
//!   without copying the payload and flushes when no more frames are ready.
//! * WebSocket: tokio-tungstenite `accept_async` / `client_async` over the same sockets; the
//!   server forwards binary messages back (tokio-tungstenite's echo-server shape).
//! * UDP: `tokio::net::UdpSocket`, `recv_from` / `send_to` on the server, a connected socket
//!   per client, socket buffers set as the flags ask (via socket2); tokio has no batched
//!   datagram calls, so the record says `udp_batch: false`.
//!
//! Clients feed their window into the sink and flush only when no echo is ready, the same
//! batching `forward` does. `syscalls_per_message` is not measured (null): tokio keeps no
//! syscall counters.

mod endpoints;
mod stream;
mod tcp;
mod udp;
mod ws;
mod ws_lib;

use std::process::ExitCode;

use ark_loopback::args::Args;
use bench_harness::alloc_counter::{self, CountingAllocator};
use bench_harness::runner::without_repetition;
use clap::{CommandFactory, FromArgMatches};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    let command = Args::command().name("peer-tokio-loopback").about(
        "Loopback echo benchmark as a plain tokio program (ark-loopback's flags and record)",
    );
    let flags = without_repetition(std::env::args().collect());
    let args = match command
        .try_get_matches_from(flags)
        .and_then(|m| Args::from_arg_matches(&m))
    {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    ark_loopback::run::main_for::<endpoints::TokioEndpoints>(
        &args,
        Some(alloc_counter::allocations),
    )
}
