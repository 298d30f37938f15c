//! Request heads: parsed with httparse, checked against the limits and the framing rules that
//! keep a request from being read two ways (request smuggling), and viewed as a [`Request`].

use crate::error::{ExtractError, HttpError};

/// The most headers a request may have, whatever the limits say: the parser's fixed array.
pub const MAX_HEADERS: usize = 100;

/// Bounds on what a request may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the request line and headers, the final empty line included (default 8,192).
    pub max_head: usize,
    /// Headers (default 100, at most [`MAX_HEADERS`]).
    pub max_headers: usize,
    /// Body bytes, after chunked decoding (default 16 MiB).
    pub max_body: u64,
    /// Bytes of one chunk's extensions (`;name=value` after its size), default 4,096: past it
    /// the request is refused with 400.
    pub max_chunk_extension: usize,
    /// Accept a head whose lines all end in a bare LF (default `false`: every line of a head
    /// ends in CRLF). A head that mixes the two is refused with 400 either way: a proxy that
    /// reads it otherwise would see other headers (RFC 9112 §2.2).
    pub bare_lf: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 8192,
            max_headers: MAX_HEADERS,
            max_body: 16 * 1024 * 1024,
            max_chunk_extension: 4096,
            bare_lf: false,
        }
    }
}

/// How a request's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What a checked head says about the exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadFacts {
    /// Bytes of the head, the final empty line included.
    pub len: usize,
    /// How the body is framed.
    pub body: BodyKind,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    /// The connection stays open after the answer (1.1 without `Connection: close`, 1.0 with
    /// `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for a `100 Continue` before its body.
    pub expect_continue: bool,
    /// The method is HEAD (the answer has no body).
    pub head_method: bool,
}

fn token_list_has(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses and checks the head at the front of `input`: `Ok(None)` while it is incomplete.
///
/// # Errors
/// The head is malformed, over a limit, or framed ambiguously: see [`HttpError`].
pub fn parse_head(input: &[u8], limits: &Limits) -> Result<Option<HeadFacts>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let max_headers = limits.max_headers.min(MAX_HEADERS);
    let mut request = httparse::Request::new(&mut headers[..max_headers]);
    // Only the first `max_head + 1` bytes are looked at: a head that does not end within the
    // limit is 431 however its later bytes look, and the verdict does not depend on how the
    // bytes arrived (found by the fuzz target).
    let window = &input[..input.len().min(limits.max_head.saturating_add(1))];
    let len = match request.parse(window) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if window.len() > limits.max_head => {
            return Err(HttpError::HeadTooLarge {
                limit: limits.max_head,
            });
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::TooManyHeaders { limit: max_headers });
        }
        Err(httparse::Error::Version) => return Err(HttpError::UnsupportedVersion),
        Err(_) => return Err(HttpError::BadRequest("malformed request line or header")),
    };
    if len > limits.max_head {
        return Err(HttpError::HeadTooLarge {
            limit: limits.max_head,
        });
    }
    line_endings(&input[..len], limits.bare_lf)?;
    let version = request.version.unwrap_or(1);
    check(&request, len, version)
}

/// Every line of `head` ends in CRLF — or, with `bare_lf`, every line ends in a bare LF. A CR
/// not before an LF, and a head mixing CRLF and bare LF, are refused.
fn line_endings(head: &[u8], bare_lf: bool) -> Result<(), HttpError> {
    let (mut crlf, mut lf) = (false, false);
    for (i, &b) in head.iter().enumerate() {
        match b {
            b'\n' if i > 0 && head[i - 1] == b'\r' => crlf = true,
            b'\n' => lf = true,
            b'\r' if head.get(i + 1) != Some(&b'\n') => {
                return Err(HttpError::BadRequest("CR not followed by LF in the head"));
            }
            _ => {}
        }
    }
    match (crlf, lf) {
        (true, true) => Err(HttpError::BadRequest(
            "the head mixes CRLF and bare LF line endings",
        )),
        (false, true) if !bare_lf => Err(HttpError::BadRequest(
            "the head's lines end in a bare LF, not CRLF",
        )),
        _ => Ok(()),
    }
}

