//! `HttpAgent`: requests to any number of origins over kept-alive connections reused per
//! origin, each request with a deadline and a way to cancel it; the answer comes back through
//! a [`Pending`] (wait on it) or a callback. One request per connection at a time: a request
//! takes an idle connection of its origin, else opens one (up to the per-origin limit), else
//! waits in the origin's queue for the first connection to free up.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use ark_frame::Raw;
use ark_tcp::{
    CloseReason, ReactorConfig, ReactorPool, Runtime, Stopping, TcpClient, TcpClientHandle,
    TcpHandler, TcpSession, TcpSessionHandle, TimerId,
};

use crate::client::RequestHead;
use crate::error::AnswerError;
use crate::proto::answers::{AnswerReader, AnswerSink, ClientResponse};
use crate::proto::head::Limits;
use crate::stats::{AgentCounters, AgentStats};

/// Where requests go: an address, the `Host` it is known by, and TLS or not.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    addr: SocketAddr,
    host: String,
    tls_name: Option<String>,
}

impl Origin {
    /// Plain HTTP to `addr`; the `Host` header is the address.
    pub fn http(addr: SocketAddr) -> Origin {
        Origin {
            addr,
            host: addr.to_string(),
            tls_name: None,
        }
    }

    /// https to `addr`, the server verified as `name` (sent by SNI, and the `Host`). Needs
    /// an agent built with [`HttpAgentBuilder::tls`].
    pub fn https(addr: SocketAddr, name: impl Into<String>) -> Origin {
        let name = name.into();
        Origin {
            addr,
            host: name.clone(),
            tls_name: Some(name),
        }
    }

    /// The `Host` header's value for this origin.
    pub fn host(mut self, host: impl Into<String>) -> Origin {
        self.host = host.into();
        self
    }
}

/// A request to send: method, target, headers and body; optionally its own deadline.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    method: String,
    target: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    timeout: Option<Duration>,
}

impl HttpRequest {
    /// `method target` with no headers and no body.
    pub fn new(method: impl Into<String>, target: impl Into<String>) -> HttpRequest {
        HttpRequest {
            method: method.into(),
            target: target.into(),
            headers: Vec::new(),
            body: Vec::new(),
            timeout: None,
        }
    }

    /// `GET target`.
    pub fn get(target: impl Into<String>) -> HttpRequest {
        HttpRequest::new("GET", target)
    }

    /// `POST target` with `body`.
    pub fn post(target: impl Into<String>, body: impl Into<Vec<u8>>) -> HttpRequest {
        HttpRequest::new("POST", target).body(body)
    }

    /// Adds a header (`Host` and `Content-Length` are written by the agent).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) -> HttpRequest {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The body, sent with its `content-length`.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> HttpRequest {
        self.body = body.into();
        self
    }

    /// This request's deadline, from the moment it is sent to the agent (default: the
    /// agent's [`timeout`](HttpAgentBuilder::timeout)).
    pub fn timeout(mut self, timeout: Duration) -> HttpRequest {
        self.timeout = Some(timeout);
        self
    }

    /// The request's bytes on the wire for `host`.
    fn encode(&self, host: &str, out: &mut Vec<u8>) {
        let head = RequestHead {
            method: &self.method,
            target: &self.target,
            host,
        };
        let headers = self.headers.iter().map(|(n, v)| (n.as_str(), v.as_slice()));
        head.encode(headers, self.body.len(), out);
        out.extend_from_slice(&self.body);
    }
}

/// An answer the agent received, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    /// The headers in order, names as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body (chunked bodies decoded; empty for HEAD, 204, 304).
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }

    fn from_view(view: &ClientResponse<'_>) -> HttpResponse {
        HttpResponse {
            status: view.status,
            version: view.version,
            headers: view
                .headers()
                .into_iter()
                .map(|(n, v)| (n.to_string(), v.to_vec()))
                .collect(),
            body: view.body.to_vec(),
        }
    }
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The deadline passed first; the connection it was on (if any) was closed.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// [`Pending::cancel`] ran first.
    #[error("cancelled")]
    Cancelled,
    /// No answer came over the connection: it could not be made, or it failed before the
    /// answer (which, in [`ConnectionError`]).
    #[error("{0}")]
    Connection(#[from] ConnectionError),
    /// The origin is https and the agent has no TLS config (or ark-http was built without
    /// its `tls` feature).
    #[error(
        "https origin {0} needs an agent built with tls (HttpAgentBuilder::tls, ark-http's `tls` feature)"
    )]
    NoTls(String),
    /// The agent stopped.
    #[error("the agent stopped")]
    Stopped,
}

