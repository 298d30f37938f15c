//! The rules both directions share, so the server and the clients cannot drift apart: the
//! start lines (request line, status line), the field lines (httparse's header parser),
//! line endings ([`Limits::bare_lf`]), and the fields that frame a message
//! (`Content-Length`, `Transfer-Encoding`) or say what happens to its connection.

use crate::error::HttpError;
use crate::proto::head::{Limits, MAX_HEADERS};

/// A set of bytes as a 256-entry table: one load per byte checked (a request's method and
/// target, a `Host` value, are checked byte by byte on every request).
pub(crate) struct ByteClass([bool; 256]);

impl ByteClass {
    /// ASCII letters and digits, and the bytes of `others`.
    pub(crate) const fn alphanumeric_and(others: &[u8]) -> ByteClass {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 256 {
            table[b] = (b as u8).is_ascii_alphanumeric();
            b += 1;
        }
        let mut i = 0;
        while i < others.len() {
            table[others[i] as usize] = true;
            i += 1;
        }
        ByteClass(table)
    }

    /// The bytes from `low` to `high`.
    pub(crate) const fn range(low: u8, high: u8) -> ByteClass {
        let mut table = [false; 256];
        let mut b = low as usize;
        while b <= high as usize {
            table[b] = true;
            b += 1;
        }
        ByteClass(table)
    }

    /// Whether `b` is in the set.
    #[inline]
    pub(crate) fn has(&self, b: u8) -> bool {
        self.0[b as usize]
    }
}

/// `tchar` of RFC 9110 §5.6.2: what a method, a field name or a chunk extension name is made of.
const TCHAR: ByteClass = ByteClass::alphanumeric_and(b"!#$%&'*+-.^_`|~");

/// Visible ASCII: what a request target is made of.
const VISIBLE: ByteClass = ByteClass::range(0x21, 0x7e);

/// `tchar` of RFC 9110 §5.6.2: what a method, a field name or a chunk extension name is made of.
#[inline]
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR.has(b)
}

/// The bytes of an empty line (CRLF, or a bare LF) at the front of `input`: `Some(0)` for none,
/// `None` while it cannot be told (a lone CR at the end).
fn empty_line(input: &[u8]) -> Option<usize> {
    match input {
        [b'\r', b'\n', ..] => Some(2),
        [b'\n', ..] => Some(1),
        [b'\r'] => None,
        _ => Some(0),
    }
}

/// The end of a start line at `input[at..]`: the bytes up to and with its CRLF (or bare LF;
/// [`line_endings`] decides whether that is allowed), `None` while incomplete.
fn line_end(input: &[u8], at: usize, what: &'static str) -> Result<Option<usize>, HttpError> {
    match &input[at.min(input.len())..] {
        [] | [b'\r'] => Ok(None),
        [b'\r', b'\n', ..] => Ok(Some(at + 2)),
        [b'\n', ..] => Ok(Some(at + 1)),
        _ => Err(HttpError::BadRequest(what)),
    }
}

/// `HTTP/x.y` at `input[at..]`: the minor version as HTTP/1.1 reads it (0 for 1.0, 1 for 1.1
/// and any later 1.x, which RFC 9110 §2.5 says to serve as 1.1), `None` while incomplete.
/// Another major version is [`HttpError::UnsupportedVersion`] (505); anything not of this
/// shape is malformed (400).
fn version(input: &[u8], at: usize, what: &'static str) -> Result<Option<u8>, HttpError> {
    const SHAPE: &[u8] = b"HTTP/#.#";
    let bytes = &input[at.min(input.len())..];
    for (i, (&b, &want)) in bytes.iter().zip(SHAPE).enumerate() {
        let fits = if want == b'#' {
            b.is_ascii_digit()
        } else {
            b == want
        };
        if !fits {
            return Err(HttpError::BadRequest(what));
        }
        if i == SHAPE.len() - 1 {
            return match (bytes[5], bytes[7]) {
                (b'1', b'0') => Ok(Some(0)),
                (b'1', _) => Ok(Some(1)),
                _ => Err(HttpError::UnsupportedVersion),
            };
        }
    }
    Ok(None)
}

/// A request line, checked: `method SP request-target SP HTTP-version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestLine<'a> {
    pub(crate) method: &'a str,
    /// Visible ASCII only (no byte of 0x80 and up: raw UTF-8 is not a target).
    pub(crate) target: &'a str,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and 1.2 to 1.9).
    pub(crate) version: u8,
}

