//! The hostile HTTP origin, called through an `HttpAgent` (issue 45 §1): for each run a std
//! `TcpListener` in this process plays a broken server on a new port (a new origin for the
//! one agent the actor keeps), with the next of the client vectors, round-robin: a body that
//! runs to the close (1.1 and 1.0), 1-byte chunks with 4,000-byte extensions, an extra answer
//! in the same read, bytes on an idle connection, two `Content-Length`s, a list, a sign, a
//! bare LF in a CRLF head, an unasked-for 101. Each run sends the vector's request, then
//! `/next/<n>`, which must get its own answer (`next <n>`) on a new connection; the agent's
//! counter for the vector must move by one, and no connection may hold more than 64 KiB of an
//! answer. Anything else fails the run.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ark_http::{
    AgentStats, AnswerError, ConnectionError, HttpAgent, HttpError, HttpRequest, Limits, Origin,
    RequestError,
};

use crate::shared::{Ctx, Rng, pause, timed_out};
use crate::tally::Ending;

/// The actor's kind in the summary.
const KIND: &str = "http_agent_hostile";
/// Each request's deadline (and the origin's read timeout).
const TIMEOUT: Duration = Duration::from_secs(10);
/// The most one agent connection may hold of an answer: no vector sends a body the agent
/// should take whole of more than 39 bytes, and the bomb's raw bytes must not be kept.
const HELD_BOUND: u64 = 64 * 1024;
/// How long bytes sent to an idle connection may take to be noticed.
const IDLE_NOTICE: Duration = Duration::from_secs(2);
/// The body of a close-delimited answer.
const BODY_39: &[u8] = b"a body that runs to the close: 39 bytes";

