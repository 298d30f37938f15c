//! `HttpClient`: one kept-alive HTTP/1.1 connection on an ark-tcp client, requests pipelined
//! (sent without waiting for earlier answers) and answers delivered in order; https with
//! ark-tls.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ark_frame::Raw;
use ark_tcp::{
    CloseReason, ReactorPool, SendError, Session, TcpClient, TcpClientHandle, TcpHandler, TcpStats,
};

use crate::decoder::Dechunker;
use crate::error::HttpError;
use crate::head::{Limits, MAX_HEADERS};

/// An answer as a handler sees it: status, version, headers and the whole body.
#[derive(Debug)]
pub struct ClientResponse<'a> {
    /// The status code.
    pub status: u16,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    head: &'a [u8],
    /// The body (chunked bodies decoded; empty for HEAD, 204, 304).
    pub body: &'a [u8],
}

impl<'a> ClientResponse<'a> {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        response.parse(self.head).ok()?;
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }
}

/// A client connection's view for its handler: send requests.
pub struct ClientSession<'s, 'a> {
    tcp: &'s mut Session<'a>,
    host: &'s str,
    in_flight: &'s mut VecDeque<bool>,
    buf: &'s mut Vec<u8>,
}

impl std::fmt::Debug for ClientSession<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("in_flight", &self.in_flight.len())
            .finish_non_exhaustive()
    }
}

impl ClientSession<'_, '_> {
    /// Queues a request (pipelined behind those in flight): `method target`, the `Host` of
    /// the client, `headers`, and `body` with its `content-length` (none for an empty body
    /// of GET or HEAD).
    ///
    /// # Errors
    /// The connection's send queue is full or the connection is closing ([`SendError`]).
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> Result<(), SendError> {
        self.buf.clear();
        let _ = write!(
            self.buf,
            "{method} {target} HTTP/1.1\r\nhost: {}\r\n",
            self.host
        );
        for (name, value) in headers {
            self.buf.extend_from_slice(name.as_bytes());
            self.buf.extend_from_slice(b": ");
            self.buf.extend_from_slice(value);
            self.buf.extend_from_slice(b"\r\n");
        }
        if !body.is_empty() || !matches!(method, "GET" | "HEAD") {
            let _ = write!(self.buf, "content-length: {}\r\n", body.len());
        }
        self.buf.extend_from_slice(b"\r\n");
        self.buf.extend_from_slice(body);
        self.tcp.append_raw(self.buf)?;
        self.in_flight.push_back(method == "HEAD");
        Ok(())
    }

    /// Requests sent and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Closes the connection gracefully (requests in flight are still answered first if the
    /// server answers before its end).
    pub fn close(&mut self) {
        self.tcp.close();
    }
}

/// The callbacks of an HTTP client connection.
pub trait HttpClientHandler: Send + 'static {
    /// The connection is open: send the first requests.
    fn on_open(&mut self, session: &mut ClientSession<'_, '_>) {
        let _ = session;
    }

    /// The answer to the oldest request in flight.
    fn on_response(&mut self, session: &mut ClientSession<'_, '_>, response: &ClientResponse<'_>);

    /// The send queue has room again after a refused request.
    fn on_writable(&mut self, session: &mut ClientSession<'_, '_>) {
        let _ = session;
    }

    /// The connection ended; requests still in flight got no answer.
    fn on_close(&mut self, reason: &CloseReason, unanswered: usize) {
        let _ = (reason, unanswered);
    }
}

/// How an answer's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    None,
    Length(usize),
    Chunked,
}

/// Parses the head of an answer at the front of `input`: its length, status, version and body
/// framing (`head_request`: the answer has no body).
fn parse_response(
    input: &[u8],
    limits: &Limits,
    head_request: bool,
) -> Result<Option<(usize, u16, u8, Framing)>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let window = &input[..input.len().min(limits.max_head + 1)];
    let len = match response.parse(window) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if window.len() > limits.max_head => {
            return Err(HttpError::HeadTooLarge {
                limit: limits.max_head,
            });
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(HttpError::BadRequest("malformed response head")),
    };
    let status = response.code.unwrap_or(0);
    let version = response.version.unwrap_or(1);
    let mut framing = Framing::None;
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("transfer-encoding") {
            framing = Framing::Chunked;
        } else if header.name.eq_ignore_ascii_case("content-length") && framing != Framing::Chunked
        {
            let n = std::str::from_utf8(header.value)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or(HttpError::BadContentLength)?;
            if n as u64 > limits.max_body {
                return Err(HttpError::BodyTooLarge {
                    limit: limits.max_body,
                });
            }
            framing = Framing::Length(n);
        }
    }
    if head_request || matches!(status, 100..=199 | 204 | 304) {
        framing = Framing::None;
    }
    Ok(Some((len, status, version, framing)))
}

/// One client connection as an ark-tcp handler.
struct ClientConn<H> {
    handler: H,
    host: Arc<str>,
    limits: Limits,
    pending: Vec<u8>,
    in_flight: VecDeque<bool>,
    request_buf: Vec<u8>,
    dechunker: Option<(Dechunker, Vec<u8>, usize)>,
}

impl<H: HttpClientHandler> ClientConn<H> {
    fn view<'s, 'a>(&'s mut self, tcp: &'s mut Session<'a>) -> (&'s mut H, ClientSession<'s, 'a>) {
        (
            &mut self.handler,
            ClientSession {
                tcp,
                host: &self.host,
                in_flight: &mut self.in_flight,
                buf: &mut self.request_buf,
            },
        )
    }

