//! `HttpServer`: HTTP/1.1 connections as ark-tcp sessions (raw framing), requests decoded by
//! [`RequestDecoder`], answered by a [`Router`] in order (pipelining), with keep-alive, limits
//! and deadlines; https with ark-tls.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ark_frame::Raw;
use ark_tcp::{
    AcceptLimits, CloseReason, SendError, Stopping, TcpHandler, TcpServer, TcpServerBuilder,
    TcpServerHandle, TcpSession, TcpStats, TimerId,
};

use crate::error::HttpError;
use crate::proto::decoder::{Decoded, RequestDecoder};
use crate::proto::head::{BodyKind, HeadFacts, Limits, Request};
use crate::proto::router::Router;
use crate::response::{Response, Slot, Upgrade, http_date};
use crate::stats::{HttpCounters, HttpStats};

/// Server settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Request limits (head 8,192 B, 100 headers, body 16 MiB by default).
    pub limits: Limits,
    /// A request must arrive whole (head and body) within this time from its first byte;
    /// past it the server answers 408 and closes (default 30 s).
    pub request_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed (default 60 s).
    pub keep_alive_timeout: Duration,
    /// `TCP_NODELAY` on every connection's socket (default on, as ark-tcp's).
    pub nodelay: bool,
    /// TCP keepalive on every connection's socket (default off).
    pub keepalive: Option<ark_tcp::Keepalive>,
    /// `SO_SNDBUF` request for every connection's socket (default: the system's).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` request for every connection's socket (default: the system's).
    pub recv_buffer: Option<usize>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            limits: Limits::default(),
            request_timeout: Duration::from_secs(30),
            keep_alive_timeout: Duration::from_secs(60),
            nodelay: true,
            keepalive: None,
            send_buffer: None,
            recv_buffer: None,
        }
    }
}

thread_local! {
    /// The `date` value of the current second, per thread.
    static DATE: std::cell::Cell<(u64, [u8; 29])> = const { std::cell::Cell::new((u64::MAX, [0; 29])) };
}

/// Today's `date` header value, formatted once a second per thread.
fn date_now() -> [u8; 29] {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with(|cell| {
        let (second, value) = cell.get();
        if second == now {
            return value;
        }
        let value = http_date(now);
        cell.set((now, value));
        value
    })
}

/// Most answers a connection keeps waiting behind a deferred one before it stops taking
/// requests.
const MAX_WAITING: usize = 64;

/// Encoded answers handed to the session at once, at most (bytes; one answer may pass it).
const OUT_BATCH: usize = 64 * 1024;

/// An answer waiting for one deferred before it.
enum Waiting {
    /// Encoded, ready to go.
    Encoded(Vec<u8>),
    /// Deferred by its handler: the slot its responder fills, and how to encode it.
    Deferred {
        slot: Slot,
        version: u8,
        head_method: bool,
        close: bool,
        /// For the router's `after` middleware (when it has any): the request's head and the
        /// state `before` left.
        after: Option<AfterDeferred>,
        /// When the read that completed the request was served (its answer's latency).
        since: Instant,
    },
}

/// What the `after` middleware of a deferred answer sees.
struct AfterDeferred {
    head: Vec<u8>,
    state: Option<Box<dyn std::any::Any + Send>>,
}

/// One connection: the bytes of the request under way, the decoder, reused buffers.
struct HttpConn {
    router: Arc<Router>,
    config: Arc<HttpConfig>,
    decoder: RequestDecoder,
    /// Bytes from the start of the request under way (only when a read ended inside one).
    pending: Vec<u8>,
    response: Response,
    /// Encoded responses not yet handed to the session (its queue was full).
    out: Vec<u8>,
    /// The request deadline's timer, while a request is under way.
    deadline: Option<TimerId>,
    /// An answer ended the connection: nothing more is read.
    done: bool,
    /// Answers in order behind a deferred one (empty on the fast path).
    waiting: VecDeque<Waiting>,
    /// The response's waker is set (on the first request).
    waker_set: bool,
    /// An upgrade answered, to hand the connection over once the answer is queued.
    upgrading: Option<Upgrade>,
    /// The handler that took the connection over (an upgrade): every callback goes to it.
    upgraded: Option<Box<dyn TcpHandler>>,
    /// The server's counters, and this connection's counts since they were last added.
    counters: Arc<HttpCounters>,
    tally: HttpStats,
    /// Answers queued by the serving under way (their latency is counted at its end).
    batch: u64,
    /// The server drains: every answer from now on closes the connection, and a connection
    /// with nothing under way closes at once.
    draining: bool,
}

