//! Reading answers: bytes of a client connection in, whole answers out in order (sans-IO),
//! for [`HttpClient`](crate::HttpClient) and [`HttpAgent`](crate::HttpAgent).
//!
//! Heads are read by the rules the server applies to requests (`syntax`: one head parser,
//! one set of framing rules). A body is framed by `Content-Length`, by chunks, or by the close
//! (RFC 9112 §6.3: neither field, and a status with a body); none for HEAD, 1xx, 204, 304. A
//! body's raw bytes are not kept once taken (chunks are decoded as they come), so an answer
//! under way holds its head, its body so far (at most `max_body`) and a read; and it may take
//! no more than [`Limits::message_bound`] bytes on the wire. Bytes no request asked for are
//! refused, never delivered.

use crate::error::{AnswerError, HttpError};
use crate::proto::decoder::{Dechunker, reserve_within};
use crate::proto::head::{Limits, MAX_HEADERS};
use crate::proto::syntax::{Declared, StatusLine, fields, reread, status_line, with_head};

/// An answer as a handler sees it: status, version, headers and the whole body.
#[derive(Debug)]
pub struct ClientResponse<'a> {
    /// The status code.
    pub status: u16,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and a later 1.x, read as 1.1).
    pub version: u8,
    head: &'a [u8],
    /// The body (chunked bodies decoded; empty for HEAD, 204, 304).
    pub body: &'a [u8],
    keep_alive: bool,
}

impl<'a> ClientResponse<'a> {
    /// Every header in order: name and value.
    pub fn headers(&self) -> Vec<(&'a str, &'a [u8])> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match reread(self.head, &mut headers, status_line) {
            Some((_, count)) => headers[..count].iter().map(|h| (h.name, h.value)).collect(),
            None => Vec::new(),
        }
    }

    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let (_, count) = reread(self.head, &mut headers, status_line)?;
        headers[..count]
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// Whether the connection may carry another request after this answer: HTTP/1.1 without
    /// `Connection: close` (1.0 with `Connection: keep-alive`), and a body that did not run
    /// to the close.
    pub fn keeps_alive(&self) -> bool {
        self.keep_alive
    }
}

/// How an answer's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// No body (HEAD, 1xx, 204, 304, `Content-Length: 0`).
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunks.
    Chunked,
    /// Up to the close.
    Close,
}

/// A checked answer head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct AnswerHead {
    /// Bytes of the head.
    len: usize,
    line: StatusLine,
    framing: Framing,
    keep_alive: bool,
}

/// Reads the head of an answer at the front of `input` with the server's rules, and frames
/// its body (`head_request`: the answer has none).
fn parse_answer(
    input: &[u8],
    limits: &Limits,
    head_request: bool,
) -> Result<Option<AnswerHead>, AnswerError> {
    let read = with_head(input, limits, status_line, |line, len, headers| {
        fields(headers, line.version).map(|fields| (line, len, fields))
    })?;
    let Some((line, len, fields)) = read.transpose()? else {
        return Ok(None);
    };
    if line.status == 101 {
        return Err(AnswerError::Switching);
    }
    let framing = match fields.body {
        _ if head_request || matches!(line.status, 100..=199 | 204 | 304) => Framing::None,
        Declared::Length(n) if n > limits.max_body => {
            return Err(HttpError::BodyTooLarge {
                limit: limits.max_body,
            }
            .into());
        }
        Declared::Length(0) => Framing::None,
        Declared::Length(n) => Framing::Length(n),
        Declared::Chunked => Framing::Chunked,
        Declared::Neither => Framing::Close,
    };
    Ok(Some(AnswerHead {
        len,
        line,
        framing,
        keep_alive: fields.persistent(line.version) && framing != Framing::Close,
    }))
}