/// The framing and connection rules of one parsed head.
fn check(
    request: &httparse::Request<'_, '_>,
    len: usize,
    version: u8,
) -> Result<Option<HeadFacts>, HttpError> {
    let (mut hosts, mut length, mut chunked) = (0, None, None);
    let (mut close, mut keep_alive, mut expect_continue) = (false, false, false);
    for header in request.headers.iter() {
        let value = header.value;
        if header.name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if header.name.eq_ignore_ascii_case("content-length") {
            if length.is_some() {
                return Err(HttpError::BadContentLength);
            }
            length = Some(parse_length(value)?);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked.is_some() {
                return Err(HttpError::BadRequest("more than one Transfer-Encoding"));
            }
            chunked = Some(transfer_coding(value)?);
        } else if header.name.eq_ignore_ascii_case("connection") {
            close |= token_list_has(value, "close");
            keep_alive |= token_list_has(value, "keep-alive");
        } else if header.name.eq_ignore_ascii_case("expect") {
            expect_continue = value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    if version == 1 && hosts != 1 {
        return Err(HttpError::BadHost);
    }
    let body = match (length, chunked) {
        (Some(_), Some(_)) => return Err(HttpError::LengthAndChunked),
        (_, Some(())) if version == 0 => {
            return Err(HttpError::BadRequest(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        (_, Some(())) => BodyKind::Chunked,
        (Some(0), None) | (None, None) => BodyKind::None,
        (Some(n), None) => BodyKind::Length(n),
    };
    Ok(Some(HeadFacts {
        len,
        body,
        version,
        keep_alive: if version == 1 {
            !close
        } else {
            keep_alive && !close
        },
        expect_continue: expect_continue && version == 1,
        head_method: request.method == Some("HEAD"),
    }))
}

/// A `Content-Length` value: digits only (no list, sign or space inside).
fn parse_length(value: &[u8]) -> Result<u64, HttpError> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::BadContentLength);
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse().ok())
        .ok_or(HttpError::BadContentLength)
}

/// A `Transfer-Encoding` value: `chunked` alone is supported; another coding is 501, and
/// `chunked` anywhere but last is a framing error.
fn transfer_coding(value: &[u8]) -> Result<(), HttpError> {
    let codings: Vec<&[u8]> = value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .collect();
    match codings.as_slice() {
        [only] if only.eq_ignore_ascii_case(b"chunked") => Ok(()),
        [.., last] if !last.eq_ignore_ascii_case(b"chunked") => {
            if codings.iter().any(|c| c.eq_ignore_ascii_case(b"chunked")) {
                Err(HttpError::BadRequest(
                    "chunked is not the last transfer coding",
                ))
            } else {
                Err(HttpError::UnsupportedTransferCoding)
            }
        }
        _ => Err(HttpError::UnsupportedTransferCoding),
    }
}

/// A request as a handler sees it: method, target, version, headers and the whole body,
/// borrowed from the connection's buffers.
pub struct Request<'a> {
    method: &'a str,
    target: &'a str,
    version: u8,
    headers: [httparse::Header<'a>; MAX_HEADERS],
    count: usize,
    body: &'a [u8],
    params: &'a [(&'a str, &'a str)],
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("version", &self.version)
            .field("headers", &self.count)
            .field("body", &self.body.len())
            .finish()
    }
}

impl<'a> Request<'a> {
    /// Views a head that [`parse_head`] accepted, with its decoded `body`.
    pub(crate) fn view(head: &'a [u8], body: &'a [u8]) -> Option<Request<'a>> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        parsed.parse(head).ok()?;
        let (method, target, version) = (parsed.method?, parsed.path?, parsed.version?);
        let count = parsed.headers.len();
        Some(Request {
            method,
            target,
            version,
            headers,
            count,
            body,
            params: &[],
        })
    }

    pub(crate) fn with_params(mut self, params: &'a [(&'a str, &'a str)]) -> Self {
        self.params = params;
        self
    }

    /// The method (`GET`, `POST`, ...).
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// The request target as sent (path and query).
    pub fn target(&self) -> &'a str {
        self.target
    }

    /// The path: the target without its query.
    pub fn path(&self) -> &'a str {
        self.target
            .split_once('?')
            .map_or(self.target, |(path, _)| path)
    }

    /// The query, without `?`.
    pub fn query(&self) -> Option<&'a str> {
        self.target.split_once('?').map(|(_, query)| query)
    }

    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Every header, in order.
    pub fn headers(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + '_ {
        self.headers[..self.count].iter().map(|h| (h.name, h.value))
    }

    /// The whole body (chunked bodies decoded).
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The route parameter `name` (`:name` or `*name` in the route's pattern).
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// The route parameter `name` parsed as a `T` (`req.param_as::<u64>("id")`).
    ///
    /// # Errors
    /// [`ExtractError::MissingParam`], or [`ExtractError::BadParam`] with the parser's reason;
    /// [`Response::reject`](crate::Response::reject) answers either.
    pub fn param_as<T>(&self, name: &str) -> Result<T, ExtractError>
    where
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        let value = self
            .param(name)
            .ok_or_else(|| ExtractError::MissingParam(name.into()))?;
        value.parse().map_err(|e: T::Err| ExtractError::BadParam {
            name: name.into(),
            value: value.into(),
            ty: std::any::type_name::<T>(),
            reason: e.to_string(),
        })
    }

    /// The body as JSON of type `T` (cargo feature `json`): the request must say
    /// `content-type: application/json` (or a `+json` type).
    ///
    /// # Errors
    /// [`ExtractError::NotJson`] (415) or [`ExtractError::BadJson`] (400), with serde's
    /// reason; [`Response::reject`](crate::Response::reject) answers either.
    #[cfg(feature = "json")]
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ExtractError> {
        let json = self.header("content-type").is_some_and(|value| {
            let media = value.split(|&b| b == b';').next().unwrap_or_default();
            let media = media.trim_ascii();
            media.eq_ignore_ascii_case(b"application/json")
                || (media.len() > 5 && media[media.len() - 5..].eq_ignore_ascii_case(b"+json"))
        });
        if !json {
            return Err(ExtractError::NotJson);
        }
        serde_json::from_slice(self.body).map_err(|e| ExtractError::BadJson(e.to_string()))
    }
}
