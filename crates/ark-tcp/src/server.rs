//! `TcpServer`: a listener that spreads accepted sessions over a reactor pool.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
#[cfg(unix)]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;
use ark_reactor::{
    Context, GroupLimits, Handler, Lifecycle, Pace, Phase, RateLimitError, RateLimits,
    ReactorConfig, ReactorHandle, ReactorPool, Ready, Runtime, SourceRef, Stopping, TimerId, Turn,
};
use mio::net::TcpListener;

use crate::config::{AcceptLimits, TcpConfig};
use crate::driver;
use crate::driver::stream::{Listen, SessionStream};
use crate::error::CloseReason;
use crate::handle::TcpSessionHandle;
use crate::handler::{SessionInfo, TcpHandler};
use crate::owner::Owner;
use crate::proto::core::{Framing, SessionCore};
use crate::stats::{TcpCounters, TcpStats};

/// Entry point: [`TcpServer::builder`].
#[derive(Debug)]
pub struct TcpServer;

impl TcpServer {
    /// A builder with the defaults of [`TcpConfig`], a 4-byte big-endian length prefix and
    /// a single-threaded pool of its own.
    pub fn builder() -> TcpServerBuilder<LengthPrefix> {
        TcpServerBuilder {
            addr: None,
            codec: LengthPrefix::default(),
            config: TcpConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            accept: AcceptLimits::default(),
            group_rate_limits: RateLimits::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// Configures and starts a [`TcpServer`].
#[derive(Debug)]
pub struct TcpServerBuilder<C> {
    addr: Option<io::Result<SocketAddr>>,
    codec: C,
    config: TcpConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    accept: AcceptLimits,
    group_rate_limits: RateLimits,
    #[cfg(feature = "tls")]
    tls: Option<ark_tls::ServerTls>,
}

/// The socket options of every ark builder over TCP — ark-tcp's, ark-ws's and ark-http's:
/// `nodelay`, `keepalive` and `socket_buffers`, one vocabulary at every layer. For a builder
/// whose `config` has the fields `nodelay`, `keepalive`, `send_buffer` and `recv_buffer`
/// ([`TcpConfig`], `ark_ws::WsConfig`, `ark_http::HttpConfig`); each reaches every session's
/// socket.
#[doc(hidden)]
#[macro_export]
macro_rules! socket_options {
    () => {
        /// `TCP_NODELAY` on every session's socket (default on: a message goes out at once,
        /// not after the peer's delayed ACK). Each setting is applied to every accepted or
        /// connected socket; a socket that refuses one is closed, not served without it.
        pub fn nodelay(mut self, on: bool) -> Self {
            self.config.nodelay = on;
            self
        }

        /// TCP keepalive on every session's socket (default off): probes after `idle` without
        /// traffic, every `interval`; `probes` unanswered drop the connection (a peer that
        /// vanished without a FIN).
        pub fn keepalive(mut self, keepalive: Option<$crate::Keepalive>) -> Self {
            self.config.keepalive = keepalive;
            self
        }

        /// `SO_SNDBUF` / `SO_RCVBUF` requests for every session's socket (default: the
        /// system's; Linux doubles what is asked and caps it at `net.core.wmem_max` /
        /// `rmem_max`).
        pub fn socket_buffers(mut self, send: Option<usize>, recv: Option<usize>) -> Self {
            self.config.send_buffer = send;
            self.config.recv_buffer = recv;
            self
        }
    };
}

/// The accept limits of every ark server over TCP — ark-tcp's, ark-ws's and ark-http's:
/// `backlog` and `max_sessions`, for a builder with an `accept` field of type
/// [`AcceptLimits`](crate::AcceptLimits).
#[doc(hidden)]
#[macro_export]
macro_rules! accept_options {
    () => {
        /// The listen backlog (default 1024; Linux caps it at `net.core.somaxconn`).
        pub fn backlog(mut self, backlog: i32) -> Self {
            self.accept.backlog = backlog;
            self
        }

        /// Most sessions open at once, TLS handshakes under way included (default none). A
        /// connection accepted while that many are open is reset at once, before any handler
        /// runs, and counted in `refused_sessions`: a flood of connections costs the server
        /// at most this many sessions.
        pub fn max_sessions(mut self, max: Option<usize>) -> Self {
            self.accept.max_sessions = max;
            self
        }
    };
}

macro_rules! tcp_options {
    () => {
        /// Initial receive-buffer capacity (allocated only for frames spanning reads).
        pub fn initial_recv_buffer(mut self, bytes: usize) -> Self {
            self.config.initial_recv_buffer = bytes;
            self
        }

        $crate::socket_options!();

        /// Idle (silence) timeout; `None` disables it. Default 1 hour.
        pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.config.idle_timeout = timeout;
            self
        }

        /// Most bytes a session may queue for sending; a send past it fails with
        /// `SendError::Full`. Default 16 MiB.
        pub fn send_limit(mut self, bytes: usize) -> Self {
            self.config.send_limit = bytes;
            self
        }

        /// Queued bytes at which a session stops reading while its answers pile up
        /// (backpressure to the peer). Default 8 MiB; at most `send_limit`.
        pub fn high_watermark(mut self, bytes: usize) -> Self {
            self.config.high_watermark = bytes;
            self
        }

        /// Queued bytes at or under which reading resumes and `on_writable` runs. Default
        /// 1 MiB; at most the high watermark.
        pub fn low_watermark(mut self, bytes: usize) -> Self {
            self.config.low_watermark = bytes;
            self
        }

        /// How long a graceful close may take in all (see `TcpConfig::close_timeout`).
        pub fn close_timeout(mut self, timeout: Duration) -> Self {
            self.config.close_timeout = timeout;
            self
        }

        /// How long a frame that has started to arrive may stall (see
        /// `TcpConfig::stall_timeout`); `None` disables it.
        pub fn stall_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.config.stall_timeout = timeout;
            self
        }

        /// How long queued bytes may wait with none written before the session is reset
        /// (see `TcpConfig::write_stall_timeout`); `None` disables it.
        pub fn write_stall_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.config.write_stall_timeout = timeout;
            self
        }

        /// Each session's own rate limits, each way (default none; see
        /// `TcpConfig::rate_limits`).
        pub fn rate_limits(mut self, limits: ark_reactor::RateLimits) -> Self {
            self.config.rate_limits = limits;
            self
        }

        /// Replaces every session option at once.
        pub fn session_config(mut self, config: TcpConfig) -> Self {
            self.config = config;
            self
        }

        ark_reactor::runtime_options!();
    };
}
pub(crate) use tcp_options;

