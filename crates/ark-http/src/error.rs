//! What can be wrong with a message: a request (and the status it is answered with), an answer
//! a client refuses, a request a handler cannot use.

/// A message that breaks HTTP/1.1's rules. The server and the clients read heads and framing
/// with one set of rules (see `docs/http.md`), so one type says what is wrong either way.
///
/// For a request, each variant has the status it is answered with
/// ([`status`](Self::status)); every one of them closes the connection after the answer, since
/// the stream can no longer be trusted to be framed as the peer meant (RFC 9112 §6.3, §11).
/// For an answer, the clients fail the request with [`AnswerError::Malformed`] and drop the
/// connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// A malformed start line or field line (obs-fold included), line endings that are not
    /// all CRLF (or, with `Limits::bare_lf`, all LF), a request target of none of the four
    /// forms, or a framing rule broken (which, in the text).
    #[error("{0}")]
    BadRequest(&'static str),
    /// Both `Content-Length` and `Transfer-Encoding` (a smuggling attempt).
    #[error("both Content-Length and Transfer-Encoding")]
    LengthAndChunked,
    /// More than one `Content-Length`, or a list of them, or one that is not a number.
    #[error("duplicate, differing or invalid Content-Length")]
    BadContentLength,
    /// A chunk size that is not hexadecimal or too long, a chunk extension that breaks its
    /// syntax or is over `Limits::max_chunk_extension`, a malformed chunk, or a trailer line
    /// that is not a field line.
    #[error("malformed chunked body ({0})")]
    BadChunk(&'static str),
    /// HTTP/1.1 without exactly one `Host`, a second `Host` in HTTP/1.0, or a `Host` that is
    /// not a valid authority (RFC 3986: a reg-name, IPv4 or `[IPv6]`, an optional port up to
    /// 65535, no userinfo).
    #[error("missing, duplicate or invalid Host")]
    BadHost,
    /// The head passed the limit before it ended (default 8,192 bytes).
    #[error("head larger than {limit} bytes")]
    HeadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// More headers than the limit (default 100).
    #[error("more than {limit} headers")]
    TooManyHeaders {
        /// The limit.
        limit: usize,
    },
    /// The body passes the limit (default 16 MiB).
    #[error("body larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: u64,
    },
    /// A transfer coding other than `chunked` (501).
    #[error("unsupported transfer coding")]
    UnsupportedTransferCoding,
    /// An HTTP major version other than 1 (505; a later 1.x is served as 1.1).
    #[error("unsupported HTTP version")]
    UnsupportedVersion,
    /// The request did not arrive whole within `HttpConfig::request_timeout` (408).
    #[error("request timeout")]
    RequestTimeout,
    /// An upgrade asked for while the server drains (`HttpServerHandle::drain`): 503.
    #[error("the server is draining: no upgrade")]
    Draining,
}

impl HttpError {
    /// The status the request is answered with.
    pub fn status(&self) -> u16 {
        match self {
            HttpError::HeadTooLarge { .. } | HttpError::TooManyHeaders { .. } => 431,
            HttpError::BodyTooLarge { .. } => 413,
            HttpError::UnsupportedTransferCoding => 501,
            HttpError::UnsupportedVersion => 505,
            HttpError::RequestTimeout => 408,
            HttpError::Draining => 503,
            _ => 400,
        }
    }
}

/// An answer a client ([`HttpClient`](crate::HttpClient), [`HttpAgent`](crate::HttpAgent))
/// refuses: the request fails (`ConnectionError::BadAnswer`, or
/// `HttpClientHandler::on_bad_answer`) and the connection is dropped, never reused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// The answer breaks the rules the server applies to requests (one head parser and one
    /// set of framing rules for both): which, in the [`HttpError`].
    #[error("{0}")]
    Malformed(#[from] HttpError),
    /// A `101 Switching Protocols`: neither client asks to switch, nor could it hand the
    /// connection over; what follows is not HTTP/1.1.
    #[error("101 Switching Protocols, not asked for")]
    Switching,
    /// Bytes arrived that no request asked for: with no request waiting for an answer, or
    /// after an answer that ends the connection. They are never delivered.
    #[error("{bytes} bytes arrived that no request asked for")]
    Unsolicited {
        /// The bytes of the read they came in (from the first unsolicited one).
        bytes: usize,
    },
    /// The answer passed the most one connection takes of one answer on the wire: its head,
    /// its body and its chunked framing (`Limits::max_head + max_body` + 64 KiB, the bound the
    /// server puts on a request it holds).
    #[error("an answer over {limit} bytes on the wire (head, body and chunk framing)")]
    TooLarge {
        /// The bound.
        limit: u64,
    },
}

/// A request a handler cannot use: a route parameter missing or not of the type asked for, or
/// a body that is not the JSON asked for. [`Response::reject`](crate::Response::reject)
/// answers it with [`status`](Self::status) and the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// The route has no parameter of that name.
    #[error("no route parameter {0:?}")]
    MissingParam(String),
    /// The parameter does not parse as the type asked for.
    #[error("route parameter {name:?} = {value:?} is not a valid {ty}: {reason}")]
    BadParam {
        /// The parameter's name.
        name: String,
        /// Its value.
        value: String,
        /// The type asked for.
        ty: &'static str,
        /// The parser's reason.
        reason: String,
    },
    /// The body was asked for as JSON and the request says it is not
    /// (`content-type` missing, or not `application/json` or `…+json`): 415.
    #[error("expected a body of content-type application/json")]
    NotJson,
    /// The body is not valid JSON for the type asked for.
    #[error("bad JSON body: {0}")]
    BadJson(String),
}

impl ExtractError {
    /// The status to answer with: 415 for [`NotJson`](Self::NotJson), 500 for a handler that
    /// asked for a parameter its route does not have, 400 for every other.
    pub fn status(&self) -> u16 {
        match self {
            ExtractError::NotJson => 415,
            ExtractError::MissingParam(_) => 500,
            _ => 400,
        }
    }
}
