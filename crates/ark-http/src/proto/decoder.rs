//! The sans-IO request decoder: bytes in, whole requests (head and decoded body) out, one at a
//! time and in order (pipelining), with every limit checked as the bytes arrive.

use crate::error::HttpError;
use crate::proto::head::{BodyKind, HeadFacts, Limits, MAX_HEADERS, parse_head};
use crate::proto::syntax::{is_field_line, is_tchar};

/// Makes room in `buf` for `extra` more bytes, growing it by doubling but never past `max`
/// (unless it needs more): a body's buffer does not hold twice its limit.
pub(crate) fn reserve_within(buf: &mut Vec<u8>, extra: usize, max: usize) {
    let need = buf.len().saturating_add(extra);
    if need > buf.capacity() {
        let target = need.max(buf.capacity().saturating_mul(2).min(max));
        buf.reserve_exact(target - buf.len());
    }
}

/// Where a chunked body's decoding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex size; digits so far.
    Size { digits: u8 },
    /// After the size: an extension up to CR, where in its syntax.
    Extension(Ext),
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

/// Where a chunk extension is in its syntax (RFC 9112 §7.1.1): `*( BWS ";" BWS name [ BWS
/// "=" BWS ( token / quoted-string ) ] )`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ext {
    /// After `;`: whitespace, then a name.
    Start,
    /// In a name.
    Name,
    /// Whitespace after a name: `=` or `;` must follow.
    NameSpace,
    /// After `=`: whitespace, then a token or a quoted string.
    ValueStart,
    /// In a token value.
    Token,
    /// Inside a quoted string.
    Quoted,
    /// After `\` in a quoted string.
    Escape,
    /// After a quoted string's closing quote.
    QuoteEnd,
    /// Whitespace after a value: `;` must follow.
    ValueSpace,
}

impl Ext {
    /// The next state after `b`; `None` when `b` is the CR that ends the size line.
    fn step(self, b: u8) -> Result<Option<Ext>, HttpError> {
        let space = b == b' ' || b == b'\t';
        let tchar = is_tchar(b);
        let text = b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80;
        let next = match self {
            Ext::Start if space => Ext::Start,
            Ext::Start | Ext::Name if tchar => Ext::Name,
            Ext::Name | Ext::Token | Ext::QuoteEnd if b == b'\r' => return Ok(None),
            Ext::Name | Ext::NameSpace if space => Ext::NameSpace,
            Ext::Name | Ext::NameSpace if b == b'=' => Ext::ValueStart,
            Ext::ValueStart if space => Ext::ValueStart,
            Ext::ValueStart if b == b'"' => Ext::Quoted,
            Ext::ValueStart | Ext::Token if tchar => Ext::Token,
            Ext::Quoted if b == b'"' => Ext::QuoteEnd,
            Ext::Quoted if b == b'\\' => Ext::Escape,
            Ext::Quoted | Ext::Escape if text => Ext::Quoted,
            Ext::Token | Ext::QuoteEnd | Ext::ValueSpace if space => Ext::ValueSpace,
            Ext::Name | Ext::NameSpace | Ext::Token | Ext::QuoteEnd | Ext::ValueSpace
                if b == b';' =>
            {
                Ext::Start
            }
            _ => {
                return Err(HttpError::BadChunk(
                    "a chunk extension that breaks its syntax",
                ));
            }
        };
        Ok(Some(next))
    }
}

/// Decodes a chunked body incrementally into `out`. The trailer section is read by the head's
/// rules for field lines and dropped.
#[derive(Debug, Clone)]
pub(crate) struct Dechunker {
    state: Chunk,
    /// Size being read.
    size: u64,
    /// Trailer bytes so far (bounded by the head limit).
    trailer: usize,
    /// Trailer lines so far (bounded by the header limit).
    trailer_lines: usize,
    /// The trailer line under way (checked as a field line at its end).
    line: Vec<u8>,
    /// Bytes of the current chunk's extension (bounded by `Limits::max_chunk_extension`).
    extension: usize,
}

