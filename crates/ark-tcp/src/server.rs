//! `TcpServer`: a listener that spreads accepted sessions over a reactor pool.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;
use ark_reactor::{
    Context, Handler, IoModel, ReactorConfig, ReactorHandle, ReactorPool, Ready, Runtime, SourceId,
    TimerId, Turn, release_pool,
};
use mio::net::TcpListener;

use crate::config::{Keepalive, SessionConfig, apply_socket_options};
use crate::conn::{Conn, Framing};
use crate::owner::{Owner, ServerShared};
use crate::session::TcpHandler;
use crate::stats::TcpStats;

/// Entry point: [`TcpServer::builder`].
#[derive(Debug)]
pub struct TcpServer;

impl TcpServer {
    /// A builder with the defaults of [`SessionConfig`], a 4-byte big-endian length prefix and
    /// a single-threaded pool of its own.
    pub fn builder() -> TcpServerBuilder<LengthPrefix> {
        TcpServerBuilder {
            addr: None,
            codec: LengthPrefix::default(),
            config: SessionConfig::default(),
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            backlog: 1024,
        }
    }
}

/// Configures and starts a [`TcpServer`].
#[derive(Debug)]
pub struct TcpServerBuilder<C> {
    addr: Option<SocketAddr>,
    codec: C,
    config: SessionConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
    backlog: i32,
}

macro_rules! session_options {
    () => {
        /// Initial receive-buffer capacity (allocated only for frames spanning reads).
        pub fn initial_recv_buffer(mut self, bytes: usize) -> Self {
            self.config.initial_recv_buffer = bytes;
            self
        }

        /// `TCP_NODELAY` (default on).
        pub fn nodelay(mut self, on: bool) -> Self {
            self.config.nodelay = on;
            self
        }

        /// TCP keepalive (default off).
        pub fn keepalive(mut self, keepalive: Option<Keepalive>) -> Self {
            self.config.keepalive = keepalive;
            self
        }

        /// `SO_SNDBUF` / `SO_RCVBUF` requests.
        pub fn socket_buffers(mut self, send: Option<usize>, recv: Option<usize>) -> Self {
            self.config.send_buffer = send;
            self.config.recv_buffer = recv;
            self
        }

        /// Idle (silence) timeout; `None` disables it. Default 1 hour.
        pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.config.idle_timeout = timeout;
            self
        }

        /// Send-queue limit and the low/high watermarks.
        pub fn send_queue(mut self, limit: usize, low: usize, high: usize) -> Self {
            self.config.send_limit = limit;
            self.config.low_watermark = low.min(limit);
            self.config.high_watermark = high.clamp(self.config.low_watermark, limit);
            self
        }

        /// Time to wait for the peer's end of stream after a graceful close.
        pub fn close_linger(mut self, linger: Duration) -> Self {
            self.config.close_linger = linger;
            self
        }

        /// Replaces every session option at once.
        pub fn session_config(mut self, config: SessionConfig) -> Self {
            self.config = config;
            self
        }

        /// Runs on a pool of its own with this IO model.
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
pub(crate) use session_options;

impl TcpServerBuilder<LengthPrefix> {
    /// Largest frame body of the default length-prefix framing (default 16 MiB). Other codecs
    /// carry their own limit (`ArkDgram::max_frame_len`, ...).
    pub fn max_frame(mut self, bytes: usize) -> Self {
        self.codec = self.codec.max_frame_len(bytes);
        self
    }
}

impl<C: Framing> TcpServerBuilder<C> {
    /// The address to listen on (IPv4 or IPv6; port 0 picks one).
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.addr = Some(addr);
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
            backlog: self.backlog,
        }
    }

    /// The listen backlog. Default 1024.
    pub fn backlog(mut self, backlog: i32) -> Self {
        self.backlog = backlog;
        self
    }

    session_options!();

    /// Starts listening; `factory(peer)` makes the handler of each accepted session.
    ///
    /// # Errors
    /// No address, binding or listening failed, or the pool could not start.
    pub fn start<H, F>(self, factory: F) -> io::Result<TcpServerHandle>
    where
        H: TcpHandler,
        F: Fn(SocketAddr) -> H + Send + Sync + 'static,
    {
        let addr = self.addr.ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "TcpServer: no bind address")
        })?;
        let codec = self.codec;
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(addr),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())?;
        socket.listen(self.backlog)?;
        socket.set_nonblocking(true)?;
        let listener = TcpListener::from_std(socket.into());
        let local_addr = listener.local_addr()?;

        let (pool, own_pool) = match self.runtime {
            Runtime::Own(model) => (
                Arc::new(ReactorPool::start(model, self.reactor_config)?),
                true,
            ),
            Runtime::Shared(pool) => (pool, false),
        };
        let shared = Arc::new(ServerShared::default());
        let accept = Listener {
            listener,
            codec,
            factory,
            config: Arc::new(self.config),
            shared: shared.clone(),
            handles: pool.handles().to_vec(),
            next: 0,
            retry: None,
            _handler: std::marker::PhantomData,
        };
        let listener_reactor = pool.handles()[0].clone();
        let (tx, rx) = std::sync::mpsc::channel();
        listener_reactor.post(move |r| {
            let _ = tx.send(r.insert(Box::new(accept), mio::Interest::READABLE));
        });
        let listener_id = rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| io::Error::other("the reactor did not register the listener"))??;
        Ok(TcpServerHandle {
            local_addr,
            shared,
            pool: Some(pool),
            own_pool,
            listener: (listener_reactor, listener_id),
            stopped: false,
        })
    }
}

