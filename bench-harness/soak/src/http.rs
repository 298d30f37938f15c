//! HTTP/1.1: a well-behaved link (`POST /echo`, kept alive, pipelined up to the plan's
//! window) and the bad actor that sends heads (and trailers) two parsers could read
//! differently.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Instant;

use crate::bad::{CLOSE_WAIT, connect, must_close, read_until_end};
use crate::link::{IO_TIMEOUT, Link, Msg, tcp_connect};
use crate::shared::{Ctx, Rng};
use crate::tally::{Ending, Fault};

/// The most a client accepts as a response head.
const MAX_HEAD: usize = 64 * 1024;

/// A kept-alive HTTP/1.1 connection to the echo server: each message is one `POST /echo`,
/// each echo the body of its answer (answers come in request order).
#[derive(Debug)]
pub struct HttpLink {
    stream: TcpStream,
    /// Bytes read past the last answer.
    read: Vec<u8>,
}

impl HttpLink {
    /// Connects to the HTTP echo server.
    pub fn connect(addr: SocketAddr) -> io::Result<HttpLink> {
        Ok(HttpLink {
            stream: tcp_connect(addr, IO_TIMEOUT)?,
            read: Vec::new(),
        })
    }

    /// Reads until `read` holds at least `len` bytes.
    fn fill(&mut self, len: usize) -> io::Result<()> {
        let mut buf = [0u8; 16 * 1024];
        while self.read.len() < len {
            match self.stream.read(&mut buf)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => self.read.extend_from_slice(&buf[..n]),
            }
        }
        Ok(())
    }

    /// Reads one whole response head; returns its length (the blank line included).
    fn head(&mut self) -> io::Result<usize> {
        for _ in 0..100_000 {
            if let Some(at) = self.read.windows(4).position(|w| w == b"\r\n\r\n") {
                return Ok(at + 4);
            }
            if self.read.len() > MAX_HEAD {
                break;
            }
            let want = self.read.len() + 1;
            self.fill(want)?;
        }
        Err(io::Error::other("no end of the response head"))
    }
}

/// The status and `content-length` of a response head.
fn status_and_length(head: &[u8]) -> io::Result<(u16, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        other => return Err(io::Error::other(format!("bad response head: {other:?}"))),
    }
    let length = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.parse().ok())
        .ok_or_else(|| io::Error::other("a response without a content-length"))?;
    Ok((response.code.unwrap_or(0), length))
}

impl Link for HttpLink {
    fn send(&mut self, msg: &Msg) -> io::Result<()> {
        let mut request = format!(
            "POST /echo HTTP/1.1\r\nHost: soak\r\nContent-Length: {}\r\n\r\n",
            msg.data.len()
        )
        .into_bytes();
        request.extend_from_slice(&msg.data);
        self.stream.write_all(&request)
    }

    fn recv(&mut self) -> io::Result<Msg> {
        let head = self.head()?;
        let (status, length) = status_and_length(&self.read[..head])?;
        if status != 200 {
            return Err(io::Error::other(format!("answered {status}")));
        }
        self.fill(head + length)?;
        let data = self.read[head..head + length].to_vec();
        self.read.drain(..head + length);
        Ok(Msg { text: false, data })
    }

    fn leave(&mut self) -> Result<(), Fault> {
        self.stream
            .shutdown(Shutdown::Write)
            .map_err(|e| Fault::broken(0, "shutdown", e))?;
        let mut rest = [0u8; 64];
        match (self.read.len(), self.stream.read(&mut rest)) {
            (0, Ok(0)) => Ok(()),
            (held, Ok(n)) => Err(Fault::Wrong(format!(
                "{} bytes after the last answer",
                held + n
            ))),
            (_, Err(e)) => Err(Fault::broken(
                0,
                "waiting for the server's end of stream",
                e,
            )),
        }
    }
}

/// The heads of [`bad_framing`]: each must get one 400 and the connection closed, and the
/// request smuggled after it must not be answered.
const BAD_HEADS: [(&str, &[u8]); 6] = [
    (
        "mixed line endings",
        b"POST /echo HTTP/1.1\r\nHost: soak\r\nX-A: a\nContent-Length: 5\r\n\r\nhello",
    ),
    ("bare LF throughout", b"GET /echo HTTP/1.1\nHost: soak\n\n"),
    (
        "bare CR",
        b"GET /echo HTTP/1.1\r\nHost: soak\rX-A: a\r\n\r\n",
    ),
    (
        "chunk extension over 4 KiB",
        b"POST /echo HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n1;",
    ),
    (
        "a request as a trailer",
        b"POST /echo HTTP/1.1\r\nHost: soak\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nGET /echo HTTP/1.1\r\nHost: soak\r\n\r\n",
    ),
    ("a Host with userinfo", b"GET /echo HTTP/1.1\r\nHost: u@soak\r\n\r\n"),
];

/// The request sent after each bad one, as a smuggler would.
const SMUGGLED: &[u8] = b"GET /echo HTTP/1.1\r\nHost: soak\r\n\r\n";

/// HTTP: sends one of [`BAD_HEADS`] (the chunk extension padded past the 4 KiB cap), then a
/// well-formed request; the server must answer 400 alone and close within [`CLOSE_WAIT`].
pub fn bad_framing(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let (case, head) = BAD_HEADS[rng.range(0, BAD_HEADS.len() as u64 - 1) as usize];
    let mut stream = match connect(ctx.addrs.http, IO_TIMEOUT, started) {
        Ok(s) => s,
        Err(ending) => return ending,
    };
    let mut request = head.to_vec();
    if case.starts_with("chunk") {
        request.extend(std::iter::repeat_n(b'e', 5000));
        request.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
    }
    request.extend_from_slice(SMUGGLED);
    if let Err(e) = stream.write_all(&request) {
        return Ending::failed("write failed", started, format!("{case}: write: {e}"));
    }
    let (end, answer) = read_until_end(&mut stream, CLOSE_WAIT, 64 * 1024);
    let answers = answer.windows(9).filter(|w| w == b"HTTP/1.1 ").count();
    if !answer.starts_with(b"HTTP/1.1 400 ") || answers != 1 {
        let first = answer.split(|&b| b == b'\r').next().unwrap_or_default();
        return Ending::failed(
            format!("{case}: not one 400"),
            started,
            format!(
                "{case}: {answers} answers, the first {:?} (want one 400, then the close)",
                String::from_utf8_lossy(first)
            ),
        );
    }
    must_close(end, started, &format!(", after 400 [{case}]"))
}
