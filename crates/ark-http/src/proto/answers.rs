//! Reading answers: bytes of a client connection in, whole answers out in order (sans-IO),
//! for [`HttpClient`](crate::HttpClient) and [`HttpAgent`](crate::HttpAgent).

use crate::error::HttpError;
use crate::proto::decoder::Dechunker;
use crate::proto::head::{Limits, MAX_HEADERS};

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
    /// Every header in order: name and value.
    pub fn headers(&self) -> Vec<(&'a str, &'a [u8])> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        if response.parse(self.head).is_err() {
            return Vec::new();
        }
        response.headers.iter().map(|h| (h.name, h.value)).collect()
    }

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

/// What a connection's reader reports to: whether the oldest request in flight was a HEAD (its
/// answer has no body), and each whole final answer (1xx skipped).
pub(crate) trait AnswerSink {
    /// Whether the request the next answer belongs to was a HEAD.
    fn head_request(&self) -> bool;
    /// A whole final answer.
    fn answer(&mut self, response: &ClientResponse<'_>);
}

/// Reassembles answers from the bytes of one connection: what a read leaves of a partial
/// answer is kept (up to the limits) and completed by the next reads.
#[derive(Debug)]
pub(crate) struct AnswerReader {
    limits: Limits,
    pending: Vec<u8>,
    dechunker: Option<(Dechunker, Vec<u8>, usize)>,
}

impl AnswerReader {
    pub(crate) fn new(limits: Limits) -> Self {
        AnswerReader {
            limits,
            pending: Vec::new(),
            dechunker: None,
        }
    }

    /// Forgets a partial answer (a new connection).
    pub(crate) fn reset(&mut self) {
        self.pending.clear();
        self.dechunker = None;
    }

    /// Feeds the bytes of one read: every answer they complete goes to `sink`, in order.
    ///
    /// # Errors
    /// A malformed answer or one over the limits: the connection cannot go on.
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        sink: &mut dyn AnswerSink,
    ) -> Result<(), HttpError> {
        if self.pending.is_empty() {
            let used = self.answers(bytes, sink)?;
            self.pending.extend_from_slice(&bytes[used..]);
        } else {
            // Only the rest of the answer under way is copied (when its length is known);
            // the answers after it are read straight from `bytes`.
            let take = self
                .wanted(sink.head_request())
                .map_or(bytes.len(), |total| {
                    total.saturating_sub(self.pending.len()).min(bytes.len())
                });
            self.pending.extend_from_slice(&bytes[..take]);
            let pending = std::mem::take(&mut self.pending);
            let result = self.answers(&pending, sink);
            self.pending = pending;
            self.pending.drain(..result?);
            if take < bytes.len() {
                if self.pending.is_empty() {
                    return self.feed(&bytes[take..], sink);
                }
                self.pending.extend_from_slice(&bytes[take..]);
            }
        }
        Ok(())
    }

    /// The bytes the answer at the front of `pending` takes in all, once its head is there
    /// and its body has a length (`None` otherwise: chunked, or the head still partial).
    fn wanted(&self, head_request: bool) -> Option<usize> {
        match parse_response(&self.pending, &self.limits, head_request) {
            Ok(Some((len, _, _, Framing::None))) => Some(len),
            Ok(Some((len, _, _, Framing::Length(n)))) => len.checked_add(n),
            _ => None,
        }
    }

    /// Delivers every whole answer at the front of `input`; returns the bytes consumed.
    fn answers(&mut self, input: &[u8], sink: &mut dyn AnswerSink) -> Result<usize, HttpError> {
        let mut at = 0;
        while at < input.len() {
            let Some((len, status, version, framing)) =
                parse_response(&input[at..], &self.limits, sink.head_request())?
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
            let chunked = self.dechunker.take();
            let body = chunked
                .as_ref()
                .map_or(body, |(_, decoded, _)| decoded.as_slice());
            sink.answer(&ClientResponse {
                status,
                version,
                head,
                body,
            });
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Collects answers; the requests were HEAD where `heads` says so.
    struct Collect {
        heads: VecDeque<bool>,
        answers: Vec<(u16, Vec<u8>)>,
    }

    impl AnswerSink for Collect {
        fn head_request(&self) -> bool {
            self.heads.front().copied().unwrap_or(false)
        }
        fn answer(&mut self, response: &ClientResponse<'_>) {
            self.heads.pop_front();
            self.answers.push((response.status, response.body.to_vec()));
        }
    }

    #[test]
    fn answers_split_anywhere_across_reads_come_out_whole_and_in_order() {
        let big: Vec<u8> = (0..20_000).map(|i| (i % 251) as u8).collect();
        let mut stream = Vec::new();
        stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello");
        stream.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        stream.extend_from_slice(b"HTTP/1.1 201 Created\r\ncontent-length: 20000\r\n\r\n");
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n");
        stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        stream.extend_from_slice(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
        stream.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
        stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        let expected = vec![
            (200, b"hello".to_vec()),
            (201, big.clone()),
            (200, Vec::new()),
            (200, b"abcde".to_vec()),
            (204, Vec::new()),
            (200, Vec::new()),
        ];
        for piece in [1, 2, 5, 33, 100, 1000, 7000, 20_050, stream.len()] {
            let mut reader = AnswerReader::new(Limits::default());
            let mut sink = Collect {
                // The third request was a HEAD: its answer's content-length has no body.
                heads: [false, false, true, false, false, false].into(),
                answers: Vec::new(),
            };
            for chunk in stream.chunks(piece) {
                reader.feed(chunk, &mut sink).unwrap();
            }
            assert_eq!(sink.answers, expected, "pieces of {piece} bytes");
            assert!(reader.pending.is_empty(), "pieces of {piece} bytes");
        }
    }
}
