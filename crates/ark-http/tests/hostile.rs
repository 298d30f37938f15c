//! `HttpAgent` and `HttpClient` against a hostile or broken server, over real sockets: a std
//! `TcpListener` thread plays the server and writes exactly the bytes of each vector. A
//! close-delimited body is delivered whole at the close and its connection never reused; a
//! chunked answer of 1-byte chunks with 4,000-byte extensions fails with a typed error while
//! the client holds a few KiB; bytes no request asked for close the connection (counted) and
//! are never delivered; and framing a client must refuse is refused with the same rules the
//! server applies to requests.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use ark_http::{
    AnswerError, ClientResponse, ClientSession, ConnectionError, HttpAgent, HttpClient,
    HttpClientHandler, HttpError, HttpRequest, HttpResponse, Limits, Origin, RequestError,
};

const TIMEOUT: Duration = Duration::from_secs(20);

/// What the hostile server does after writing its bytes for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Reads the next request on the same connection.
    Serve,
    /// Closes the connection (FIN).
    Close,
}

/// The script: the path of each request read, the connection's stream to write to.
type Script = dyn Fn(&str, &mut TcpStream) -> After + Send + Sync;

/// A hostile server on loopback, one thread per connection; counts the connections.
struct Hostile {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl Hostile {
    fn start(script: impl Fn(&str, &mut TcpStream) -> After + Send + Sync + 'static) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let script: Arc<Script> = Arc::new(script);
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let script = script.clone();
                thread::spawn(move || serve(stream, &*script));
            }
        });
        Hostile { addr, accepted }
    }

    fn origin(&self) -> Origin {
        Origin::http(self.addr)
    }

    fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Reads request heads (no bodies: the tests send GETs) and runs the script for each.
fn serve(mut stream: TcpStream, script: &Script) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        if script(&path, &mut stream) == After::Close {
            return;
        }
    }
}

/// Reads one request head from `stream`; whether one came.
fn read_head(stream: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    true
}

