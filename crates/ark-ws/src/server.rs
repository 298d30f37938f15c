//! `WsServer`: WebSocket sessions on an ark-tcp server.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ark_frame::Raw;
use ark_reactor::{RateLimitError, RateLimits, ReactorConfig, Runtime};
use ark_tcp::{AcceptLimits, TcpServer, TcpServerHandle, TcpStats};

use crate::config::{UpgradeHook, WsConfig};
use crate::driver::conn::{Registry, WsConn, WsOwner};
use crate::error::UpgradeRequest;
use crate::handle::WsSessionHandle;
use crate::handler::WsHandler;
use crate::stats::{WsCounters, WsStats};

/// Entry point: [`WsServer::builder`].
#[derive(Debug)]
pub struct WsServer;

impl WsServer {
    /// A builder with the defaults of [`WsConfig`] and a single-threaded pool of its own.
    pub fn builder() -> WsServerBuilder {
        WsServerBuilder {
            addr: None,
            config: WsConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            group_rate_limits: RateLimits::default(),
            accept: AcceptLimits::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// Configures and starts a [`WsServer`].
#[derive(Debug)]
pub struct WsServerBuilder {
    addr: Option<io::Result<SocketAddr>>,
    config: WsConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    group_rate_limits: RateLimits,
    accept: AcceptLimits,
    #[cfg(feature = "tls")]
    tls: Option<ark_tls::ServerTls>,
}

macro_rules! ws_options {
    () => {
        /// Largest message, after reassembly (default 16 MiB); larger closes with 1009.
        pub fn max_message(mut self, bytes: usize) -> Self {
            self.config.max_message = bytes;
            self
        }

        /// Largest frame (default 16 MiB); larger closes with 1009.
        pub fn max_frame(mut self, bytes: usize) -> Self {
            self.config.max_frame = bytes;
            self
        }

        /// What a session's receive buffers keep when idle (default 4 KiB; see
        /// [`WsConfig::read_buffer`](crate::WsConfig::read_buffer)).
        pub fn read_buffer(mut self, bytes: usize) -> Self {
            self.config.read_buffer = bytes;
            self
        }

        /// Most encoded bytes waiting to be written before sends fail with `Full`.
        pub fn write_buffer_limit(mut self, bytes: usize) -> Self {
            self.config.write_buffer_limit = bytes;
            self
        }

        /// How long the close handshake may take (default 30 s).
        pub fn close_timeout(mut self, timeout: Duration) -> Self {
            self.config.close_timeout = timeout;
            self
        }

        /// How long the opening handshake may take (default 10 s).
        pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
            self.config.handshake_timeout = timeout;
            self
        }

        /// How long encoded frames may wait with none written (a peer that stopped reading)
        /// before the connection is reset (default 30 s; `None` disables).
        pub fn write_stall_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.config.write_stall_timeout = timeout;
            self
        }

        /// Idle timeout (default 1 h; `None` disables).
        pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.config.idle_timeout = timeout;
            self
        }

        /// Each session's own rate limits, each way (default none): bytes on the wire a second
        /// and a burst. Reading pauses while the read budget is spent (no busy loop: the
        /// session reads again on a timer); frames wait in the send queue for the write budget,
        /// under the write-buffer limit. See [`WsConfig::rate_limits`](crate::WsConfig::rate_limits);
        /// a session's own can be changed later with
        /// [`WsSessionHandle::set_rate_limits`](crate::WsSessionHandle::set_rate_limits).
        pub fn rate_limits(mut self, limits: ark_reactor::RateLimits) -> Self {
            self.config.rate_limits = limits;
            self
        }

        /// permessage-deflate (RFC 7692) with these settings: offered by a client, accepted
        /// from clients that offer it by a server (default: declined). See
        /// [`WsConfig::deflate`](crate::WsConfig::deflate); `start`/`connect` refuse window
        /// bits outside 8 to 15 or a level over 9.
        #[cfg(feature = "deflate")]
        #[cfg_attr(docsrs, doc(cfg(feature = "deflate")))]
        pub fn deflate(mut self, deflate: crate::DeflateConfig) -> Self {
            self.config.deflate = Some(deflate);
            self
        }

        ark_tcp::socket_options!();

        /// Subprotocols, in preference order.
        pub fn subprotocols(mut self, protocols: &[&str]) -> Self {
            self.config.subprotocols = protocols.iter().map(|p| p.to_string()).collect();
            self
        }

        ark_reactor::runtime_options!();
    };
}
pub(crate) use ws_options;

