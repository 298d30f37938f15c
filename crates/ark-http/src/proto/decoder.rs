//! The sans-IO request decoder: bytes in, whole requests (head and decoded body) out, one at a
//! time and in order (pipelining), with every limit checked as the bytes arrive.

use crate::error::HttpError;
use crate::proto::head::{BodyKind, HeadFacts, Limits, parse_head};

/// Where a chunked body's decoding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex size; digits so far.
    Size { digits: u8 },
    /// After the size: an extension up to CR.
    Extension,
    /// After CR of the size line.
    SizeLf,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// After the data: CR.
    DataCr,
    /// After the data's CR: LF.
    DataLf,
    /// After the last chunk: at the start of a trailer line (or the final CRLF).
    TrailerStart,
    /// Inside a trailer line.
    Trailer,
    /// After CR at a trailer line's start: the final LF.
    FinalLf,
    /// After CR inside a trailer line.
    TrailerLf,
    /// The body ended.
    Done,
}

/// Decodes a chunked body incrementally into `out`.
#[derive(Debug, Clone)]
pub(crate) struct Dechunker {
    state: Chunk,
    /// Size being read.
    size: u64,
    /// Trailer bytes so far (bounded by the head limit).
    trailer: usize,
    /// Bytes of the current chunk's extension (bounded by `Limits::max_chunk_extension`).
    extension: usize,
}

impl Dechunker {
    pub(crate) fn new() -> Self {
        Dechunker {
            state: Chunk::Size { digits: 0 },
            size: 0,
            trailer: 0,
            extension: 0,
        }
    }

    /// Decodes from `input`, appending data to `out` (at most `limits.max_body` in all);
    /// returns the bytes consumed and whether the body ended.
    pub(crate) fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        limits: &Limits,
    ) -> Result<(usize, bool), HttpError> {
        let mut at = 0;
        while at < input.len() {
            if let Chunk::Data(left) = self.state {
                let take = (left as usize).min(input.len() - at);
                if (out.len() + take) as u64 > limits.max_body {
                    return Err(HttpError::BodyTooLarge {
                        limit: limits.max_body,
                    });
                }
                out.extend_from_slice(&input[at..at + take]);
                at += take;
                let left = left - take as u64;
                self.state = if left == 0 {
                    Chunk::DataCr
                } else {
                    Chunk::Data(left)
                };
                continue;
            }
            self.step(input[at], limits)?;
            at += 1;
            if self.state == Chunk::Done {
                return Ok((at, true));
            }
        }
        Ok((at, self.state == Chunk::Done))
    }

    /// One byte outside chunk data.
    fn step(&mut self, byte: u8, limits: &Limits) -> Result<(), HttpError> {
        let bad = HttpError::BadChunk;
        self.state = match (self.state, byte) {
            (Chunk::Size { digits }, b) if b.is_ascii_hexdigit() => {
                if digits >= 15 {
                    return Err(bad("chunk size too long"));
                }
                self.size = self.size * 16 + u64::from((b as char).to_digit(16).unwrap_or(0));
                Chunk::Size { digits: digits + 1 }
            }
            (Chunk::Size { digits: 0 }, _) => return Err(bad("chunk size is not hexadecimal")),
            (Chunk::Size { .. }, b';') => {
                self.extension = 1;
                Chunk::Extension
            }
            (Chunk::Size { .. }, b'\r') => Chunk::SizeLf,
            (Chunk::Size { .. }, _) => return Err(bad("chunk size is not hexadecimal")),
            (Chunk::Extension, b'\r') => Chunk::SizeLf,
            (Chunk::Extension, b'\n') => return Err(bad("bare LF in a chunk extension")),
            (Chunk::Extension, _) => {
                self.extension += 1;
                if self.extension > limits.max_chunk_extension {
                    return Err(bad("chunk extension over Limits::max_chunk_extension"));
                }
                Chunk::Extension
            }
            (Chunk::SizeLf, b'\n') if self.size == 0 => Chunk::TrailerStart,
            (Chunk::SizeLf, b'\n') => Chunk::Data(std::mem::take(&mut self.size)),
            (Chunk::SizeLf, _) => return Err(bad("chunk size line not ended by CRLF")),
            (Chunk::DataCr, b'\r') => Chunk::DataLf,
            (Chunk::DataLf, b'\n') => Chunk::Size { digits: 0 },
            (Chunk::DataCr | Chunk::DataLf, _) => {
                return Err(bad("chunk data not followed by CRLF"));
            }
            (Chunk::TrailerStart, b'\r') => Chunk::FinalLf,
            (Chunk::FinalLf, b'\n') => Chunk::Done,
            (Chunk::FinalLf, _) => return Err(bad("chunked body not ended by CRLF")),
            (Chunk::Trailer, b'\r') => Chunk::TrailerLf,
            (Chunk::TrailerLf, b'\n') => Chunk::TrailerStart,
            (Chunk::TrailerLf, _) => return Err(bad("trailer line not ended by CRLF")),
            (Chunk::TrailerStart | Chunk::Trailer, b'\n') => {
                return Err(bad("bare LF in a trailer"));
            }
            (Chunk::TrailerStart | Chunk::Trailer, _) => {
                self.trailer += 1;
                if self.trailer > limits.max_head {
                    return Err(HttpError::HeadTooLarge {
                        limit: limits.max_head,
                    });
                }
                Chunk::Trailer
            }
            (Chunk::Data(_) | Chunk::Done, _) => self.state,
        };
        Ok(())
    }
}