/// Why a request's connection gave no answer: [`RequestError::Connection`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionError {
    /// The origin refused the connection (nothing listens there).
    #[error("could not connect: connection refused by {0}")]
    Refused(SocketAddr),
    /// No connection within the agent's connect timeout.
    #[error("could not connect within {0:?}")]
    ConnectTimeout(Duration),
    /// Connecting failed otherwise (the cause in the text).
    #[error("could not connect: {0}")]
    Connect(String),
    /// The TLS handshake or a TLS record failed (which check, in the text), or the origin's
    /// name is not a valid TLS server name.
    #[error("TLS: {0}")]
    Tls(String),
    /// The server reset the connection.
    #[error("the server reset the connection before the answer")]
    Reset,
    /// The server closed the connection before the answer was whole.
    #[error("the server closed the connection before the answer")]
    Closed,
    /// The answer broke HTTP/1.1's rules, or passed a limit (which, in the [`AnswerError`]);
    /// the connection was dropped.
    #[error("bad answer: {0}")]
    BadAnswer(AnswerError),
    /// The connection failed otherwise (the cause in the text).
    #[error("connection failed: {0}")]
    Other(String),
}

impl ConnectionError {
    /// Why a connection that closed gave no answer.
    fn of(reason: &CloseReason) -> RequestError {
        RequestError::Connection(match reason {
            CloseReason::Stopped => return RequestError::Stopped,
            CloseReason::Refused(addr) => ConnectionError::Refused(*addr),
            CloseReason::ConnectTimeout(after) => ConnectionError::ConnectTimeout(*after),
            CloseReason::ConnectFailed { .. } => ConnectionError::Connect(reason.to_string()),
            CloseReason::Reset => ConnectionError::Reset,
            CloseReason::PeerClosed | CloseReason::EofMidFrame { .. } => ConnectionError::Closed,
            #[cfg(feature = "tls")]
            CloseReason::Tls(e) => ConnectionError::Tls(e.to_string()),
            other => ConnectionError::Other(other.to_string()),
        })
    }
}

/// What a request's answer is delivered to: exactly once, on whatever thread settles it.
type Done = Box<dyn FnOnce(Result<HttpResponse, RequestError>) + Send>;

/// A request on its way: to the queue, to a connection, to its answer.
struct Job {
    id: u64,
    request: HttpRequest,
    deadline: Instant,
    timeout: Duration,
    done: Done,
    cancelled: Arc<AtomicBool>,
}

impl Job {
    fn settle(self, result: Result<HttpResponse, RequestError>) {
        (self.done)(result);
    }