impl TcpServerBuilder<LengthPrefix> {
    /// Largest frame body of the default length-prefix framing (default 16 MiB). Other codecs
    /// carry their own limit (`ArkDgram::max_frame_len`, ...).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.codec = self.codec.with_max_frame_len(bytes);
        self
    }
}

/// State a server shares with its listener and sessions.
#[derive(Debug, Default)]
pub(crate) struct ServerShared {
    counters: TcpCounters,
    life: Arc<Lifecycle>,
    next_id: AtomicU64,
    /// Handles of the live sessions.
    sessions: Mutex<HashMap<u64, TcpSessionHandle>>,
}

impl ServerShared {
    fn sessions(&self) -> MutexGuard<'_, HashMap<u64, TcpSessionHandle>> {
        // A panic elsewhere while holding the lock leaves the map usable.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<H: TcpHandler> Owner<H> for ServerShared {
    fn counters(&self) -> &TcpCounters {
        &self.counters
    }

    fn phase(&self) -> Phase {
        self.life.phase()
    }

    fn closed(self: Arc<Self>, id: u64, _: &CloseReason, _: H, _: &ReactorHandle) {
        self.sessions().remove(&id);
    }
}

impl<C: Framing> TcpServerBuilder<C> {
    /// The address to listen on (IPv4 or IPv6; port 0 picks one), or a name and port
    /// (`"localhost:7000"`); see [`ark_reactor::resolve`].
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.addr = Some(ark_reactor::resolve(addr));
        self
    }

    /// The framing of every session (any ark-frame codec).
    pub fn framing<D: Framing>(self, codec: D) -> TcpServerBuilder<D> {
        TcpServerBuilder {
            addr: self.addr,
            codec,
            config: self.config,
            runtime: self.runtime,
            reactor_config: self.reactor_config,
            accept: self.accept,
            group_rate_limits: self.group_rate_limits,
            #[cfg(feature = "tls")]
            tls: self.tls,
        }
    }

    /// Serves TLS (`tcps`): every accepted connection does a handshake with `tls` first, and
    /// its session opens (`on_open`, with [`TcpSession::tls`](crate::TcpSession::tls) set) when the
    /// handshake completes. A bad handshake ends only that connection, with
    /// [`CloseReason::Tls`] saying which check failed (the handler's `on_close` sees it,
    /// without an `on_open` before).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Rate limits of all the server's sessions together, each way (default none): one
    /// bucket a direction that every session takes from, beside its own limits. Change them
    /// with [`TcpServerHandle::set_group_rate_limits`].
    pub fn group_rate_limits(mut self, limits: RateLimits) -> Self {
        self.group_rate_limits = limits;
        self
    }

    accept_options!();

    /// Both accept limits at once (see [`AcceptLimits`]).
    pub fn accept_limits(mut self, limits: AcceptLimits) -> Self {
        self.accept = limits;
        self
    }

    tcp_options!();

    /// Starts listening; `factory(peer)` makes the handler of each accepted session.
    ///
    /// # Errors
    /// No address, binding or listening failed, or the pool could not start.
    pub fn start<H, F>(mut self, factory: F) -> io::Result<TcpServerHandle>
    where
        H: TcpHandler,
        F: Fn(SocketAddr) -> H + Send + Sync + 'static,
    {
        let addr = self.addr.take().unwrap_or_else(|| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "TcpServer: no bind address",
            ))
        })?;
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(self.accept.backlog)?;
        socket.set_nonblocking(true)?;
        let listener = TcpListener::from_std(socket.into());
        let local_addr = listener.local_addr()?;
        self.serve(listener, local_addr, factory)
    }

    /// Serves the sessions `listener` accepts (see [`start`](Self::start)).
    fn serve<H, F, L>(
        self,
        listener: L,
        local_addr: SocketAddr,
        factory: F,
    ) -> io::Result<TcpServerHandle>
    where
        H: TcpHandler,
        F: Fn(SocketAddr) -> H + Send + Sync + 'static,
        L: Listen,
    {
        let (pool, own_pool) = self.runtime.pool(self.reactor_config)?;
        let shared = Arc::new(ServerShared::default());
        let close_timeout = self.config.close_timeout;
        let group = GroupLimits::new(self.group_rate_limits, Instant::now());
        let accept = Listener {
            listener,
            codec: self.codec,
            factory,
            config: Arc::new(self.config.normalized()),
            shared: shared.clone(),
            group: group.clone(),
            #[cfg(feature = "tls")]
            tls: self.tls,
            max_sessions: self.accept.max_sessions,
            handles: pool.handles().to_vec(),
            next: 0,
            retry: None,
            _handler: std::marker::PhantomData,
        };
        let listener_reactor = pool.handles()[0].clone();
        let listener_id = listener_reactor
            .insert(Box::new(accept), mio::Interest::READABLE)
            .ok_or_else(|| io::Error::other("the reactor did not take the listener"))?;
        Ok(TcpServerHandle {
            local_addr,
            shared,
            pool: Some(pool),
            own_pool,
            listener: SourceRef::new(listener_reactor, listener_id),
            close_timeout,
            group,
            #[cfg(unix)]
            unix_path: None,
        })
    }

    /// Starts listening on a Unix-domain stream socket at `path` (Unix only): the same
    /// sessions as over TCP — framing, TLS if set, handles, timers, rate limits, accept
    /// limits, stop and drain — between processes of one host. `factory` gets the unspecified
    /// address (`0.0.0.0:0`), as do the sessions' `peer_addr` and `local_addr`: a Unix-domain
    /// peer has no IP address. Of the socket options only the buffer sizes apply (nodelay
    /// and keepalive are TCP's). The handle's stop (or drop) removes the socket file.
    ///
    /// # Errors
    /// Binding `path` failed (`AddrInUse` if a file is there: ark does not remove a file it
    /// did not create), or the pool could not start.
    #[cfg(unix)]
    pub fn start_unix<H, F>(self, path: impl AsRef<Path>, factory: F) -> io::Result<TcpServerHandle>
    where
        H: TcpHandler,
        F: Fn(SocketAddr) -> H + Send + Sync + 'static,
    {
        let path = path.as_ref().to_path_buf();
        let listener = bind_unix(&path, self.accept.backlog)?;
        let mut handle = self.serve(listener, driver::stream::NO_IP_ADDRESS, factory)?;
        handle.unix_path = Some(path);
        Ok(handle)
    }
}

