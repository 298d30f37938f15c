//! # ark-reactor
//!
//! The readiness reactor every ark transport runs on: ark's counterpart of an Asio
//! `io_context` plus arknet's IO topologies, built on [mio].
//!
//! * [`Reactor`]: a `mio::Poll`, its events and a slab of sources, each with a [`Handler`] that
//!   receives readiness (edge-triggered, drained until `WouldBlock` within a fairness
//!   [`Budget`]); one-shot and periodic timers in a heap (O(log n)); closures posted from other
//!   threads through a [`ReactorHandle`] (a `mio::Waker` plus a crossbeam-channel queue);
//!   graceful stop; a scratch read buffer lent to the handler that is reading; [`Counters`] of
//!   turns, events, wakeups and the syscalls transports report, kept per thread in a
//!   [`Striped`] value (one copy per thread on a cache line of its own, summed when read).
//! * [`ReactorPool`]: runs an [`IoModel`] — `Shared { threads }` (one loop served by
//!   `threads` threads in turn, each polling or running handlers, never two at once per
//!   source) or `Sharded { reactors }` (independent
//!   loops, one thread each) — places new sources round-robin or on the least loaded reactor,
//!   and stops and joins everything.
//! * [`Mailbox`]: how other threads reach a source's handler (requests under a lock, one
//!   wake per batch, a lock-free look when nothing waits) — every transport's session
//!   handles post through one.
//! * [`Answer`]: a value another thread gives once, waited for on a thread or awaited in
//!   async code on any runtime (a `Future`); [`Stopping`] is one.
//!   [`Replies`] matches a session's replies to requests in order.
//! * [`IO_PATH`]: which IO path this build runs. mio is portable (epoll, kqueue, Windows'
//!   IOCP): every ark transport runs on its portable API everywhere, and on Linux a few fast
//!   paths sit beside it (here: a timerfd for far timer deadlines; in ark-udp: `recvmmsg`/
//!   `sendmmsg` and reuseport steering). Building with `ARK_PORTABLE=1` in the environment
//!   (or `RUSTFLAGS="--cfg ark_portable"`) makes Linux run the portable path, so it is tested
//!   where the fast paths are.
//!
//! ```
//! use std::time::Duration;
//! use ark_reactor::{Reactor, ReactorConfig};
//!
//! let mut reactor = Reactor::new(ReactorConfig::default())?;
//! let handle = reactor.handle();
//! // Another thread posts work; the reactor runs it on its own thread, then stops.
//! let poster = std::thread::spawn(move || {
//!     handle.post(|reactor| {
//!         reactor.add_timer(Duration::from_millis(5), None, |reactor| reactor.stop());
//!     });
//! });
//! reactor.run()?;
//! poster.join().unwrap();
//! assert!(reactor.stats().turns >= 1);
//! # Ok::<(), std::io::Error>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs: every feature-gated item is marked with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod answer;
mod buffers;
mod config;
mod counters;
mod deadlines;
#[cfg(test)]
mod delivery_tests;
mod far_timer;
mod handler;
mod ids;
mod lending;
mod lifecycle;
mod log_limit;
mod mailbox;
mod pool;
mod rate;
mod reactor;
mod shared;
mod slot;
mod source;
mod stats;
mod striped;
mod timer;
mod turn;

/// The mio version ark-reactor's API takes (`mio::Interest`, `mio::event::Source`, ...).
pub use mio;

pub use answer::{Answer, AnswerDropped, Answerer, Replies, answer};
pub use buffers::SocketBuffers;
pub use config::ReactorConfig;
pub use deadlines::{Deadlines, TimerSlot};
pub use handler::{Budget, Context, Handler, ReactorHandle};
pub use ids::{SourceId, TimerId};
pub use lifecycle::{Lifecycle, Member, Phase, StopReport, Stopping};
pub use log_limit::{LOG_BURST, LOG_INTERVAL, LogLimit};
pub use mailbox::{Mailbox, Wake};
pub use pool::{IoModel, Placement, ReactorPool, Runtime, SourceRef, release_pool, resolve};
pub use rate::{
    Direction, EachWay, GroupBucket, GroupLimits, Pace, RateLimit, RateLimitError, RateLimits,
    RateWindow, TokenBucket, queue_delay,
};
pub use reactor::Reactor;
pub use source::{CloseReason, Ready, Turn};
pub use stats::{CounterSet, Counters, Stats};
pub use striped::Striped;

/// Whether a short read or write means the socket is drained, so a transport may stop there
/// and wait for the next readiness edge: Linux's edge-triggered epoll raises a new edge for
/// data or room that comes after any read or write, short or not. mio's portable contract
/// ("Draining readiness" in `mio::Poll`'s documentation) promises another event only after an
/// operation returned `WouldBlock` — what Windows' readiness emulation needs — so everywhere
/// else, and on the forced portable path on Linux (`ark_portable`, so Linux CI runs the
/// strictest contract), transports read and write until `WouldBlock`. `true` saves one
/// syscall per read on the fast path.
pub const SHORT_IO_DRAINS: bool = cfg!(all(target_os = "linux", not(ark_portable)));

/// Which IO path this build of ark runs: `"linux"` (mio plus Linux's fast paths) or
/// `"portable"` (mio's portable API alone: macOS, Windows, the BSDs, and Linux built with
/// `--cfg ark_portable`). ark-loopback puts it in every record as `io_path`.
pub const IO_PATH: &str = if cfg!(all(target_os = "linux", not(ark_portable))) {
    "linux"
} else {
    "portable"
};