/// An answer with a `content-length` body.
fn answer(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The body of a close-delimited answer (39 bytes, as in the issue).
const BODY_39: &str = "a body that runs to the close: 39 bytes";

fn agent() -> HttpAgent {
    HttpAgent::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn get(agent: &HttpAgent, origin: &Origin, path: &str) -> Result<HttpResponse, RequestError> {
    agent.send(origin, HttpRequest::get(path)).wait()
}

/// The vector's answer to `/first` (then `after`); `/next` is answered `next`, kept alive.
fn first_then_next(first: &'static [u8], after: After) -> Hostile {
    Hostile::start(move |path, stream| {
        if path == "/first" {
            let _ = stream.write_all(first);
            after
        } else {
            let _ = stream.write_all(&answer("next"));
            After::Serve
        }
    })
}

fn close_delimited(first: &'static [u8]) {
    let server = first_then_next(first, After::Close);
    let agent = agent();
    let origin = server.origin();
    let answer = get(&agent, &origin, "/first").unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(String::from_utf8_lossy(&answer.body), BODY_39);
    let next = get(&agent, &origin, "/next").unwrap();
    assert_eq!(next.body, b"next");
    assert_eq!(server.connections(), 2, "never reused after the close");
    let stats = agent.stats();
    assert_eq!(stats.close_delimited, 1, "{stats:?}");
    agent.stop().wait().unwrap();
}

#[test]
fn agent_reads_a_close_delimited_body_of_http11_to_the_close() {
    close_delimited(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\na body that runs to the close: 39 bytes",
    );
}

#[test]
fn agent_reads_a_close_delimited_body_of_http10_to_the_close() {
    close_delimited(b"HTTP/1.0 200 OK\r\n\r\na body that runs to the close: 39 bytes");
}

/// Without `Connection: close` the body still runs to the close, and the connection is not
/// reused meanwhile (before: an empty body, and the connection reused with the 39 bytes
/// waiting on it as the next request's answer).
#[test]
fn agent_reads_a_close_delimited_body_without_connection_close_and_never_reuses_it() {
    close_delimited(b"HTTP/1.1 200 OK\r\n\r\na body that runs to the close: 39 bytes");
}

/// Limits of the memory-bomb tests: a 1 MiB body, so a connection takes at most
/// 8,192 + 1 MiB + 64 KiB bytes of one answer on the wire.
fn bomb_limits() -> Limits {
    Limits {
        max_body: 1024 * 1024,
        ..Limits::default()
    }
}

/// The wire bound of [`bomb_limits`].
const BOMB_BOUND: u64 = 8192 + 1024 * 1024 + 64 * 1024;

/// 1-byte chunks, each with a 4,000-byte extension (under the 4,096 cap), until the client
/// goes (or 64 MiB).
fn bomb(stream: &mut TcpStream) -> After {
    let mut chunk = b"1;".to_vec();
    chunk.extend(std::iter::repeat_n(b'e', 3999));
    chunk.extend_from_slice(b"\r\nx\r\n");
    let many = chunk.repeat(16);
    if stream
        .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        .is_err()
    {
        return After::Close;
    }
    let mut sent = 0;
    while sent < 64 << 20 && stream.write_all(&many).is_ok() {
        sent += many.len();
    }
    After::Close
}

#[test]
fn agent_fails_a_chunk_extension_bomb_with_a_typed_error_holding_a_few_kib() {
    let server = Hostile::start(|path, stream| match path {
        "/first" => bomb(stream),
        _ => {
            let _ = stream.write_all(&answer("next"));
            After::Serve
        }
    });
    let agent = HttpAgent::builder()
        .limits(bomb_limits())
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let origin = server.origin();
    let error = get(&agent, &origin, "/first").unwrap_err();
    assert_eq!(
        error,
        RequestError::Connection(ConnectionError::BadAnswer(AnswerError::TooLarge {
            limit: BOMB_BOUND
        }))
    );
    let stats = agent.stats();
    assert_eq!(stats.too_large, 1, "{stats:?}");
    // Raw bytes are dropped as the dechunker takes them: the head, the ~280 decoded bytes
    // and one chunk's extension state, not the 1.1 MB that came.
    assert!(stats.held_peak < 16 * 1024, "{stats:?}");
    assert!(stats.held_peak > 0, "{stats:?}");
    assert_eq!(get(&agent, &origin, "/next").unwrap().body, b"next");
    let stats = agent.stats();
    assert_eq!(stats.held, 0, "nothing held between answers: {stats:?}");
    agent.stop().wait().unwrap();
}

/// `/first` is answered, then (in the same write) an extra answer's head and part of its
/// body; the rest comes 200 ms later, and a request written meanwhile on that connection
/// gets only that rest.
#[test]
fn agent_closes_a_connection_that_sends_more_than_the_answer_and_counts_it() {
    let server = Hostile::start(|path, stream| match path {
        "/first" => {
            let mut bytes = answer("first");
            bytes.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUG");
            let _ = stream.write_all(&bytes);
            thread::sleep(Duration::from_millis(200));
            let _ = stream.write_all(b"GLED");
            After::Serve
        }
        _ => {
            let _ = stream.write_all(&answer("next"));
            After::Serve
        }
    });
    let agent = agent();
    let origin = server.origin();
    assert_eq!(get(&agent, &origin, "/first").unwrap().body, b"first");
    match get(&agent, &origin, "/next") {
        Ok(answer) => assert_eq!(answer.body, b"next"),
        Err(e) => assert!(matches!(e, RequestError::Connection(_)), "{e:?}"),
    }
    assert_eq!(server.connections(), 2, "the connection was not reused");
    assert_eq!(agent.stats().unsolicited, 1);
    agent.stop().wait().unwrap();
}

/// A whole extra answer in the same read as the real one: dropped, counted, and the
/// connection closed (before: dropped silently and the connection reused).
#[test]
fn agent_closes_a_connection_that_sends_two_answers_to_one_request() {
    let mut twice = answer("first");
    twice.extend_from_slice(&answer("SMUGGLED"));
    let twice: &'static [u8] = twice.leak();
    let server = first_then_next(twice, After::Serve);
    let agent = agent();
    let origin = server.origin();
    assert_eq!(get(&agent, &origin, "/first").unwrap().body, b"first");
    assert_eq!(get(&agent, &origin, "/next").unwrap().body, b"next");
    assert_eq!(server.connections(), 2, "the connection was not reused");
    assert_eq!(agent.stats().unsolicited, 1);
    agent.stop().wait().unwrap();
}

/// Part of an answer on an idle connection: it is closed and counted, never kept for the
/// next request (before: the next request's answer was the smuggled head and the first 8
/// bytes of what followed).
#[test]
fn agent_closes_an_idle_connection_that_receives_bytes() {
    let server = Hostile::start(|path, stream| match path {
        "/first" => {
            let _ = stream.write_all(&answer("first"));
            thread::sleep(Duration::from_millis(100));
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUG");
            // A request that still comes on this connection gets the rest of it.
            if read_head(stream) {
                let mut rest = b"GLED".to_vec();
                rest.extend_from_slice(&answer("next"));
                let _ = stream.write_all(&rest);
            }
            After::Close
        }
        _ => {
            let _ = stream.write_all(&answer("next"));
            After::Serve
        }
    });
    let agent = agent();
    let origin = server.origin();
    assert_eq!(get(&agent, &origin, "/first").unwrap().body, b"first");
    // The unsolicited bytes arrive while the connection is idle.
    thread::sleep(Duration::from_millis(500));
    match get(&agent, &origin, "/next") {
        Ok(answer) => assert_eq!(answer.body, b"next"),
        Err(e) => panic!("{e:?}"),
    }
    assert_eq!(server.connections(), 2, "the connection was not reused");
    assert_eq!(agent.stats().unsolicited, 1);
    agent.stop().wait().unwrap();
}

/// Each answer framing a client must refuse, and the typed error it is refused with; the
/// next request gets its own answer on a new connection.
const REFUSED: [(&str, &[u8], AnswerError); 7] = [
    (
        "two Content-Lengths",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 11\r\n\r\nhello world",
        AnswerError::Malformed(HttpError::BadContentLength),
    ),
    (
        "a Content-Length list",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 11\r\n\r\nhello world",
        AnswerError::Malformed(HttpError::BadContentLength),
    ),
    (
        "a signed Content-Length",
        b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
        AnswerError::Malformed(HttpError::BadContentLength),
    ),
    (
        "a bare LF in a CRLF head",
        b"HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 5\r\n\r\nhello",
        AnswerError::Malformed(HttpError::BadRequest(
            "the head mixes CRLF and bare LF line endings",
        )),
    ),
    (
        "an unasked-for 101",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        AnswerError::Switching,
    ),
    (
        "Content-Length and Transfer-Encoding",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        AnswerError::Malformed(HttpError::LengthAndChunked),
    ),
    (
        "a trailer that is not a field line",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nHTTP/1.1 200 OK\r\n\r\n",
        AnswerError::Malformed(HttpError::BadChunk("a trailer line that is not a field line")),
    ),
];

#[test]
fn agent_refuses_framing_a_client_must_refuse_with_the_servers_rules() {
    let agent = agent();
    for (case, bytes, expected) in REFUSED {
        let server = first_then_next(bytes, After::Serve);
        let origin = server.origin();
        let result = get(&agent, &origin, "/first");
        assert_eq!(
            result,
            Err(RequestError::Connection(ConnectionError::BadAnswer(
                expected.clone()
            ))),
            "{case}"
        );
        assert_eq!(
            get(&agent, &origin, "/next").unwrap().body,
            b"next",
            "{case}"
        );
        assert_eq!(server.connections(), 2, "{case}");
    }
    assert_eq!(agent.stats().bad_answers, REFUSED.len() as u64);
    agent.stop().wait().unwrap();
}

/// What an `HttpClient` handler saw.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Answer(u16, Vec<u8>),
    Bad(AnswerError),
    Closed(usize),
}

/// Sends `paths` (pipelined) at open; reports everything.
struct Report {
    paths: Vec<&'static str>,
    tx: mpsc::Sender<Seen>,
}

impl HttpClientHandler for Report {
    fn on_open(&mut self, session: &mut ClientSession<'_, '_>) {
        for path in &self.paths {
            session.request("GET", path, &[], b"").unwrap();
        }
    }
    fn on_response(&mut self, _: &mut ClientSession<'_, '_>, response: &ClientResponse<'_>) {
        let _ = self
            .tx
            .send(Seen::Answer(response.status, response.body.to_vec()));
    }
    fn on_bad_answer(&mut self, error: &AnswerError) {
        let _ = self.tx.send(Seen::Bad(error.clone()));
    }
    fn on_close(&mut self, _: &ark_tcp::CloseReason, unanswered: usize) {
        let _ = self.tx.send(Seen::Closed(unanswered));
    }
}

/// Runs an `HttpClient` sending `paths` to `server` until it closes; what its handler saw.
fn client_sees(server: &Hostile, paths: Vec<&'static str>, limits: Limits) -> Vec<Seen> {
    let (tx, rx) = mpsc::channel();
    let client = HttpClient::builder()
        .limits(limits)
        .connect(server.addr, Report { paths, tx })
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let event = rx.recv_timeout(TIMEOUT).expect("the connection ends");
        let closed = matches!(event, Seen::Closed(_));
        seen.push(event);
        if closed {
            break;
        }
    }
    client.stop().wait().unwrap();
    seen
}