    /// Delivers every whole answer at the front of `input`; returns the bytes consumed.
    fn answers(&mut self, tcp: &mut Session<'_>, input: &[u8]) -> Result<usize, HttpError> {
        let mut at = 0;
        while at < input.len() {
            let head_request = self.in_flight.front().copied().unwrap_or(false);
            let Some((len, status, version, framing)) =
                parse_response(&input[at..], &self.limits, head_request)?
            else {
                break;
            };
            let rest = &input[at + len..];
            let (used, body): (usize, &[u8]) = match framing {
                Framing::None => (0, &[]),
                Framing::Length(n) if rest.len() >= n => (n, &rest[..n]),
                Framing::Length(_) => break,
                Framing::Chunked => {
                    let (dechunker, body, seen) = self
                        .dechunker
                        .get_or_insert_with(|| (Dechunker::new(), Vec::new(), 0));
                    let (n, done) = dechunker.decode(&rest[*seen..], body, &self.limits)?;
                    *seen += n;
                    if !done {
                        break;
                    }
                    (*seen, &[])
                }
            };
            let head = &input[at..at + len];
            at += len + used;
            if (100..200).contains(&status) {
                continue;
            }
            self.in_flight.pop_front();
            let chunked = self.dechunker.take();
            let body = chunked
                .as_ref()
                .map_or(body, |(_, decoded, _)| decoded.as_slice());
            let response = ClientResponse {
                status,
                version,
                head,
                body,
            };
            let (handler, mut session) = self.view(tcp);
            handler.on_response(&mut session, &response);
        }
        Ok(at)
    }
}

impl<H: HttpClientHandler> TcpHandler for ClientConn<H> {
    fn on_open(&mut self, tcp: &mut Session<'_>) {
        self.pending.clear();
        self.in_flight.clear();
        self.dechunker = None;
        let (handler, mut session) = self.view(tcp);
        handler.on_open(&mut session);
    }

    fn on_message(&mut self, tcp: &mut Session<'_>, bytes: &[u8]) {
        let result = if self.pending.is_empty() {
            self.answers(tcp, bytes)
                .map(|used| self.pending.extend_from_slice(&bytes[used..]))
        } else {
            self.pending.extend_from_slice(bytes);
            let pending = std::mem::take(&mut self.pending);
            let result = self.answers(tcp, &pending);
            self.pending = pending;
            result.map(|used| {
                self.pending.drain(..used);
            })
        };
        if result.is_err() {
            tcp.abort();
        }
    }

    fn on_writable(&mut self, tcp: &mut Session<'_>) {
        let (handler, mut session) = self.view(tcp);
        handler.on_writable(&mut session);
    }

    fn on_close(&mut self, reason: &CloseReason) {
        let unanswered = self.in_flight.len();
        self.handler.on_close(reason, unanswered);
    }
}

/// Entry point: [`HttpClient::builder`].
#[derive(Debug)]
pub struct HttpClient;

impl HttpClient {
    /// A builder: default limits, a 30 s connect timeout, a pool of its own.
    pub fn builder() -> HttpClientBuilder {
        HttpClientBuilder {
            limits: Limits::default(),
            tls: None,
            pool: None,
            connect_timeout: Duration::from_secs(30),
            host: None,
        }
    }
}

/// Configures and starts an [`HttpClient`].
#[derive(Debug)]
pub struct HttpClientBuilder {
    limits: Limits,
    tls: Option<(ark_tls::ClientTls, String)>,
    pool: Option<Arc<ReactorPool>>,
    connect_timeout: Duration,
    host: Option<String>,
}

impl HttpClientBuilder {
    /// Limits on answers (head size, body size).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// https: TLS with `tls` to the server `name` (verified, sent by SNI, and the `Host`).
    pub fn tls(mut self, tls: ark_tls::ClientTls, name: impl Into<String>) -> Self {
        self.tls = Some((tls, name.into()));
        self
    }

    /// The `Host` header's value (default: the address connected to, or the TLS name).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Runs on a shared pool.
    pub fn pool(mut self, pool: Arc<ReactorPool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// How long connecting (and the TLS handshake) may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connects to `addr` and runs `handler` on the connection.
    ///
    /// # Errors
    /// The pool could not start, or the TLS name is invalid.
    pub fn connect<H: HttpClientHandler>(
        self,
        addr: SocketAddr,
        handler: H,
    ) -> io::Result<HttpClientHandle> {
        let host = self
            .host
            .or_else(|| self.tls.as_ref().map(|(_, name)| name.clone()))
            .unwrap_or_else(|| addr.to_string());
        let mut tcp = TcpClient::builder()
            .framing(Raw::new().with_max_frame_len(64 * 1024))
            .connect_timeout(self.connect_timeout);
        if let Some(pool) = self.pool {
            tcp = tcp.pool(pool);
        }
        if let Some((tls, name)) = self.tls {
            tcp = tcp.tls(tls, name);
        }
        let conn = ClientConn {
            handler,
            host: host.into(),
            limits: self.limits,
            pending: Vec::new(),
            in_flight: VecDeque::new(),
            request_buf: Vec::new(),
            dechunker: None,
        };
        Ok(HttpClientHandle {
            inner: tcp.connect(addr, conn)?,
        })
    }
}

/// A running HTTP client connection.
#[derive(Debug)]
pub struct HttpClientHandle {
    inner: TcpClientHandle,
}

impl HttpClientHandle {
    /// The underlying TCP counters.
    pub fn stats(&self) -> TcpStats {
        self.inner.stats()
    }

    /// Begins a graceful stop.
    pub fn stop(self) -> ark_tcp::Stopping {
        self.inner.stop()
    }
}
