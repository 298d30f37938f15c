//! `UdpClient`: a connected socket with one session.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ark_reactor::{
    IoModel, ReactorConfig, ReactorHandle, ReactorPool, Runtime, SourceId, release_pool,
};

use crate::config::UdpConfig;
use crate::endpoint::{Endpoint, Mode};
use crate::server::{bind_socket, deregister, granted_buffers, register, udp_options};
use crate::session::UdpHandler;
use crate::stats::{UdpCounters, UdpStats};

/// Entry point: [`UdpClient::builder`].
#[derive(Debug)]
pub struct UdpClient;

impl UdpClient {
    /// A builder with the defaults of [`UdpConfig`] (batch 8 for a client) and a
    /// single-threaded pool of its own.
    pub fn builder() -> UdpClientBuilder {
        UdpClientBuilder {
            config: UdpConfig {
                batch: 8,
                session_expiry: None,
                ..UdpConfig::default()
            },
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
        }
    }
}

/// Configures and starts a [`UdpClient`].
#[derive(Debug)]
pub struct UdpClientBuilder {
    config: UdpConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
}

impl UdpClientBuilder {
    udp_options!();

    /// Binds an ephemeral port, connects the socket to `peer` (an address, or a name and
    /// port; see [`ark_reactor::resolve`]) and starts the session (`on_open` runs first on the
    /// socket's thread).
    ///
    /// # Errors
    /// The address does not resolve; binding, connecting or starting the pool failed.
    pub fn connect<H: UdpHandler>(
        self,
        peer: impl std::net::ToSocketAddrs,
        handler: H,
    ) -> io::Result<UdpClientHandle> {
        let peer = ark_reactor::resolve(peer)?;
        let any: SocketAddr = match peer {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let config = Arc::new(self.config);
        let socket = bind_socket(any, &config, false)?;
        socket.connect(peer)?;
        UdpSocketHandle::start(
            socket,
            Mode::client(peer, handler),
            config,
            self.runtime,
            self.reactor_config,
        )
    }
}

/// A running UDP client.
pub type UdpClientHandle = UdpSocketHandle;

/// A running single-socket endpoint: a [`UdpClient`] or a [`UdpCast`](crate::UdpCast).
#[derive(Debug)]
pub struct UdpSocketHandle {
    pub(crate) local_addr: SocketAddr,
    pub(crate) socket_buffers: (usize, usize),
    pub(crate) counters: Arc<UdpCounters>,
    pub(crate) endpoint: Option<(ReactorHandle, SourceId)>,
    pub(crate) pool: Option<Arc<ReactorPool>>,
    pub(crate) own_pool: bool,
}

impl UdpSocketHandle {
    /// Registers a bound socket in `mode` on the next reactor of `runtime`'s pool; the
    /// endpoint gets a first turn at once (so `on_open` runs before any datagram).
    pub(crate) fn start<H: UdpHandler>(
        socket: mio::net::UdpSocket,
        mode: Mode<H>,
        config: Arc<UdpConfig>,
        runtime: Runtime,
        reactor_config: ReactorConfig,
    ) -> io::Result<Self> {
        let local_addr = socket.local_addr()?;
        let socket_buffers = granted_buffers(&socket);
        let (pool, own_pool) = runtime.pool(reactor_config)?;
        let counters = Arc::new(UdpCounters::default());
        let endpoint = Endpoint::new(socket, mode, config, counters.clone());
        let reactor = pool.next().clone();
        let id = register(&reactor, endpoint, true)?;
        Ok(UdpSocketHandle {
            local_addr,
            socket_buffers,
            counters,
            endpoint: Some((reactor, id)),
            pool: Some(pool),
            own_pool,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The granted `(SO_SNDBUF, SO_RCVBUF)` sizes.
    pub fn socket_buffers(&self) -> (usize, usize) {
        self.socket_buffers
    }

    /// A copy of the counters.
    pub fn stats(&self) -> UdpStats {
        self.counters.snapshot()
    }

    /// Closes the socket (`on_close(Stopped)`) and stops an own pool.
    ///
    /// # Errors
    /// Stopping the own pool failed.
    pub fn stop(mut self) -> io::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<()> {
        if let Some((reactor, id)) = self.endpoint.take() {
            deregister(&reactor, id);
        }
        self.pool
            .take()
            .map_or(Ok(()), |pool| release_pool(pool, self.own_pool))
    }
}

impl Drop for UdpSocketHandle {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
