//! `TcpClient`: one outgoing connection, with connect timeout and optional reconnect.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;
use ark_reactor::{
    IoModel, Reactor, ReactorConfig, ReactorHandle, ReactorPool, Runtime, SourceId, release_pool,
};
use mio::net::TcpStream;

use crate::config::{Keepalive, SessionConfig, apply_socket_options};
use crate::conn::{Conn, Framing};
use crate::owner::Owner;
use crate::server::session_options;
use crate::session::{CloseReason, TcpHandler};
use crate::stats::{TcpCounters, TcpStats};

/// Reconnection with exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// First delay after a connection is lost. Default 1 s.
    pub initial: Duration,
    /// Largest delay. Default 30 s.
    pub max: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
        }
    }
}

/// State a client shares with its connection.
#[derive(Debug)]
pub(crate) struct ClientShared {
    pub(crate) counters: TcpCounters,
    pub(crate) stopping: AtomicBool,
    pub(crate) next_id: AtomicU64,
    pub(crate) connect_timeout: Duration,
    pub(crate) reconnect: Option<Reconnect>,
    backoff: Mutex<Duration>,
    connected: AtomicBool,
    addr: SocketAddr,
    config: Arc<SessionConfig>,
    /// The live connection, for a graceful stop.
    session: Mutex<Option<(ReactorHandle, SourceId)>>,
    /// Connections attempted (the first one included).
    attempts: AtomicU64,
}

impl ClientShared {
    pub(crate) fn on_connected(&self) {
        self.connected.store(true, Ordering::SeqCst);
        if let Some(r) = self.reconnect {
            *self.backoff.lock().unwrap_or_else(PoisonError::into_inner) = r.initial;
        }
    }

    pub(crate) fn on_disconnected(&self) {
        self.connected.store(false, Ordering::SeqCst);
        *self.session.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// The delay before the next attempt, doubling the one after it (capped).
    fn next_backoff(&self) -> Duration {
        let Some(r) = self.reconnect else {
            return Duration::ZERO;
        };
        let mut backoff = self.backoff.lock().unwrap_or_else(PoisonError::into_inner);
        let delay = *backoff;
        *backoff = (delay * 2).min(r.max);
        delay
    }
}

/// Entry point: [`TcpClient::builder`].
#[derive(Debug)]
pub struct TcpClient;

impl TcpClient {
    /// A builder with the defaults of [`SessionConfig`], a 30 s connect timeout, no reconnect,
    /// a 4-byte big-endian length prefix and a single-threaded pool of its own.
    pub fn builder() -> TcpClientBuilder<LengthPrefix> {
        TcpClientBuilder {
            codec: LengthPrefix::default(),
            config: SessionConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            connect_timeout: Duration::from_secs(30),
            reconnect: None,
        }
    }
}

/// Configures and starts a [`TcpClient`].
#[derive(Debug)]
pub struct TcpClientBuilder<C> {
    codec: C,
    config: SessionConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    connect_timeout: Duration,
    reconnect: Option<Reconnect>,
}

impl TcpClientBuilder<LengthPrefix> {
    /// Largest frame body of the default length-prefix framing (default 16 MiB).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.codec = self.codec.max_frame_len(bytes);
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
        }
    }

    /// How long a connection attempt may take. Default 30 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Reconnect after a connection is lost or an attempt fails (default off). Data queued on
    /// a lost connection is dropped (counted in `aborted_send_bytes`), never replayed.
    pub fn reconnect(mut self, reconnect: Option<Reconnect>) -> Self {
        self.reconnect = reconnect;
        self
    }

    session_options!();

    /// Connects to `addr` with `handler`, which stays with the client across reconnects.
    ///
    /// # Errors
    /// The pool could not start. Connection failures reach the handler as `on_close`.
    pub fn connect<H: TcpHandler>(
        self,
        addr: SocketAddr,
        handler: H,
    ) -> io::Result<TcpClientHandle> {
        let (pool, own_pool) = match self.runtime {
            Runtime::Own(model) => (
                Arc::new(ReactorPool::start(model, self.reactor_config)?),
                true,
            ),
            Runtime::Shared(pool) => (pool, false),
        };
        let shared = Arc::new(ClientShared {
            counters: TcpCounters::default(),
            stopping: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            connect_timeout: self.connect_timeout,
            reconnect: self.reconnect,
            backoff: Mutex::new(self.reconnect.map_or(Duration::ZERO, |r| r.initial)),
            connected: AtomicBool::new(false),
            addr,
            config: Arc::new(self.config),
            session: Mutex::new(None),
            attempts: AtomicU64::new(0),
        });
        let codec = self.codec;
        let s = shared.clone();
        pool.next().post(move |r| connect_on(r, s, codec, handler));
        Ok(TcpClientHandle {
            shared,
            pool: Some(pool),
            own_pool,
            stopped: false,
        })
    }
}

