//! Request heads: read by the rules both directions share (`syntax`), checked against the
//! limits and the request rules that keep a request from being read two ways (request
//! smuggling), and viewed as a [`Request`].

use crate::error::{ExtractError, HttpError};
use crate::proto::syntax::{
    Declared, FEW_HEADERS, RequestLine, fields, request_line, reread, with_head,
};
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
    with_head(input, limits, request_line, |line, len, headers| {
        check(&line, headers, len)
    })?
    .transpose()
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

/// A request's field lines: [`FEW_HEADERS`] slots in place (no allocation), or all
/// [`MAX_HEADERS`] boxed for a request that has more.
// The small variant is the point: in place, so a request with few fields allocates nothing.
#[allow(clippy::large_enum_variant)]
enum Slots<'a> {
    Few([httparse::Header<'a>; FEW_HEADERS]),
    Many(Box<[httparse::Header<'a>; MAX_HEADERS]>),
}

impl<'a> Slots<'a> {
    fn as_slice(&self) -> &[httparse::Header<'a>] {
        match self {
            Slots::Few(few) => few,
            Slots::Many(many) => &many[..],
        }
    }
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
    headers: Slots<'a>,
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
        let mut few = [httparse::EMPTY_HEADER; FEW_HEADERS];
        let (headers, (line, count)) = match reread(head, &mut few, request_line) {
            Some(read) => (Slots::Few(few), read),
            None => {
                let mut many = Box::new([httparse::EMPTY_HEADER; MAX_HEADERS]);
                let read = reread(head, &mut many[..], request_line)?;
                (Slots::Many(many), read)
            }
        };
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
        self.headers.as_slice()[..self.count]
            .iter()
            .map(|h| (h.name, h.value))
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

    /// Needs the cargo feature `json`, off in this build: a call does not compile, and says
    /// so (see [`NeedsJsonFeature`](crate::NeedsJsonFeature)).
    ///
    /// # Errors
    /// None: the method cannot be called.
    #[cfg(not(feature = "json"))]
    pub fn json<T: crate::NeedsJsonFeature>(&self) -> Result<T, ExtractError> {
        unreachable!("no type implements NeedsJsonFeature")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A head of `n` fields besides `Host`, the last one `x-last`.
    fn head_with(n: usize) -> Vec<u8> {
        let mut head = b"GET /a HTTP/1.1\r\nhost: h\r\n".to_vec();
        for i in 0..n {
            head.extend_from_slice(format!("x-{i}: {i}\r\n").as_bytes());
        }
        head.extend_from_slice(b"x-last: yes\r\n\r\n");
        head
    }

    #[test]
    fn heads_past_the_few_slots_are_read_whole_and_the_limit_still_holds() {
        for n in [0, 14, 15, 16, 40, 98] {
            let head = head_with(n);
            let facts = parse_head(&head, &Limits::default()).unwrap().unwrap();
            assert_eq!(facts.len, head.len(), "{n} fields");
            let request = Request::view(&head, b"").unwrap();
            assert_eq!(request.headers().count(), n + 2, "{n} fields");
            assert_eq!(request.header("x-last"), Some(&b"yes"[..]), "{n} fields");
        }
        let over = head_with(99);
        assert_eq!(
            parse_head(&over, &Limits::default()),
            Err(HttpError::TooManyHeaders { limit: MAX_HEADERS })
        );
        let limits = Limits {
            max_headers: 10,
            ..Limits::default()
        };
        assert_eq!(
            parse_head(&head_with(9), &limits),
            Err(HttpError::TooManyHeaders { limit: 10 })
        );
    }
}