impl HttpConn {
    fn new(router: Arc<Router>, config: Arc<HttpConfig>, counters: Arc<HttpCounters>) -> Self {
        HttpConn {
            counters,
            tally: HttpStats::default(),
            batch: 0,
            decoder: RequestDecoder::new(config.limits),
            router,
            config,
            pending: Vec::new(),
            response: Response::new(),
            out: Vec::new(),
            deadline: None,
            done: false,
            draining: false,
            waiting: VecDeque::new(),
            waker_set: false,
            upgrading: None,
            upgraded: None,
        }
    }

    /// Answers every whole request at the front of `input`; returns the bytes consumed.
    fn serve(&mut self, session: &mut TcpSession<'_>, input: &[u8]) -> usize {
        let started = Instant::now();
        let used = self.serve_since(session, input, started);
        if self.batch > 0 {
            let n = std::mem::take(&mut self.batch);
            self.tally.count_latency(started.elapsed(), n);
        }
        used
    }

    /// As [`serve`](Self::serve), for a read served from `started`.
    fn serve_since(
        &mut self,
        session: &mut TcpSession<'_>,
        input: &[u8],
        started: Instant,
    ) -> usize {
        let mut at = 0;
        if !self.waker_set {
            self.waker_set = true;
            self.response.set_waker(session.handle());
        }
        // The answers to a read's requests go to the session together (one copy into its
        // queue, none when it is empty), in batches of at most OUT_BATCH bytes; an answer
        // the session refuses (its queue is full) stops the serving until it drains.
        while !self.done
            && self.out.len() < OUT_BATCH
            && self.waiting.len() < MAX_WAITING
            && at < input.len()
        {
            match self.decoder.decode(&input[at..]) {
                Ok((Decoded::Request(facts), used)) => {
                    self.answer(facts, &input[at..at + used], started);
                    at += used;
                    if self.out.len() >= OUT_BATCH {
                        self.flush(session);
                    }
                }
                Ok((Decoded::Continue, _)) => {
                    self.emit(|out| out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n"));
                    self.flush(session);
                    break;
                }
                Ok((Decoded::Incomplete, _)) => break,
                Err(error) => {
                    self.refuse(&error);
                    self.flush(session);
                    at = input.len();
                }
            }
        }
        self.flush(session);
        if let Some(upgrade) = self.upgrading.take() {
            self.hand_over(session, upgrade, &input[at..]);
            return input.len();
        }
        self.close_when_answered(session);
        at
    }

    /// Hands the connection to the handler of an upgrade, its `101` queued: `on_open`, then
    /// the bytes that followed the request.
    fn hand_over(&mut self, session: &mut TcpSession<'_>, upgrade: Upgrade, rest: &[u8]) {
        if !self.out.is_empty() {
            // The 101 is not queued (the queue is full of earlier answers): nothing may go
            // out before it, so the connection cannot be handed over.
            session.abort();
            return;
        }
        if let Some(timer) = self.deadline.take() {
            session.cancel_timer(timer);
        }
        self.pending = Vec::new();
        let Upgrade(mut handler) = upgrade;
        handler.on_open(session);
        if !rest.is_empty() {
            handler.on_message(session, rest);
        }
        self.upgraded = Some(handler);
    }

    /// Once the connection is done and no deferred answer is outstanding, closes it. In a
    /// drain a connection with no request under way and every answer handed over is done.
    fn close_when_answered(&mut self, session: &mut TcpSession<'_>) {
        if self.draining && self.pending.is_empty() && self.out.is_empty() {
            self.done = true;
        }
        if self.done && self.waiting.is_empty() {
            session.close();
        }
    }

    /// Encodes the answers at the front of the waiting queue that are ready.
    fn drain_waiting(&mut self) {
        while let Some(front) = self.waiting.front_mut() {
            match front {
                Waiting::Encoded(bytes) => self.out.append(bytes),
                Waiting::Deferred {
                    slot,
                    version,
                    head_method,
                    close,
                    after,
                    since,
                } => {
                    let answer = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                    let Some(mut answer) = answer else {
                        return;
                    };
                    self.tally.count_latency(since.elapsed(), 1);
                    if let Some(AfterDeferred { head, state }) = after.take() {
                        answer.put_state_box(state);
                        self.router.after_deferred(&head, &mut answer);
                    }
                    // Deferred before a drain began, it is the connection's last answer now.
                    let close = *close || answer.closes() || self.draining;
                    self.tally.count_status(answer.status_code());
                    answer.encode(&mut self.out, *version, *head_method, close, &date_now());
                    if close {
                        // Nothing may follow an answer that closes: the requests pipelined
                        // after it go unanswered, as a client expects of a closed connection.
                        self.done = true;
                        self.waiting.clear();
                        return;
                    }
                }
            }
            self.waiting.pop_front();
        }
    }

    /// Runs the router for one whole request and encodes its answer.
    fn answer(&mut self, facts: HeadFacts, bytes: &[u8], since: Instant) {
        let head = &bytes[..facts.len];
        let body = match facts.body {
            BodyKind::Chunked => self.decoder.chunked_body(),
            _ => &bytes[facts.len..],
        };
        self.response.reset();
        let Some(request) = Request::view(head, body) else {
            // parse_head accepted it: not expected, but refused rather than trusted.
            self.refuse(&HttpError::BadRequest("unreadable request head"));
            return;
        };
        self.tally.count_method(request.method());
        self.router.handle(request, &mut self.response);
        let close = !facts.keep_alive || self.response.closes() || self.draining;
        if let Some(upgrade) = self.response.take_upgrade() {
            if self.draining {
                return self.refuse(&HttpError::Draining);
            }
            return self.answer_upgrade(upgrade, facts.version, close);
        }
        if !self.response.is_deferred() {
            self.tally.count_status(self.response.status_code());
            self.batch += 1;
        }
        if let Some(slot) = self.response.take_deferred() {
            let after = self.router.has_after().then(|| AfterDeferred {
                head: head.to_vec(),
                state: self.response.take_state_box(),
            });
            self.waiting.push_back(Waiting::Deferred {
                slot,
                version: facts.version,
                head_method: facts.head_method,
                close,
                after,
                since,
            });
            // No request after one that closes is read; its answer ends the connection.
            self.done |= close;
        } else {
            let response = std::mem::take(&mut self.response);
            self.emit(|out| {
                response.encode(out, facts.version, facts.head_method, close, &date_now())
            });
            self.response = response;
            self.done |= close;
        }
    }

    /// Answers an upgrade with its `101`; the connection is handed over after the serving.
    fn answer_upgrade(&mut self, upgrade: Upgrade, version: u8, close: bool) {
        if !self.waiting.is_empty() || version == 0 || close {
            return self.refuse(&HttpError::BadRequest(
                "upgrade refused: answers to earlier requests are waiting, HTTP/1.0, or connection: close",
            ));
        }
        if self.response.status_code() != 101 {
            // The handler changed its mind after upgrading: a plain answer.
            self.tally.count_status(self.response.status_code());
            self.batch += 1;
            let response = std::mem::take(&mut self.response);
            self.emit(|out| response.encode(out, version, false, false, &date_now()));
            self.response = response;
            return;
        }
        let response = std::mem::take(&mut self.response);
        response.encode(&mut self.out, version, false, false, &date_now());
        self.response = response;
        #[cfg(feature = "tracing")]
        ark_reactor::log_limited!(
            tracing::Level::DEBUG,
            "http connection upgraded (101): handed over"
        );
        self.tally.count_status(101);
        self.tally.upgrades += 1;
        self.batch += 1;
        self.upgrading = Some(upgrade);
        self.done = true;
    }

    /// Encodes an answer into the outgoing bytes, or behind the deferred answers before it.
    fn emit(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        if self.waiting.is_empty() {
            encode(&mut self.out);
        } else {
            let mut bytes = Vec::new();
            encode(&mut bytes);
            self.waiting.push_back(Waiting::Encoded(bytes));
        }
    }

    /// Answers a bad request with its status and closes.
    fn refuse(&mut self, error: &HttpError) {
        // A peer can send bad requests at will: rate-limited.
        #[cfg(feature = "tracing")]
        ark_reactor::log_limited!(
            tracing::Level::WARN,
            status = error.status(),
            %error,
            "http request refused"
        );
        self.response.reset();
        self.router.refuse(error, &mut self.response);
        self.tally.count_status(self.response.status_code());
        self.tally.refused += 1;
        let response = std::mem::take(&mut self.response);
        self.emit(|out| response.encode(out, 1, false, true, &date_now()));
        self.response = response;
        self.done = true;
    }

    /// Adds this connection's counts to the server's.
    fn publish(&mut self) {
        if self.tally != HttpStats::default() {
            self.counters.add(&std::mem::take(&mut self.tally));
        }
    }

    /// Hands the encoded answers to the session; they wait here while its queue is full.
    fn flush(&mut self, session: &mut TcpSession<'_>) {
        if self.out.is_empty() {
            return;
        }
        match session.append_raw(&mut self.out) {
            Ok(()) | Err(SendError::Closed) => self.out.clear(),
            Err(_) => {}
        }
    }

    /// Keeps the request deadline armed while a request is under way.
    fn watch(&mut self, session: &mut TcpSession<'_>) {
        match (self.pending.is_empty(), self.deadline) {
            (false, None) => self.deadline = Some(session.set_timer(self.config.request_timeout)),
            (true, Some(timer)) => {
                session.cancel_timer(timer);
                self.deadline = None;
            }
            _ => {}
        }
    }

    /// The most request bytes a connection holds: one whole request at its limits, plus a
    /// read's worth.
    fn held_limit(&self) -> usize {
        usize::try_from(self.decoder.limits().message_bound()).unwrap_or(usize::MAX)
    }

    /// Once the connection is done (a refusal, a 408, an answer that closes), nothing more
    /// is read from it: the request bytes held and the decoder's body go at once, not when
    /// the close finishes (up to `close_timeout` later, a whole `max_body` per connection).
    fn release_if_done(&mut self) {
        if self.done {
            self.pending = Vec::new();
            self.decoder = RequestDecoder::new(*self.decoder.limits());
        }
    }

    /// Serves `pending` (the bytes kept from earlier reads) and drops what it consumed.
    fn serve_pending(&mut self, session: &mut TcpSession<'_>) {
        let pending = std::mem::take(&mut self.pending);
        let used = self.serve(session, &pending);
        self.pending = pending;
        self.pending.drain(..used);
    }
}

impl HttpConn {
    /// Serves the requests of `bytes` (read from the connection).
    fn receive(&mut self, session: &mut TcpSession<'_>, bytes: &[u8]) {
        if self.done {
            return;
        }
        if self.pending.is_empty() {
            // The common case: whole requests straight from the read, nothing copied.
            let used = self.serve(session, bytes);
            if !self.done {
                self.pending.extend_from_slice(&bytes[used..]);
            }
        } else {
            // Only the rest of the request under way is copied (when its length is known);
            // the requests after it are served straight from the read.
            let take = self.decoder.wanted().map_or(bytes.len(), |total| {
                total.saturating_sub(self.pending.len()).min(bytes.len())
            });
            self.pending.extend_from_slice(&bytes[..take]);
            if self.pending.len() > self.held_limit() {
                // Only while answers wait for a full send queue can bytes pile up past one
                // request: a client pipelining without reading its answers. Bounded: reset.
                session.abort();
                self.done = true;
                return;
            }
            self.serve_pending(session);
            let rest = &bytes[take..];
            if let Some(upgraded) = &mut self.upgraded {
                // Upgraded by the request just completed: what followed it is the new
                // protocol's.
                if !rest.is_empty() {
                    upgraded.on_message(session, rest);
                }
                return;
            }
            if self.pending.is_empty() && !self.done {
                let used = self.serve(session, rest);
                if !self.done {
                    self.pending.extend_from_slice(&rest[used..]);
                }
            } else if !self.done {
                self.pending.extend_from_slice(rest);
            }
        }
        if self.pending.is_empty() {
            self.pending = Vec::new();
        }
        self.release_if_done();
        self.watch(session);
    }
}

impl TcpHandler for HttpConn {
    fn on_message(&mut self, session: &mut TcpSession<'_>, bytes: &[u8]) {
        match &mut self.upgraded {
            Some(upgraded) => upgraded.on_message(session, bytes),
            None => {
                self.receive(session, bytes);
                self.publish();
            }
        }
    }

