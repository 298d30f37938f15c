//! `peer-tokio-loopback`: the loopback echo benchmark written as the fastest tokio program we could, the
//! peer ark's figures are compared with in the same run.
//!
//! ```text
//! peer-tokio-loopback --protocol tcp --payload 1024 --clients 16 --window 16
//! ```
//!
//! It takes `ark-loopback`'s flags and prints the same JSON record (`implementation:
//! "tokio"`): the run (phases, messages, validation, round-trip timing, record) is
//! `ark_loopback::run::measure`, shared with ark; only the stack differs. They are the
//! fastest tokio program measured on this workload (bench-harness/README.md logs what else
//! was tried and what it gave):
//!
//! * IO models: `--io-model shared --io-threads 1` is a current-thread runtime, `shared N` a
//!   multi-thread runtime with N workers, `sharded N` N current-thread runtimes, one thread
//!   each, with connections and clients spread round-robin over them, `owned` a
//!   current-thread runtime per endpoint. Runtimes enable IO only.
//! * TCP ([`tcp`]) and WebSocket ([`ws`]) on one connection loop ([`stream`]): readiness-driven
//!   `try_read`/`try_write` into a 64 KiB receive buffer decoded in place, reads until a short
//!   read drains the socket, every reply to a read in one write; the TCP server writes whole
//!   frames straight from the receive buffer. WebSocket framing is hand-written
//!   (`ark_peers::peer_ws`: unmasking in place, a fresh random mask per client frame);
//!   `PEER_TOKIO_WS=tungstenite`, `tokio-websockets` or `fastwebsockets` runs that library
//!   instead ([`ws_lib`], [`ws_fast`]).
//! * tcps and wss ([`tls`]): tokio-rustls with the same rustls configs as ark (`ring`
//!   provider, TLS 1.2/1.3, resumption on), one task per connection polling the `TlsStream`
//!   for reads and writes (no split halves), every reply to a read handed to rustls at once
//!   and flushed; WebSocket framing hand-written as above.
//! * http and https ([`http`]): the server is hyper 1.x (http1, keep-alive, `pipeline_flush`),
//!   the client a hand-written pipelining one (hyper's client cannot keep a window in flight).
//! * UDP ([`udp`]): `try_recv_from`/`try_send_to` loops that drain the socket on every wake,
//!   one `SO_REUSEPORT` socket per runtime when sharded, a connected socket per client;
//!   tokio has no batched datagram calls, so the record says `udp_batch: false`.
//!
//! `TCP_NODELAY` on both ends. The clients do the same work per message as ark's: fill and
//! check every payload byte, time every round trip (`ark_loopback::clients::Core`).
//! `syscalls_per_message` is not measured (null): tokio keeps no syscall counters.

mod http;
mod stack;
mod stream;
mod tcp;
mod tls;
mod udp;
mod ws;
mod ws_fast;
mod ws_lib;

use std::process::ExitCode;

use ark_testkit::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    ark_peers::peer_main::<stack::TokioStack>(
        "peer-tokio-loopback",
        "Loopback echo benchmark as a plain tokio program (ark-loopback's flags and record)",
    )
}
