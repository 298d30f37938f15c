//! `TcpClient`: one outgoing connection, with connect timeout and optional reconnect.

use std::io;
use std::net::SocketAddr;
#[cfg(unix)]
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;
use ark_reactor::{
    Lifecycle, Pace, Phase, Reactor, ReactorConfig, ReactorHandle, ReactorPool, Runtime, SourceRef,
    Stopping,
};
use mio::net::TcpStream;

use crate::config::{TcpConfig, apply_socket_options};
use crate::driver;
use crate::driver::stream::SessionStream;
use crate::error::{CloseReason, SendError};
use crate::handle::TcpSessionHandle;
use crate::handler::{SessionInfo, TcpHandler};
use crate::owner::Owner;
use crate::proto::core::{Framing, SessionCore};
use crate::server::tcp_options;
use crate::stats::{TcpCounters, TcpStats};

/// Reconnection with exponential backoff and jitter.
///
/// After a connection is lost or an attempt fails, the next attempt waits the current delay
/// (`initial` at first), and the delay doubles, up to `max`. The delay goes back to `initial`
/// only when a connection ends after staying up for `stable_after`: a server that accepts and
/// closes at once, or answers and drops the connection, is an attempt that failed, and the
/// delay keeps growing against it. With `jitter`, each wait is drawn at random between half
/// the delay and all of it, so clients that lost the same server do not come back in step.
///
/// ```
/// use std::time::Duration;
/// use ark_tcp::Reconnect;
///
/// // 100 ms, 200 ms, ... up to 5 s; reset after a connection that lasted 5 s.
/// let reconnect = Reconnect::new(Duration::from_millis(100), Duration::from_secs(5));
/// assert_eq!(reconnect.stable_after, Duration::from_secs(5));
/// assert!(reconnect.jitter);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// First delay after a connection is lost. Default 1 s.
    pub initial: Duration,
    /// Largest delay. Default 30 s.
    pub max: Duration,
    /// How long a connection must have stayed up for its end to reset the delay to
    /// `initial`. Default (and with [`new`](Self::new)): `max`.
    pub stable_after: Duration,
    /// Wait a random time between half the delay and the delay (default on).
    pub jitter: bool,
}

impl Reconnect {
    /// Backoff from `initial` doubling up to `max`, reset after a connection that stayed up
    /// for `max`, with jitter.
    pub fn new(initial: Duration, max: Duration) -> Reconnect {
        Reconnect {
            initial,
            max,
            stable_after: max,
            jitter: true,
        }
    }

    /// The wait for a backoff `delay`: with jitter, drawn in `[delay / 2, delay]`.
    fn wait(&self, delay: Duration) -> Duration {
        if !self.jitter || delay.is_zero() {
            return delay;
        }
        let half = delay / 2;
        let nanos = u64::try_from((delay - half).as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(random_u64() % nanos.saturating_add(1))
    }
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect::new(Duration::from_secs(1), Duration::from_secs(30))
    }
}

/// A random number for jitter (not for anything secret): std's randomly keyed hasher.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    hasher.finish()
}

/// State a client shares with its connection.
pub(crate) struct ClientShared<C> {
    counters: TcpCounters,
    life: Arc<Lifecycle>,
    next_id: AtomicU64,
    connect_timeout: Duration,
    reconnect: Option<Reconnect>,
    backoff: Mutex<Duration>,
    /// When the live connection opened (its lifetime decides whether the backoff resets).
    opened_at: Mutex<Option<Instant>>,
    connected: AtomicBool,
    addr: SocketAddr,
    /// The socket file of a Unix-domain server, connected to instead of `addr`.
    #[cfg(unix)]
    unix_path: Option<PathBuf>,
    config: Arc<TcpConfig>,
    codec: C,
    /// The live connection's handle.
    session: Mutex<Option<TcpSessionHandle>>,
    /// Connections attempted (the first one included).
    attempts: AtomicU64,
    /// TLS for every connection, and the server's name (verified and sent by SNI).
    #[cfg(feature = "tls")]
    tls: Option<(ark_tls::ClientTls, ark_tls::ServerName<'static>)>,
}

impl<C> std::fmt::Debug for ClientShared<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientShared")
            .field("addr", &self.addr)
            .field("connected", &self.connected)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

impl<C> ClientShared<C> {
    fn session(&self) -> std::sync::MutexGuard<'_, Option<TcpSessionHandle>> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The wait before the next attempt (the delay, with jitter), doubling the delay after
    /// it (capped). A connection that stayed up for `stable_after` resets the delay first.
    fn next_backoff(&self) -> Duration {
        let Some(r) = self.reconnect else {
            return Duration::ZERO;
        };
        let opened_at = self
            .opened_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut backoff = self.backoff.lock().unwrap_or_else(PoisonError::into_inner);
        if opened_at.is_some_and(|at| at.elapsed() >= r.stable_after) {
            *backoff = r.initial;
        }
        let delay = *backoff;
        *backoff = (delay * 2).min(r.max);
        r.wait(delay)
    }
}

impl<C: Framing, H: TcpHandler> Owner<H> for ClientShared<C> {
    fn counters(&self) -> &TcpCounters {
        &self.counters
    }