    fn on_message_mut(&mut self, session: &mut TcpSession<'_>, bytes: &mut [u8]) {
        match &mut self.upgraded {
            Some(upgraded) => upgraded.on_message_mut(session, bytes),
            None => self.on_message(session, bytes),
        }
    }

    fn decodes_in_place(&self) -> bool {
        self.upgraded.as_ref().is_some_and(|h| h.decodes_in_place())
    }

    fn on_wake(&mut self, session: &mut TcpSession<'_>) {
        if let Some(upgraded) = &mut self.upgraded {
            return upgraded.on_wake(session);
        }
        self.drain_waiting();
        self.flush(session);
        self.close_when_answered(session);
        self.release_if_done();
        if self.out.is_empty() && !self.pending.is_empty() && !self.done {
            self.serve_pending(session);
            self.watch(session);
        }
        self.publish();
    }

    fn on_writable(&mut self, session: &mut TcpSession<'_>) {
        if let Some(upgraded) = &mut self.upgraded {
            return upgraded.on_writable(session);
        }
        self.flush(session);
        if self.out.is_empty() && !self.pending.is_empty() && !self.done {
            self.serve_pending(session);
            self.watch(session);
        }
        self.publish();
    }

    fn on_timer(&mut self, session: &mut TcpSession<'_>, timer: TimerId) {
        if let Some(upgraded) = &mut self.upgraded {
            return upgraded.on_timer(session, timer);
        }
        if self.deadline == Some(timer) {
            self.deadline = None;
            self.refuse(&HttpError::RequestTimeout);
            self.flush(session);
            self.close_when_answered(session);
            self.release_if_done();
            self.publish();
        }
    }

