//! `WsClient`: one WebSocket connection on an ark-tcp client.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ark_frame::Raw;
use ark_reactor::{IoModel, ReactorPool};
use ark_tcp::{TcpClient, TcpClientHandle, TcpStats};
use tungstenite::client::IntoClientRequest;

use crate::config::WsConfig;
use crate::conn::WsConn;
use crate::server::ws_options;
use crate::session::WsHandler;

/// Entry point: [`WsClient::builder`].
#[derive(Debug)]
pub struct WsClient;

impl WsClient {
    /// A builder with the defaults of [`WsConfig`] and a single-threaded pool of its own.
    pub fn builder() -> WsClientBuilder {
        WsClientBuilder {
            config: WsConfig::default(),
            io_model: None,
            pool: None,
            connect_timeout: Duration::from_secs(30),
        }
    }
}

/// Configures and starts a [`WsClient`].
#[derive(Debug)]
pub struct WsClientBuilder {
    config: WsConfig,
    io_model: Option<IoModel>,
    pool: Option<Arc<ReactorPool>>,
    connect_timeout: Duration,
}

impl WsClientBuilder {
    ws_options!();

    /// How long the TCP connection may take (default 30 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connects to `url` (`ws://IP:PORT/path`; names are not resolved) and runs `handler`.
    ///
    /// # Errors
    /// A malformed URL, a host that is not an IP address, or the pool could not start.
    /// Connection and handshake failures reach the handler as `on_close`.
    pub fn connect<H: WsHandler>(self, url: &str, handler: H) -> io::Result<WsClientHandle> {
        let mut request = url
            .into_client_request()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let uri = request.uri();
        let host = uri
            .host()
            .unwrap_or_default()
            .trim_matches(|c| c == '[' || c == ']');
        let ip: std::net::IpAddr = host.parse().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("WsClient: {host} is not an IP address"),
            )
        })?;
        let addr = SocketAddr::new(ip, uri.port_u16().unwrap_or(80));
        if !self.config.subprotocols.is_empty()
            && let Ok(value) = self.config.subprotocols.join(", ").parse()
        {
            request
                .headers_mut()
                .insert("sec-websocket-protocol", value);
        }
        let config = Arc::new(self.config);
        let mut tcp = TcpClient::builder()
            .framing(Raw::new().max_frame_len(64 * 1024))
            .connect_timeout(self.connect_timeout)
            .session_config(config.session_config());
        if let Some(model) = self.io_model {
            tcp = tcp.io_model(model);
        }
        if let Some(pool) = self.pool {
            tcp = tcp.pool(pool);
        }
        let inner = tcp.connect(addr, WsConn::client(request, config, handler))?;
        Ok(WsClientHandle { inner })
    }
}

/// A running WebSocket client.
#[derive(Debug)]
pub struct WsClientHandle {
    inner: TcpClientHandle,
}

impl WsClientHandle {
    /// The underlying TCP counters.
    pub fn stats(&self) -> TcpStats {
        self.inner.stats()
    }

    /// Whether the TCP connection is established.
    pub fn is_connected(&self) -> bool {
        self.inner.is_connected()
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