    /// Why this job ends before it is written, if it does: cancelled, or past its deadline.
    fn stale(&self, now: Instant) -> Option<RequestError> {
        if self.cancelled.load(Ordering::SeqCst) {
            Some(RequestError::Cancelled)
        } else if now >= self.deadline {
            Some(RequestError::Timeout(self.timeout))
        } else {
            None
        }
    }
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// One connection as the agent tracks it.
#[derive(Debug, Default)]
struct Conn {
    /// Keeps the connection alive; dropped away from its reactor (see `Shared::graveyard`).
    client: Option<TcpClientHandle>,
    /// Set at open: how the agent wakes the connection.
    session: Option<TcpSessionHandle>,
    /// A job handed to the connection while idle, taken in its next turn.
    mailbox: Option<Job>,
    /// The job the connection is serving, by id (cancel finds it here).
    serving: Option<u64>,
}

/// One origin's connections and waiting requests.
#[derive(Debug, Default)]
struct Host {
    conns: HashMap<u64, Conn>,
    idle: Vec<u64>,
    waiting: VecDeque<Job>,
}

#[derive(Debug)]
struct Shared {
    /// Weak: the pool must not be dropped (and joined) by the last connection on one of its
    /// own threads; the agent or the user owns it.
    pool: Weak<ReactorPool>,
    #[cfg(feature = "tls")]
    tls: Option<ark_tls::ClientTls>,
    limits: Limits,
    timeout: Duration,
    connect_timeout: Duration,
    per_host: usize,
    next_id: AtomicU64,
    counters: AgentCounters,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    hosts: HashMap<Origin, Host>,
    /// Handles of ended connections: dropping one waits for its stop, which must not happen
    /// on the reactor thread that ends it; the next send (or the agent's stop) drops them.
    graveyard: Vec<TcpClientHandle>,
    stopped: bool,
}

/// Jobs to settle once the lock is released (a callback may send again).
type Settle = Vec<(Job, Result<HttpResponse, RequestError>)>;

fn settle_all(jobs: Settle) {
    for (job, result) in jobs {
        job.settle(result);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives `job` to an idle connection of `origin`, or a new one, or the queue.
    fn dispatch(self: &Arc<Self>, state: &mut State, origin: &Origin, job: Job, out: &mut Settle) {
        if state.stopped {
            out.push((job, Err(RequestError::Stopped)));
            return;
        }
        let host = state.hosts.entry(origin.clone()).or_default();
        if let Some(id) = host.idle.pop() {
            let conn = host
                .conns
                .get_mut(&id)
                .expect("idle connections are tracked");
            conn.serving = Some(job.id);
            conn.mailbox = Some(job);
            if let Some(session) = &conn.session {
                session.wake();
            }
        } else if host.conns.len() < self.per_host {
            self.open(host, origin, job, out);
        } else {
            host.waiting.push_back(job);
        }
    }

    /// Opens a connection to `origin` for `job`.
    fn open(self: &Arc<Self>, host: &mut Host, origin: &Origin, job: Job, out: &mut Settle) {
        let Some(pool) = self.pool.upgrade() else {
            out.push((job, Err(RequestError::Stopped)));
            return;
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // The job's deadline bounds the connect too.
        let left = job.deadline.saturating_duration_since(Instant::now());
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
        let mut tcp = TcpClient::builder()
            .framing(Raw::new().with_max_frame_len(64 * 1024))
            .connect_timeout(self.connect_timeout.min(left))
            .pool(pool);
        #[cfg(not(feature = "tls"))]
        if let Some(name) = &origin.tls_name {
            out.push((job, Err(RequestError::NoTls(name.clone()))));
            return;
        }
        #[cfg(feature = "tls")]
        if let Some(name) = &origin.tls_name {
            let Some(tls) = &self.tls else {
                out.push((job, Err(RequestError::NoTls(name.clone()))));
                return;
            };
            if let Err(e) = ark_tls::server_name(name) {
                let e = ConnectionError::Tls(e.to_string());
                out.push((job, Err(RequestError::Connection(e))));
                return;
            }
            tcp = tcp.tls(tls.clone(), name.clone());
        }
        let conn = AgentConn {
            shared: self.clone(),
            origin: origin.clone(),
            id,
            job: None,
            opened: false,
            timer: None,
            reader: AnswerReader::new(self.limits),
            held: 0,
            buf: Vec::new(),
        };
        // `connect` fails at once only for an address that does not resolve (a `SocketAddr`
        // always does), a bad TLS name (checked above) or an own pool that cannot start (the
        // pool is given): it does not fail here.
        // The job waits in the connection's mailbox until it opens: a cancel meanwhile takes
        // it from there at once.
        if let Ok(client) = tcp.connect(origin.addr, conn) {
            let conn = Conn {
                client: Some(client),
                serving: Some(job.id),
                mailbox: Some(job),
                ..Conn::default()
            };
            host.conns.insert(id, conn);
        }
    }
}

/// Starts an [`HttpAgent`].
#[derive(Debug)]
pub struct HttpAgentBuilder {
    runtime: Runtime,
    reactor_config: ReactorConfig,
    #[cfg(feature = "tls")]
    tls: Option<ark_tls::ClientTls>,
    limits: Limits,
    timeout: Duration,
    connect_timeout: Duration,
    per_host: usize,
}

impl HttpAgentBuilder {
    // Where the connections run (default: a pool of one IO thread of the agent's own).
    ark_reactor::runtime_options!();

    /// TLS for https origins.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Limits on answers (head size, headers, body size, chunk extensions, bare LF): the
    /// server's rules for requests, and one answer takes at most `max_head + max_body` + 64 KiB
    /// on the wire ([`AnswerError::TooLarge`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The default deadline of a request, from send to answer (default 30 s): waiting for a
    /// connection, connecting, sending and the answer included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long connecting (and a TLS handshake) may take (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connections per origin at most (default 8, at least 1); more requests wait in order.
    pub fn max_connections_per_host(mut self, n: usize) -> Self {
        self.per_host = n.max(1);
        self
    }

    /// Starts the agent.
    ///
    /// # Errors
    /// Its own pool could not start.
    pub fn build(self) -> io::Result<HttpAgent> {
        let (pool, owned) = self.runtime.pool(self.reactor_config)?;
        let (pool, own_pool) = (Arc::downgrade(&pool), owned.then_some(pool));
        Ok(HttpAgent {
            own_pool: Mutex::new(own_pool),
            shared: Arc::new(Shared {
                pool,
                #[cfg(feature = "tls")]
                tls: self.tls,
                limits: self.limits,
                timeout: self.timeout,
                connect_timeout: self.connect_timeout,
                per_host: self.per_host,
                next_id: AtomicU64::new(0),
                counters: AgentCounters::default(),
                state: Mutex::new(State::default()),
            }),
        })
    }
}

/// An HTTP/1.1 client for many requests to many origins: connections kept alive and reused
/// per origin, a deadline on every request, cancellation. Answers arrive through a
/// [`Pending`] or a callback; callbacks run on an IO thread (keep them short) or, for a
/// request that ends before reaching a connection, on the thread that ended it.
///
/// ```
/// use ark_http::{HttpAgent, HttpRequest, HttpServer, Origin, Router};
///
/// let router = Router::new().get("/hello", |_, res| {
///     res.body("hello");
/// });
/// let server = HttpServer::builder().bind("127.0.0.1:0").start(router)?;
/// let agent = HttpAgent::builder().build()?;
/// let origin = Origin::http(server.local_addr());
/// for _ in 0..3 {
///     let answer = agent.send(&origin, HttpRequest::get("/hello")).wait()?;
///     assert_eq!((answer.status, answer.body.as_slice()), (200, &b"hello"[..]));
/// }
/// assert_eq!(agent.connections(&origin), 1, "one connection, reused");
/// agent.stop().wait()?;
/// server.stop().wait()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct HttpAgent {
    shared: Arc<Shared>,
    /// The agent's own pool, stopped after its connections (taken by the first stop).
    own_pool: Mutex<Option<Arc<ReactorPool>>>,
}

/// How long a stop gives the connections' graceful closes (ark-tcp's close timeout).
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

impl HttpAgent {
    /// A builder: 8 connections per origin, 30 s per request, default limits, an own pool.
    pub fn builder() -> HttpAgentBuilder {
        HttpAgentBuilder {
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            #[cfg(feature = "tls")]
            tls: None,
            limits: Limits::default(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            per_host: 8,
        }
    }

    /// Sends `request` to `origin`; wait for the answer on the returned [`Pending`], or
    /// `.await` it.
    pub fn send(&self, origin: &Origin, request: HttpRequest) -> Pending {
        let (answerer, answer) = ark_reactor::answer();
        let canceller = self.send_with(origin, request, move |result| {
            answerer.give(result);
        });
        Pending {
            answer: Some(answer),
            canceller,
        }
    }

    /// Sends `request` to `origin`; `done` gets the answer or the error, exactly once.
    pub fn send_with(
        &self,
        origin: &Origin,
        request: HttpRequest,
        done: impl FnOnce(Result<HttpResponse, RequestError>) + Send + 'static,
    ) -> Canceller {
        let timeout = request.timeout.unwrap_or(self.shared.timeout);
        let cancelled = Arc::new(AtomicBool::new(false));
        let job = Job {
            id: self.shared.next_id.fetch_add(1, Ordering::Relaxed),
            request,
            deadline: Instant::now() + timeout,
            timeout,
            done: Box::new(done),
            cancelled: cancelled.clone(),
        };
        let canceller = Canceller {
            shared: self.shared.clone(),
            origin: origin.clone(),
            id: job.id,
            cancelled,
        };
        let mut out = Vec::new();
        let graveyard = {
            let mut state = self.shared.lock();
            self.shared.dispatch(&mut state, origin, job, &mut out);
            std::mem::take(&mut state.graveyard)
        };
        drop(graveyard);
        settle_all(out);
        canceller
    }

    /// The agent's counters: answers (those read to the close), connections dropped for bytes
    /// no request asked for, answers refused, bytes held of answers under way.
    pub fn stats(&self) -> AgentStats {
        self.shared.counters.snapshot()
    }

    /// Open connections to `origin` (busy and idle).
    pub fn connections(&self, origin: &Origin) -> usize {
        self.shared
            .lock()
            .hosts
            .get(origin)
            .map_or(0, |h| h.conns.len())
    }

    /// Begins stopping and returns at once: waiting requests end with
    /// [`RequestError::Stopped`], every connection closes gracefully (a request on one ends
    /// with [`RequestError::Connection`]), and new requests end with `Stopped`. Wait with
    /// [`Stopping::wait`], or `.await` it; an own pool stops once the connections are gone.
    /// Dropping the agent stops it the same way, finishing in the background.
    pub fn stop(&self) -> Stopping {
        let clients = self.begin_stop();
        let stops = clients.into_iter().map(TcpClientHandle::stop).collect();
        let own = self
            .own_pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let pool = own.map(|pool| (pool, true));
        Stopping::together(stops, pool, STOP_TIMEOUT)
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping the own pool failed.
    pub fn stop_timeout(&self, timeout: Duration) -> io::Result<()> {
        self.stop().wait_timeout(timeout)
    }

    /// Marks the agent stopped, ends every request not yet on a connection, and returns the
    /// connections' clients.
    fn begin_stop(&self) -> Vec<TcpClientHandle> {
        let (clients, out) = {
            let mut state = self.shared.lock();
            state.stopped = true;
            let mut clients = std::mem::take(&mut state.graveyard);
            let mut out = Vec::new();
            for host in state.hosts.values_mut() {
                out.extend(
                    host.waiting
                        .drain(..)
                        .map(|j| (j, Err(RequestError::Stopped))),
                );
                for conn in host.conns.values_mut() {
                    clients.extend(conn.client.take());
                    if let Some(job) = conn.mailbox.take() {
                        out.push((job, Err(RequestError::Stopped)));
                    }
                }
            }
            (clients, out)
        };
        settle_all(out);
        clients
    }
}

impl Drop for HttpAgent {
    /// Begins the same stop as [`stop`](HttpAgent::stop) and returns at once: it finishes in
    /// the background (see [`Stopping`]'s drop).
    fn drop(&mut self) {
        drop(self.stop());
    }
}

/// Cancels one request: [`cancel`](Canceller::cancel).
#[derive(Debug, Clone)]
pub struct Canceller {
    shared: Arc<Shared>,
    origin: Origin,
    id: u64,
    cancelled: Arc<AtomicBool>,
}

impl Canceller {
    /// Ends the request with [`RequestError::Cancelled`] unless its answer came first: a
    /// waiting request leaves the queue, one being sent or answered closes its connection
    /// (HTTP/1.1 cannot take a request back).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        let mut out = Vec::new();
        {
            let mut state = self.shared.lock();
            let Some(host) = state.hosts.get_mut(&self.origin) else {
                return;
            };
            if let Some(at) = host.waiting.iter().position(|j| j.id == self.id) {
                let job = host.waiting.remove(at).expect("found");
                out.push((job, Err(RequestError::Cancelled)));
            } else if let Some(conn) = host.conns.values_mut().find(|c| c.serving == Some(self.id))
            {
                match conn.mailbox.take_if(|j| j.id == self.id) {
                    // Not written yet (the connection is being made, or has not taken it).
                    Some(job) => {
                        conn.serving = None;
                        out.push((job, Err(RequestError::Cancelled)));
                    }
                    // Written: the connection settles it in its next turn, and closes.
                    None => {
                        if let Some(session) = &conn.session {
                            session.wake();
                        }
                    }
                }
            }
        }
        settle_all(out);
    }
}

/// A request's answer to come: [`wait`](Pending::wait) for it on a thread, `.await` it (it is
/// a [`Future`], woken from the agent's thread; any runtime), or cancel the request.
///
/// Dropping a `Pending` whose answer has not come cancels the request, as dropping a future
/// does in async Rust; [`HttpAgent::send_with`] sends without one.
#[derive(Debug)]
pub struct Pending {
    /// `None` once the answer was taken (nothing left to cancel).
    answer: Option<ark_reactor::Answer<Result<HttpResponse, RequestError>>>,
    canceller: Canceller,
}

/// What a dropped answer means: the agent went away without settling the request.
fn stopped(
    result: Result<Result<HttpResponse, RequestError>, ark_reactor::AnswerDropped>,
) -> Result<HttpResponse, RequestError> {
    result.unwrap_or(Err(RequestError::Stopped))
}

impl Pending {
    /// Waits for the answer (at most the request's deadline, plus the time to notice it).
    ///
    /// # Errors
    /// Why the request got no answer.
    pub fn wait(mut self) -> Result<HttpResponse, RequestError> {
        match self.answer.take() {
            Some(answer) => stopped(answer.wait()),
            None => Err(RequestError::Stopped),
        }
    }

    /// The answer if it is here; after `Some`, this `Pending` is spent.
    pub fn try_result(&mut self) -> Option<Result<HttpResponse, RequestError>> {
        let result = self.answer.as_mut()?.try_take().map(stopped);
        if result.is_some() {
            self.answer = None;
        }
        result
    }

    /// Cancels the request (see [`Canceller::cancel`]).
    pub fn cancel(&self) {
        self.canceller.cancel();
    }

    /// A canceller for another thread.
    pub fn canceller(&self) -> Canceller {
        self.canceller.clone()
    }
}

impl Future for Pending {
    type Output = Result<HttpResponse, RequestError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        let Some(answer) = self.answer.as_mut() else {
            return Poll::Ready(Err(RequestError::Stopped));
        };
        let result = std::task::ready!(Pin::new(answer).poll(cx));
        self.answer = None;
        Poll::Ready(stopped(result))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.answer.is_some() {
            self.canceller.cancel();
        }
    }
}

/// One agent connection as an ark-tcp handler: serves one job at a time.
struct AgentConn {
    shared: Arc<Shared>,
    origin: Origin,
    id: u64,
    /// The job written and awaiting its answer.
    job: Option<Job>,
    /// The connection opened (a close before is a failed connect).
    opened: bool,
    timer: Option<TimerId>,
    reader: AnswerReader,
    /// The bytes the reader held when last reported to the agent's counters.
    held: usize,
    buf: Vec<u8>,
}

/// Collects the answer to the one request in flight (none awaited: any byte is unsolicited),
/// and whether it leaves the connection usable for the next request.
struct OneAnswer {
    awaited: bool,
    head: bool,
    answer: Option<(HttpResponse, bool)>,
}

impl AnswerSink for OneAnswer {
    fn awaited(&self) -> usize {
        usize::from(self.awaited && self.answer.is_none())
    }

    fn head_request(&self) -> bool {
        self.head
    }

    fn answer(&mut self, response: &ClientResponse<'_>) {
        // The head is parsed once more, for the owned headers.
        self.answer = Some((HttpResponse::from_view(response), response.keeps_alive()));
    }
}

impl AgentConn {
    /// Writes `job`'s request and starts its deadline; settles it instead if it is stale.
    fn start(&mut self, session: &mut TcpSession<'_>, job: Job) -> bool {
        if let Some(error) = job.stale(Instant::now()) {
            job.settle(Err(error));
            return false;
        }
        self.buf.clear();
        job.request.encode(&self.origin.host, &mut self.buf);
        if let Err(e) = session.append_raw(&mut self.buf) {
            let e = match e {
                ark_tcp::SendError::Closed => ConnectionError::Closed,
                other => ConnectionError::Other(other.to_string()),
            };
            job.settle(Err(RequestError::Connection(e)));
            session.abort();
            return true;
        }
        let left = job.deadline.saturating_duration_since(Instant::now());
        self.timer = Some(session.set_timer(left));
        self.job = Some(job);
        true
    }

    /// The sink for the job in flight (none: every byte is unsolicited).
    fn sink(&self) -> OneAnswer {
        OneAnswer {
            awaited: self.job.is_some(),
            head: self
                .job
                .as_ref()
                .is_some_and(|j| j.request.method == "HEAD"),
            answer: None,
        }
    }

    /// Reports what the reader holds to the agent's counters.
    fn report_held(&mut self) {
        let now = self.reader.held();
        self.shared.counters.held(self.held, now);
        self.held = now;
    }

    /// Takes the connection out of its origin's idle list at once (it is being dropped): no
    /// job is handed to it meanwhile. A job already in its mailbox goes on when it closes.
    fn retire(&self) {
        let mut state = self.shared.lock();
        if let Some(host) = state.hosts.get_mut(&self.origin) {
            host.idle.retain(|id| *id != self.id);
        }
    }

    /// At a clean close by the server (not a reset, nor a TLS stream cut short), the answer
    /// under way whose body runs to the close (RFC 9112 §6.3) is whole.
    fn answer_at_close(&mut self, reason: &CloseReason) -> Option<HttpResponse> {
        if *reason != CloseReason::PeerClosed || self.job.is_none() || !self.reader.under_way() {
            return None;
        }
        let mut sink = self.sink();
        self.reader.end_of_stream(&mut sink);
        let (response, _) = sink.answer?;
        let counters = &self.shared.counters;
        counters.answers.fetch_add(1, Ordering::Relaxed);
        counters.close_delimited.fetch_add(1, Ordering::Relaxed);
        Some(response)
    }

    /// The connection is free: the next job of the origin, or idle. Stale jobs in the queue
    /// are settled on the way.
    fn next(&mut self, session: &mut TcpSession<'_>) {
        loop {
            let job = {
                let mut state = self.shared.lock();
                let Some(host) = state.hosts.get_mut(&self.origin) else {
                    return;
                };
                let job = host.waiting.pop_front();
                if let Some(conn) = host.conns.get_mut(&self.id) {
                    conn.serving = job.as_ref().map(|j| j.id);
                    if job.is_none() {
                        host.idle.push(self.id);
                    }
                }
                job
            };
            match job {
                None => return,
                Some(job) => {
                    if self.start(session, job) {
                        return;
                    }
                }
            }
        }
    }
}

impl TcpHandler for AgentConn {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        self.opened = true;
        let first = {
            let mut state = self.shared.lock();
            let conn = state
                .hosts
                .get_mut(&self.origin)
                .and_then(|h| h.conns.get_mut(&self.id));
            conn.and_then(|conn| {
                conn.session = Some(session.handle());
                conn.mailbox.take()
            })
        };
        let started = match first {
            Some(job) => self.start(session, job),
            None => false,
        };
        if !started {
            self.next(session);
        }
    }

    fn on_message(&mut self, session: &mut TcpSession<'_>, bytes: &[u8]) {
        let mut sink = self.sink();
        let read = self.reader.feed(bytes, &mut sink);
        self.report_held();
        if let Err(error) = &read {
            self.shared.counters.refused(error);
        }
        let Some((response, keep)) = sink.answer else {
            if let Err(error) = read {
                // A bad answer fails its request; bytes on an idle connection fail none.
                if let Some(job) = self.job.take() {
                    let e = ConnectionError::BadAnswer(error);
                    job.settle(Err(RequestError::Connection(e)));
                }
                self.retire();
                session.abort();
            }
            return;
        };
        if let Some(timer) = self.timer.take() {
            session.cancel_timer(timer);
        }
        let Some(job) = self.job.take() else {
            // Not expected: an answer comes only while a job awaits it.
            session.abort();
            return;
        };
        self.shared.counters.answers.fetch_add(1, Ordering::Relaxed);
        // Free (or busy with the next job) before the caller hears of the answer: a request
        // it sends in return finds the connection idle.
        match read {
            Ok(()) if keep => self.next(session),
            Ok(()) => session.close(),
            // More came after the answer in the same read: the answer is its request's, what
            // followed is no one's, and the connection is not trusted again.
            Err(_) => session.abort(),
        }
        job.settle(Ok(response));
    }

    fn on_wake(&mut self, session: &mut TcpSession<'_>) {
        if self
            .job
            .as_ref()
            .is_some_and(|j| j.cancelled.load(Ordering::SeqCst))
        {
            if let Some(job) = self.job.take() {
                job.settle(Err(RequestError::Cancelled));
            }
            session.abort();
            return;
        }
        let mailbox = {
            let mut state = self.shared.lock();
            state
                .hosts
                .get_mut(&self.origin)
                .and_then(|h| h.conns.get_mut(&self.id))
                .and_then(|c| c.mailbox.take())
        };
        if let Some(job) = mailbox
            && !self.start(session, job)
        {
            self.next(session);
        }
    }

    fn on_timer(&mut self, session: &mut TcpSession<'_>, timer: TimerId) {
        if self.timer != Some(timer) {
            return;
        }
        self.timer = None;
        // A session timer counts from its turn's clock, which may be a little behind the
        // instant the deadline was read at: not due yet, it is set again for what is left.
        let left = self
            .job
            .as_ref()
            .map(|j| j.deadline.saturating_duration_since(Instant::now()));
        if let Some(left) = left.filter(|l| !l.is_zero()) {
            self.timer = Some(session.set_timer(left));
            return;
        }
        if let Some(job) = self.job.take() {
            let timeout = job.timeout;
            job.settle(Err(RequestError::Timeout(timeout)));
        }
        session.abort();
    }

    fn on_close(&mut self, reason: &CloseReason) {
        self.timer = None;
        let answered = self.answer_at_close(reason);
        self.reader.reset();
        self.report_held();
        let mut out: Settle = Vec::new();
        // Past its deadline (a connect that timed out by it, say) the job timed out.
        let now = Instant::now();
        let error = |job: &Job| match job.stale(now) {
            Some(stale) => stale,
            None => ConnectionError::of(reason),
        };
        if let Some(job) = self.job.take() {
            let result = match answered {
                Some(response) => Ok(response),
                None => Err(error(&job)),
            };
            out.push((job, result));
        }
        let shared = self.shared.clone();
        let mut state = shared.lock();
        let stopped = state.stopped;
        let (client, mailbox) = match state.hosts.get_mut(&self.origin) {
            Some(host) => {
                host.idle.retain(|id| *id != self.id);
                match host.conns.remove(&self.id) {
                    Some(conn) => (conn.client, conn.mailbox),
                    None => (None, None),
                }
            }
            None => (None, None),
        };
        state.graveyard.extend(client);
        let mut redo: Vec<Job> = Vec::new();
        if let Some(job) = mailbox {
            if self.opened {
                // Handed over as the connection ended, never written: it goes on.
                redo.push(job);
            } else {
                // The connect failed: that is this request's answer.
                let e = error(&job);
                out.push((job, Err(e)));
            }
        }
        if let Some(host) = state.hosts.get_mut(&self.origin)
            && !stopped
            && host.conns.len() < shared.per_host
        {
            redo.extend(host.waiting.pop_front());
        }
        for job in redo {
            shared.dispatch(&mut state, &self.origin, job, &mut out);
        }
        drop(state);
        settle_all(out);
    }
}
