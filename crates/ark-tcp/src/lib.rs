//! # ark-tcp
//!
//! TCP servers, clients and sessions for the ark networking library, on
//! [`ark_reactor`] and [`ark_frame`].
//!
//! * **Receive path.** Each readiness turn reads once into the reactor's shared 64 KiB scratch
//!   buffer; every whole frame is handed to [`TcpHandler::on_message`] straight from it; only a
//!   trailing partial frame is copied into the session's receive buffer, allocated lazily and
//!   released when the session goes idle. A large pending frame is read directly into the
//!   receive buffer.
//! * **Send path.** [`Session::send`] appends header and payload to the session's send queue;
//!   the queue is written with one `write` per turn, so many messages share a syscall. Sends
//!   never block: past the queue limit they fail with [`SendError::Full`] and
//!   [`TcpHandler::on_writable`] follows when the queue drains. Above the high watermark the
//!   session stops reading (backpressure to the peer).
//! * **Close.** Graceful close flushes everything queued, shuts down writing and waits for the
//!   peer's end of stream; bad frames, resets, EOF mid-frame, idle and connect timeouts end only
//!   their own session, each with its own [`CloseReason`].
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use ark_tcp::{Session, TcpClient, TcpHandler, TcpServer};
//!
//! struct Echo;
//! impl TcpHandler for Echo {
//!     fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]) {
//!         let _ = session.send(message);
//!     }
//! }
//!
//! struct Ask(mpsc::Sender<Vec<u8>>);
//! impl TcpHandler for Ask {
//!     fn on_open(&mut self, session: &mut Session<'_>) {
//!         session.send(b"hello").unwrap();
//!     }
//!     fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]) {
//!         self.0.send(message.to_vec()).unwrap();
//!         session.close();
//!     }
//! }
//!
//! let server = TcpServer::builder()
//!     .bind("127.0.0.1:0".parse()?)
//!     .start(|_peer| Echo)?;
//! let (tx, rx) = mpsc::channel();
//! let client = TcpClient::builder().connect(server.local_addr(), Ask(tx))?;
//! assert_eq!(rx.recv_timeout(Duration::from_secs(10))?, b"hello");
//! client.stop()?;
//! server.stop()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod client;
mod config;
mod core;
mod driver;
mod owner;
mod server;
mod session;
mod sim;
mod stats;

pub use ark_reactor::Runtime;
pub use client::{Reconnect, TcpClient, TcpClientBuilder, TcpClientHandle};
pub use config::{Keepalive, SessionConfig};
pub use core::Framing;
pub use server::{TcpServer, TcpServerBuilder, TcpServerHandle};
pub use session::{CloseReason, SendError, Session, TcpHandler};
pub use sim::Simulator;
pub use stats::TcpStats;
