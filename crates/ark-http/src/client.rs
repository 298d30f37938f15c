//! `HttpClient`: one kept-alive HTTP/1.1 connection on an ark-tcp client, requests pipelined
//! (sent without waiting for earlier answers) and answers delivered in order; https with
//! ark-tls.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Duration;

use ark_frame::Raw;
use ark_tcp::{
    CloseReason, ReactorConfig, Runtime, SendError, TcpClient, TcpClientHandle, TcpHandler,
    TcpSession, TcpStats,
};

use crate::error::AnswerError;
use crate::proto::answers::{AnswerReader, AnswerSink, ClientResponse};
use crate::proto::head::Limits;

/// A client connection's view for its handler: send requests.
pub struct ClientSession<'s, 'a> {
    /// `None` once the connection has ended (an answer delivered at the peer's close).
    tcp: Option<&'s mut TcpSession<'a>>,
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
    /// The connection's send queue is full or the connection is closing or closed
    /// ([`SendError`]).
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> Result<(), SendError> {
        let Some(tcp) = self.tcp.as_deref_mut() else {
            return Err(SendError::Closed);
        };
        self.buf.clear();
        let head = RequestHead {
            method,
            target,
            host: self.host,
        };
        head.encode(headers.iter().copied(), body.len(), self.buf);
        // The body goes straight into the send queue, not through the head's buffer.
        tcp.send_raw_parts(&[self.buf, body])?;
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
        if let Some(tcp) = self.tcp.as_deref_mut() {
            tcp.close();
        }
    }
}

/// A request's head as both clients write it.
pub(crate) struct RequestHead<'a> {
    pub(crate) method: &'a str,
    pub(crate) target: &'a str,
    pub(crate) host: &'a str,
}

impl RequestHead<'_> {
    /// Appends the head to `out`: the request line, `host`, `headers`, and the body's
    /// `content-length` (none for an empty body of GET or HEAD).
    pub(crate) fn encode<'h>(
        &self,
        headers: impl Iterator<Item = (&'h str, &'h [u8])>,
        body_len: usize,
        out: &mut Vec<u8>,
    ) {
        let (method, target, host) = (self.method, self.target, self.host);
        let _ = write!(out, "{method} {target} HTTP/1.1\r\nhost: {host}\r\n");
        for (name, value) in headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        if body_len > 0 || !matches!(method, "GET" | "HEAD") {
            let _ = write!(out, "content-length: {body_len}\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// The callbacks of an HTTP client connection.
pub trait HttpClientHandler: Send + 'static {
    /// The connection is open: send the first requests.
    fn on_open(&mut self, session: &mut ClientSession<'_, '_>) {
        let _ = session;
    }

    /// The answer to the oldest request in flight. An answer whose body runs to the close
    /// comes when the server closes cleanly, just before [`on_close`](Self::on_close): the
    /// session then sends nothing more.
    fn on_response(&mut self, session: &mut ClientSession<'_, '_>, response: &ClientResponse<'_>);

    /// The server broke HTTP/1.1's rules (which, in `error`: a malformed or ambiguous answer,
    /// one over the limits, a `101`, bytes no request asked for). Nothing of it reaches
    /// [`on_response`](Self::on_response); the connection is dropped, and
    /// [`on_close`](Self::on_close) follows with the requests left unanswered.
    fn on_bad_answer(&mut self, error: &AnswerError) {
        let _ = error;
    }

    /// The send queue has room again after a refused request.
    fn on_writable(&mut self, session: &mut ClientSession<'_, '_>) {
        let _ = session;
    }

    /// The connection ended; requests still in flight got no answer.
    fn on_close(&mut self, reason: &CloseReason, unanswered: usize) {
        let _ = (reason, unanswered);
    }
}

/// One client connection as an ark-tcp handler.
struct ClientConn<H> {
    handler: H,
    host: Arc<str>,
    reader: AnswerReader,
    in_flight: VecDeque<bool>,
    request_buf: Vec<u8>,
}

impl<H: HttpClientHandler> ClientConn<H> {
    fn view<'s, 'a>(
        &'s mut self,
        tcp: &'s mut TcpSession<'a>,
    ) -> (&'s mut H, ClientSession<'s, 'a>) {
        (
            &mut self.handler,
            ClientSession {
                tcp: Some(tcp),
                host: &self.host,
                in_flight: &mut self.in_flight,
                buf: &mut self.request_buf,
            },
        )
    }
}

/// The handler's side of an [`AnswerReader`]: each answer pops its request and goes to the
/// handler with the session.
struct Deliver<'c, 's, 'a, H> {
    handler: &'c mut H,
    session: ClientSession<'s, 'a>,
}

impl<H: HttpClientHandler> AnswerSink for Deliver<'_, '_, '_, H> {
    fn awaited(&self) -> usize {
        self.session.in_flight.len()
    }

    fn head_request(&self) -> bool {
        self.session.in_flight.front().copied().unwrap_or(false)
    }

    fn answer(&mut self, response: &ClientResponse<'_>) {
        self.session.in_flight.pop_front();
        self.handler.on_response(&mut self.session, response);
    }
}

impl<H: HttpClientHandler> TcpHandler for ClientConn<H> {
    fn on_open(&mut self, tcp: &mut TcpSession<'_>) {
        self.reader.reset();
        self.in_flight.clear();
        let (handler, mut session) = self.view(tcp);
        handler.on_open(&mut session);
    }

    fn on_message(&mut self, tcp: &mut TcpSession<'_>, bytes: &[u8]) {
        let ClientConn {
            handler,
            host,
            reader,
            in_flight,
            request_buf,
        } = self;
        let session = ClientSession {
            tcp: Some(tcp),
            host,
            in_flight,
            buf: request_buf,
        };
        let mut deliver = Deliver { handler, session };
        if let Err(error) = reader.feed(bytes, &mut deliver) {
            deliver.handler.on_bad_answer(&error);
            if let Some(tcp) = deliver.session.tcp {
                tcp.abort();
            }
        }
    }

    fn on_writable(&mut self, tcp: &mut TcpSession<'_>) {
        let (handler, mut session) = self.view(tcp);
        handler.on_writable(&mut session);
    }

    fn on_close(&mut self, reason: &CloseReason) {
        if *reason == CloseReason::PeerClosed && self.reader.under_way() {
            // A body that runs to the close ends at a clean close (not at a reset, nor a TLS
            // stream cut short).
            let ClientConn {
                handler,
                host,
                reader,
                in_flight,
                request_buf,
            } = self;
            let session = ClientSession {
                tcp: None,
                host,
                in_flight,
                buf: request_buf,
            };
            reader.end_of_stream(&mut Deliver { handler, session });
        }
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
            #[cfg(feature = "tls")]
            tls: None,
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
            connect_timeout: Duration::from_secs(30),
            host: None,
        }
    }
}