/// What the origin does with the vector's request.
#[derive(Debug, Clone, Copy)]
enum Script {
    /// Writes these bytes, then closes (`true`) or keeps serving.
    Bytes(&'static [u8], bool),
    /// A chunked answer of 1-byte chunks with 4,000-byte extensions, until the agent goes.
    Bomb,
    /// `first`, and in the same write part of an extra answer (`SMUG`; `GLED` later).
    SameRead,
    /// `first`; 50 ms later, part of an extra answer on the idle connection.
    Idle,
}

/// One client vector: its script, what the agent must make of it, the counter that moves.
#[derive(Debug, Clone, Copy)]
struct Vector {
    name: &'static str,
    script: Script,
    /// The first request's result is right.
    expect: fn(&Result<Vec<u8>, RequestError>) -> bool,
    counter: fn(&AgentStats) -> u64,
}

fn refused(result: &Result<Vec<u8>, RequestError>, want: &AnswerError) -> bool {
    matches!(result, Err(RequestError::Connection(ConnectionError::BadAnswer(e))) if e == want)
}

fn malformed(result: &Result<Vec<u8>, RequestError>, want: HttpError) -> bool {
    refused(result, &AnswerError::Malformed(want))
}

/// The vectors, in the order the runs take them.
const VECTORS: [Vector; 10] = [
    Vector {
        name: "close-delimited 1.1",
        script: Script::Bytes(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\na body that runs to the close: 39 bytes",
            true,
        ),
        expect: |r| matches!(r, Ok(body) if body == BODY_39),
        counter: |s| s.close_delimited,
    },
    Vector {
        name: "close-delimited 1.0",
        script: Script::Bytes(
            b"HTTP/1.0 200 OK\r\n\r\na body that runs to the close: 39 bytes",
            true,
        ),
        expect: |r| matches!(r, Ok(body) if body == BODY_39),
        counter: |s| s.close_delimited,
    },
    Vector {
        name: "chunk-extension bomb",
        script: Script::Bomb,
        expect: |r| matches!(r, Err(RequestError::Connection(ConnectionError::BadAnswer(AnswerError::TooLarge { .. })))),
        counter: |s| s.too_large,
    },
    Vector {
        name: "extra answer in the same read",
        script: Script::SameRead,
        expect: |r| matches!(r, Ok(body) if body == b"first"),
        counter: |s| s.unsolicited,
    },
    Vector {
        name: "bytes on an idle connection",
        script: Script::Idle,
        expect: |r| matches!(r, Ok(body) if body == b"first"),
        counter: |s| s.unsolicited,
    },
    Vector {
        name: "two Content-Lengths",
        script: Script::Bytes(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 11\r\n\r\nhello world",
            false,
        ),
        expect: |r| malformed(r, HttpError::BadContentLength),
        counter: |s| s.bad_answers,
    },
    Vector {
        name: "Content-Length list",
        script: Script::Bytes(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 11\r\n\r\nhello world",
            false,
        ),
        expect: |r| malformed(r, HttpError::BadContentLength),
        counter: |s| s.bad_answers,
    },
    Vector {
        name: "signed Content-Length",
        script: Script::Bytes(b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello", false),
        expect: |r| malformed(r, HttpError::BadContentLength),
        counter: |s| s.bad_answers,
    },
    Vector {
        name: "bare LF in a CRLF head",
        script: Script::Bytes(
            b"HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 5\r\n\r\nhello",
            false,
        ),
        expect: |r| {
            malformed(
                r,
                HttpError::BadRequest("the head mixes CRLF and bare LF line endings"),
            )
        },
        counter: |s| s.bad_answers,
    },
    Vector {
        name: "unasked-for 101",
        script: Script::Bytes(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            false,
        ),
        expect: |r| refused(r, &AnswerError::Switching),
        counter: |s| s.bad_answers,
    },
];

/// An answer with a `content-length` body.
fn answer(body: &[u8]) -> Vec<u8> {
    let mut bytes =
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads one request head; its path, or `None` once the connection ends.
fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
        if head.len() > 64 * 1024 {
            return None;
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    head.split(' ').nth(1).map(str::to_string)
}

/// Writes 1-byte chunks with 4,000-byte extensions (under the 4,096 cap) until the agent
/// goes, or 8 MiB (the agent's bound is 1.1 MB).
fn bomb(stream: &mut TcpStream) {
    let mut chunk = b"1;".to_vec();
    chunk.extend(std::iter::repeat_n(b'e', 3999));
    chunk.extend_from_slice(b"\r\nx\r\n");
    let many = chunk.repeat(16);
    if stream
        .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        .is_err()
    {
        return;
    }
    let mut sent = 0;
    while sent < 8 << 20 && stream.write_all(&many).is_ok() {
        sent += many.len();
    }
}

/// Plays `script` for the vector's request; whether to keep serving the connection.
fn play(script: Script, stream: &mut TcpStream) -> bool {
    match script {
        Script::Bytes(bytes, close) => stream.write_all(bytes).is_ok() && !close,
        Script::Bomb => {
            bomb(stream);
            false
        }
        Script::SameRead => {
            let mut bytes = answer(b"first");
            bytes.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUG");
            let _ = stream.write_all(&bytes);
            thread::sleep(Duration::from_millis(50));
            stream.write_all(b"GLED").is_ok()
        }
        Script::Idle => {
            let _ = stream.write_all(&answer(b"first"));
            thread::sleep(Duration::from_millis(50));
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUG")
                .is_ok()
        }
    }
}

/// One connection of the origin: `/first` gets the script, `/next/<n>` gets `next <n>`.
fn serve(mut stream: TcpStream, script: Script) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TIMEOUT));
    while let Some(path) = read_request(&mut stream) {
        let go_on = match path.strip_prefix("/next/") {
            Some(n) => stream
                .write_all(&answer(format!("next {n}").as_bytes()))
                .is_ok(),
            None => play(script, &mut stream),
        };
        if !go_on {
            break;
        }
    }
    // The origin keeps a clone of every stream: only a shutdown sends the FIN a body that
    // runs to the close ends with.
    let _ = stream.shutdown(Shutdown::Both);
}