/// Starts a connection attempt on `reactor`. An attempt that fails before reaching the
/// reactor (no socket, say) is reported to the handler and retried like any other.
pub(crate) fn connect_on<C: Framing, H: TcpHandler>(
    reactor: &mut Reactor,
    shared: Arc<ClientShared>,
    codec: C,
    mut handler: H,
) {
    if shared.stopping.load(Ordering::SeqCst) {
        handler.on_close(&CloseReason::Stopped);
        return;
    }
    shared.attempts.fetch_add(1, Ordering::Relaxed);
    let addr = shared.addr;
    match open_stream(addr, &shared.config) {
        Ok(stream) => {
            let conn = Conn::connecting(
                stream,
                addr,
                codec,
                handler,
                shared.config.clone(),
                Owner::Client(shared.clone()),
            );
            let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
            if let Ok(id) = reactor.insert_or_close(Box::new(conn), interest) {
                *shared
                    .session
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some((reactor.handle(), id));
                // A first turn arms the connect timeout even if the socket never becomes ready.
                reactor.wake(id);
            }
        }
        Err(e) => {
            let reason = CloseReason::ConnectFailed {
                addr,
                kind: e.kind(),
                message: e.to_string(),
            };
            handler.on_close(&reason);
            if shared.reconnect.is_some() {
                reconnect_later(shared, handler, codec, &reactor.handle());
            }
        }
    }
}

/// Schedules the next attempt after the backoff, on `reactor`.
pub(crate) fn reconnect_later<C: Framing, H: TcpHandler>(
    shared: Arc<ClientShared>,
    handler: H,
    codec: C,
    reactor: &ReactorHandle,
) {
    let delay = shared.next_backoff();
    let mut next = Some((shared, codec, handler));
    reactor.post(move |r| {
        r.add_timer(delay, None, move |r| {
            if let Some((shared, codec, handler)) = next.take() {
                connect_on(r, shared, codec, handler);
            }
        });
    });
}

/// A socket with the session options applied, connecting without blocking.
fn open_stream(addr: SocketAddr, config: &SessionConfig) -> io::Result<TcpStream> {
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
        // A non-blocking connect under way (EINPROGRESS).
        Err(e)
            if e.raw_os_error() == Some(libc::EINPROGRESS)
                || e.kind() == io::ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    Ok(TcpStream::from_std(socket.into()))
}

/// A running client: its counters, connection state and a graceful `stop`.
#[derive(Debug)]
pub struct TcpClientHandle {
    shared: Arc<ClientShared>,
    pool: Option<Arc<ReactorPool>>,
    own_pool: bool,
    stopped: bool,
}

impl TcpClientHandle {
    /// Whether the connection is established now.
    pub fn is_connected(&self) -> bool {
        self.shared.connected.load(Ordering::SeqCst)
    }

    /// Connection attempts made so far (the first one included).
    pub fn attempts(&self) -> u64 {
        self.shared.attempts.load(Ordering::Relaxed)
    }

    /// A copy of the client's counters.
    pub fn stats(&self) -> TcpStats {
        self.shared.counters.snapshot()
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

    /// Stops gracefully: no reconnects; the connection flushes what is queued, shuts down
    /// writing and closes (`CloseReason::Stopped`); an own pool is stopped and joined.
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
        self.shared.stopping.store(true, Ordering::SeqCst);
        let session = self
            .shared
            .session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((handle, id)) = session {
            handle.post(move |r| {
                r.wake(id);
            });
            let deadline = Instant::now() + Duration::from_secs(15);
            while self
                .shared
                .session
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        self.pool
            .take()
            .map_or(Ok(()), |pool| release_pool(pool, self.own_pool))
    }
}

impl Drop for TcpClientHandle {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