/// Accepts connections and places each on a reactor of the pool.
struct Listener<C, H, F> {
    listener: TcpListener,
    codec: C,
    factory: F,
    config: Arc<SessionConfig>,
    shared: Arc<ServerShared>,
    handles: Vec<ReactorHandle>,
    next: usize,
    retry: Option<TimerId>,
    _handler: std::marker::PhantomData<fn() -> H>,
}

impl<C, H, F> Handler for Listener<C, H, F>
where
    C: Framing,
    H: TcpHandler,
    F: Fn(SocketAddr) -> H + Send + Sync + 'static,
{
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.listener
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        for _ in 0..cx.budget().operations {
            let (stream, peer) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Done,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Out of descriptors or memory: the pending connections stay queued; try
                    // again shortly rather than waiting for the next connection's event.
                    self.shared
                        .counters
                        .accept_errors
                        .fetch_add(1, Ordering::Relaxed);
                    if self.retry.is_none() {
                        self.retry = Some(cx.set_timer(Duration::from_millis(50), None));
                    }
                    return Turn::Done;
                }
            };
            if apply_socket_options(&socket2::SockRef::from(&stream), &self.config).is_err() {
                self.shared
                    .counters
                    .accept_errors
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let handler = (self.factory)(peer);
            let conn = Conn::accepted(
                stream,
                peer,
                self.codec.clone(),
                handler,
                self.config.clone(),
                Owner::Server(self.shared.clone()),
            );
            let session_id = conn.id();
            let shared = self.shared.clone();
            let target = &self.handles[self.next % self.handles.len()];
            self.next = self.next.wrapping_add(1);
            target.post(move |r| {
                let interest = mio::Interest::READABLE | mio::Interest::WRITABLE;
                if let Ok(id) = r.insert_or_close(Box::new(conn), interest) {
                    shared.sessions().insert(session_id, (r.handle(), id));
                }
            });
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

/// A running server: its address, counters, and a graceful `stop`.
#[derive(Debug)]
pub struct TcpServerHandle {
    local_addr: SocketAddr,
    shared: Arc<ServerShared>,
    pool: Option<Arc<ReactorPool>>,
    own_pool: bool,
    listener: (ReactorHandle, SourceId),
    stopped: bool,
}

impl TcpServerHandle {
    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A copy of the server's counters.
    pub fn stats(&self) -> TcpStats {
        self.shared.counters.snapshot()
    }

    /// Stops gracefully: no new connections; every session flushes what it had queued, shuts
    /// down writing and closes (with `CloseReason::Stopped`) when its peer ends its side or
    /// after the close linger; then an own pool is stopped and its threads joined.
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
        let listener = self.listener.1;
        self.listener.0.post(move |r| {
            r.remove(listener);
        });
        let sessions: Vec<(ReactorHandle, SourceId)> =
            self.shared.sessions().values().cloned().collect();
        for (handle, id) in sessions {
            handle.post(move |r| {
                r.wake(id);
            });
        }
        // Bounded: each session closes within its linger time once woken.
        let deadline = Instant::now() + Duration::from_secs(15);
        while !self.shared.sessions().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.pool
            .take()
            .map_or(Ok(()), |pool| release_pool(pool, self.own_pool))
    }
}

impl Drop for TcpServerHandle {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
