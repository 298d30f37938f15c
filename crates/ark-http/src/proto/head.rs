//! Request heads: read by the rules both directions share (`syntax`), checked against the
//! limits and the request rules that keep a request from being read two ways (request
//! smuggling), and viewed as a [`Request`].

use crate::error::{ExtractError, HttpError};
use crate::proto::syntax::{Declared, RequestLine, fields, read_head, request_line, reread};
use crate::proto::target::{Target, target_form, valid_authority};

/// The most headers a request may have, whatever the limits say: the parser's fixed array.
pub const MAX_HEADERS: usize = 100;

/// Bounds on what a message may be: a request the server takes, an answer a client
/// ([`HttpClient`](crate::HttpClient), [`HttpAgent`](crate::HttpAgent)) takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the start line and headers, the final empty line included (default 8,192); a
    /// trailer section gets as many again.
    pub max_head: usize,
    /// Headers (default 100, at most [`MAX_HEADERS`]).
    pub max_headers: usize,
    /// Body bytes, after chunked decoding (default 16 MiB).
    pub max_body: u64,
    /// Bytes of one chunk's extensions (`;name=value` after its size), default 4,096: past it
    /// the message is refused (a request with 400).
    pub max_chunk_extension: usize,
    /// Accept a head whose lines all end in a bare LF (default `false`: every line of a head
    /// ends in CRLF). A head that mixes the two is refused (a request with 400) either way: a
    /// proxy that reads it otherwise would see other headers (RFC 9112 §2.2).
    pub bare_lf: bool,
}

/// What one read adds to a message a connection holds, at most (ark-tcp's raw reads).
const ONE_READ: u64 = 64 * 1024;

impl Limits {
    /// The most bytes of one message a connection takes: its head and body at their limits
    /// and a read's worth. The server holds no more of a request; a client takes no more of
    /// one answer on the wire (head, body and chunk framing).
    pub(crate) fn message_bound(&self) -> u64 {
        (self.max_head as u64)
            .saturating_add(self.max_body)
            .saturating_add(ONE_READ)
    }
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
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and a later 1.x, served as 1.1).
    pub version: u8,
    /// The connection stays open after the answer (1.1 without `Connection: close`, 1.0 with
    /// `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue`: the client waits for a `100 Continue` before its body.
    pub expect_continue: bool,
    /// The method is HEAD (the answer has no body).
    pub head_method: bool,
}

/// Parses and checks the head at the front of `input`: `Ok(None)` while it is incomplete.
///
/// The request line is read strictly (visible ASCII in the target, one SP between its
/// parts, `HTTP/1.x` with any later 1.x served as 1.1), the field lines with httparse's
/// header parser, and the framing fields by the rules the clients apply to answers.
///
/// # Errors
/// The head is malformed, over a limit, or framed ambiguously: see [`HttpError`].
pub fn parse_head(input: &[u8], limits: &Limits) -> Result<Option<HeadFacts>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let Some((line, len, count)) = read_head(input, limits, &mut headers, request_line)? else {
        return Ok(None);
    };
    check(&line, &headers[..count], len).map(Some)
}

/// The request rules of one parsed head: its target's form, its `Host`, its framing.
fn check(
    line: &RequestLine<'_>,
    headers: &[httparse::Header<'_>],
    len: usize,
) -> Result<HeadFacts, HttpError> {
    let version = line.version;
    let fields = fields(headers, version)?;
    // RFC 9112 §3.2: one Host in HTTP/1.1, never two, and a valid one.
    if fields.hosts > 1
        || (version == 1 && fields.hosts == 0)
        || !valid_authority(fields.host.trim_ascii())
    {
        return Err(HttpError::BadHost);
    }
    if target_form(line.method, line.target).is_none() {
        return Err(HttpError::BadRequest(
            "a request target of none of the four forms (RFC 9112 §3.2)",
        ));
    }
    let body = match fields.body {
        Declared::Chunked => BodyKind::Chunked,
        Declared::Length(0) | Declared::Neither => BodyKind::None,
        Declared::Length(n) => BodyKind::Length(n),
    };
    Ok(HeadFacts {
        len,
        body,
        version,
        keep_alive: fields.persistent(version),
        expect_continue: fields.expect_continue && version == 1,
        head_method: line.method == "HEAD",
    })
}

/// A request as a handler sees it: method, target, version, headers and the whole body,
/// borrowed from the connection's buffers.
pub struct Request<'a> {
    method: &'a str,
    target: &'a str,
    /// The path and query: the target's, after the authority of an absolute-form target.
    rest: &'a str,
    /// The authority of an absolute-form target (RFC 9112 §3.2.2: it wins over `Host`).
    authority: Option<&'a str>,
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
        let (line, count) = reread(head, &mut headers, request_line)?;
        let (rest, authority) = match target_form(line.method, line.target) {
            Some(Target::Absolute { authority, rest }) => (rest, Some(authority)),
            _ => (line.target, None),
        };
        Some(Request {
            method: line.method,
            target: line.target,
            rest,
            authority,
            version: line.version,
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

    /// The request target as sent (path and query; a whole URI in absolute form).
    pub fn target(&self) -> &'a str {
        self.target
    }

    /// The path: the target without its query, and without the scheme and authority of an
    /// absolute-form target (`/x` for `http://b/x`, `/` for `http://b`). The router routes on it.
    pub fn path(&self) -> &'a str {
        let path = self
            .rest
            .split_once('?')
            .map_or(self.rest, |(path, _)| path);
        if path.is_empty() && self.authority.is_some() {
            "/"
        } else {
            path
        }
    }

    /// The query, without `?`.
    pub fn query(&self) -> Option<&'a str> {
        self.rest.split_once('?').map(|(_, query)| query)
    }

    /// The host the request is for: the authority of an absolute-form target (RFC 9112
    /// §3.2.2: it wins over the `Host` header), else the `Host` value (checked: a valid
    /// authority, once); `None` for an HTTP/1.0 request without `Host`.
    pub fn host(&self) -> Option<&'a str> {
        if self.authority.is_some() {
            return self.authority;
        }
        let value = self.header("host")?.trim_ascii();
        // Checked by `parse_head`: visible ASCII.
        std::str::from_utf8(value).ok()
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
