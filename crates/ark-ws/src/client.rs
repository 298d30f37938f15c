//! `WsClient`: one WebSocket connection on an ark-tcp client.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use ark_frame::Raw;
use ark_reactor::{ReactorConfig, Runtime};
use ark_tcp::{Reconnect, TcpClient, TcpClientHandle, TcpStats};
use tungstenite::client::IntoClientRequest;

use crate::config::WsConfig;
use crate::driver::conn::{ClientOf, WsConn, WsOwner};
use crate::error::SendError;
use crate::handle::{CurrentSession, WsSessionHandle, WsShared};
use crate::handler::WsHandler;
use crate::server::ws_options;
use crate::stats::{WsCounters, WsStats};
use tungstenite::Message;

/// Entry point: [`WsClient::builder`].
#[derive(Debug)]
pub struct WsClient;

impl WsClient {
    /// A builder with the defaults of [`WsConfig`] and a single-threaded pool of its own.
    pub fn builder() -> WsClientBuilder {
        WsClientBuilder {
            config: WsConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            connect_timeout: Duration::from_secs(30),
            reconnect: None,
            final_status: refusal_is_final,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "tls")]
            tls_server_name: None,
        }
    }
}

/// Configures and starts a [`WsClient`].
#[derive(Debug)]
pub struct WsClientBuilder {
    config: WsConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    connect_timeout: Duration,
    reconnect: Option<Reconnect>,
    final_status: fn(u16) -> bool,
    #[cfg(feature = "tls")]
    tls: Option<ark_tls::ClientTls>,
    #[cfg(feature = "tls")]
    tls_server_name: Option<String>,
}

/// The default of [`WsClientBuilder::final_status`]: the refusals of an upgrade that a
/// reconnecting client does not retry — every 3xx and 4xx answer (the request is wrong, not
/// allowed, or elsewhere: trying again changes nothing) but 408 (Request Timeout) and 429 (Too
/// Many Requests). A 5xx answer (a proxy or a server in the middle of a deploy), a failed or
/// timed-out handshake, and a failed connection are retried.
///
/// ```
/// assert!(ark_ws::refusal_is_final(403));
/// assert!(!ark_ws::refusal_is_final(503));
/// assert!(!ark_ws::refusal_is_final(429));
/// ```
pub fn refusal_is_final(status: u16) -> bool {
    (300..500).contains(&status) && status != 408 && status != 429
}

impl WsClientBuilder {
    ws_options!();

    /// How long the TCP connection may take (default 30 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connect again after the connection is lost, an attempt fails, or the opening handshake
    /// fails or is refused (unless the refusal is final: [`final_status`](Self::final_status)),
    /// with exponential backoff and jitter (`Reconnect::default()`: from 1 s up to 30 s, as
    /// arknet's clients; reset only after a connection that stayed up for
    /// [`Reconnect::stable_after`], so a server that accepts and closes at once, or answers
    /// 101 and drops the connection, meets a growing delay). Default off, as ark-tcp's. Not
    /// after this side's own close or a stop.
    /// Each connection makes its own handshake with the same request; the handler gets
    /// `on_close` for the session that ended, then `on_open` for the next. Messages queued
    /// through a handle of the lost session are not replayed.
    pub fn reconnect(mut self, reconnect: Option<Reconnect>) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// Which HTTP statuses answering the upgrade end a reconnecting client for good
    /// (`on_close(WsClose::Failed(OpenError::Rejected { status }))` and no more attempts).
    /// Default [`refusal_is_final`]: 3xx and 4xx but 408 and 429.
    pub fn final_status(mut self, is_final: fn(u16) -> bool) -> Self {
        self.final_status = is_final;
        self
    }

    /// The TLS config for `wss://` URLs: the roots that verify the server (chain and host
    /// name, always), a client certificate for mTLS, ALPN, ... Without one, a `wss://` URL
    /// verifies against the system's CAs ([`ark_tls::TrustRoots::system`]).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// For `wss://`: the name the server's certificate must be valid for (and sent by SNI)
    /// instead of the URL's host — to reach a server by its address while verifying its
    /// name, say.
    #[cfg(feature = "tls")]
    pub fn tls_server_name(mut self, name: impl Into<String>) -> Self {
        self.tls_server_name = Some(name.into());
        self
    }