/// What a connection's reader reports to: the answers awaited, whether the oldest request in
/// flight was a HEAD (its answer has no body), and each whole final answer (1xx skipped).
pub(crate) trait AnswerSink {
    /// Requests sent and not answered yet.
    fn awaited(&self) -> usize;
    /// Whether the request the next answer belongs to was a HEAD.
    fn head_request(&self) -> bool;
    /// A whole final answer.
    fn answer(&mut self, response: &ClientResponse<'_>);
}

/// An answer whose body is under way.
#[derive(Debug)]
struct Body {
    head: Vec<u8>,
    facts: AnswerHead,
    /// The body so far (chunked: decoded).
    decoded: Vec<u8>,
    dechunker: Option<Dechunker>,
    /// Bytes taken on the wire, head included.
    wire: u64,
}

/// Reassembles answers from the bytes of one connection: a partial head is kept (at most
/// `max_head` bytes), a body is taken as it comes.
#[derive(Debug)]
pub(crate) struct AnswerReader {
    limits: Limits,
    /// A head not yet whole.
    pending: Vec<u8>,
    body: Option<Body>,
    /// An answer that ends the connection came (or the reader failed): any more bytes are
    /// unsolicited.
    ended: bool,
}

impl AnswerReader {
    pub(crate) fn new(limits: Limits) -> Self {
        AnswerReader {
            limits,
            pending: Vec::new(),
            body: None,
            ended: false,
        }
    }

    /// Forgets everything (a new connection).
    pub(crate) fn reset(&mut self) {
        *self = AnswerReader::new(self.limits);
    }

    /// Bytes held for the answer under way (buffers' capacities).
    pub(crate) fn held(&self) -> usize {
        let body = self.body.as_ref().map_or(0, |b| {
            b.head.capacity()
                + b.decoded.capacity()
                + b.dechunker.as_ref().map_or(0, Dechunker::held)
        });
        self.pending.capacity() + body
    }

    /// Feeds the bytes of one read: every answer they complete goes to `sink`, in order. The
    /// answers they may hold are those `sink` awaited when the read began: a request sent
    /// while they are delivered cannot be answered by bytes already read.
    ///
    /// # Errors
    /// A malformed answer, one over the limits, or bytes no request asked for: the
    /// connection cannot go on (the reader holds nothing more, and takes nothing more).
    pub(crate) fn feed(
        &mut self,
        bytes: &[u8],
        sink: &mut dyn AnswerSink,
    ) -> Result<(), AnswerError> {
        let mut awaited = sink.awaited();
        let mut input = bytes;
        while !input.is_empty() {
            let used = match self.step(input, sink, &mut awaited) {
                Ok(used) => used,
                Err(error) => {
                    *self = AnswerReader {
                        ended: true,
                        ..AnswerReader::new(self.limits)
                    };
                    return Err(error);
                }
            };
            input = &input[used..];
        }
        Ok(())
    }

    /// Takes what it can of `input` (not empty): returns the bytes taken.
    fn step(
        &mut self,
        input: &[u8],
        sink: &mut dyn AnswerSink,
        awaited: &mut usize,
    ) -> Result<usize, AnswerError> {
        if let Some(body) = self.body.take() {
            return self.go_on(body, input, sink, awaited);
        }
        if self.ended || (*awaited == 0 && self.pending.is_empty()) {
            return Err(AnswerError::Unsolicited { bytes: input.len() });
        }
        if !self.pending.is_empty() {
            return self.join(input, sink, awaited);
        }
        let Some(head) = parse_answer(input, &self.limits, sink.head_request())? else {
            // A partial head (`read_head` refuses one over `max_head`).
            self.pending.extend_from_slice(input);
            return Ok(input.len());
        };
        let (bytes, rest) = input.split_at(head.len);
        Ok(head.len + self.begin(bytes, head, rest, sink, awaited)?)
    }

    /// Completes the head kept from earlier reads with `input`: returns the bytes taken.
    fn join(
        &mut self,
        input: &[u8],
        sink: &mut dyn AnswerSink,
        awaited: &mut usize,
    ) -> Result<usize, AnswerError> {
        let before = self.pending.len();
        let take = input
            .len()
            .min((self.limits.max_head + 1).saturating_sub(before));
        let mut pending = std::mem::take(&mut self.pending);
        pending.extend_from_slice(&input[..take]);
        let Some(head) = parse_answer(&pending, &self.limits, sink.head_request())? else {
            self.pending = pending;
            return Ok(take);
        };
        // The head was not whole before: it ends in what was just taken.
        let in_input = head.len - before;
        let used = self.begin(
            &pending[..head.len],
            head,
            &input[in_input..],
            sink,
            awaited,
        )?;
        Ok(in_input + used)
    }