    fn on_drain(&mut self, session: &mut TcpSession<'_>) {
        if let Some(upgraded) = &mut self.upgraded {
            return upgraded.on_drain(session);
        }
        self.draining = true;
        self.close_when_answered(session);
        self.release_if_done();
        self.publish();
    }

    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        if let Some(upgraded) = &mut self.upgraded {
            upgraded.on_stopping(session);
        }
    }

    fn on_idle(&mut self, session: &mut TcpSession<'_>) {
        if let Some(upgraded) = &mut self.upgraded {
            upgraded.on_idle(session);
        }
    }

    fn on_close(&mut self, reason: &CloseReason) {
        self.publish();
        if let Some(upgraded) = &mut self.upgraded {
            upgraded.on_close(reason);
        }
    }
}

/// Entry point: [`HttpServer::builder`].
#[derive(Debug)]
pub struct HttpServer;

impl HttpServer {
    /// A builder with [`HttpConfig`]'s defaults and a single-threaded pool of its own.
    pub fn builder() -> HttpServerBuilder {
        HttpServerBuilder {
            tcp: TcpServer::builder().framing(Raw::new().with_max_frame_len(64 * 1024)),
            config: HttpConfig::default(),
            accept: AcceptLimits::default(),
        }
    }
}

/// Configures and starts an [`HttpServer`]: the address and the runtime are chosen as for
/// every ark server (it is an ark-tcp server underneath).
#[derive(Debug)]
pub struct HttpServerBuilder {
    tcp: TcpServerBuilder<Raw>,
    config: HttpConfig,
    accept: AcceptLimits,
}

