//! # ark-udp
//!
//! The UDP transport of the ark networking library, on [`ark_reactor`]:
//!
//! * [`UdpServer`]: sessions keyed by the peer's address, opened by its first datagram and
//!   closed when idle; in the sharded IO model one `SO_REUSEPORT` socket per shard, so the
//!   kernel spreads peers over shards.
//! * [`UdpClient`]: a connected socket with one session.
//! * [`UdpCast`]: an unconnected socket that sends to and receives from any address
//!   (broadcast and multicast only when enabled).
//! * Batched syscalls: `recvmmsg` receives up to `batch` datagrams per call and the replies
//!   queued during a readiness turn leave with `sendmmsg`; batching can be turned off to
//!   compare.
//! * Offloads (Linux): datagrams of one size to one peer leave as one GSO message
//!   (`UDP_SEGMENT`, or explicitly with [`UdpSession::send_train`]), and GRO-coalesced
//!   receives are split back into datagrams ([`UdpConfig::gso`], [`UdpConfig::gro`],
//!   [`UdpOffload`]).
//! * Sizes and loss: sends over the UDP maximum are a typed error ([`SendError::TooLarge`]),
//!   truncated receives are detected (`MSG_TRUNC`), counted and never delivered as whole,
//!   empty datagrams are messages, and [`NetCounters`] reads the kernel's drop counters.
//! * Rate limits per session and for a server's total ([`RateLimits`], in payload bytes): a
//!   server drops datagrams over a session's read allowance, a client pauses reading, sends
//!   over the write allowance wait; [`UdpSessionStats`] gives each session's rates each way
//!   and its send queue's delay (docs/udp.md, "Rate limits").
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use ark_udp::{UdpClient, UdpHandler, UdpServer, UdpSession};
//!
//! struct Echo;
//! impl UdpHandler for Echo {
//!     fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
//!         let _ = session.send(datagram);
//!     }
//! }
//!
//! struct Ask(mpsc::Sender<Vec<u8>>);
//! impl UdpHandler for Ask {
//!     fn on_open(&mut self, session: &mut UdpSession<'_>) {
//!         session.send(b"hello").unwrap();
//!     }
//!     fn on_message(&mut self, _: &mut UdpSession<'_>, datagram: &[u8]) {
//!         self.0.send(datagram.to_vec()).unwrap();
//!     }
//! }
//!
//! let server = UdpServer::builder().bind("127.0.0.1:0").start(|_peer| Echo)?;
//! let (tx, rx) = mpsc::channel();
//! let client = UdpClient::builder().connect(server.local_addr(), Ask(tx))?;
//! assert_eq!(rx.recv_timeout(Duration::from_secs(10))?, b"hello");
//! client.stop().wait()?;
//! server.stop().wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod cast;
mod client;
mod config;
mod driver;
mod error;
mod handle;
mod handler;
mod limits;
mod proto;
mod server;
mod snmp;
mod stats;

pub use ark_reactor::{
    Answer, AnswerDropped, IoModel, RateLimit, RateLimitError, RateLimits, ReactorConfig,
    ReactorPool, Runtime, SocketBuffers, Stopping, TimerId,
};
pub use cast::{UdpCast, UdpCastBuilder, UdpCastHandle};
pub use client::{UdpClient, UdpClientBuilder, UdpClientHandle, UdpSocketHandle, UdpWaker};
pub use config::{GRO_MIN_DATAGRAM, UdpConfig, UdpOffload};
pub use driver::steering::{Steering, bind_for_shard, steer_by_peer_port};
pub use error::{CloseReason, DatagramError, SendError};
pub use handle::UdpSessionHandle;
pub use handler::{UdpHandler, UdpSession};
pub use limits::{
    MAX_PAYLOAD_V4, MAX_PAYLOAD_V6, max_payload, unfragmented_payload_v4, unfragmented_payload_v6,
};
pub use server::{UdpServer, UdpServerBuilder, UdpServerHandle};
pub use snmp::NetCounters;
pub use stats::{UdpSessionStats, UdpStats};