    fn phase(&self) -> Phase {
        self.life.phase()
    }

    fn opened(&self, _: u64) {
        self.connected.store(true, Ordering::SeqCst);
        *self
            .opened_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
    }

    /// A connection that ended other than by this side's choice (as the handler's
    /// [`reconnect_after`](TcpHandler::reconnect_after) decides) is made again after the
    /// backoff, with the same handler, when reconnecting is on.
    fn closed(self: Arc<Self>, _: u64, reason: &CloseReason, handler: H, reactor: &ReactorHandle) {
        self.connected.store(false, Ordering::SeqCst);
        *self.session() = None;
        if self.reconnect.is_some() && !self.life.is_stopping() && handler.reconnect_after(reason) {
            reconnect_later(self, handler, reactor);
        }
    }
}

/// Entry point: [`TcpClient::builder`].
#[derive(Debug)]
pub struct TcpClient;

impl TcpClient {
    /// A builder with the defaults of [`TcpConfig`], a 30 s connect timeout, no reconnect,
    /// a 4-byte big-endian length prefix and a single-threaded pool of its own.
    pub fn builder() -> TcpClientBuilder<LengthPrefix> {
        TcpClientBuilder {
            codec: LengthPrefix::default(),
            config: TcpConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            connect_timeout: Duration::from_secs(30),
            reconnect: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// Configures and starts a [`TcpClient`].
#[derive(Debug)]
pub struct TcpClientBuilder<C> {
    codec: C,
    config: TcpConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    connect_timeout: Duration,
    reconnect: Option<Reconnect>,
    #[cfg(feature = "tls")]
    tls: Option<(ark_tls::ClientTls, String)>,
}

impl TcpClientBuilder<LengthPrefix> {
    /// Largest frame body of the default length-prefix framing (default 16 MiB).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.codec = self.codec.with_max_frame_len(bytes);
        self
    }
}

impl<C: Framing> TcpClientBuilder<C> {
    /// The framing (any ark-frame codec).
    pub fn framing<D: Framing>(self, codec: D) -> TcpClientBuilder<D> {
        TcpClientBuilder {
            codec,
            config: self.config,
            runtime: self.runtime,
            reactor_config: self.reactor_config,
            connect_timeout: self.connect_timeout,
            reconnect: self.reconnect,
            #[cfg(feature = "tls")]
            tls: self.tls,
        }
    }

    /// Speaks TLS (`tcps`) to the server `server_name` (a DNS name or an IP address: the
    /// name its certificate must be valid for, sent by SNI). Every connection (reconnects
    /// too) does a handshake first; the session opens when it completes, with
    /// [`TcpSession::tls`](crate::TcpSession::tls) set. A failed handshake ends the connection with
    /// [`CloseReason::Tls`] saying which check failed.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ClientTls, server_name: impl Into<String>) -> Self {
        self.tls = Some((tls, server_name.into()));
        self
    }

    /// How long a connection attempt may take. Default 30 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Reconnect after a connection is lost or an attempt fails (default off), with the
    /// backoff, reset and jitter [`Reconnect`] describes; which ends count as lost is the
    /// handler's [`reconnect_after`](TcpHandler::reconnect_after) (by default every end but
    /// this side's own close, abort, stop or panic). Data queued on a lost connection is
    /// dropped (counted in `aborted_send_bytes`), never replayed.
    pub fn reconnect(mut self, reconnect: Option<Reconnect>) -> Self {
        self.reconnect = reconnect;
        self
    }

    tcp_options!();

    /// Connects to `addr` — an address, or a name and port such as `"localhost:7000"` (see
    /// [`ark_reactor::resolve`]) — with `handler`, which stays with the client across
    /// reconnects. Returns at once; the connection is made on the client's reactor.
    ///
    /// # Errors
    /// The address does not resolve, or the pool could not start. Connection failures reach
    /// the handler as `on_close`.
    pub fn connect<H: TcpHandler>(
        self,
        addr: impl std::net::ToSocketAddrs,
        handler: H,
    ) -> io::Result<TcpClientHandle> {
        let addr = ark_reactor::resolve(addr)?;
        self.start(addr, None, handler)
    }

    /// Connects to the Unix-domain stream socket at `path` (Unix only; a server's
    /// [`start_unix`](crate::TcpServerBuilder::start_unix)) with `handler`: the same session
    /// as over TCP — framing, TLS if set, reconnects, handles, timers, stop. Its
    /// `peer_addr` and `local_addr` are `0.0.0.0:0` (no IP address); of the socket options
    /// only the buffer sizes apply. A connect fails at once or succeeds at once (there is no
    /// connect under way): a missing socket file, a server that is gone or a full backlog
    /// reach the handler as `on_close` with [`CloseReason::ConnectFailed`].
    ///
    /// # Errors
    /// The pool could not start, or a TLS server name is not valid.
    #[cfg(unix)]
    pub fn connect_unix<H: TcpHandler>(
        self,
        path: impl AsRef<Path>,
        handler: H,
    ) -> io::Result<TcpClientHandle> {
        let path = path.as_ref().to_path_buf();
        self.start(driver::stream::NO_IP_ADDRESS, Some(path), handler)
    }

    /// The client of `connect` and `connect_unix`.
    fn start<H: TcpHandler>(
        self,
        addr: SocketAddr,
        #[cfg_attr(not(unix), allow(unused_variables))] unix_path: Option<std::path::PathBuf>,
        handler: H,
    ) -> io::Result<TcpClientHandle> {
        #[cfg(feature = "tls")]
        let tls = match self.tls {
            Some((config, name)) => {
                let name = ark_tls::server_name(&name)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                Some((config, name))
            }
            None => None,
        };
        let (pool, own_pool) = self.runtime.pool(self.reactor_config)?;
        let close_timeout = self.config.close_timeout;
        let shared = Arc::new(ClientShared {
            counters: TcpCounters::default(),
            life: Lifecycle::new(),
            next_id: AtomicU64::new(0),
            connect_timeout: self.connect_timeout,
            reconnect: self.reconnect,
            backoff: Mutex::new(self.reconnect.map_or(Duration::ZERO, |r| r.initial)),
            opened_at: Mutex::new(None),
            connected: AtomicBool::new(false),
            addr,
            #[cfg(unix)]
            unix_path,
            config: Arc::new(self.config.normalized()),
            codec: self.codec,
            session: Mutex::new(None),
            attempts: AtomicU64::new(0),
            #[cfg(feature = "tls")]
            tls,
        });
        let s = shared.clone();
        pool.next().post(move |r| connect_on(r, s, handler));
        Ok(TcpClientHandle {
            shared,
            pool: Some(pool),
            own_pool,
            close_timeout,
        })
    }
}

/// Starts a connection attempt on `reactor`. An attempt that fails before reaching the
/// reactor (no socket, say) is reported to the handler and retried like any other.
fn connect_on<C: Framing, H: TcpHandler>(
    reactor: &mut Reactor,
    shared: Arc<ClientShared<C>>,
    mut handler: H,
) {
    if shared.life.is_stopping() {
        handler.on_close(&CloseReason::Stopped);
        return;
    }
    shared.attempts.fetch_add(1, Ordering::Relaxed);
    #[cfg(unix)]
    if let Some(path) = &shared.unix_path {
        match open_unix(path, &shared.config) {
            Ok(stream) => install(reactor, shared, handler, stream),
            Err(e) => connect_failed(reactor, shared, handler, &e),
        }
        return;
    }
    match open_stream(shared.addr, &shared.config) {
        Ok(stream) => install(reactor, shared, handler, stream),
        Err(e) => connect_failed(reactor, shared, handler, &e),
    }
}

/// An attempt failed before its stream reached the reactor: the handler hears why, and a
/// reconnecting client tries again after its backoff.
fn connect_failed<C: Framing, H: TcpHandler>(
    reactor: &mut Reactor,
    shared: Arc<ClientShared<C>>,
    mut handler: H,
    e: &io::Error,
) {
    let reason = CloseReason::ConnectFailed {
        addr: shared.addr,
        kind: e.kind(),
        message: e.to_string(),
    };
    handler.on_close(&reason);
    if shared.reconnect.is_some() {
        reconnect_later(shared, handler, &reactor.handle());
    }
}

/// Makes `stream` (connecting, or connected) the client's session on `reactor`.
fn install<C: Framing, H: TcpHandler, S: SessionStream>(
    reactor: &mut Reactor,
    shared: Arc<ClientShared<C>>,
    mut handler: H,
    stream: S,
) {
    let addr = shared.addr;
    let info = SessionInfo {
        id: shared.next_id.fetch_add(1, Ordering::Relaxed),
        peer: addr,
        local: stream.local_addr_or(addr),
        socket_buffers: ark_reactor::SocketBuffers::default(),
        #[cfg(feature = "tls")]
        tls: None,
    };
    let id = match reactor.reserve_id() {
        Ok(id) => id,
        Err(e) => {
            handler.on_close(&CloseReason::io(&e));
            return;
        }
    };
    let now = reactor.now();
    #[cfg(feature = "tls")]
    let tls = match &shared.tls {
        None => None,
        Some((config, name)) => match ark_tls::TlsSession::client(config, name.clone(), now) {
            Ok(session) => Some(session),
            Err(e) => {
                handler.on_close(&CloseReason::Tls(e));
                return;
            }
        },
    };
    #[cfg(not(feature = "tls"))]
    let tls = None;
    let source = SourceRef::new(reactor.handle(), id);
    let core = SessionCore::new(
        handler,
        shared.codec.clone(),
        shared.config.clone(),
        info,
        now,
        Some(shared.connect_timeout),
        (
            Some(source.clone()),
            Pace::new(shared.config.rate_limits, &Default::default(), now),
        ),
    );
    *shared.session() = Some(core.session_handle());
    let owner: Arc<dyn Owner<H>> = shared.clone();
    let member = shared.life.join(Some(source));
    let machine = crate::proto::machine::machine(core, tls);
    let conn = driver::conn::conn(stream, machine, owner, reactor.handle(), member, true);
    let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
    if reactor.install(id, conn, interest).is_ok() {
        // A first turn arms the connect timeout even if the socket never becomes ready.
        reactor.wake(id);
    }
}

/// Schedules the next attempt after the backoff, on `reactor`.
fn reconnect_later<C: Framing, H: TcpHandler>(
    shared: Arc<ClientShared<C>>,
    handler: H,
    reactor: &ReactorHandle,
) {
    let delay = shared.next_backoff();
    let mut next = Some((shared, handler));
    reactor.post(move |r| {
        r.add_timer(delay, None, move |r| {
            if let Some((shared, handler)) = next.take() {
                connect_on(r, shared, handler);
            }
        });
    });
}

/// A Unix-domain stream connected to `path` (at once: such a connect is never under way),
/// with the buffer sizes of `config`.
#[cfg(unix)]
fn open_unix(path: &Path, config: &TcpConfig) -> io::Result<mio::net::UnixStream> {
    let stream = mio::net::UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    crate::config::apply_buffer_sizes(&socket2::SockRef::from(&stream), config)?;
    Ok(stream)
}

/// A socket with the session options applied, connecting without blocking.
fn open_stream(addr: SocketAddr, config: &TcpConfig) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    // Buffer sizes must be set before connecting to take part in window scaling.
    apply_socket_options(&socket2::SockRef::from(&socket), config)?;
    socket.set_nonblocking(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(e) if connect_in_progress(&e) => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}

/// A non-blocking connect under way: `EINPROGRESS` on Unix (as mio checks it: std's
/// `ErrorKind::InProgress` is not stable yet), `WSAEWOULDBLOCK` (`WouldBlock`) on Windows.
#[cfg(unix)]
fn connect_in_progress(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINPROGRESS)
}

/// A non-blocking connect under way: Windows reports `WSAEWOULDBLOCK` (`WouldBlock`).
#[cfg(not(unix))]
fn connect_in_progress(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

/// A running client: send to its connection, its counters and state, and a graceful `stop`.
#[derive(Debug)]
pub struct TcpClientHandle {
    shared: Arc<dyn ClientState>,
    pool: Option<Arc<ReactorPool>>,
    own_pool: bool,
    close_timeout: Duration,
}

/// What the handle needs of a client's shared state, whatever its codec.
trait ClientState: Send + Sync + std::fmt::Debug {
    fn connected(&self) -> bool;
    fn attempts(&self) -> u64;
    fn counters(&self) -> &TcpCounters;
    fn life(&self) -> &Arc<Lifecycle>;
    fn session(&self) -> Option<TcpSessionHandle>;
}

impl<C: Send + Sync> ClientState for ClientShared<C> {
    fn connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }
    fn attempts(&self) -> u64 {
        self.attempts.load(Ordering::Relaxed)
    }
    fn counters(&self) -> &TcpCounters {
        &self.counters
    }
    fn life(&self) -> &Arc<Lifecycle> {
        &self.life
    }
    fn session(&self) -> Option<TcpSessionHandle> {
        ClientShared::session(self).clone()
    }
}

impl TcpClientHandle {
    /// Whether the connection is established now.
    pub fn is_connected(&self) -> bool {
        self.shared.connected()
    }