/// The request line at the front of `input` (after the empty lines RFC 9112 §2.2 lets a
/// server skip) and the bytes up to its end; `None` while incomplete. A byte that cannot be
/// there is refused as soon as it arrives.
///
/// # Errors
/// A malformed request line (400), or an HTTP major version other than 1 (505).
pub(crate) fn request_line(input: &[u8]) -> Result<Option<(RequestLine<'_>, usize)>, HttpError> {
    let bad = "malformed request line";
    let mut start = 0;
    loop {
        match empty_line(&input[start..]) {
            None => return Ok(None),
            Some(0) => break,
            Some(n) => start += n,
        }
    }
    let Some(method_len) = token_until_space(&input[start..], is_tchar, bad)? else {
        return Ok(None);
    };
    let target_at = start + method_len + 1;
    let Some(target_len) = token_until_space(&input[target_at..], |b| VISIBLE.has(b), bad)? else {
        return Ok(None);
    };
    let version_at = target_at + target_len + 1;
    let Some(version) = version(input, version_at, bad)? else {
        return Ok(None);
    };
    let Some(end) = line_end(input, version_at + 8, bad)? else {
        return Ok(None);
    };
    // Both are ASCII (checked byte by byte above).
    let text = |at: usize, len: usize| std::str::from_utf8(&input[at..at + len]).ok();
    match (text(start, method_len), text(target_at, target_len)) {
        (Some(method), Some(target)) => Ok(Some((
            RequestLine {
                method,
                target,
                version,
            },
            end,
        ))),
        _ => Err(HttpError::BadRequest(bad)),
    }
}

/// The length of a non-empty run of bytes that `ok` accepts, followed by one SP; `None`
/// while the run has not ended.
#[inline]
fn token_until_space(
    input: &[u8],
    ok: impl Fn(u8) -> bool,
    what: &'static str,
) -> Result<Option<usize>, HttpError> {
    for (i, &b) in input.iter().enumerate() {
        if b == b' ' && i > 0 {
            return Ok(Some(i));
        }
        if !ok(b) {
            return Err(HttpError::BadRequest(what));
        }
    }
    Ok(None)
}

/// A status line, checked: `HTTP-version SP status-code [SP reason-phrase]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatusLine {
    /// 100 to 599.
    pub(crate) status: u16,
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and 1.2 to 1.9).
    pub(crate) version: u8,
}

/// The status line at the front of `input` and the bytes up to its end; `None` while
/// incomplete. No empty line may come before it (an answer starts at its first byte).
///
/// # Errors
/// A malformed status line, a status outside 100 to 599, or a major version other than 1.
pub(crate) fn status_line(input: &[u8]) -> Result<Option<(StatusLine, usize)>, HttpError> {
    let bad = "malformed status line";
    let Some(version) = version(input, 0, bad)? else {
        return Ok(None);
    };
    let code = &input[8.min(input.len())..input.len().min(12)];
    for (i, &b) in code.iter().enumerate() {
        let fits = if i == 0 {
            b == b' '
        } else {
            b.is_ascii_digit()
        };
        if !fits {
            return Err(HttpError::BadRequest(bad));
        }
    }
    if code.len() < 4 {
        return Ok(None);
    }
    let status = code[1..]
        .iter()
        .fold(0u16, |n, &d| n * 10 + u16::from(d - b'0'));
    if !(100..=599).contains(&status) {
        return Err(HttpError::BadRequest("status code outside 100 to 599"));
    }
    // The reason phrase: HTAB, SP, visible ASCII and obs-text; the SP before it may be missing
    // when it is (as httparse allows).
    let mut at = 12;
    if input.get(at) == Some(&b' ') {
        at += 1;
        while let Some(&b) = input.get(at) {
            if !(b == b'\t' || b == b' ' || (0x21..=0x7e).contains(&b) || b >= 0x80) {
                break;
            }
            at += 1;
        }
    }
    let Some(end) = line_end(input, at, bad)? else {
        return Ok(None);
    };
    Ok(Some((StatusLine { status, version }, end)))
}

/// A whole head read by [`read_head`]: its start line, its length (the final empty line
/// included), and how many of the headers given it filled.
pub(crate) type Head<L> = (L, usize, usize);

