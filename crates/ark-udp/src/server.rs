//! `UdpServer`: sessions keyed by peer address, one socket per shard.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_reactor::{
    IoModel, Lifecycle, RateLimitError, RateLimits, ReactorConfig, ReactorHandle, ReactorPool,
    Runtime, SocketBuffers, SourceRef, Stopping,
};
use mio::net::UdpSocket;

use crate::config::{UdpConfig, UdpOffload};
use crate::driver::socket::UdpDriver;
use crate::driver::steering::{Steering, steer_by_peer_port};
use crate::handle::UdpShared;
use crate::handler::UdpHandler;
use crate::proto::rate::Group;
use crate::proto::sessions::{Factory, Mode};
use crate::stats::{UdpCounters, UdpStats};

/// How long a UDP stop waits for its sockets by default: each closes at its next turn.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Entry point: [`UdpServer::builder`].
#[derive(Debug)]
pub struct UdpServer;

impl UdpServer {
    /// A builder with the defaults of [`UdpConfig`] and a single-threaded pool of its own.
    pub fn builder() -> UdpServerBuilder {
        UdpServerBuilder {
            addr: None,
            steering: Steering::default(),
            group_rate_limits: RateLimits::default(),
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
    steering: Steering,
    group_rate_limits: RateLimits,
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

        /// UDP GSO and GRO where the kernel has them (see [`UdpConfig::gso`] and
        /// [`UdpConfig::gro`]; both on by default).
        pub fn offload(mut self, gso: bool, gro: bool) -> Self {
            self.config.gso = gso;
            self.config.gro = gro;
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

        /// Every session's own rate limits, each way, in datagram payload bytes (default
        /// none; see [`UdpConfig::rate_limits`] and docs/udp.md, "Rate limits").
        pub fn rate_limits(mut self, limits: ark_reactor::RateLimits) -> Self {
            self.config.rate_limits = limits;
            self
        }

        /// Replaces every option at once.
        pub fn config(mut self, config: UdpConfig) -> Self {
            self.config = config;
            self
        }

        ark_reactor::runtime_options!();
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
        set_reuse_port(&socket)?;
    }
    apply_options(&socket, config)?;
    socket.bind(&addr.into())?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// Lets the shards of a sharded server bind one port (`SO_REUSEPORT`, on Unix).
#[cfg(unix)]
fn set_reuse_port(socket: &socket2::Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

/// Windows has no `SO_REUSEPORT`: a sharded UDP server is refused.
#[cfg(not(unix))]
fn set_reuse_port(_socket: &socket2::Socket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "a sharded UDP server needs SO_REUSEPORT, which this platform lacks: use one shard",
    ))
}

/// The configured socket buffers, and non-blocking mode.
pub(crate) fn apply_options(socket: &socket2::Socket, config: &UdpConfig) -> io::Result<()> {
    if let Some(n) = config.send_buffer {
        socket.set_send_buffer_size(n)?;
    }
    if let Some(n) = config.recv_buffer {
        socket.set_recv_buffer_size(n)?;
    }
    socket.set_nonblocking(true)
}

/// The granted `SO_SNDBUF` and `SO_RCVBUF` of a socket.
pub(crate) fn granted_buffers(socket: &UdpSocket) -> SocketBuffers {
    let s = socket2::SockRef::from(socket);
    SocketBuffers {
        send: s.send_buffer_size().unwrap_or(0),
        recv: s.recv_buffer_size().unwrap_or(0),
    }
}

/// What a socket needs besides its socket and mode to become a reactor source.
pub(crate) struct Placement {
    pub(crate) config: Arc<UdpConfig>,
    pub(crate) counters: Arc<UdpCounters>,
    pub(crate) life: Arc<Lifecycle>,
}

/// Registers a socket in `mode` on `reactor` as a member of the owner's lifecycle; with
/// `wake`, it gets a first turn at once (so `on_open` runs before any datagram). Returns what
/// its handles share with it, and the offloads it turned on.
pub(crate) fn register<H: UdpHandler>(
    reactor: &ReactorHandle,
    socket: UdpSocket,
    mode: Mode<H>,
    placement: &Placement,
    wake: bool,
) -> io::Result<(Arc<UdpShared>, UdpOffload)> {
    let shared = UdpShared::new(placement.config.send_queue_limit);
    let offload = crate::driver::sys::enable_offload(&socket, &placement.config);
    let make = |id| -> Box<dyn ark_reactor::Handler> {
        let source = SourceRef::new(reactor.clone(), id);
        shared.attach(source.clone());
        let member = placement.life.join(Some(source));
        let parts = (shared.clone(), placement.life.clone(), member);
        let (config, counters) = (placement.config.clone(), placement.counters.clone());
        Box::new(UdpDriver::new(
            socket,
            mode,
            (config, offload),
            counters,
            parts,
        ))
    };
    // Writability is asked for only while a send would block (`UdpDriver::want_writable`).
    let interest = mio::Interest::READABLE;
    let id = reactor
        .insert_with(make, interest)
        .ok_or_else(|| io::Error::other("the reactor did not take the socket"))?;
    if wake {
        reactor.wake(id);
    }
    Ok((shared, offload))
}

impl UdpServerBuilder {
    /// The address to bind (IPv4 or IPv6; port 0 picks one), or a name and port; see
    /// [`ark_reactor::resolve`].
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.addr = Some(ark_reactor::resolve(addr));
        self
    }

    udp_options!();

    /// Which shard receives a peer's datagrams in the sharded model (default
    /// [`Steering::Hash`]); no effect with one socket.
    pub fn steering(mut self, steering: Steering) -> Self {
        self.steering = steering;
        self
    }

    /// Limits of the server's total, each way, in datagram payload bytes: one token bucket per
    /// limited direction shared by every session of every shard, on top of each session's own
    /// ([`rate_limits`](Self::rate_limits)). Default none. Which directions have one is fixed at
    /// start; their rates change with [`UdpServerHandle::set_group_rate_limits`].
    pub fn group_rate_limits(mut self, limits: RateLimits) -> Self {
        self.group_rate_limits = limits;
        self
    }

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
        if shards > 1 && self.steering == Steering::PeerPort {
            steer_by_peer_port(&sockets[0], shards)?;
        }
        let (pool, own_pool) = self.runtime.pool(self.reactor_config)?;
        let factory: Factory<H> = Arc::new(factory);
        let life = Lifecycle::new();
        let now = Instant::now();
        let group = Group::new(self.group_rate_limits, now);
        let mut handle = UdpServerHandle {
            local_addr,
            group: group.clone(),
            socket_buffers,
            offload: UdpOffload::default(),
            shards: Vec::new(),
            life: life.clone(),
            pool: Some(pool.clone()),
            own_pool,
        };
        for (i, socket) in sockets.into_iter().enumerate() {
            let placement = Placement {
                config: config.clone(),
                counters: Arc::new(UdpCounters::default()),
                life: life.clone(),
            };
            let reactor = &pool.handles()[i % pool.handles().len()];
            let (_, offload) = register(
                reactor,
                socket,
                Mode::server(factory.clone(), group.clone()),
                &placement,
                false,
            )?;
            if i == 0 {
                handle.offload = offload;
            }
            handle.shards.push(placement.counters);
        }
        Ok(handle)
    }
}