/// A Unix-domain listener at `path` with `backlog` (mio's `bind` takes the system's).
#[cfg(unix)]
fn bind_unix(path: &Path, backlog: i32) -> io::Result<mio::net::UnixListener> {
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    socket.bind(&socket2::SockAddr::unix(path)?)?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(mio::net::UnixListener::from_std(
        std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(socket)),
    ))
}

/// Accepts connections and places each on a reactor of the pool.
struct Listener<C, H, F, L> {
    listener: L,
    codec: C,
    factory: F,
    config: Arc<TcpConfig>,
    shared: Arc<ServerShared>,
    /// The buckets every session takes from (the server's total), if limited.
    group: GroupLimits,
    #[cfg(feature = "tls")]
    tls: Option<ark_tls::ServerTls>,
    /// [`AcceptLimits::max_sessions`].
    max_sessions: Option<usize>,
    handles: Vec<ReactorHandle>,
    next: usize,
    retry: Option<TimerId>,
    _handler: std::marker::PhantomData<fn() -> H>,
}

impl<C, H, F, L> Listener<C, H, F, L>
where
    L: Listen,
    C: Framing,
    H: TcpHandler,
    F: Fn(SocketAddr) -> H + Send + Sync + 'static,
{
    /// Makes an accepted connection a session on the next reactor, round-robin.
    fn place(&mut self, stream: L::Stream, peer: SocketAddr, now: Instant) {
        let info = SessionInfo {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            peer,
            local: stream.local_addr_or(peer),
            socket_buffers: ark_reactor::SocketBuffers::default(),
            #[cfg(feature = "tls")]
            tls: None,
        };
        let session_id = info.id;
        #[cfg(feature = "tls")]
        let tls = match self
            .tls
            .as_ref()
            .map(|t| ark_tls::TlsSession::server(t, now))
        {
            None => None,
            Some(Ok(session)) => Some(session),
            // rustls could not start a connection with this config: refuse this one.
            Some(Err(_)) => return,
        };
        #[cfg(not(feature = "tls"))]
        let tls = None;
        let target = self.handles[self.next % self.handles.len()].clone();
        self.next = self.next.wrapping_add(1);
        let handler = (self.factory)(peer);
        let (codec, config, shared) = (self.codec.clone(), self.config.clone(), &self.shared);
        // The session goes in the registry under its lock, so it cannot close (and remove
        // itself) before it is in.
        let mut sessions = shared.sessions();
        let make = |id| -> Box<dyn Handler> {
            let source = SourceRef::new(target.clone(), id);
            let pace = Pace::new(config.rate_limits, &self.group, now);
            let core = SessionCore::new(
                handler,
                codec,
                config,
                info,
                now,
                None,
                (Some(source.clone()), pace),
            );
            sessions.insert(session_id, core.session_handle());
            let owner: Arc<dyn Owner<H>> = shared.clone();
            let member = shared.life.join(Some(source));
            let machine = crate::proto::machine::machine(core, tls);
            driver::conn::conn(stream, machine, owner, target.clone(), member, false)
        };
        let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
        if target.insert_with(make, interest).is_none() {
            sessions.remove(&session_id);
        }
    }
}