/// Reads the head at the front of `input`: its start line with `start_line`, then its field
/// lines into `headers` with httparse's header parser (no obs-fold, no space before a colon,
/// no CTL but HTAB in a value), within `limits`, its line endings checked. Only the first
/// `max_head + 1` bytes are looked at: a head that does not end within the limit is refused
/// however its later bytes look, so the verdict does not depend on how the bytes arrived.
/// `None` while incomplete.
///
/// # Errors
/// The head is malformed or over a limit ([`HttpError`]).
pub(crate) fn read_head<'a, L>(
    input: &'a [u8],
    limits: &Limits,
    headers: &mut [httparse::Header<'a>],
    start_line: impl Fn(&'a [u8]) -> Result<Option<(L, usize)>, HttpError>,
) -> Result<Option<Head<L>>, HttpError> {
    let window = &input[..input.len().min(limits.max_head.saturating_add(1))];
    let too_large = HttpError::HeadTooLarge {
        limit: limits.max_head,
    };
    let partial = |window: &[u8]| {
        if window.len() > limits.max_head {
            Err(too_large.clone())
        } else {
            Ok(None)
        }
    };
    let Some((line, at)) = start_line(window)? else {
        return partial(window);
    };
    let max = limits.max_headers.min(MAX_HEADERS).min(headers.len());
    let (len, count) = match httparse::parse_headers(&window[at..], &mut headers[..max]) {
        Ok(httparse::Status::Complete((n, parsed))) => (at + n, parsed.len()),
        Ok(httparse::Status::Partial) => return partial(window),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::TooManyHeaders { limit: max });
        }
        Err(_) => return Err(HttpError::BadRequest("malformed header field")),
    };
    if len > limits.max_head {
        return Err(too_large);
    }
    line_endings(&input[..len], limits.bare_lf)?;
    Ok(Some((line, len, count)))
}

/// Field lines most heads fit in. A head is read into this many slots first and into
/// [`MAX_HEADERS`] only when it has more: filling 100 empty slots is 3.2 KB of stores, which
/// cost a pipelined request more than parsing it (a third of `parse_head`'s samples).
pub(crate) const FEW_HEADERS: usize = 16;

