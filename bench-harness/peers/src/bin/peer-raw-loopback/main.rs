//! `peer-raw-loopback`: the loopback echo benchmark on raw syscalls, the floor ark's
//! figures are compared with in the same run.
//!
//! ```text
//! peer-raw-loopback --protocol udp --payload 1024 --clients 16 --window 1
//! ```
//!
//! It takes `ark-loopback`'s flags and prints the same JSON record (`implementation:
//! "raw"`): the run (phases, messages, validation, round-trip timing, record) is
//! `ark_loopback::run::measure`, shared with ark and tokio; only the stack differs. They
//! are the least a program on these syscalls can do, with nothing between it and `libc`:
//!
//! * One edge-triggered epoll instance per loop ([`poller`]). `--io-model shared N`: N
//!   threads wait on one epoll, `EPOLLONESHOT` gives each event to one thread and the
//!   connection is re-armed after it was served; `sharded N`: N loops, one thread each, the
//!   server's connections and the clients spread round-robin; `owned`: a loop per endpoint.
//! * TCP and WebSocket ([`stream`]): per connection a 64 KiB receive buffer, messages decoded
//!   in place; reads until a short read drains the socket; the TCP server writes the whole
//!   frames of a read straight from the receive buffer (`writev` behind bytes still waiting);
//!   every other reply to a read goes out in one write. WebSocket frames are unmasked in
//!   place and client frames get a fresh random mask each (`ark_peers::peer_ws`).
//! * UDP ([`udp`]): `recvmmsg`/`sendmmsg` on preallocated headers, the server echoing up to
//!   32 datagrams from the buffers they arrived in, one `SO_REUSEPORT` socket per loop when
//!   sharded; a client asks only for the echoes still in flight. `--udp-batch off` makes every
//!   batch one datagram.
//!
//! The clients do the same work per message as ark's and tokio's: fill and check every
//! payload byte, time every round trip (`ark_loopback::clients::Core`). Socket syscalls are
//! counted (`syscalls_per_message`).

mod listener;
mod poller;
mod stack;
mod stream;
mod sys;
mod udp;

use std::process::ExitCode;

use ark_testkit::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    ark_peers::peer_main::<stack::RawStack>(
        "peer-raw-loopback",
        "Loopback echo benchmark on raw syscalls (ark-loopback's flags and record)",
    )
}
