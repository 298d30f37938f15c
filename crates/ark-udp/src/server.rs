//! `UdpServer`: sessions keyed by peer address, one socket per shard.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ark_reactor::{
    IoModel, ReactorConfig, ReactorHandle, ReactorPool, Runtime, SourceId, release_pool,
};
use mio::net::UdpSocket;

use crate::config::UdpConfig;
use crate::endpoint::{Endpoint, Factory, Mode};
use crate::session::UdpHandler;
use crate::stats::{UdpCounters, UdpStats};

/// Entry point: [`UdpServer::builder`].
#[derive(Debug)]
pub struct UdpServer;

impl UdpServer {
    /// A builder with the defaults of [`UdpConfig`] and a single-threaded pool of its own.
    pub fn builder() -> UdpServerBuilder {
        UdpServerBuilder {
            addr: None,
            config: UdpConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
        }
    }
}

/// Configures and starts a [`UdpServer`].
#[derive(Debug)]
pub struct UdpServerBuilder {
    addr: Option<io::Result<SocketAddr>>,
    config: UdpConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
}

macro_rules! udp_options {
    () => {
        /// `SO_SNDBUF` / `SO_RCVBUF` requests; the granted sizes are readable from the handle.
        pub fn socket_buffers(mut self, send: Option<usize>, recv: Option<usize>) -> Self {
            self.config.send_buffer = send;
            self.config.recv_buffer = recv;
            self
        }

        /// Receive slot size; longer datagrams are detected as truncated and dropped.
        pub fn max_datagram(mut self, bytes: usize) -> Self {
            self.config.max_datagram = bytes.max(1);
            self
        }

        /// Batched syscalls on or off, and the batch size.
        pub fn batching(mut self, on: bool, batch: usize) -> Self {
            self.config.batching = on;
            self.config.batch = batch.clamp(1, 1024);
            self
        }

        /// Idle session expiry (`None`: never).
        pub fn session_expiry(mut self, expiry: Option<std::time::Duration>) -> Self {
            self.config.session_expiry = expiry;
            self
        }

        /// Most sessions per socket.
        pub fn max_sessions(mut self, max: usize) -> Self {
            self.config.max_sessions = max;
            self
        }

        /// Most bytes queued for sending per socket.
        pub fn send_queue_limit(mut self, bytes: usize) -> Self {
            self.config.send_queue_limit = bytes;
            self
        }

        /// Replaces every option at once.
        pub fn config(mut self, config: UdpConfig) -> Self {
            self.config = config;
            self
        }

        /// Runs on a pool of its own with this IO model (sharded: one socket per shard).
        pub fn io_model(mut self, model: IoModel) -> Self {
            self.runtime = Runtime::Own(model);
            self
        }

        /// Runs on a shared pool.
        pub fn pool(mut self, pool: Arc<ReactorPool>) -> Self {
            self.runtime = Runtime::Shared(pool);
            self
        }

        /// Settings of an own pool's reactors.
        pub fn reactor_config(mut self, config: ReactorConfig) -> Self {
            self.reactor_config = config;
            self
        }
    };
}
pub(crate) use udp_options;

