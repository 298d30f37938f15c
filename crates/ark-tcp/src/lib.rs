//! # ark-tcp
//!
//! TCP servers, clients and sessions for the ark networking library, on
//! [`ark_reactor`] and [`ark_frame`].
//!
//! * **Structure.** Each session is a sans-IO core — framing, send queue, one phase enum,
//!   deadlines and the handler's callbacks, with bytes and time in and bytes and the next
//!   deadline out — driven by a thin reactor driver (read → feed → deliver → write). The same
//!   core runs in memory in a [`Simulator`], for deterministic tests of a handler.
//! * **Receive path.** Reads go into the reactor's shared 64 KiB scratch buffer, several per
//!   turn within the reactor's budget; every whole frame is handed to
//!   [`TcpHandler::on_message`] straight from it; only a trailing partial frame is copied into
//!   the session's receive buffer, allocated lazily, grown with the bytes that arrive (never
//!   with an announced length) and released when the session goes idle. A large pending frame
//!   is read directly into the receive buffer.
//! * **Send path.** [`TcpSession::send`] appends header and payload to the session's send queue;
//!   the queue is written with one `write` per turn, so many messages share a syscall. Sends
//!   never block: past the queue limit they fail with [`SendError::Full`] and
//!   [`TcpHandler::on_writable`] follows when the queue drains. While answers pile up past the
//!   high watermark the session stops reading (backpressure to the peer).
//! * **Timers and close.** [`TcpSession::set_timer`] starts a timer ([`TcpHandler::on_timer`]).
//!   Graceful close flushes everything queued, shuts down writing and waits for the peer's end
//!   of stream, all within the close timeout; a peer that ends its stream still gets every
//!   answer first. Bad frames, resets, EOF mid-frame, stalled frames or writes, idle and connect
//!   timeouts end only their own session, each with its own [`CloseReason`]. `docs/tcp.md`
//!   lists every bound a hostile peer meets.
//! * **TLS (`tcps`; cargo feature `tls`, off by default).** [`TcpServerBuilder::tls`] and [`TcpClientBuilder::tls`] put an
//!   `ark_tls::TlsSession` (rustls) between the socket and the session core: same framing,
//!   handles, timers and backpressure; the session opens after the handshake
//!   ([`TcpSession::tls`]); a bad handshake ends only its connection with [`CloseReason::Tls`]
//!   saying which check failed; a graceful close sends `close_notify`.
//! * **Unix-domain sockets (Unix).** [`TcpServerBuilder::start_unix`] and
//!   [`TcpClientBuilder::connect_unix`] run the same sessions — framing, TLS, handles, timers,
//!   limits, reconnect, stop — over a socket file between processes of one host; the driver
//!   owns either kind of stream behind one small trait.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use ark_tcp::{TcpSession, TcpClient, TcpHandler, TcpServer};
//!
//! struct Echo;
//! impl TcpHandler for Echo {
//!     fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
//!         let _ = session.send(message);
//!     }
//! }
//!
//! struct Ask(mpsc::Sender<Vec<u8>>);
//! impl TcpHandler for Ask {
//!     fn on_open(&mut self, session: &mut TcpSession<'_>) {
//!         session.send(b"hello").unwrap();
//!     }
//!     fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
//!         self.0.send(message.to_vec()).unwrap();
//!         session.close();
//!     }
//! }
//!
//! let server = TcpServer::builder()
//!     .bind("127.0.0.1:0")
//!     .start(|_peer| Echo)?;
//! let (tx, rx) = mpsc::channel();
//! let client = TcpClient::builder().connect(server.local_addr(), Ask(tx))?;
//! assert_eq!(rx.recv_timeout(Duration::from_secs(10))?, b"hello");
//! client.stop().wait()?;
//! server.stop().wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs: every feature-gated item is marked with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod config;
mod driver;
mod encode;
mod error;
mod handle;
mod handler;
mod owner;
mod proto;
mod server;
mod stats;
mod trace;

/// The framing crate, whole (its `Decoder`/`Encoder` traits, `FrameReader`, `RecvBuf`).
pub use ark_frame;
/// The framing codecs a session takes ([`TcpServerBuilder::framing`]): a newline chat needs
/// no other crate (`Delimiter::new(b"\n")`).
pub use ark_frame::{ArkDgram, Delimiter, Endian, ExactSize, LengthPrefix, PrefixWidth, Raw};
pub use ark_reactor::{
    Answer, AnswerDropped, IoModel, RateLimit, RateLimitError, RateLimits, ReactorConfig,
    ReactorPool, Replies, Runtime, SocketBuffers, StopReport, Stopping, TimerId,
};
pub use client::{Reconnect, TcpClient, TcpClientBuilder, TcpClientHandle};
pub use config::{AcceptLimits, Keepalive, TcpConfig};
pub use error::{CloseReason, SendError};
pub use handle::TcpSessionHandle;
pub use handler::{TcpHandler, TcpSession};
pub use proto::core::Framing;
pub use proto::sim::Simulator;
pub use server::{TcpServer, TcpServerBuilder, TcpServerHandle};
pub use stats::{TcpSessionStats, TcpStats};

/// The README's examples, compiled as doctests so the README cannot drift from the code.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