/// A hostile origin on a port of its own; stopping it (or dropping it) ends its
/// connections.
struct HostileOrigin {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl HostileOrigin {
    fn start(script: Script) -> io::Result<HostileOrigin> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let mut origin = HostileOrigin {
            addr: listener.local_addr()?,
            stop: Arc::default(),
            accepted: Arc::default(),
            streams: Arc::default(),
            acceptor: None,
        };
        let (stop, accepted, streams) = (
            origin.stop.clone(),
            origin.accepted.clone(),
            origin.streams.clone(),
        );
        let acceptor = thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        accepted.fetch_add(1, Ordering::SeqCst);
                        let _ = stream.set_nonblocking(false);
                        if let Ok(clone) = stream.try_clone() {
                            streams
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(clone);
                        }
                        thread::spawn(move || serve(stream, script));
                    }
                    Err(e) if timed_out(&e) => thread::sleep(Duration::from_millis(2)),
                    Err(_) => return,
                }
            }
        });
        origin.acceptor = Some(acceptor);
        Ok(origin)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for HostileOrigin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let streams =
            std::mem::take(&mut *self.streams.lock().unwrap_or_else(PoisonError::into_inner));
        for stream in streams {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// `GET path` through `agent`: the body, or why there is none.
fn get(agent: &HttpAgent, origin: &Origin, path: &str) -> Result<Vec<u8>, RequestError> {
    let request = HttpRequest::get(path).timeout(TIMEOUT);
    agent.send(origin, request).wait().map(|answer| answer.body)
}

/// Waits (up to [`IDLE_NOTICE`]) for `counter` to pass `before`.
fn moved(agent: &HttpAgent, counter: fn(&AgentStats) -> u64, before: u64) -> bool {
    let deadline = Instant::now() + IDLE_NOTICE;
    while counter(&agent.stats()) == before {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

/// One run of `vector` (the `n`th): `Ok` with what happened, or why it failed.
fn run(agent: &HttpAgent, vector: &Vector, n: u64) -> Result<String, String> {
    let server = HostileOrigin::start(vector.script).map_err(|e| format!("origin: {e}"))?;
    let origin = Origin::http(server.addr);
    let before = agent.stats();
    let first = get(agent, &origin, "/first");
    if !(vector.expect)(&first) {
        let seen = first.map(|body| String::from_utf8_lossy(&body).into_owned());
        return Err(format!("the vector's request ended in {seen:?}"));
    }
    if matches!(vector.script, Script::Idle)
        && !moved(agent, vector.counter, (vector.counter)(&before))
    {
        return Err(format!(
            "bytes on an idle connection not counted within {IDLE_NOTICE:?}"
        ));
    }
    let next = get(agent, &origin, &format!("/next/{n}"));
    match &next {
        Ok(body) if *body == format!("next {n}").into_bytes() => {}
        other => {
            let seen = other
                .as_ref()
                .map(|body| String::from_utf8_lossy(body).into_owned());
            return Err(format!("the next request got {seen:?}, not its own answer"));
        }
    }
    let after = agent.stats();
    let delta = (vector.counter)(&after) - (vector.counter)(&before);
    if delta != 1 {
        return Err(format!("its counter moved by {delta}, not 1: {after:?}"));
    }
    if after.held_peak > HELD_BOUND {
        return Err(format!(
            "a connection held {} bytes of an answer",
            after.held_peak
        ));
    }
    if server.accepted() != 2 {
        return Err(format!(
            "{} connections, not 2 (reused after the vector?)",
            server.accepted()
        ));
    }
    Ok(format!(
        "{}: refused or read right, next answered on a new connection",
        vector.name
    ))
}

/// The actor: one `HttpAgent` for the whole run, a new hostile origin per run, the vectors
/// round-robin (from a random first one). Ends by stopping the agent; it must then hold no
/// byte of any answer.
pub fn hostile_origins(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    let agent = match HttpAgent::builder()
        .limits(Limits {
            max_body: 1 << 20,
            ..Limits::default()
        })
        .timeout(TIMEOUT)
        .build()
    {
        Ok(agent) => agent,
        Err(e) => {
            return ctx
                .tally
                .problem(format!("{KIND}: the agent did not start: {e}"));
        }
    };
    let mut n = rng.range(0, VECTORS.len() as u64 - 1);
    while ctx.running() {
        let started = Instant::now();
        let vector = &VECTORS[(n % VECTORS.len() as u64) as usize];
        let ending = match run(&agent, vector, n) {
            Ok(what) => Ending::new(what, started),
            Err(why) => Ending::failed(
                format!("{}: failed", vector.name),
                started,
                format!("{}: {why}", vector.name),
            ),
        };
        ctx.tally.actor(
            KIND,
            Ending {
                messages: 2,
                ..ending
            },
        );
        n += 1;
        pause(ctx, rng.millis(20, 200));
    }
    if let Err(e) = agent.stop().wait_timeout(TIMEOUT) {
        ctx.tally
            .problem(format!("{KIND}: the agent's stop failed: {e}"));
    }
    let stats = agent.stats();
    if stats.held != 0 {
        ctx.tally.problem(format!(
            "{KIND}: the stopped agent still holds {} bytes of answers",
            stats.held
        ));
    }
}