/// A non-blocking UDP socket with the options applied, bound to `addr`.
pub(crate) fn bind_socket(
    addr: SocketAddr,
    config: &UdpConfig,
    reuse_port: bool,
) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    if let Some(n) = config.send_buffer {
        socket.set_send_buffer_size(n)?;
    }
    if let Some(n) = config.recv_buffer {
        socket.set_recv_buffer_size(n)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// The granted `(SO_SNDBUF, SO_RCVBUF)` of a socket.
pub(crate) fn granted_buffers(socket: &UdpSocket) -> (usize, usize) {
    let s = socket2::SockRef::from(socket);
    (
        s.send_buffer_size().unwrap_or(0),
        s.recv_buffer_size().unwrap_or(0),
    )
}

/// Registers `endpoint` on `reactor` and waits for the outcome.
pub(crate) fn register<H: UdpHandler>(
    reactor: &ReactorHandle,
    endpoint: Endpoint<H>,
    wake: bool,
) -> io::Result<SourceId> {
    let (tx, rx) = std::sync::mpsc::channel();
    reactor.post(move |r| {
        let result = r.insert(
            Box::new(endpoint),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        );
        if let (true, Ok(id)) = (wake, &result) {
            r.wake(*id);
        }
        let _ = tx.send(result);
    });
    rx.recv_timeout(Duration::from_secs(10))
        .map_err(|_| io::Error::other("the reactor did not register the socket"))?
}

/// Removes a socket from its reactor (its sessions get `on_close(Stopped)`) and waits for it.
pub(crate) fn deregister(reactor: &ReactorHandle, id: SourceId) {
    let (tx, rx) = std::sync::mpsc::channel();
    if reactor.post(move |r| {
        r.remove(id);
        let _ = tx.send(());
    }) {
        let _ = rx.recv_timeout(Duration::from_secs(10));
    }
}

impl UdpServerBuilder {
    /// The address to bind (IPv4 or IPv6; port 0 picks one), or a name and port; see
    /// [`ark_reactor::resolve`].
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.addr = Some(ark_reactor::resolve(addr));
        self
    }

    udp_options!();

    /// Binds (one `SO_REUSEPORT` socket per shard in the sharded model) and starts serving;
    /// `factory(peer)` makes the handler of each new peer's session.
    ///
    /// # Errors
    /// No address, binding failed, or the pool could not start.
    pub fn start<H, F>(self, factory: F) -> io::Result<UdpServerHandle>
    where
        H: UdpHandler,
        F: Fn(SocketAddr) -> H + Send + Sync + 'static,
    {
        let addr = self.addr.unwrap_or_else(|| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UdpServer: no bind address",
            ))
        })?;
        let shards = match &self.runtime {
            Runtime::Own(IoModel::Sharded { reactors }) => (*reactors).max(1),
            Runtime::Shared(pool) if matches!(pool.model(), IoModel::Sharded { .. }) => {
                pool.handles().len()
            }
            _ => 1,
        };
        let config = Arc::new(self.config);
        // Bind every shard first (the first fixes the port), then start the pool.
        let first = bind_socket(addr, &config, shards > 1)?;
        let local_addr = first.local_addr()?;
        let socket_buffers = granted_buffers(&first);
        let mut sockets = vec![first];
        for _ in 1..shards {
            sockets.push(bind_socket(local_addr, &config, true)?);
        }
        let (pool, own_pool) = self.runtime.pool(self.reactor_config)?;
        let factory: Factory<H> = Arc::new(factory);
        let mut handle = UdpServerHandle {
            local_addr,
            socket_buffers,
            shards: Vec::new(),
            endpoints: Vec::new(),
            pool: Some(pool.clone()),
            own_pool,
            stopped: false,
        };
        for (i, socket) in sockets.into_iter().enumerate() {
            let counters = Arc::new(UdpCounters::default());
            let endpoint = Endpoint::new(
                socket,
                Mode::server(factory.clone()),
                config.clone(),
                counters.clone(),
            );
            let reactor = pool.handles()[i % pool.handles().len()].clone();
            let id = register(&reactor, endpoint, false)?;
            handle.shards.push(counters);
            handle.endpoints.push((reactor, id));
        }
        Ok(handle)
    }
}

/// A running UDP server.
#[derive(Debug)]
pub struct UdpServerHandle {
    local_addr: SocketAddr,
    socket_buffers: (usize, usize),
    shards: Vec<Arc<UdpCounters>>,
    endpoints: Vec<(ReactorHandle, SourceId)>,
    pool: Option<Arc<ReactorPool>>,
    own_pool: bool,
    stopped: bool,
}

impl UdpServerHandle {
    /// The bound address (every shard shares it).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The granted `(SO_SNDBUF, SO_RCVBUF)` sizes.
    pub fn socket_buffers(&self) -> (usize, usize) {
        self.socket_buffers
    }

    /// Counters of all shards added up.
    pub fn stats(&self) -> UdpStats {
        let mut total = UdpStats::default();
        for shard in &self.shards {
            total.merge(&shard.snapshot());
        }
        total
    }

    /// Counters per shard (socket).
    pub fn shard_stats(&self) -> Vec<UdpStats> {
        self.shards.iter().map(|s| s.snapshot()).collect()
    }

    /// Stops: every session gets `on_close(Stopped)`, sockets close, an own pool is joined.
    ///
    /// # Errors
    /// Stopping the own pool failed.
    pub fn stop(mut self) -> io::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        for (reactor, id) in self.endpoints.drain(..) {
            deregister(&reactor, id);
        }
        self.pool
            .take()
            .map_or(Ok(()), |pool| release_pool(pool, self.own_pool))
    }
}

impl Drop for UdpServerHandle {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
