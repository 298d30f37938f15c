//! `UdpClient`: a connected socket with one session.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ark_reactor::{Lifecycle, ReactorConfig, ReactorPool, Runtime, SocketBuffers, Stopping};

use crate::config::{UdpConfig, UdpOffload};
use crate::error::SendError;
use crate::handle::{UdpSessionHandle, UdpShared};
use crate::handler::UdpHandler;
use crate::proto::sessions::Mode;
use crate::server::{
    Placement, STOP_TIMEOUT, apply_options, bind_socket, granted_buffers, register, udp_options,
};
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
            socket: None,
        }
    }
}

/// Configures and starts a [`UdpClient`].
#[derive(Debug)]
pub struct UdpClientBuilder {
    config: UdpConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    /// A bound socket of the caller's to use instead of an ephemeral one.
    socket: Option<std::net::UdpSocket>,
}

impl UdpClientBuilder {
    udp_options!();

    /// Uses `socket`, already bound (to a port of the caller's choice, e.g. one from
    /// [`bind_for_shard`](crate::bind_for_shard)), instead of binding an ephemeral port. The
    /// builder's socket buffers and non-blocking mode are applied to it.
    pub fn socket(mut self, socket: std::net::UdpSocket) -> Self {
        self.socket = Some(socket);
        self
    }

    /// Binds an ephemeral port (or takes the [`socket`](Self::socket) given), connects the
    /// socket to `peer` (an address, or a name and port; see [`ark_reactor::resolve`]) and
    /// starts the session (`on_open` runs first on the socket's thread).
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
        let socket = match self.socket {
            Some(socket) => {
                let socket = socket2::Socket::from(socket);
                apply_options(&socket, &config)?;
                mio::net::UdpSocket::from_std(socket.into())
            }
            None => bind_socket(any, &config, false)?,
        };
        socket.connect(peer)?;
        UdpSocketHandle::start(
            socket,
            Mode::client(peer, handler),
            config,
            self.runtime,
            self.reactor_config,
            Some(peer),
        )
    }
}

/// A running UDP client.
pub type UdpClientHandle = UdpSocketHandle;

/// A running single-socket endpoint: a [`UdpClient`] or a [`UdpCast`](crate::UdpCast).
#[derive(Debug)]
pub struct UdpSocketHandle {
    pub(crate) local_addr: SocketAddr,
    pub(crate) socket_buffers: SocketBuffers,
    pub(crate) offload: UdpOffload,
    pub(crate) counters: Arc<UdpCounters>,
    /// A client's session (its connected peer).
    pub(crate) session: Option<UdpSessionHandle>,
    /// What the socket shares with handles (for [`wake`](Self::wake)).
    pub(crate) shared: Arc<UdpShared>,
    pub(crate) life: Arc<Lifecycle>,
    pub(crate) pool: Option<Arc<ReactorPool>>,
    pub(crate) own_pool: bool,
}

