//! # ark-link
//!
//! A link conditioner for tests and benchmarks: lossy, slow, jittery, reordering links made
//! reproducible on any machine, without root, `tc netem` or a kernel module.
//!
//! * [`Conditioner`] — one direction of a link, sans-IO: packets and time in, packets out at
//!   their release times. Independent loss and bursty loss ([`GilbertElliott`]), a fixed delay
//!   with jitter (order kept), reordering (a packet held back to be overtaken), duplication
//!   and a rate limit with a bounded queue, all drawn from one seeded generator: the same
//!   seed and the same packets at the same times give the same decisions. [`LinkCounters`]
//!   say what it did.
//! * [`UdpRelay`] — a UDP relay on loopback between clients and a server, a conditioner in
//!   each direction, on a thread of its own; [`RelayCounters`] at the end.
//! * [`UdpForwarder`] — one socket between one client and a server, for attack tests: both
//!   ends see its address as their peer's, so what it [injects](UdpForwarder::inject) carries
//!   the peer's own address (an off-path attacker's spoofed packet); a filter may drop
//!   datagrams either way.
//! * [`TcpRelay`] — the same for TCP connections: delay, jitter and rate (a stream cannot
//!   lose, reorder or duplicate bytes: TCP repairs that below the application).
//!
//! ```
//! use ark_link::{Conditioner, LinkConfig};
//! use std::time::{Duration, Instant};
//!
//! let lossy = LinkConfig { loss: 0.2, delay: Duration::from_millis(5), seed: 7, ..LinkConfig::default() };
//! let run = |config: &LinkConfig| {
//!     let mut link = Conditioner::new(config.clone());
//!     let start = Instant::now();
//!     for i in 0..1000u32 {
//!         link.offer(start + Duration::from_micros(u64::from(i)), i.to_be_bytes().to_vec());
//!     }
//!     let mut arrived = Vec::new();
//!     while let Some(packet) = link.poll(start + Duration::from_secs(1)) {
//!         arrived.push(packet);
//!     }
//!     (arrived, link.counters())
//! };
//! let (first, counters) = run(&lossy);
//! assert_eq!(run(&lossy).0, first, "the same seed decides the same");
//! assert_eq!(counters.delivered as usize, first.len());
//! assert_eq!(counters.offered - counters.dropped(), counters.delivered);
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod driver;
mod proto;

pub use driver::forwarder::{ForwarderCounters, Towards, UdpForwarder};
pub use driver::relay::{MAX_CLIENTS, UdpRelay};
pub use driver::tcp_relay::{MAX_CONNECTIONS, StreamLinkError, TcpRelay};
pub use proto::conditioner::{
    Conditioner, GilbertElliott, LinkConfig, LinkCounters, RelayCounters,
};

/// The README's examples, compiled as doctests so the README cannot drift from the code.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