/// What the decoder found at the front of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// Not a whole request yet: give it more bytes (after the `consumed` ones).
    Incomplete,
    /// A head with `Expect: 100-continue` whose body has not started: answer `100 Continue`
    /// (once) to let the client send it.
    Continue,
    /// A whole request, `used` bytes of the input (head and body): its head is
    /// `input[..facts.len]`; a `Content-Length` body follows it in the input, a chunked body
    /// is decoded in [`RequestDecoder::chunked_body`].
    Request(HeadFacts),
}

/// Decodes requests one at a time from a connection's bytes.
///
/// Feed it the connection's unconsumed bytes from the start of the current request;
/// [`decode`](Self::decode) says how many it consumed and what it found. A request whose head
/// and `Content-Length` body are all in the input is returned without copying its body
/// (its bytes follow the head); only chunked bodies are decoded into the decoder's buffer.
#[derive(Debug)]
pub struct RequestDecoder {
    limits: Limits,
    /// The current request's head, once parsed, and how far its body has been read.
    head: Option<HeadFacts>,
    /// Body bytes of the current request read so far (chunked: decoded so far).
    body_read: u64,
    dechunker: Option<Dechunker>,
    chunked_body: Vec<u8>,
    continued: bool,
}

impl RequestDecoder {
    /// A decoder with `limits`.
    pub fn new(limits: Limits) -> Self {
        RequestDecoder {
            limits,
            head: None,
            body_read: 0,
            dechunker: None,
            chunked_body: Vec::new(),
            continued: false,
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Decodes the request at the front of `input` (everything from its first byte on, the
    /// same prefix again on every call until it is whole). Returns what was found; for a
    /// whole request, the bytes it took (head and body).
    ///
    /// # Errors
    /// The request is bad ([`HttpError`]); answer with its status and close the connection.
    pub fn decode(&mut self, input: &[u8]) -> Result<(Decoded, usize), HttpError> {
        let facts = match self.head {
            Some(facts) => facts,
            None => match parse_head(input, &self.limits)? {
                None => return Ok((Decoded::Incomplete, 0)),
                Some(facts) => {
                    self.begin(facts)?;
                    facts
                }
            },
        };
        let body = &input[facts.len..];
        let complete = match facts.body {
            BodyKind::None => Some(facts.len),
            BodyKind::Length(n) => (body.len() as u64 >= n).then(|| facts.len + n as usize),
            BodyKind::Chunked => self.dechunk(body)?.map(|used| facts.len + used),
        };
        match complete {
            Some(len) => {
                self.head = None;
                self.dechunker = None;
                Ok((Decoded::Request(facts), len))
            }
            None if facts.expect_continue && !self.continued && body.is_empty() => {
                self.continued = true;
                Ok((Decoded::Continue, 0))
            }
            None => Ok((Decoded::Incomplete, 0)),
        }
    }

    /// A new head: checks its body against the limit; chunked bodies start decoding.
    fn begin(&mut self, facts: HeadFacts) -> Result<(), HttpError> {
        if let BodyKind::Length(n) = facts.body
            && n > self.limits.max_body
        {
            return Err(HttpError::BodyTooLarge {
                limit: self.limits.max_body,
            });
        }
        self.head = Some(facts);
        self.body_read = 0;
        self.continued = false;
        self.chunked_body.clear();
        if facts.body == BodyKind::Chunked {
            self.dechunker = Some(Dechunker::new());
        }
        Ok(())
    }

    /// Decodes the chunked body bytes not seen yet (`body` holds all of them from the first);
    /// `Some(encoded length)` once it ended.
    fn dechunk(&mut self, body: &[u8]) -> Result<Option<usize>, HttpError> {
        let Some(dechunker) = self.dechunker.as_mut() else {
            return Ok(None);
        };
        let seen = self.body_read as usize;
        let (used, done) = dechunker.decode(&body[seen..], &mut self.chunked_body, &self.limits)?;
        self.body_read += used as u64;
        Ok(done.then_some(self.body_read as usize))
    }

    /// The bytes the request under way takes in all (head and body), once its head is
    /// parsed and its body has a length (`None` before, between requests, and for chunked
    /// bodies). A caller holding a partial request copies only this much more of its next
    /// read, and serves the rest straight from the read.
    pub fn wanted(&self) -> Option<usize> {
        let facts = self.head?;
        match facts.body {
            BodyKind::None => Some(facts.len),
            BodyKind::Length(n) => usize::try_from(n).ok()?.checked_add(facts.len),
            BodyKind::Chunked => None,
        }
    }

    /// The decoded body of the chunked request just returned (empty otherwise).
    pub fn chunked_body(&self) -> &[u8] {
        &self.chunked_body
    }
}