/// A running UDP server.
#[derive(Debug)]
pub struct UdpServerHandle {
    local_addr: SocketAddr,
    /// The group's buckets (read, write), shared by every session.
    group: Group,
    socket_buffers: SocketBuffers,
    offload: UdpOffload,
    shards: Vec<Arc<UdpCounters>>,
    life: Arc<Lifecycle>,
    pool: Option<Arc<ReactorPool>>,
    own_pool: bool,
}

impl UdpServerHandle {
    /// The bound address (every shard shares it).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The granted `SO_SNDBUF` and `SO_RCVBUF` sizes.
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.socket_buffers
    }

    /// The datagram offloads the sockets use (every shard's alike).
    pub fn offload(&self) -> UdpOffload {
        self.offload
    }

    /// Counters of all shards added up. Each reactor turn publishes its receive-side
    /// counters (sessions, datagrams in) before it sends the turn's replies, and its send
    /// counters after: a peer that received a reply finds its datagram counted.
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

    /// New limits of the server's total (the group every session shares), from now; the
    /// tokens in the buckets are kept, up to the new bursts; a direction given `None` is
    /// lifted. A direction the server started without a group limit for stays without
    /// ([`UdpServerBuilder::group_rate_limits`]: every session's share of a group is fixed
    /// when it opens).
    ///
    /// # Errors
    /// [`RateLimitError::NoGroupLimit`] for a limit on a direction the server started
    /// without; nothing changes then.
    pub fn set_group_rate_limits(&self, limits: RateLimits) -> Result<(), RateLimitError> {
        self.group.set_limits(limits, Instant::now())
    }

    /// Begins a stop and returns at once: every session gets `on_stopping` (its goodbye
    /// datagrams still leave), then `on_close(Stopped)`, and the sockets close; wait for it
    /// with [`Stopping::wait`] (an own pool is then stopped and joined).
    pub fn stop(mut self) -> Stopping {
        self.begin_stop()
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> std::io::Result<()> {
        self.stop().wait_timeout(timeout)
    }

    /// Begins a drain and returns at once: every session's handler gets `on_drain` (the
    /// moment to tell its peer to finish); plain UDP has no end of a conversation to wait
    /// for, so the sockets then close (a handler cannot hold a server's socket), and at
    /// `drain` at the latest every session gets `on_stopping` and `on_close(Stopped)`.
    pub fn drain(mut self, drain: Duration) -> Stopping {
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::drain(self.life.clone(), pool, drain, STOP_TIMEOUT)
    }

    fn begin_stop(&mut self) -> Stopping {
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::begin(self.life.clone(), pool, STOP_TIMEOUT)
    }
}

impl Drop for UdpServerHandle {
    /// Begins the same stop as `stop()` and returns at once: it finishes in the background
    /// (see [`Stopping`]'s drop).
    fn drop(&mut self) {
        if self.pool.is_some() {
            drop(self.begin_stop());
        }
    }
}
