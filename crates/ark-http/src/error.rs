//! What can be wrong with a request, and the status it is answered with.

/// A request the server refuses. Each variant has the status it is answered with
/// ([`status`](Self::status)); every one of them closes the connection after the answer, since
/// the stream can no longer be trusted to be framed as the peer meant (RFC 9112 §6.3, §11).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// Malformed request line or header (obs-fold included), or a bad header value.
    #[error("bad request: {0}")]
    BadRequest(&'static str),
    /// Both `Content-Length` and `Transfer-Encoding` (a smuggling attempt).
    #[error("bad request: both Content-Length and Transfer-Encoding")]
    LengthAndChunked,
    /// More than one `Content-Length`, or a list of them, or one that is not a number.
    #[error("bad request: duplicate, differing or invalid Content-Length")]
    BadContentLength,
    /// A chunk size that is not hexadecimal, too long, or a malformed chunk.
    #[error("bad request: malformed chunked body ({0})")]
    BadChunk(&'static str),
    /// HTTP/1.1 without exactly one `Host`.
    #[error("bad request: HTTP/1.1 needs exactly one Host header")]
    BadHost,
    /// The head passed the limit before it ended (default 8,192 bytes).
    #[error("request head larger than {limit} bytes")]
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
    #[error("request body larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: u64,
    },
    /// A transfer coding other than `chunked` (501).
    #[error("unsupported transfer coding")]
    UnsupportedTransferCoding,
    /// An HTTP version other than 1.0 and 1.1 (505).
    #[error("unsupported HTTP version")]
    UnsupportedVersion,
    /// The request did not arrive whole within `HttpConfig::request_timeout` (408).
    #[error("request timeout")]
    RequestTimeout,
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
            _ => 400,
        }
    }
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