impl UdpSocketHandle {
    /// Registers a bound socket in `mode` on the next reactor of `runtime`'s pool; the
    /// endpoint gets a first turn at once (so `on_open` runs before any datagram). `peer` is a
    /// client's connected peer.
    pub(crate) fn start<H: UdpHandler>(
        socket: mio::net::UdpSocket,
        mode: Mode<H>,
        config: Arc<UdpConfig>,
        runtime: Runtime,
        reactor_config: ReactorConfig,
        peer: Option<SocketAddr>,
    ) -> io::Result<Self> {
        let local_addr = socket.local_addr()?;
        let socket_buffers = granted_buffers(&socket);
        let (pool, own_pool) = runtime.pool(reactor_config)?;
        let placement = Placement {
            config,
            counters: Arc::new(UdpCounters::default()),
            life: Lifecycle::new(),
        };
        let (shared, offload) = register(pool.next(), socket, mode, &placement, true)?;
        Ok(UdpSocketHandle {
            local_addr,
            socket_buffers,
            offload,
            counters: placement.counters,
            session: peer.map(|peer| UdpSessionHandle::new(shared.clone(), peer, true)),
            shared,
            life: placement.life,
            pool: Some(pool),
            own_pool,
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The granted `SO_SNDBUF` and `SO_RCVBUF` sizes.
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.socket_buffers
    }

    /// The datagram offloads the socket uses.
    pub fn offload(&self) -> UdpOffload {
        self.offload
    }

    /// A copy of the counters.
    pub fn stats(&self) -> UdpStats {
        self.counters.snapshot()
    }

    /// Queues one datagram to a client's peer from any thread (see
    /// [`UdpSessionHandle::send`]).
    ///
    /// # Errors
    /// [`SendError::Connected`] on a cast socket (it has no one peer: send from its
    /// handler with `send_to`); otherwise as [`UdpSessionHandle::send`].
    pub fn send(&self, payload: &[u8]) -> Result<(), SendError> {
        self.session
            .as_ref()
            .ok_or(SendError::Connected)?
            .send(payload)
    }

    /// Wakes the socket's handler from any thread: [`UdpHandler::on_wake`] runs on the socket's
    /// thread at its next turn (several wakes before it may run once). For a layer on top
    /// (reliable UDP, say) that keeps a mailbox of its own and must run it on the socket's
    /// thread.
    ///
    /// [`UdpHandler::on_wake`]: crate::UdpHandler::on_wake
    pub fn wake(&self) {
        self.shared.push(|r| r.wake = true);
    }

    /// A cloneable, `Send` waker of this socket's handler: [`wake`](Self::wake) from
    /// anywhere, without the socket's handle.
    pub fn waker(&self) -> UdpWaker {
        UdpWaker(self.shared.clone())
    }

    /// A handle to a client's session.
    pub fn session(&self) -> Option<UdpSessionHandle> {
        self.session.clone()
    }

    /// Begins closing the socket and returns at once: the handler gets `on_stopping`, then
    /// `on_close(Stopped)` (for a handler that [`lingers`](crate::UdpHandler::lingers), once
    /// it is done); wait with [`Stopping::wait`] (5 s; an own pool is then stopped).
    pub fn stop(mut self) -> Stopping {
        self.begin_stop()
    }

    /// As [`stop`](Self::stop), giving the handler `timeout` to wind down: what
    /// [`Stopping::wait`] waits for a handler that lingers (a reliable protocol delivering
    /// what it accepted) before the socket is closed at once.
    pub fn stop_allowing(mut self, timeout: std::time::Duration) -> Stopping {
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::begin(self.life.clone(), pool, timeout)
    }

    /// Begins a drain and returns at once: the handler gets `on_drain` and the socket goes on
    /// while it [`lingers`](crate::UdpHandler::lingers) (closing at once if it does not); at
    /// `drain` the stop follows (`on_stopping`), given `timeout` more to wind down.
    /// [`Stopping::report`] says whether the drain's deadline cut it off.
    pub fn drain(mut self, drain: std::time::Duration, timeout: std::time::Duration) -> Stopping {
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::drain(self.life.clone(), pool, drain, timeout)
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> std::io::Result<()> {
        self.stop().wait_timeout(timeout)
    }

    fn begin_stop(&mut self) -> Stopping {
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::begin(self.life.clone(), pool, STOP_TIMEOUT)
    }
}

/// Wakes a client's or cast socket's handler ([`UdpHandler::on_wake`]) from any thread; get
/// one from [`UdpSocketHandle::waker`].
///
/// [`UdpHandler::on_wake`]: crate::UdpHandler::on_wake
#[derive(Debug, Clone)]
pub struct UdpWaker(Arc<UdpShared>);

impl UdpWaker {
    /// See [`UdpSocketHandle::wake`].
    pub fn wake(&self) {
        self.0.push(|r| r.wake = true);
    }
}

/// A layer above a socket (ark-rudp's sessions) keeps its own [`ark_reactor::Mailbox`] and
/// wakes the socket's handler with this.
impl ark_reactor::Wake for UdpWaker {
    fn wake(&self) {
        UdpWaker::wake(self);
    }
}

impl Drop for UdpSocketHandle {
    /// Begins the same stop as `stop()` and returns at once: it finishes in the background
    /// (see [`Stopping`]'s drop).
    fn drop(&mut self) {
        if self.pool.is_some() {
            drop(self.begin_stop());
        }
    }
}