    /// Connects to `url` (`ws://HOST:PORT/path`, or `wss://` for TLS with the host verified
    /// against the server's certificate; the host may be a name such as `localhost`, resolved
    /// here) and runs `handler`. Returns at once; the connection and the handshakes happen on
    /// the client's reactor.
    ///
    /// # Errors
    /// A malformed URL or another scheme; for `wss://`, an ark-ws built without its `tls`
    /// feature, or without [`tls`](Self::tls) no usable system CA; a host that does not resolve; the pool could not start. Connection
    /// and handshake failures (TLS ones too) reach the handler as
    /// `on_close(WsClose::Failed(..))`.
    pub fn connect<H: WsHandler>(self, url: &str, handler: H) -> io::Result<WsClientHandle> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        self.config.check()?;
        let mut request = url
            .into_client_request()
            .map_err(|e| invalid(format!("WsClient: {e}")))?;
        let uri = request.uri();
        let secure = match uri.scheme_str() {
            Some("ws") => false,
            Some("wss") => true,
            _ => {
                return Err(invalid(format!(
                    "WsClient: {url}: not a ws:// or wss:// URL"
                )));
            }
        };
        let host = uri
            .host()
            .unwrap_or_default()
            .trim_matches(|c| c == '[' || c == ']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if secure { 443 } else { 80 });
        let addr = ark_reactor::resolve((host.as_str(), port))?;
        #[cfg(not(feature = "tls"))]
        if secure {
            return Err(invalid(format!(
                "WsClient: {url}: wss:// needs ark-ws built with its `tls` feature"
            )));
        }
        #[cfg(feature = "tls")]
        let tls = match (secure, self.tls) {
            (false, _) => None,
            (true, Some(tls)) => Some(tls),
            (true, None) => {
                Some(system_tls().map_err(|e| invalid(format!("WsClient: {url}: {e}")))?)
            }
        };
        if !self.config.subprotocols.is_empty()
            && let Ok(value) = self.config.subprotocols.join(", ").parse()
        {
            request
                .headers_mut()
                .insert("sec-websocket-protocol", value);
        }
        let config = Arc::new(self.config);
        let mut tcp = TcpClient::builder()
            .framing(Raw::new().with_max_frame_len(64 * 1024))
            .connect_timeout(self.connect_timeout)
            .reconnect(self.reconnect)
            .session_config(config.session_config());
        tcp = tcp
            .runtime(self.runtime)
            .reactor_config(self.reactor_config);
        #[cfg(feature = "tls")]
        if let Some(tls) = tls {
            tcp = tcp.tls(tls, self.tls_server_name.unwrap_or(host));
        }
        let current = CurrentSession::new(WsShared::new(config.write_buffer_limit));
        let counters = Arc::new(WsCounters::default());
        let client_of = ClientOf {
            current: current.clone(),
            request,
            final_status: self.final_status,
        };
        let conn = WsConn::client(
            WsOwner {
                config,
                counters: counters.clone(),
            },
            handler,
            client_of,
        );
        let inner = tcp.connect(addr, conn)?;
        Ok(WsClientHandle {
            inner,
            current,
            counters,
        })
    }
}

/// A client TLS config trusting the system's CAs.
#[cfg(feature = "tls")]
fn system_tls() -> Result<ark_tls::ClientTls, ark_tls::ConfigError> {
    ark_tls::ClientTls::builder(ark_tls::TrustRoots::system()?).build()
}

/// A running WebSocket client: send to its session, wait for it, stop it.
#[derive(Debug)]
pub struct WsClientHandle {
    inner: TcpClientHandle,
    /// The session of the current connection (a new one per reconnection).
    current: CurrentSession,
    counters: Arc<WsCounters>,
}

impl WsClientHandle {
    /// The WebSocket counters (across reconnections).
    pub fn stats(&self) -> WsStats {
        self.counters.snapshot()
    }

    /// The underlying TCP counters.
    pub fn tcp_stats(&self) -> TcpStats {
        self.inner.stats()
    }

    /// Whether the session is open (TCP connected and the WebSocket handshake done, not
    /// closing).
    pub fn is_connected(&self) -> bool {
        self.current.get().is_open()
    }

    /// Waits until the session is open, for at most `timeout`; `true` if it is. `false` also
    /// when the connection or handshake failed (the handler's `on_close` says why).
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while !self.is_connected() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// A handle to the session, once it is open (the current connection's, with reconnect).
    pub fn session(&self) -> Option<WsSessionHandle> {
        let shared = self.current.get();
        shared.is_open().then(|| WsSessionHandle::new(shared))
    }

    /// Queues `message` on the session (see [`WsSessionHandle::send`]).
    ///
    /// # Errors
    /// [`SendError::NotConnected`] before the session is open or after it closed; otherwise as
    /// [`WsSessionHandle::send`].
    pub fn send(&self, message: Message) -> Result<(), SendError> {
        self.session().ok_or(SendError::NotConnected)?.send(message)
    }

    /// Begins a graceful stop and returns at once (see ark-tcp's `stop`); wait for it with
    /// [`Stopping::wait`](ark_reactor::Stopping::wait) or
    /// [`wait_timeout`](ark_reactor::Stopping::wait_timeout).
    pub fn stop(self) -> ark_reactor::Stopping {
        self.inner.stop()
    }

    /// Stops gracefully within `timeout` and waits for the end.
    ///
    /// # Errors
    /// Stopping the own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> io::Result<()> {
        self.inner.stop_timeout(timeout)
    }
}