/// Configures and starts an [`HttpClient`].
#[derive(Debug)]
pub struct HttpClientBuilder {
    limits: Limits,
    #[cfg(feature = "tls")]
    tls: Option<(ark_tls::ClientTls, String)>,
    runtime: Runtime,
    reactor_config: ReactorConfig,
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
    #[cfg(feature = "tls")]
    pub fn tls(mut self, tls: ark_tls::ClientTls, name: impl Into<String>) -> Self {
        self.tls = Some((tls, name.into()));
        self
    }

    /// The `Host` header's value (default: the address connected to, or the TLS name).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    ark_reactor::runtime_options!();

    /// How long connecting (and the TLS handshake) may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connects to `addr` (an address, or a name and port such as `"localhost:8080"`; see
    /// [`ark_reactor::resolve`]) and runs `handler` on the connection.
    ///
    /// # Errors
    /// The address does not resolve, the pool could not start, or the TLS name is invalid.
    pub fn connect<H: HttpClientHandler>(
        self,
        addr: impl std::net::ToSocketAddrs,
        handler: H,
    ) -> io::Result<HttpClientHandle> {
        let addr = ark_reactor::resolve(addr)?;
        #[cfg(feature = "tls")]
        let host = self
            .host
            .or_else(|| self.tls.as_ref().map(|(_, name)| name.clone()));
        #[cfg(not(feature = "tls"))]
        let host = self.host;
        let host = host.unwrap_or_else(|| addr.to_string());
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
        let mut tcp = TcpClient::builder()
            .framing(Raw::new().with_max_frame_len(64 * 1024))
            .connect_timeout(self.connect_timeout)
            .runtime(self.runtime)
            .reactor_config(self.reactor_config);
        #[cfg(feature = "tls")]
        if let Some((tls, name)) = self.tls {
            tcp = tcp.tls(tls, name);
        }
        let conn = ClientConn {
            handler,
            host: host.into(),
            reader: AnswerReader::new(self.limits),
            in_flight: VecDeque::new(),
            request_buf: Vec::new(),
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
    /// The underlying TCP counters (the client's HTTP answers go to its handler).
    pub fn tcp_stats(&self) -> TcpStats {
        self.inner.stats()
    }

    /// Begins a graceful stop.
    pub fn stop(self) -> ark_tcp::Stopping {
        self.inner.stop()
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> std::io::Result<()> {
        self.stop().wait_timeout(timeout)
    }
}
