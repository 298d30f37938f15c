//! # ark-rudp
//!
//! Reliable UDP for the ark networking library: sessions over [`ark_udp`] sockets with
//!
//! * a handshake that keeps no server state and never answers with more bytes than it got
//!   until the client proves its address (a stateless HMAC cookie; the HELLO is padded to
//!   1200 bytes; replayed HELLOs make no second session);
//! * encrypted, authenticated sessions by default: a Noise `NK` key exchange in the
//!   handshake (forward secrecy; the server proves it holds the secret of the public key the
//!   client pinned, [`RudpServerKey`]; an optional connect token the server checks), then
//!   every datagram AEAD-protected (AES-128-GCM, the packet number as nonce, the header
//!   authenticated, keys updated every 2^22 datagrams), so neither an off-path nor an
//!   on-path attacker can read, forge, close, feed or keep alive a session (what does not
//!   open is counted and dropped unread); a replay window drops what was seen before.
//!   Plaintext with per-session tokens (off-path attackers kept out, on-path ones not) is an
//!   explicit opt-in for trusted networks ([`RudpServerBuilder::plaintext`]);
//!   `max_sessions` and `max_sessions_per_ip` on a server, `max_message` on both ends'
//!   receive side, a zero-window deadline;
//! * graceful closes and stops: what was accepted is delivered (retransmitted for at most
//!   [`RudpConfig::close_timeout`], then what was cut is reported), the CLOSE repeated until
//!   answered; handles' sends refuse at once (`Full`, `TooLarge`, `Closed`, counted) and
//!   `flush()` says when everything sent was acknowledged;
//! * reliable ordered messages, reliable unordered ones and unreliable datagrams on the same
//!   session; fragmentation to [`RudpConfig::mtu`] (default 1200 B);
//! * lanes ([`Lane`], [`RudpConfig::lanes`]): independent orders, each reliable-ordered,
//!   reliable-unordered or unreliable-sequenced (newest wins), with a priority and a weight,
//!   interleaved fragment by fragment — a 1 MiB message on one lane does not hold back a
//!   small one on another, at the sender or at the receiver;
//! * selective acknowledgement (a cumulative point and a 64-bit map on every datagram),
//!   RTT estimation and the retransmission timeout of RFC 6298, fast retransmit (packet and
//!   time thresholds), NewReno congestion control with a floor (see [`Congestion`]), the
//!   peer's receive window as flow control, keep-alives and dead-peer timeouts;
//! * rate limits per session and per server ([`RateLimits`]): writes paced, reads limited
//!   through the window advertised to the peer (nothing it sent is dropped); bytes a second
//!   each way and the send queue's delay in [`RudpStats`];
//! * forward error correction with Reed–Solomon groups ([`Fec`]): fixed `k + m`, or adaptive
//!   parity from the loss measured; ARQ repairs what FEC cannot.
//!
//! The protocol logic is a sans-IO state machine ([`Connection`]; [`Endpoint`], one socket's
//! connections with the [`Listener`]'s handshake, limits and replacement) that takes
//! datagrams and time and gives datagrams, messages and events; [`RudpServer`] and
//! [`RudpClient`] drive it on ark-udp with the handler, handle and timer API of the other
//! transports.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use ark_rudp::{RudpClient, RudpHandler, RudpServer, RudpSession};
//!
//! struct Echo;
//! impl RudpHandler for Echo {
//!     fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
//!         let _ = session.send(message);
//!     }
//! }
//!
//! struct Ask(mpsc::Sender<Vec<u8>>);
//! impl RudpHandler for Ask {
//!     fn on_open(&mut self, session: &mut RudpSession<'_>) {
//!         session.send(b"hello").unwrap();
//!     }
//!     fn on_message(&mut self, _: &mut RudpSession<'_>, message: &[u8]) {
//!         self.0.send(message.to_vec()).unwrap();
//!     }
//! }
//!
//! // A key pair made at start; a deployed server loads its own (`RudpServerBuilder::key`).
//! let server = RudpServer::builder().bind("127.0.0.1:0").start(|_peer| Echo)?;
//! let server_key = server.public_key().expect("encrypted by default");
//! let (tx, rx) = mpsc::channel();
//! let client = RudpClient::builder()
//!     .server_key(server_key)
//!     .connect(server.local_addr(), Ask(tx))?;
//! assert_eq!(rx.recv_timeout(Duration::from_secs(10))?, b"hello");
//! client.stop().wait()?;
//! server.stop().wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs: every feature-gated item is marked with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod api;
mod config;
mod driver;
mod handler;
mod proto;

pub use api::{
    RudpClient, RudpClientBuilder, RudpClientHandle, RudpServer, RudpServerBuilder,
    RudpServerHandle,
};
pub use ark_reactor::{
    IoModel, RateLimit, RateLimitError, RateLimits, ReactorConfig, ReactorPool, Runtime,
    SocketBuffers, StopReport, Stopping, TimerId,
};
pub use config::RudpConfig;
pub use handler::{RudpHandler, RudpSession, RudpSessionHandle};
pub use proto::congestion::Congestion;
pub use proto::connection::{
    CloseReason, Connection, Delivery, Event, RateGroup, RudpStats, SendError,
};
pub use proto::crypto::HandshakeError;
pub use proto::endpoint::{Endpoint, EndpointEntry, Io, Replacement, Routed};
pub use proto::fec::Fec;
pub use proto::lane::{Lane, LaneMode, MAX_LANES};
pub use proto::listener::{Incoming, Listener, Refusal, Timestamp};
pub use proto::packet::PacketError;
pub use proto::protection::{
    ClientProtection, MAX_CONNECT_TOKEN, RudpPublicKey, RudpServerKey, ServerProtection, TokenCheck,
};