impl Dechunker {
    pub(crate) fn new() -> Self {
        Dechunker {
            state: Chunk::Size { digits: 0 },
            size: 0,
            trailer: 0,
            trailer_lines: 0,
            line: Vec::new(),
            extension: 0,
        }
    }

    /// Bytes this decoder holds itself (the trailer line under way).
    pub(crate) fn held(&self) -> usize {
        self.line.capacity()
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
                reserve_within(out, take, limits.max_body.try_into().unwrap_or(usize::MAX));
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
                Chunk::Extension(Ext::Start)
            }
            (Chunk::Size { .. }, b'\r') => Chunk::SizeLf,
            (Chunk::Size { .. }, _) => return Err(bad("chunk size is not hexadecimal")),
            (Chunk::Extension(ext), b) => match ext.step(b)? {
                None => Chunk::SizeLf,
                Some(next) => {
                    self.extension += 1;
                    if self.extension > limits.max_chunk_extension {
                        return Err(bad("chunk extension over Limits::max_chunk_extension"));
                    }
                    Chunk::Extension(next)
                }
            },
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
            (Chunk::Trailer | Chunk::TrailerStart | Chunk::TrailerLf, _) => {
                self.trailer_byte(byte, limits)?
            }
            (Chunk::Data(_) | Chunk::Done, _) => self.state,
        };
        Ok(())
    }

    /// One byte of a trailer line: kept (up to the head limit) and, at the line's end,
    /// checked as a field line by the head's rules (RFC 9112 §7.1.2); no bare LF, no CR but
    /// before LF.
    fn trailer_byte(&mut self, byte: u8, limits: &Limits) -> Result<Chunk, HttpError> {
        self.trailer += 1;
        if self.trailer > limits.max_head {
            return Err(HttpError::HeadTooLarge {
                limit: limits.max_head,
            });
        }
        self.line.push(byte);
        Ok(match (self.state, byte) {
            (Chunk::TrailerLf, b'\n') => {
                self.trailer_lines += 1;
                if self.trailer_lines > limits.max_headers.min(MAX_HEADERS) {
                    return Err(HttpError::TooManyHeaders {
                        limit: limits.max_headers.min(MAX_HEADERS),
                    });
                }
                if !is_field_line(&self.line) {
                    return Err(HttpError::BadChunk(
                        "a trailer line that is not a field line",
                    ));
                }
                self.line.clear();
                Chunk::TrailerStart
            }
            (Chunk::TrailerLf, _) => {
                return Err(HttpError::BadChunk("trailer line not ended by CRLF"));
            }
            (_, b'\n') => return Err(HttpError::BadChunk("bare LF in a trailer")),
            (_, b'\r') => Chunk::TrailerLf,
            _ => Chunk::Trailer,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes one chunked request whose body is `body`, fed whole and a byte at a time: the
    /// decoded body, or the refusal (the same either way).
    fn chunked(body: &[u8], limits: Limits) -> Result<Vec<u8>, HttpError> {
        let mut request =
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        request.extend_from_slice(body);
        let decode = |step: usize| {
            let mut decoder = RequestDecoder::new(limits);
            for end in (step..request.len() + step).step_by(step) {
                match decoder.decode(&request[..end.min(request.len())])? {
                    (Decoded::Request(_), _) => return Ok(decoder.chunked_body().to_vec()),
                    _ => continue,
                }
            }
            Err(HttpError::BadChunk("incomplete"))
        };
        let whole = decode(request.len());
        assert_eq!(decode(1), whole, "{:?}", String::from_utf8_lossy(body));
        whole
    }

    #[test]
    fn trailer_lines_are_field_lines_by_the_heads_rules() {
        let ok = chunked(b"2\r\nhi\r\n0\r\nX-A: 1\r\nX-B:\r\n\r\n", Limits::default());
        assert_eq!(ok, Ok(b"hi".to_vec()));
        let not_a_field = HttpError::BadChunk("a trailer line that is not a field line");
        for tail in [
            &b"GET /second HTTP/1.1\r\nHost: x\r\n\r\n"[..],
            b"no-colon\r\n\r\n",
            b"X-A: a\0b\r\n\r\n",
            b"X-A : a\r\n\r\n",
            b" X-A: a\r\n\r\n",
            b"X-A: a\r\n\tfolded\r\n\r\n",
            b": a\r\n\r\n",
        ] {
            let mut body = b"2\r\nhi\r\n0\r\n".to_vec();
            body.extend_from_slice(tail);
            assert_eq!(
                chunked(&body, Limits::default()),
                Err(not_a_field.clone()),
                "{:?}",
                String::from_utf8_lossy(tail)
            );
        }
        assert_eq!(
            chunked(b"0\r\nX-A: a\nX-B: b\r\n\r\n", Limits::default()),
            Err(HttpError::BadChunk("bare LF in a trailer"))
        );
        assert_eq!(
            chunked(b"0\r\nX-A: a\rX\r\n\r\n", Limits::default()),
            Err(HttpError::BadChunk("trailer line not ended by CRLF"))
        );
    }

    #[test]
    fn a_trailer_section_is_bounded_like_a_head() {
        let limits = Limits {
            max_head: 64,
            max_headers: 2,
            ..Limits::default()
        };
        assert_eq!(
            chunked(b"0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits),
            Err(HttpError::TooManyHeaders { limit: 2 })
        );
        let mut long = b"0\r\nA: ".to_vec();
        long.extend(std::iter::repeat_n(b'a', 64));
        long.extend_from_slice(b"\r\n\r\n");
        assert_eq!(
            chunked(&long, limits),
            Err(HttpError::HeadTooLarge { limit: 64 })
        );
    }

    #[test]
    fn chunk_extensions_follow_their_syntax() {
        for ext in [
            "",
            ";a",
            ";a=b",
            "; a = b ;c",
            ";a=\"b c\\\"d\"",
            ";a;b=c",
            ";a=\"\"",
            ";a=\"\u{e9}\"",
        ] {
            let body = format!("2{ext}\r\nhi\r\n0\r\n\r\n");
            assert_eq!(
                chunked(body.as_bytes(), Limits::default()),
                Ok(b"hi".to_vec()),
                "{ext:?}"
            );
        }
        for ext in [
            ";",
            "; ",
            ";=v",
            ";a=",
            ";a=\"b",
            ";a=\"b\\",
            ";a b",
            ";a=b c",
            ";a=\"b\"c",
            ";a=\x01",
            ";a ",
            ";a=b ",
            ";a,b",
            ";a=\"b\r\n\"",
            ";a=b\n",
        ] {
            let body = format!("2{ext}\r\nhi\r\n0\r\n\r\n");
            assert_eq!(
                chunked(body.as_bytes(), Limits::default()),
                Err(HttpError::BadChunk(
                    "a chunk extension that breaks its syntax"
                )),
                "{ext:?}"
            );
        }
    }

    #[test]
    fn a_chunked_body_buffer_never_grows_past_the_body_limit() {
        let limits = Limits {
            max_body: 3000,
            ..Limits::default()
        };
        let mut body = Vec::new();
        for _ in 0..3 {
            body.extend_from_slice(b"3e8\r\n");
            body.extend(std::iter::repeat_n(b'a', 1000));
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"0\r\n\r\n");
        let mut request =
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        request.extend_from_slice(&body);
        let mut decoder = RequestDecoder::new(limits);
        for end in 1..=request.len() {
            if let (Decoded::Request(_), _) = decoder.decode(&request[..end]).unwrap() {
                break;
            }
        }
        assert_eq!(decoder.chunked_body().len(), 3000);
        assert_eq!(decoder.chunked_body.capacity(), 3000);
    }
}