impl HttpServerBuilder {
    /// The address to listen on (IPv4 or IPv6; port 0 picks one), or a name and port
    /// (`"localhost:8080"`), as [`TcpServerBuilder::bind`].
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.tcp = self.tcp.bind(addr);
        self
    }

    /// All settings at once.
    pub fn config(mut self, config: HttpConfig) -> Self {
        self.config = config;
        self
    }

    /// Request limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.config.limits = limits;
        self
    }

    /// Serves https: a TLS handshake with `tls` first on every connection.
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ServerTls) -> Self {
        self.tcp = self.tcp.tls(tls);
        self
    }

    ark_reactor::runtime_options!(via tcp);

    ark_tcp::socket_options!();

    ark_tcp::accept_options!();

    /// Starts serving `router`.
    ///
    /// # Errors
    /// No address (or it did not resolve), binding failed, or the pool could not start.
    pub fn start(self, router: Router) -> io::Result<HttpServerHandle> {
        let config = Arc::new(self.config);
        // Answers of pipelined requests pause reading at 1 MiB queued (a client that does not
        // read its answers is held back by TCP), and the queue stops at 4 MiB.
        let session = ark_tcp::TcpConfig {
            nodelay: config.nodelay,
            keepalive: config.keepalive,
            send_buffer: config.send_buffer,
            recv_buffer: config.recv_buffer,
            idle_timeout: Some(config.keep_alive_timeout.max(config.request_timeout)),
            stall_timeout: None,
            send_limit: 4 * 1024 * 1024,
            high_watermark: 1024 * 1024,
            low_watermark: 256 * 1024,
            ..ark_tcp::TcpConfig::default()
        };
        let tcp = self.tcp.session_config(session).accept_limits(self.accept);
        let router = Arc::new(router);
        let counters = Arc::new(HttpCounters::default());
        let c = counters.clone();
        let inner = tcp.start(move |_| HttpConn::new(router.clone(), config.clone(), c.clone()))?;
        Ok(HttpServerHandle { inner, counters })
    }
}