/// [`read_head`] into [`FEW_HEADERS`] slots, or [`MAX_HEADERS`] when the head has more and
/// the limits allow them; `with` gets the start line, the head's length and its fields.
///
/// # Errors
/// As [`read_head`].
pub(crate) fn with_head<'a, L, R>(
    input: &'a [u8],
    limits: &Limits,
    start_line: impl Fn(&'a [u8]) -> Result<Option<(L, usize)>, HttpError> + Copy,
    with: impl FnOnce(L, usize, &[httparse::Header<'a>]) -> R,
) -> Result<Option<R>, HttpError> {
    let mut few = [httparse::EMPTY_HEADER; FEW_HEADERS];
    match read_head(input, limits, &mut few, start_line) {
        Ok(Some((line, len, count))) => Ok(Some(with(line, len, &few[..count]))),
        Err(HttpError::TooManyHeaders { .. }) if limits.max_headers > FEW_HEADERS => {
            let mut many = [httparse::EMPTY_HEADER; MAX_HEADERS];
            Ok(read_head(input, limits, &mut many, start_line)?
                .map(|(line, len, count)| with(line, len, &many[..count])))
        }
        other => other.map(|_| None),
    }
}

/// Reads again a head that [`read_head`] accepted (a whole one, from its first byte): its
/// start line and how many of `headers` its fields filled.
pub(crate) fn reread<'a, L>(
    head: &'a [u8],
    headers: &mut [httparse::Header<'a>],
    start_line: impl Fn(&'a [u8]) -> Result<Option<(L, usize)>, HttpError>,
) -> Option<(L, usize)> {
    let (line, at) = start_line(head).ok()??;
    match httparse::parse_headers(&head[at..], headers).ok()? {
        httparse::Status::Complete((_, parsed)) => Some((line, parsed.len())),
        httparse::Status::Partial => None,
    }
}

/// Whether `line` (its CRLF included) is one field line by the head's rules: a trailer line.
pub(crate) fn is_field_line(line: &[u8]) -> bool {
    let mut one = [httparse::EMPTY_HEADER; 1];
    // A valid line leaves the parser waiting for the next one (or the final empty line).
    matches!(
        httparse::parse_headers(line, &mut one),
        Ok(httparse::Status::Partial)
    )
}

/// Every line of `head` ends in CRLF — or, with `bare_lf`, every line ends in a bare LF. A CR
/// not before an LF, and a head mixing CRLF and bare LF, are refused.
pub(crate) fn line_endings(head: &[u8], bare_lf: bool) -> Result<(), HttpError> {
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

/// How a message says its body is framed, before the rules of its direction apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// Neither `Content-Length` nor `Transfer-Encoding`.
    Neither,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the fields of a head say about framing and the connection, checked by the rules both
/// directions share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fields<'a> {
    pub(crate) body: Declared,
    /// `Connection: close`.
    pub(crate) close: bool,
    /// `Connection: keep-alive`.
    pub(crate) keep_alive: bool,
    /// `Host` lines, and the value of the last.
    pub(crate) hosts: usize,
    pub(crate) host: &'a [u8],
    /// `Expect: 100-continue`.
    pub(crate) expect_continue: bool,
}

impl Fields<'_> {
    /// Whether the connection stays open after this message, by its version and `Connection`.
    pub(crate) fn persistent(&self, version: u8) -> bool {
        if version == 1 {
            !self.close
        } else {
            self.keep_alive && !self.close
        }
    }
}

/// Reads the framing and connection fields of `headers` (of a message of `version`).
///
/// # Errors
/// A second `Content-Length` (even with the same value), one that is not digits alone, a
/// second `Transfer-Encoding`, a coding other than `chunked` (501) or `chunked` not last, both
/// `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.3 lets `Transfer-Encoding` win, but
/// the pair is how requests and answers are smuggled), or `Transfer-Encoding` in HTTP/1.0.
pub(crate) fn fields<'a>(
    headers: &[httparse::Header<'a>],
    version: u8,
) -> Result<Fields<'a>, HttpError> {
    let mut fields = Fields {
        body: Declared::Neither,
        close: false,
        keep_alive: false,
        hosts: 0,
        host: b"",
        expect_continue: false,
    };
    let (mut length, mut chunked) = (None, false);
    for header in headers {
        let (name, value) = (header.name, header.value);
        // Most fields are none of these: their length says so without a comparison.
        if !matches!(name.len(), 4 | 6 | 10 | 14 | 17) {
            continue;
        }
        if name.eq_ignore_ascii_case("host") {
            fields.hosts += 1;
            fields.host = value;
        } else if name.eq_ignore_ascii_case("content-length") {
            if length.is_some() {
                return Err(HttpError::BadContentLength);
            }
            length = Some(parse_length(value)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            if chunked {
                return Err(HttpError::BadRequest("more than one Transfer-Encoding"));
            }
            transfer_coding(value)?;
            chunked = true;
        } else if name.eq_ignore_ascii_case("connection") {
            fields.close |= token_list_has(value, "close");
            fields.keep_alive |= token_list_has(value, "keep-alive");
        } else if name.eq_ignore_ascii_case("expect") {
            fields.expect_continue = value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    fields.body = match (length, chunked) {
        (Some(_), true) => return Err(HttpError::LengthAndChunked),
        (_, true) if version == 0 => {
            return Err(HttpError::BadRequest("Transfer-Encoding in HTTP/1.0"));
        }
        (_, true) => Declared::Chunked,
        (Some(n), false) => Declared::Length(n),
        (None, false) => Declared::Neither,
    };
    Ok(fields)
}

fn token_list_has(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A `Content-Length` value: digits only (no list, sign or space inside).
fn parse_length(value: &[u8]) -> Result<u64, HttpError> {
    let digits = value.trim_ascii();
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::BadContentLength);
    }
    Ok(digits
        .iter()
        .fold(0u64, |n, &d| n * 10 + u64::from(d - b'0')))
}

/// A `Transfer-Encoding` value: `chunked` alone is supported; another coding is 501, and
/// `chunked` anywhere but last is a framing error.
fn transfer_coding(value: &[u8]) -> Result<(), HttpError> {
    let mut codings = value.split(|&b| b == b',').map(<[u8]>::trim_ascii);
    let chunked = |c: &[u8]| c.eq_ignore_ascii_case(b"chunked");
    let count = codings.clone().count();
    let last = codings.clone().next_back().unwrap_or_default();
    if count == 1 && chunked(last) {
        Ok(())
    } else if !chunked(last) && codings.any(chunked) {
        Err(HttpError::BadRequest(
            "chunked is not the last transfer coding",
        ))
    } else {
        Err(HttpError::UnsupportedTransferCoding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_read_strictly_and_a_later_1x_is_11() {
        fn line(s: &[u8]) -> Result<Option<(&str, &str, u8, usize)>, HttpError> {
            request_line(s).map(|r| r.map(|(l, n)| (l.method, l.target, l.version, n)))
        }
        assert_eq!(line(b"GET / HTTP/1.1\r\n"), Ok(Some(("GET", "/", 1, 16))));
        assert_eq!(
            line(b"\r\nGET /a HTTP/1.0\n"),
            Ok(Some(("GET", "/a", 0, 18)))
        );
        assert_eq!(line(b"GET / HTTP/1.2\r\n"), Ok(Some(("GET", "/", 1, 16))));
        for partial in [
            &b""[..],
            b"\r",
            b"GE",
            b"GET ",
            b"GET /x",
            b"GET / HTTP/1",
            b"GET / HTTP/1.1\r",
        ] {
            assert_eq!(line(partial), Ok(None), "{partial:?}");
        }
        for bad in [
            &b"GET  / HTTP/1.1\r\n"[..],
            b" GET / HTTP/1.1\r\n",
            b"GET /\x80 HTTP/1.1\r\n",
            b"GET / HTTP/1.1 \r\n",
            b"GET / HTTP/1.10\r\n",
            b"GET / HTTP/1.1\rX",
            b"GET / HTTPS",
            b"GE(T / HTTP/1.1\r\n",
            b"GET / HTTP/x",
        ] {
            assert!(
                matches!(line(bad), Err(HttpError::BadRequest(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            line(b"GET / HTTP/2.0\r\n"),
            Err(HttpError::UnsupportedVersion)
        );
        assert_eq!(line(b"GET / HTTP/0.9"), Err(HttpError::UnsupportedVersion));
    }

    #[test]
    fn status_lines_are_read_strictly() {
        let line = |s: &[u8]| status_line(s).map(|r| r.map(|(l, n)| (l.status, l.version, n)));
        assert_eq!(line(b"HTTP/1.1 200 OK\r\n"), Ok(Some((200, 1, 17))));
        assert_eq!(line(b"HTTP/1.0 404\r\n"), Ok(Some((404, 0, 14))));
        assert_eq!(line(b"HTTP/1.1 204 \r\n"), Ok(Some((204, 1, 15))));
        assert_eq!(line(b"HTTP/1.3 200 \xe9t\xe9\r\n"), Ok(Some((200, 1, 18))));
        for partial in [&b"HTTP/1.1"[..], b"HTTP/1.1 2", b"HTTP/1.1 200 O"] {
            assert_eq!(line(partial), Ok(None), "{partial:?}");
        }
        for bad in [
            &b"\r\nHTTP/1.1 200 OK\r\n"[..],
            b"HTTP/1.1  200 OK\r\n",
            b"HTTP/1.1 20 OK\r\n",
            b"HTTP/1.1 099 OK\r\n",
            b"HTTP/1.1 600 OK\r\n",
            b"HTTP/1.1 200 O\x00K\r\n",
            b"HTTP/1.1 200X\r\n",
        ] {
            assert!(
                matches!(line(bad), Err(HttpError::BadRequest(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            line(b"HTTP/2.0 200 OK\r\n"),
            Err(HttpError::UnsupportedVersion)
        );
    }

    #[test]
    fn content_length_and_transfer_encoding_rules_are_one_set() {
        let framing = |lines: &[(&'static str, &'static [u8])], version| {
            let headers: Vec<httparse::Header<'static>> = lines
                .iter()
                .map(|&(name, value)| httparse::Header { name, value })
                .collect();
            fields(&headers, version).map(|f| f.body)
        };
        assert_eq!(
            framing(&[("content-length", b"5")], 1),
            Ok(Declared::Length(5))
        );
        assert_eq!(
            framing(&[("Transfer-Encoding", b"chunked")], 1),
            Ok(Declared::Chunked)
        );
        assert_eq!(framing(&[], 0), Ok(Declared::Neither));
        for bad in [
            &b"+5"[..],
            b"-5",
            b"5, 5",
            b"5 5",
            b"",
            b"0x5",
            b"99999999999999999999",
        ] {
            assert_eq!(
                framing(&[("content-length", bad)], 1),
                Err(HttpError::BadContentLength)
            );
        }
        assert_eq!(
            framing(&[("content-length", b"5"), ("content-length", b"5")], 1),
            Err(HttpError::BadContentLength)
        );
        assert_eq!(
            framing(
                &[("content-length", b"5"), ("transfer-encoding", b"chunked")],
                1
            ),
            Err(HttpError::LengthAndChunked)
        );
        assert_eq!(
            framing(&[("transfer-encoding", b"gzip")], 1),
            Err(HttpError::UnsupportedTransferCoding)
        );
        assert!(framing(&[("transfer-encoding", b"chunked, gzip")], 1).is_err());
        assert!(framing(&[("transfer-encoding", b"chunked")], 0).is_err());
    }

    #[test]
    fn a_trailer_line_is_a_field_line() {
        assert!(is_field_line(b"X-A: b\r\n"));
        assert!(is_field_line(b"X-A:\r\n"));
        for bad in [
            &b"no colon\r\n"[..],
            b"X-A : b\r\n",
            b" X-A: b\r\n",
            b"X-A: a\x00b\r\n",
            b"GET / HTTP/1.1\r\n",
        ] {
            assert!(!is_field_line(bad), "{bad:?}");
        }
    }
}
