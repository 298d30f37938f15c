//! # ark-ws
//!
//! WebSocket servers and clients for the ark networking library: [tungstenite] speaks the
//! protocol, ark-tcp's sessions do the IO on ark's reactor. tungstenite reads from and writes
//! to an in-memory stream, so its handshake and reads resume across `WouldBlock` naturally, its
//! writes never block, and everything a turn produced — replies, automatic pongs, close frames —
//! leaves in one write per turn. Whole data frames skip it: ark-ws unmasks them in place and
//! lends them to [`WsHandler::on_data`] (by default handed on to `on_message` as an owned
//! [`Message`], without a copy), and frames sent data straight into the TCP send queue; control
//! frames, fragments and anything unusual go to tungstenite whole.
//!
//! * Small idle memory: tungstenite's read buffer is 4 KiB here (its default 128 KiB costs that
//!   much per idle session), and the in-memory buffers are released when a session is idle.
//! * Bad input closes only its session: a bad upgrade gets an HTTP error response; invalid
//!   UTF-8 closes with 1007, an oversized message with 1009, a protocol violation with 1002.
//! * `wss` (cargo feature `tls`, off by default): [`WsServerBuilder::tls`] serves TLS (ark-tls on rustls) before the upgrade;
//!   `wss://` URLs work on the client, verified against [`WsClientBuilder::tls`]'s roots or
//!   the system's CAs. [`WsSession::tls`] shows what was negotiated.
//! * HTTP and WebSocket on one port (cargo feature `http`): an ark-http route calls `upgrade`,
//!   which answers `101` and hands the connection to a WebSocket session; [`WsUpgrade`] does
//!   the same from a request's parts for any server that can hand a connection over.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use ark_ws::{Message, UpgradeRequest, WsClient, WsHandler, WsServer, WsSession};
//!
//! struct Echo;
//! impl WsHandler for Echo {
//!     fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
//!         match message {
//!             Message::Text(text) => { let _ = session.send_text(&text); }
//!             // The received message goes back as it is (framed with one copy).
//!             Message::Binary(data) => { let _ = session.send(Message::Binary(data)); }
//!             _ => {}
//!         }
//!     }
//! }
//!
//! struct Hello(mpsc::Sender<String>);
//! impl WsHandler for Hello {
//!     fn on_open(&mut self, session: &mut WsSession<'_>, _: &UpgradeRequest) {
//!         session.send_text("hello").unwrap();
//!     }
//!     fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
//!         self.0.send(message.to_text().unwrap().to_string()).unwrap();
//!         session.close(ark_ws::CloseCode::NORMAL, "done");
//!     }
//! }
//!
//! let server = WsServer::builder().bind("127.0.0.1:0").start(|_| Echo)?;
//! let (tx, rx) = mpsc::channel();
//! let url = format!("ws://{}/", server.local_addr());
//! let client = WsClient::builder().connect(&url, Hello(tx))?;
//! assert_eq!(rx.recv_timeout(Duration::from_secs(10))?, "hello");
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
mod error;
mod handle;
mod handler;
mod http_upgrade;
mod proto;
mod server;
mod stats;

/// Entry points for the fuzz targets (`crates/ark-ws/fuzz`); not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::{WsConfig, WsHandler};

    /// The server side of one WebSocket connection as the ark-tcp handler the server runs,
    /// and the TCP session settings it runs with: drive it with `ark_tcp::Simulator`.
    pub fn server<H: WsHandler>(
        config: WsConfig,
        handler: H,
    ) -> (impl ark_tcp::TcpHandler, ark_tcp::TcpConfig) {
        let session = config.session_config();
        (
            crate::driver::conn::WsConn::server(
                crate::driver::conn::WsOwner::of(config),
                handler,
                None,
            ),
            session,
        )
    }

    /// The client side of one WebSocket connection for `url` (`ws://host/path`), as
    /// [`server`] gives the server side.
    ///
    /// # Errors
    /// `url` is not a WebSocket URL.
    pub fn client<H: WsHandler>(
        config: WsConfig,
        url: &str,
        handler: H,
    ) -> Result<(impl ark_tcp::TcpHandler, ark_tcp::TcpConfig), tungstenite::Error> {
        use tungstenite::client::IntoClientRequest;
        let request = url.into_client_request()?;
        let session = config.session_config();
        let current = crate::handle::CurrentSession::new(crate::handle::WsShared::new(
            config.write_buffer_limit,
        ));
        let client_of = crate::driver::conn::ClientOf {
            current,
            request,
            final_status: crate::refusal_is_final,
        };
        let owner = crate::driver::conn::WsOwner::of(config);
        let conn = crate::driver::conn::WsConn::client(owner, handler, client_of);
        Ok((conn, session))
    }
}

pub use ark_reactor::{
    IoModel, RateLimit, RateLimitError, RateLimits, ReactorConfig, ReactorPool, Runtime,
    StopReport, Stopping, TimerId,
};
pub use ark_tcp::{AcceptLimits, Keepalive, Reconnect};
pub use client::{WsClient, WsClientBuilder, WsClientHandle, refusal_is_final};
pub use config::{UpgradeHook, WsConfig};
pub use error::{SendError, UpgradeRequest};
pub use handle::WsSessionHandle;
pub use handler::{WsHandler, WsSession};
#[cfg(feature = "http")]
pub use http_upgrade::upgrade;
pub use http_upgrade::{UpgradeError, WsUpgrade};
pub use proto::close::{CloseCode, Initiator, InvalidCloseCode, OpenError, WsClose};
pub use proto::data::ReceivedData;
#[cfg(feature = "deflate")]
#[cfg_attr(docsrs, doc(cfg(feature = "deflate")))]
pub use proto::deflate::DeflateConfig;
pub use server::{WsServer, WsServerBuilder, WsServerHandle};
pub use stats::{WsSessionStats, WsStats};
pub use tungstenite::Message;