/// A running HTTP server.
#[derive(Debug)]
pub struct HttpServerHandle {
    inner: TcpServerHandle,
    counters: Arc<HttpCounters>,
}

impl HttpServerHandle {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local_addr()
    }

    /// The HTTP counters: answers by status class, requests by method, refusals, upgrades,
    /// a latency histogram.
    pub fn stats(&self) -> HttpStats {
        self.counters.snapshot()
    }

    /// The underlying TCP counters (connections, bytes, syscalls, buffers held, closes).
    pub fn tcp_stats(&self) -> TcpStats {
        self.inner.stats()
    }

    /// Begins a graceful stop (answers under way are written first).
    pub fn stop(self) -> Stopping {
        self.inner.stop()
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> std::io::Result<()> {
        self.stop().wait_timeout(timeout)
    }

    /// Begins a drain and returns at once (ark-tcp's drain): no new connections; a
    /// connection with no request under way closes at once; a request under way (being
    /// received, being handled, its answer deferred) is finished, and its answer says
    /// `connection: close` and ends the connection (requests pipelined behind it go
    /// unanswered, which a client retries on another connection, RFC 9112 §9.3.2); an
    /// upgrade asked for meanwhile is refused with 503. A WebSocket session upgraded from
    /// this server gets its `on_drain`. What is still open when `drain` has passed is
    /// stopped as [`stop`](Self::stop) does; [`Stopping::report`] says how many.
    pub fn drain(self, drain: std::time::Duration) -> Stopping {
        self.inner.drain(drain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ark_frame::Raw;
    use ark_tcp::{Simulator, TcpConfig};

    /// Pipelined POSTs of many sizes (an empty body, one byte, sizes around a read, 40 KB).
    fn requests() -> (Vec<u8>, Vec<Vec<u8>>) {
        let mut stream = Vec::new();
        let mut bodies = Vec::new();
        for (i, size) in [0, 1, 17, 1000, 4095, 16_384, 40_000, 3, 65_536, 12]
            .iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            let body: Vec<u8> = (0..*size).map(|j| b'a' + ((i + j) % 26) as u8).collect();
            stream.extend_from_slice(
                format!("POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: {size}\r\n\r\n")
                    .as_bytes(),
            );
            stream.extend_from_slice(&body);
            bodies.push(body);
        }
        (stream, bodies)
    }

    /// The bodies of the whole answers in `bytes`, in order.
    fn answer_bodies(mut bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut bodies = Vec::new();
        while !bytes.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; 16];
            let mut response = httparse::Response::new(&mut headers);
            let Ok(httparse::Status::Complete(len)) = response.parse(bytes) else {
                panic!("a partial or bad answer");
            };
            assert_eq!(response.code, Some(200));
            let length: usize = response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                .unwrap();
            bodies.push(bytes[len..len + length].to_vec());
            bytes = &bytes[len + length..];
        }
        bodies
    }

    #[test]
    fn pipelined_requests_split_anywhere_across_reads_are_answered_whole_and_in_order() {
        let router = Arc::new(Router::new().post("/echo", |req, res| {
            res.body(req.body());
        }));
        let (stream, bodies) = requests();
        for piece in [1, 7, 100, 1000, 4096, 16_385, 30_000, 65_536] {
            let conn = HttpConn::new(
                router.clone(),
                Arc::new(HttpConfig::default()),
                Arc::default(),
            );
            let codec = Raw::new().with_max_frame_len(64 * 1024);
            let mut sim = Simulator::new(conn, codec, TcpConfig::default());
            let mut answers = Vec::new();
            for chunk in stream.chunks(piece) {
                sim.peer_send(chunk);
                answers.extend(sim.peer_read());
            }
            assert_eq!(answer_bodies(&answers), bodies, "pieces of {piece} bytes");
            assert_eq!(
                sim.handler().pending.len(),
                0,
                "nothing held after the last request"
            );
        }
    }

    /// Regression: after the 408 for a stalled body, the connection kept the request bytes
    /// it held until its close ended, up to `close_timeout` later (a refusal already let
    /// them go: what it refuses is consumed).
    #[test]
    fn after_a_408_the_connection_holds_no_request_bytes() {
        let router = Arc::new(Router::new().post("/echo", |req, res| {
            res.body(req.body());
        }));
        let config = HttpConfig::default();
        let timeout = config.request_timeout;
        let conn = HttpConn::new(router, Arc::new(config), Arc::default());
        let codec = Raw::new().with_max_frame_len(64 * 1024);
        let mut sim = Simulator::new(conn, codec, TcpConfig::default());
        sim.peer_send(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 8388608\r\n\r\n");
        for _ in 0..64 {
            sim.peer_send(&[b'a'; 64 * 1024]);
        }
        assert!(
            sim.handler().pending.capacity() >= 4 << 20,
            "half the body is held"
        );
        sim.advance(timeout);
        let answer = sim.peer_read();
        let first = String::from_utf8_lossy(&answer[..answer.len().min(40)]).into_owned();
        assert!(answer.starts_with(b"HTTP/1.1 408 "), "{first}");
        assert_eq!(sim.handler().pending.capacity(), 0, "after the 408");
    }

    /// A client of raw bytes: sends `request` once its stream (and TLS) is up, keeps what
    /// comes back.
    #[cfg(feature = "tls")]
    struct RawClient {
        request: Vec<u8>,
        answer: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    #[cfg(feature = "tls")]
    impl ark_tcp::TcpHandler for RawClient {
        fn on_open(&mut self, session: &mut ark_tcp::TcpSession<'_>) {
            for piece in self.request.chunks(64 * 1024) {
                session.send(piece).unwrap();
            }
        }
        fn on_message(&mut self, _: &mut ark_tcp::TcpSession<'_>, message: &[u8]) {
            self.answer.lock().unwrap().extend_from_slice(message);
        }
    }

    /// https with no socket: the server's connection on a simulator with TLS (the core's
    /// TLS layer, as the sockets run it) answers pipelined requests to a TLS client
    /// simulator, whole and in order.
    #[cfg(feature = "tls")]
    #[test]
    fn https_answers_pipelined_requests_in_memory() {
        use ark_tls::{Pki, TlsSession};
        let router = Arc::new(Router::new().post("/echo", |req, res| {
            res.body(req.body());
        }));
        let (stream, bodies) = requests();
        let pki = Pki::generate(&["localhost"]).unwrap();
        let now = std::time::Instant::now();
        let server_tls = TlsSession::server(&pki.server_tls().unwrap(), now).unwrap();
        let name = ark_tls::server_name("localhost").unwrap();
        let client_tls = TlsSession::client(&pki.client_tls().unwrap(), name, now).unwrap();
        let conn = HttpConn::new(router, Arc::new(HttpConfig::default()), Arc::default());
        let codec = Raw::new().with_max_frame_len(64 * 1024);
        let config = TcpConfig::default();
        let mut server = Simulator::with_tls(conn, codec, config.clone(), server_tls, now);
        let answer = Arc::default();
        let client = RawClient {
            request: stream,
            answer: Arc::clone(&answer),
        };
        let mut client = Simulator::with_tls(client, codec, config, client_tls, now);
        assert!(
            client.exchange(&mut server, 1000) < 1000,
            "the exchange settles"
        );
        assert_eq!(answer_bodies(&answer.lock().unwrap()), bodies);
    }
}