impl WsServerBuilder {
    /// The address to listen on, or a name and port (`"localhost:8080"`); see
    /// [`ark_reactor::resolve`].
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.addr = Some(ark_reactor::resolve(addr));
        self
    }

    /// The upgrade path (default `/`); other paths are answered with 404.
    pub fn path(mut self, path: &str) -> Self {
        self.config.path = path.to_string();
        self
    }

    /// Inspects each upgrade request; `Err((status, reason))` rejects it with that status.
    pub fn on_upgrade<F>(mut self, hook: F) -> Self
    where
        F: Fn(&UpgradeRequest) -> Result<(), (u16, String)> + Send + Sync + 'static,
    {
        let hook: UpgradeHook = Arc::new(hook);
        self.config.upgrade_hook = Some(hook);
        self
    }

    ws_options!();

    /// The server's total rate limits, each way: one bucket a direction that all its sessions
    /// take from beside their own (default none). Change them later with
    /// [`WsServerHandle::set_group_rate_limits`]; see ark-tcp's
    /// [`group_rate_limits`](ark_tcp::TcpServerBuilder::group_rate_limits).
    pub fn group_rate_limits(mut self, limits: RateLimits) -> Self {
        self.group_rate_limits = limits;
        self
    }

    ark_tcp::accept_options!();

    /// Serves `wss`: a TLS handshake with `tls` before the WebSocket upgrade on every
    /// connection. A bad TLS handshake ends only that connection
    /// (`WsClose::Failed(OpenError::Connection(CloseReason::Tls(..)))` says which check failed).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Starts listening; `factory(peer)` makes each session's handler.
    ///
    /// # Errors
    /// No address, binding failed, or the pool could not start.
    pub fn start<H, F>(self, factory: F) -> io::Result<WsServerHandle>
    where
        H: WsHandler,
        F: Fn(SocketAddr) -> H + Send + Sync + 'static,
    {
        let addr = self.addr.unwrap_or_else(|| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "WsServer: no bind address",
            ))
        })?;
        self.config.check()?;
        let config = Arc::new(self.config);
        let mut tcp = TcpServer::builder()
            .bind(addr)
            .framing(Raw::new().with_max_frame_len(64 * 1024))
            .session_config(config.session_config())
            .group_rate_limits(self.group_rate_limits)
            .accept_limits(self.accept);
        tcp = tcp
            .runtime(self.runtime)
            .reactor_config(self.reactor_config);
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls {
            tcp = tcp.tls(tls);
        }
        let registry = Registry::default();
        let counters = Arc::new(WsCounters::default());
        let owner = WsOwner {
            config: config.clone(),
            counters: counters.clone(),
        };
        let r = registry.clone();
        let inner =
            tcp.start(move |peer| WsConn::server(owner.clone(), factory(peer), Some(r.clone())))?;
        Ok(WsServerHandle {
            inner,
            registry,
            counters,
        })
    }
}

/// A running WebSocket server: its address, counters, its open sessions, and a graceful stop.
#[derive(Debug)]
pub struct WsServerHandle {
    inner: TcpServerHandle,
    registry: Registry,
    counters: Arc<WsCounters>,
}

impl WsServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr()
    }

    /// Changes the server's total rate limits (see [`WsServerBuilder::group_rate_limits`]);
    /// `None` for a direction lifts it.
    ///
    /// # Errors
    /// [`RateLimitError::NoGroupLimit`] when `limits` limits a direction the server was built
    /// without; nothing is changed then.
    pub fn set_group_rate_limits(&self, limits: RateLimits) -> Result<(), RateLimitError> {
        self.inner.set_group_rate_limits(limits)
    }

    /// The WebSocket counters: sessions opened, data messages each way, closes by kind.
    pub fn stats(&self) -> WsStats {
        self.counters.snapshot()
    }

    /// The underlying TCP counters (connections, bytes, syscalls, buffers held, closes).
    pub fn tcp_stats(&self) -> TcpStats {
        self.inner.stats()
    }

    /// Handles of the sessions open now (handshake done, not closed; any order).
    pub fn sessions(&self) -> Vec<WsSessionHandle> {
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Begins a graceful stop and returns at once: no new connections; every open session's
    /// handler gets `on_stopping` (a last chance to send), then the session sends a close with
    /// 1001 (going away) and closes when the peer answers (within the close timeout); wait
    /// for it with
    /// [`Stopping::wait`](ark_reactor::Stopping::wait) or
    /// [`wait_timeout`](ark_reactor::Stopping::wait_timeout).
    pub fn stop(self) -> ark_reactor::Stopping {
        self.inner.stop()
    }

    /// Begins a drain and returns at once: no new connections; every open session's handler
    /// gets [`on_drain`](crate::WsHandler::on_drain) and the session goes on — messages both
    /// ways — until its peer or the handler closes it. Sessions still open when `drain` has
    /// passed are stopped as [`stop`](Self::stop) does (`on_stopping`, a close with 1001,
    /// the close handshake within the close timeout).
    /// [`Stopping::report`](ark_reactor::Stopping::report) waits for the end and says how
    /// many sessions the drain's deadline cut off.
    pub fn drain(self, drain: std::time::Duration) -> ark_reactor::Stopping {
        self.inner.drain(drain)
    }

    /// Stops gracefully within `timeout` and waits for the end.
    ///
    /// # Errors
    /// Stopping the own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> io::Result<()> {
        self.inner.stop_timeout(timeout)
    }
}
