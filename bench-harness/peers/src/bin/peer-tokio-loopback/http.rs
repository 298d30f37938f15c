//! http and https: the server is hyper 1.x (http1 only, keep-alive, `pipeline_flush` so the
//! answers to pipelined requests leave together; a `date` header like ark's), over a
//! `TcpStream` or a tokio-rustls `TlsStream`. The client pipelines `POST /echo` requests —
//! hyper's client waits for each answer before the next request, so it cannot keep a window
//! in flight; the client is hand-written on the TLS peer's poll loop (`tls::drive`), with
//! httparse reading the answers.

use std::convert::Infallible;
use std::io;

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_peers::peer_io::RecvBuf;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::stream::recv_buf;
use crate::tls::drive;

/// Largest answer body accepted.
const MAX_BODY: usize = 1 << 20;

/// One server connection: hyper answers `POST /echo` with the request's body and `GET
/// /static` with the run's static page (shared, not copied).
pub async fn session<S>(io: S, echo: Echo)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let page = Bytes::from_owner(echo.static_body.clone());
    let echo = std::sync::Arc::new(echo);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let echo = echo.clone();
        let page = (request.method() == Method::GET && request.uri().path() == "/static")
            .then(|| page.clone());
        async move {
            if let Some(page) = page {
                return Ok::<_, Infallible>(Response::new(Full::new(page)));
            }
            if request.method() != Method::POST || request.uri().path() != "/echo" {
                let mut missing = Response::new(Full::new(Bytes::new()));
                *missing.status_mut() = StatusCode::NOT_FOUND;
                return Ok::<_, Infallible>(missing);
            }
            let body = match request.into_body().collect().await {
                Ok(body) => body.to_bytes(),
                Err(_) => Bytes::new(),
            };
            echo.before_echo(&body);
            Ok(Response::new(Full::new(body)))
        }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .pipeline_flush(true)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// Appends one `POST /echo` request carrying `payload`.
fn push_request(out: &mut Vec<u8>, host: &str, payload: &[u8]) {
    out.extend_from_slice(b"POST /echo HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\ncontent-length: ");
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(payload);
}

/// Calls `body` with the body of every whole answer at the front of `data`; returns the bytes
/// they took.
fn split_answers(data: &[u8], mut body: impl FnMut(u16, &[u8])) -> io::Result<usize> {
    let mut at = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(&data[at..]) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(at),
            Err(e) => return Err(io::Error::other(e)),
        };
        let length = response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| {
                std::str::from_utf8(h.value)
                    .ok()?
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .ok_or_else(|| io::Error::other("an answer without content-length"))?;
        if length > MAX_BODY {
            return Err(io::Error::other("answer body too large"));
        }
        if data.len() - at - len < length {
            return Ok(at);
        }
        body(
            response.code.unwrap_or(0),
            &data[at + len..at + len + length],
        );
        at += len + length;
    }
}

/// A closed-loop client: its window of requests goes out in one write; every answer of a
/// read is checked and the requests that refill the window are written together.
pub async fn client<S: AsyncRead + AsyncWrite + Unpin>(mut io: S, host: String, mut core: Core) {
    core.on_connected(false);
    let mut first = Vec::with_capacity(recv_buf());
    core.pump(|m| {
        push_request(&mut first, &host, m);
        true
    });
    let _ = drive(
        &mut io,
        RecvBuf::with_capacity(recv_buf()),
        first,
        |buf, out| {
            let used = split_answers(buf.data(), |status, body| {
                let body = if status == 200 { body } else { &[] };
                core.on_echo(body, |m| {
                    push_request(out, &host, m);
                    true
                });
            })?;
            buf.consume(used);
            Ok(false)
        },
    )
    .await;
    core.on_disconnect();
}