    /// The answer of `head` (its bytes `bytes`) with the bytes after its head, `rest`:
    /// delivered if whole, else kept under way. Returns the bytes of `rest` taken.
    fn begin(
        &mut self,
        bytes: &[u8],
        head: AnswerHead,
        rest: &[u8],
        sink: &mut dyn AnswerSink,
        awaited: &mut usize,
    ) -> Result<usize, AnswerError> {
        match head.framing {
            // An interim answer (100 Continue, 103 Early Hints): skipped.
            Framing::None if head.line.status < 200 => Ok(0),
            Framing::None => {
                self.deliver(bytes, head, &[], sink, awaited);
                Ok(0)
            }
            Framing::Length(n) if rest.len() as u64 >= n => {
                // Whole in this read: delivered straight from it.
                self.deliver(bytes, head, &rest[..n as usize], sink, awaited);
                Ok(n as usize)
            }
            _ => {
                let body = Body {
                    head: bytes.to_vec(),
                    facts: head,
                    decoded: Vec::new(),
                    dechunker: (head.framing == Framing::Chunked).then(Dechunker::new),
                    wire: head.len as u64,
                };
                self.go_on(body, rest, sink, awaited)
            }
        }
    }

    /// Takes what `body` wants of `input`: delivers it once whole, else keeps it under way.
    /// Returns the bytes taken.
    fn go_on(
        &mut self,
        mut body: Body,
        input: &[u8],
        sink: &mut dyn AnswerSink,
        awaited: &mut usize,
    ) -> Result<usize, AnswerError> {
        let limits = self.limits;
        let max_body = usize::try_from(limits.max_body).unwrap_or(usize::MAX);
        let (used, done) = match (body.facts.framing, &mut body.dechunker) {
            (Framing::Chunked, Some(dechunker)) => {
                dechunker.decode(input, &mut body.decoded, &limits)?
            }
            (Framing::Length(n), _) => {
                let left = usize::try_from(n).unwrap_or(usize::MAX) - body.decoded.len();
                let take = left.min(input.len());
                reserve_within(&mut body.decoded, take, max_body);
                body.decoded.extend_from_slice(&input[..take]);
                (take, take == left)
            }
            _ => {
                if body.decoded.len() + input.len() > max_body {
                    return Err(HttpError::BodyTooLarge {
                        limit: limits.max_body,
                    }
                    .into());
                }
                reserve_within(&mut body.decoded, input.len(), max_body);
                body.decoded.extend_from_slice(input);
                (input.len(), false)
            }
        };
        body.wire += used as u64;
        if body.wire > limits.message_bound() {
            return Err(AnswerError::TooLarge {
                limit: limits.message_bound(),
            });
        }
        if done {
            self.deliver(&body.head, body.facts, &body.decoded, sink, awaited);
        } else {
            self.body = Some(body);
        }
        Ok(used)
    }

    /// Hands a whole final answer to `sink`.
    fn deliver(
        &mut self,
        head: &[u8],
        facts: AnswerHead,
        body: &[u8],
        sink: &mut dyn AnswerSink,
        awaited: &mut usize,
    ) {
        *awaited = awaited.saturating_sub(1);
        self.ended |= !facts.keep_alive;
        sink.answer(&ClientResponse {
            status: facts.line.status,
            version: facts.line.version,
            head,
            body,
            keep_alive: facts.keep_alive,
        });
    }

    /// The peer closed its end cleanly (not a reset, not a TLS stream cut short): an answer
    /// whose body runs to the close is whole and goes to `sink`. Returns whether the stream
    /// ended between answers (`false`: an answer was cut short: a partial head, or a body
    /// framed by length or chunks not ended).
    pub(crate) fn end_of_stream(&mut self, sink: &mut dyn AnswerSink) -> bool {
        let body = self.body.take();
        let pending = std::mem::take(&mut self.pending);
        match body {
            Some(body) if body.facts.framing == Framing::Close => {
                self.deliver(&body.head, body.facts, &body.decoded, sink, &mut 1);
                true
            }
            Some(_) => false,
            None => pending.is_empty(),
        }
    }

    /// Whether an answer is under way (part of its head or body has come).
    pub(crate) fn under_way(&self) -> bool {
        self.body.is_some() || !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests;
