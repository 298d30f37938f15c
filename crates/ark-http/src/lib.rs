//! # ark-http
//!
//! HTTP/1.1 for ark: a sans-IO codec on [httparse], a router, a server, a pipelining client
//! and an agent for many origins, on ark-tcp (https with ark-tls, cargo feature `tls`, off by default).
//!
//! * **Codec** — [`RequestDecoder`]: bytes in, whole requests out in order (pipelining);
//!   `Content-Length` and chunked bodies, `Expect: 100-continue`, keep-alive rules of 1.0 and
//!   1.1, HEAD. Every ambiguity a smuggler could use is refused with its status
//!   ([`HttpError`]): both `Content-Length` and `Transfer-Encoding`, duplicate or invalid
//!   `Content-Length`, a bad chunk size or extension, a trailer line that is not a field line,
//!   obs-fold, a head or body over the [`Limits`], too many headers, a missing, duplicate or
//!   invalid `Host`, raw non-ASCII in the target, an unknown transfer coding (501). The
//!   server and both clients read heads with one parser and one set of framing rules.
//!   [`Response`] encodes answers with `content-length` and `date`.
//! * **Router** — [`Router`]: static segments, `:param`/`{param}`, a last
//!   `*wildcard`/`{*wildcard}`, every pattern checked when added ([`RouteError`]); method
//!   helpers and match (GET also answers HEAD), 404 and 405 with `Allow`, middleware before
//!   and after every answer (deferred ones too), hooks on the server's own refusals, typed
//!   parameters and (feature `json`) JSON bodies, refused by [`Response::reject`]
//!   ([`ExtractError`]).
//! * **Client** — [`HttpClient`]: one kept-alive connection, requests pipelined and answers
//!   delivered in order to an [`HttpClientHandler`] (Content-Length, chunked and
//!   close-delimited bodies, HEAD, 1xx skipped); an answer that breaks the server's rules, a
//!   `101`, bytes no request asked for or an answer over the limits is refused
//!   ([`AnswerError`]) and never delivered; https with `tls`.
//! * **Agent** — [`HttpAgent`]: requests to many origins, connections kept alive and reused
//!   per origin (up to a limit, then requests queue), a deadline on every request,
//!   cancellation ([`Pending`], [`Canceller`]; a `Pending` is also a `Future`, awaited on any
//!   runtime); the same answer rules as the client, counted in [`AgentStats`]; https origins
//!   with `tls`.
//! * **Server** — [`HttpServer`]: a connection per ark-tcp session; requests answered in
//!   order, whole requests served straight from the read buffer; a handler may answer later
//!   from any thread ([`Response::defer`], [`Responder`]); a request deadline (408) and
//!   a keep-alive idle timeout; a bad request answered with its status and the connection
//!   closed; `tls` for https.
//!
//! ```
//! use ark_http::{HttpServer, Router};
//! use std::io::{Read, Write};
//!
//! let router = Router::new().get("/hello/:name", |req, res| {
//!     res.header("content-type", "text/plain").body(format!("hello {}", req.param("name").unwrap_or("")));
//! });
//! let server = HttpServer::builder().bind("127.0.0.1:0").start(router)?;
//! let mut client = std::net::TcpStream::connect(server.local_addr())?;
//! client.write_all(b"GET /hello/ark HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
//! let mut answer = String::new();
//! client.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"));
//! assert!(answer.ends_with("hello ark"));
//! drop(client);
//! server.stop().wait()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs: every feature-gated item is marked with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod agent;
mod client;
mod error;
mod feature;
mod proto;
mod response;
mod server;
mod stats;

pub use agent::{
    Canceller, ConnectionError, HttpAgent, HttpAgentBuilder, HttpRequest, HttpResponse, Origin,
    Pending, RequestError,
};
/// The stop protocol of every ark server: what `HttpServerHandle::stop` and `drain` return, and
/// what a drain reports.
pub use ark_tcp::{AcceptLimits, Keepalive, StopReport, Stopping};
pub use client::{
    ClientSession, HttpClient, HttpClientBuilder, HttpClientHandle, HttpClientHandler,
};
pub use error::{AnswerError, ExtractError, HttpError};
#[doc(hidden)]
pub use feature::NeedsJsonFeature;
pub use proto::answers::ClientResponse;
pub use proto::decoder::{Decoded, RequestDecoder};
pub use proto::head::{BodyKind, HeadFacts, Limits, MAX_HEADERS, Request, parse_head};
pub use proto::pattern::{MAX_PARAMS, RouteError};
pub use proto::router::Router;
pub use response::{Responder, Response, http_date, reason};
pub use server::{HttpConfig, HttpServer, HttpServerBuilder, HttpServerHandle};
pub use stats::{AgentStats, HttpStats};

/// The README's examples, compiled as doctests so the README cannot drift from the code.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