impl<C, H, F, L: Listen> Listener<C, H, F, L> {
    /// Whether `stream` is refused because `max_sessions` are open: then it is set to reset
    /// when dropped (no FIN and no TIME_WAIT here for a flood's connections) and counted.
    fn refuse(&self, stream: &L::Stream) -> bool {
        let Some(max) = self.max_sessions else {
            return false;
        };
        if self.shared.sessions().len() < max {
            return false;
        }
        stream.reset_on_close();
        let counters = self.shared.counters.local();
        counters.refused_sessions.fetch_add(1, Ordering::Relaxed);
        true
    }
}

impl<C, H, F, L> Handler for Listener<C, H, F, L>
where
    L: Listen,
    C: Framing,
    H: TcpHandler,
    F: Fn(SocketAddr) -> H + Send + Sync + 'static,
{
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.listener
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        for _ in 0..cx.budget().operations {
            let (stream, peer) = match self.listener.accept_one() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Done,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Out of descriptors or memory: the pending connections stay queued; try
                    // again shortly rather than waiting for the next connection's event.
                    let counters = self.shared.counters.local();
                    counters.accept_errors.fetch_add(1, Ordering::Relaxed);
                    if self.retry.is_none() {
                        self.retry = Some(cx.set_timer(Duration::from_millis(50), None));
                    }
                    return Turn::Done;
                }
            };
            if self.refuse(&stream) {
                continue;
            }
            if L::prepare(&stream, &self.config).is_err() {
                let counters = self.shared.counters.local();
                counters.accept_errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.place(stream, peer, cx.now());
        }
        Turn::Again
    }

    fn on_timer(&mut self, _: &mut Context<'_>, timer: TimerId) -> Turn {
        if self.retry == Some(timer) {
            self.retry = None;
            return Turn::Again;
        }
        Turn::Done
    }
}