#[test]
fn client_reads_close_delimited_bodies_to_the_close() {
    for first in [
        &b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\na body that runs to the close: 39 bytes"[..],
        b"HTTP/1.0 200 OK\r\n\r\na body that runs to the close: 39 bytes",
    ] {
        let server = first_then_next(first, After::Close);
        let seen = client_sees(&server, vec!["/first"], Limits::default());
        assert_eq!(
            seen,
            [
                Seen::Answer(200, BODY_39.as_bytes().to_vec()),
                Seen::Closed(0)
            ]
        );
    }
}

#[test]
fn client_fails_a_chunk_extension_bomb_with_a_typed_error() {
    let server = Hostile::start(|_, stream| bomb(stream));
    let seen = client_sees(&server, vec!["/first"], bomb_limits());
    assert_eq!(
        seen,
        [
            Seen::Bad(AnswerError::TooLarge { limit: BOMB_BOUND }),
            Seen::Closed(1)
        ]
    );
}

#[test]
fn client_refuses_an_answer_no_request_asked_for() {
    let mut twice = answer("first");
    twice.extend_from_slice(&answer("SMUGGLED"));
    let twice: &'static [u8] = twice.leak();
    let server = first_then_next(twice, After::Serve);
    let seen = client_sees(&server, vec!["/first"], Limits::default());
    assert_eq!(
        seen,
        [
            Seen::Answer(200, b"first".to_vec()),
            Seen::Bad(AnswerError::Unsolicited { bytes: 46 }),
            Seen::Closed(0)
        ]
    );
}

#[test]
fn client_refuses_framing_a_client_must_refuse() {
    for (case, bytes, expected) in REFUSED {
        let server = first_then_next(bytes, After::Serve);
        let seen = client_sees(&server, vec!["/first", "/next"], Limits::default());
        assert_eq!(seen, [Seen::Bad(expected), Seen::Closed(2)], "{case}");
    }
}