    /// Connection attempts made so far (the first one included).
    pub fn attempts(&self) -> u64 {
        self.shared.attempts()
    }

    /// A copy of the client's counters.
    pub fn stats(&self) -> TcpStats {
        self.shared.counters().snapshot()
    }

    /// Queues `payload` as one frame on the current connection (see
    /// [`TcpSessionHandle::send`]); a connection still being made takes it too and writes it
    /// once established.
    ///
    /// # Errors
    /// [`SendError::NotConnected`] between connections (a reconnect's backoff, or after the
    /// connection ended); otherwise as [`TcpSessionHandle::send`].
    pub fn send(&self, payload: &[u8]) -> Result<(), SendError> {
        self.session().ok_or(SendError::NotConnected)?.send(payload)
    }

    /// A handle to the current connection's session, if there is one.
    pub fn session(&self) -> Option<TcpSessionHandle> {
        self.shared.session()
    }

    /// Waits until connected, for at most `timeout`; `true` if connected.
    pub fn wait_connected(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.is_connected() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Begins a graceful stop and returns at once: no reconnects; the handler gets
    /// `on_stopping`, the connection writes what is queued, shuts down writing and closes
    /// (`CloseReason::Stopped`). [`Stopping::wait`] waits up to the close timeout,
    /// [`Stopping::wait_timeout`] up to yours; still open then, the connection is closed at
    /// once, and an own pool is stopped and joined.
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

    fn begin_stop(&mut self) -> Stopping {
        let pool = self.pool.take().map(|pool| (pool, self.own_pool));
        Stopping::begin(self.shared.life().clone(), pool, self.close_timeout)
    }
}

impl Drop for TcpClientHandle {
    /// Begins the same stop as `stop()` and returns at once: it finishes in the background
    /// (see [`Stopping`]'s drop).
    fn drop(&mut self) {
        if self.pool.is_some() {
            drop(self.begin_stop());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_draws_between_half_the_delay_and_the_delay() {
        let jittered = Reconnect::new(Duration::from_millis(10), Duration::from_secs(1));
        let delay = Duration::from_millis(400);
        let waits: Vec<Duration> = (0..200).map(|_| jittered.wait(delay)).collect();
        assert!(waits.iter().all(|w| *w >= delay / 2 && *w <= delay));
        // Not one value: the waits are spread.
        assert!(waits.iter().any(|w| *w != waits[0]));
        let plain = Reconnect {
            jitter: false,
            ..jittered
        };
        assert_eq!(plain.wait(delay), delay);
        assert_eq!(jittered.wait(Duration::ZERO), Duration::ZERO);
    }
}