/// A running server: its address, counters, its sessions, and a graceful `stop`.
#[derive(Debug)]
pub struct TcpServerHandle {
    local_addr: SocketAddr,
    shared: Arc<ServerShared>,
    pool: Option<Arc<ReactorPool>>,
    own_pool: bool,
    listener: SourceRef,
    close_timeout: Duration,
    group: GroupLimits,
    /// The socket file of a Unix-domain server, removed when it stops.
    #[cfg(unix)]
    unix_path: Option<PathBuf>,
}

impl TcpServerHandle {
    /// Changes the server's total rate limits (see [`TcpServerBuilder::group_rate_limits`]),
    /// from now; a direction given `None` is lifted.
    ///
    /// # Errors
    /// [`RateLimitError::NoGroupLimit`] for a direction the server was built without a group
    /// limit for (its sessions take from no shared bucket that way); nothing changes then.
    pub fn set_group_rate_limits(&self, limits: RateLimits) -> Result<(), RateLimitError> {
        self.group.set_limits(limits, Instant::now())
    }

    /// The address the server listens on (`0.0.0.0:0` for a Unix-domain server: see
    /// [`unix_path`](Self::unix_path)).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The socket file of a server started with
    /// [`start_unix`](TcpServerBuilder::start_unix) (`None` over TCP).
    #[cfg(unix)]
    pub fn unix_path(&self) -> Option<&Path> {
        self.unix_path.as_deref()
    }

    /// A copy of the server's counters.
    pub fn stats(&self) -> TcpStats {
        self.shared.counters.snapshot()
    }

    /// Handles of the sessions open now (any order).
    pub fn sessions(&self) -> Vec<TcpSessionHandle> {
        self.shared.sessions().values().cloned().collect()
    }

    /// Begins a graceful stop and returns at once: no new connections; every session's
    /// handler gets `on_stopping` (a last chance to send a goodbye), then the session writes
    /// what it has queued, shuts down writing and closes (`CloseReason::Stopped`) when its peer
    /// ends its side. [`Stopping::wait`] waits up to the sessions' close timeout,
    /// [`Stopping::wait_timeout`] up to a deadline of yours; sessions still open then are
    /// closed at once, and an own pool is stopped and its threads joined.
    pub fn stop(mut self) -> Stopping {
        self.begin_stop()
    }

    /// Stops gracefully within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping the own pool failed.
    pub fn stop_timeout(self, timeout: Duration) -> io::Result<()> {
        self.stop().wait_timeout(timeout)
    }

    /// Begins a drain and returns at once: the listener closes now (no new connections);
    /// every session's handler gets [`on_drain`](crate::TcpHandler::on_drain) and the session
    /// goes on serving — what its peer sends is still answered — until the peer or the
    /// handler closes it. Sessions still open when `drain` has passed are stopped as
    /// [`stop`](Self::stop) does (`on_stopping`, what is queued written, a graceful close
    /// within the close timeout). [`Stopping::report`] waits for the end and says how many
    /// sessions the drain's deadline cut off (`undrained`) and how many had to be closed at
    /// once (`forced`). For SIGTERM: `examples/tcp_graceful_stop.rs`.
    pub fn drain(mut self, drain: Duration) -> Stopping {
        self.close_listener();
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::drain(self.shared.life.clone(), pool, drain, self.close_timeout)
    }

    /// No new connections: the listener leaves its reactor and a Unix-domain server's socket
    /// file goes.
    fn close_listener(&mut self) {
        self.listener.remove();
        #[cfg(unix)]
        if let Some(path) = self.unix_path.take() {
            let _ = std::fs::remove_file(path);
        }
    }

    fn begin_stop(&mut self) -> Stopping {
        self.close_listener();
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::begin(self.shared.life.clone(), pool, self.close_timeout)
    }
}

impl Drop for TcpServerHandle {
    /// Begins the same stop as `stop()` and returns at once: it finishes in the background
    /// (see [`Stopping`]'s drop).
    fn drop(&mut self) {
        if self.pool.is_some() {
            drop(self.begin_stop());
        }
    }
}
