//! Bad actors, mixed in with the well-behaved clients for the whole run. Each kind runs again
//! and again on a thread of its own; each run ends in an [`Ending`] the summary counts.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use tungstenite::Message;

use crate::link::{IO_TIMEOUT, WsLink, frame, tcp_connect};
use crate::shared::{Ctx, Rng, pause, timed_out};
use crate::tally::Ending;

/// How long the server has to close a stalled connection (its own deadline is 10 s).
pub const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// How long a half-closed client waits for all its echoes and the end of stream.
const HALF_CLOSE_WAIT: Duration = Duration::from_secs(60);

/// Write timeout of the flooders: a write that blocks this long means the server stopped
/// reading.
const FLOOD_BLOCKED: Duration = Duration::from_millis(500);

/// A bad actor: one run against the servers.
pub type Actor = fn(&Ctx, &mut Rng) -> Ending;

/// Runs `actor` again and again, with a short random pause between runs, until the run ends.
/// A run under way when the run ends is finished (each is bounded in time).
pub fn repeat(ctx: &Ctx, stream: u64, kind: &'static str, actor: Actor) {
    let mut rng = Rng::new(ctx.seed, stream);
    while ctx.running() {
        let ending = actor(ctx, &mut rng);
        ctx.tally.actor(kind, ending);
        pause(ctx, rng.millis(100, 1000));
    }
}

/// How a connection that the server should end did end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The server's FIN.
    Eof,
    /// The server's reset.
    Reset,
    /// Nothing ended it in time.
    StillOpen,
    /// Reading failed otherwise.
    Failed(io::ErrorKind),
}

/// Reads until the server ends the connection or `within` passes; returns how it ended and
/// the bytes that came (at most `keep` kept).
pub fn read_until_end(stream: &mut TcpStream, within: Duration, keep: usize) -> (End, Vec<u8>) {
    let deadline = Instant::now() + within;
    let (mut got, mut buf) = (Vec::new(), vec![0u8; 64 * 1024]);
    for _ in 0..1_000_000 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        if let Err(e) = stream.set_read_timeout(Some(left)) {
            return (End::Failed(e.kind()), got);
        }
        match stream.read(&mut buf) {
            Ok(0) => return (End::Eof, got),
            Ok(n) => got.extend_from_slice(&buf[..n.min(keep.saturating_sub(got.len()))]),
            Err(e) if timed_out(&e) => break,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return (End::Reset, got),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (End::Failed(e.kind()), got),
        }
    }
    (End::StillOpen, got)
}

/// The ending of a connection the server had to close within [`CLOSE_WAIT`].
pub fn must_close(end: End, started: Instant, detail: &str) -> Ending {
    match end {
        End::Eof => Ending::new(format!("closed by the server (EOF{detail})"), started),
        End::Reset => Ending::new(format!("closed by the server (reset{detail})"), started),
        End::StillOpen => Ending::failed(
            "not closed within 30 s",
            started,
            format!("the server did not close the connection within {CLOSE_WAIT:?}"),
        ),
        End::Failed(kind) => Ending::failed(
            format!("read failed: {kind:?}"),
            started,
            format!("reading failed with {kind:?}"),
        ),
    }
}

/// A TCP connection for a bad actor, or the ending that says it could not connect.
pub fn connect(
    addr: std::net::SocketAddr,
    timeout: Duration,
    started: Instant,
) -> Result<TcpStream, Ending> {
    tcp_connect(addr, timeout)
        .map_err(|e| Ending::failed("connect failed", started, format!("connect: {e}")))
}

/// TCP: sends 3 bytes of a frame header and stalls; the server's stall timeout (10 s) must
/// close the connection.
pub fn stalled_tcp(ctx: &Ctx, _: &mut Rng) -> Ending {
    let started = Instant::now();
    let mut stream = match connect(ctx.addrs.tcp, IO_TIMEOUT, started) {
        Ok(s) => s,
        Err(ending) => return ending,
    };
    if let Err(e) = stream.write_all(&[0, 0, 0x10]) {
        return Ending::failed("write failed", started, format!("write: {e}"));
    }
    let (end, data) = read_until_end(&mut stream, CLOSE_WAIT, 4096);
    let detail = if data.is_empty() {
        String::new()
    } else {
        format!(", after {} bytes", data.len())
    };
    must_close(end, started, &detail)
}

/// TCP: announces a 16 MiB + 1 byte frame (one over the default maximum), holds the
/// connection 2–5 s without sending more, and drops it.
pub fn oversized(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let mut stream = match connect(ctx.addrs.tcp, IO_TIMEOUT, started) {
        Ok(s) => s,
        Err(ending) => return ending,
    };
    if let Err(e) = stream.write_all(&(16u32 * 1024 * 1024 + 1).to_be_bytes()) {
        return Ending::failed("write failed", started, format!("write: {e}"));
    }
    let (end, _) = read_until_end(&mut stream, rng.millis(2000, 5000), 4096);
    let outcome = match end {
        End::Eof => "closed by the server (EOF)".to_string(),
        End::Reset => "closed by the server (reset)".to_string(),
        End::StillOpen => "still open when dropped".to_string(),
        End::Failed(kind) => format!("read failed: {kind:?}"),
    };
    Ending::new(outcome, started)
}

/// TCP: writes 16 KiB frames flat out without reading for 2–4 s, then drops the socket. Once
/// a write blocks (the server stopped reading: backpressure), it writes no more (a frame
/// left half-written must not be followed by another) and holds the connection until the end.
pub fn flooder(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let mut stream = match connect(ctx.addrs.tcp, FLOOD_BLOCKED, started) {
        Ok(s) => s,
        Err(ending) => return ending,
    };
    let length = rng.millis(2000, 4000);
    let bytes = frame(&rng.bytes(16 * 1024));
    let (mut frames, mut outcome) = (0, "never blocked, dropped".to_string());
    while started.elapsed() < length && frames < 1_000_000 {
        match stream.write_all(&bytes) {
            Ok(()) => frames += 1,
            Err(e) if timed_out(&e) => {
                outcome = "blocked (backpressure), dropped".into();
                pause(ctx, length.saturating_sub(started.elapsed()));
                break;
            }
            Err(e) => {
                outcome = format!("write failed: {:?}", e.kind());
                break;
            }
        }
    }
    Ending {
        messages: frames,
        ..Ending::new(outcome, started)
    }
}

/// WebSocket: sends the first few bytes of an upgrade request and stalls; the server's
/// handshake timeout (10 s) must close the connection.
pub fn ws_stalled(ctx: &Ctx, rng: &mut Rng) -> Ending {
    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n";
    let started = Instant::now();
    let mut stream = match connect(ctx.addrs.ws, IO_TIMEOUT, started) {
        Ok(s) => s,
        Err(ending) => return ending,
    };
    let sent = rng.range(1, REQUEST.len() as u64) as usize;
    if let Err(e) = stream.write_all(&REQUEST[..sent]) {
        return Ending::failed("write failed", started, format!("write: {e}"));
    }
    let (end, data) = read_until_end(&mut stream, CLOSE_WAIT, 4096);
    let answer = String::from_utf8_lossy(&data);
    let detail = match answer.split_whitespace().nth(1) {
        Some(status) => format!(", after HTTP {status}"),
        None if data.is_empty() => String::new(),
        None => format!(", after {} bytes", data.len()),
    };
    must_close(end, started, &detail)
}

/// WebSocket: completes the upgrade, then sends 125-byte pings flat out without reading for
/// 2–4 s (holding the connection once a write blocks), then drops the socket.
pub fn ws_ping_flood(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let mut link = match WsLink::connect(ctx.addrs.ws) {
        Ok(link) => link,
        Err(e) => return Ending::failed("upgrade failed", started, format!("connect: {e}")),
    };
    let ws = &mut link.0;
    if let Err(e) = ws.get_mut().set_write_timeout(Some(FLOOD_BLOCKED)) {
        return Ending::failed("setup failed", started, format!("set_write_timeout: {e}"));
    }
    let length = rng.millis(2000, 4000);
    let payload = tungstenite::Bytes::from(rng.bytes(125));
    let (mut pings, mut outcome) = (0, "never blocked, dropped".to_string());
    while started.elapsed() < length && pings < 10_000_000 {
        match ws
            .write(Message::Ping(payload.clone()))
            .and_then(|()| ws.flush())
        {
            Ok(()) => pings += 1,
            Err(tungstenite::Error::Io(e)) if timed_out(&e) => {
                outcome = "blocked (backpressure), dropped".into();
                pause(ctx, length.saturating_sub(started.elapsed()));
                break;
            }
            Err(e) => {
                outcome = format!("write failed: {e}");
                break;
            }
        }
    }
    Ending {
        messages: pings,
        ..Ending::new(outcome, started)
    }
}

/// TCP half-close: sends 10–500 frames, shuts down writing, and reads until the end of
/// stream: every echo must arrive, in order, and the stream must end with a FIN at a frame
/// boundary. Half the runs read only after their FIN (the echoes pile up in the server's
/// queue meanwhile: at most about 8 MiB, under its 8 MiB high watermark); the other half read
/// while a second thread writes.
pub fn half_close(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let frames: Vec<Vec<u8>> = (0..rng.range(10, 500))
        .map(|_| {
            let len = rng.message_size();
            frame(&rng.bytes(len))
        })
        .collect();
    let read_after_fin = rng.range(0, 1) == 1;
    let mut stream = match connect(ctx.addrs.tcp, IO_TIMEOUT, started) {
        Ok(s) => s,
        Err(ending) => return ending,
    };
    let writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => return Ending::failed("setup failed", started, format!("try_clone: {e}")),
    };
    let keep = frames.iter().map(Vec::len).sum::<usize>() + 64 * 1024;
    let (written, (end, echoed)) = if read_after_fin {
        let written = write_then_shutdown(writer, &frames);
        (written, read_until_end(&mut stream, HALF_CLOSE_WAIT, keep))
    } else {
        std::thread::scope(|s| {
            let writing = s.spawn(|| write_then_shutdown(writer, &frames));
            let read = read_until_end(&mut stream, HALF_CLOSE_WAIT, keep);
            let written = writing
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("panicked")));
            (written, read)
        })
    };
    let mut ending = judge_half_close(&frames, written, end, &echoed, started);
    let mode = if read_after_fin {
        "read after FIN"
    } else {
        "read while writing"
    };
    ending.outcome = format!("{} [{mode}]", ending.outcome);
    ending
}

/// Writes every frame, then shuts down writing (the half-close).
fn write_then_shutdown(mut writer: TcpStream, frames: &[Vec<u8>]) -> io::Result<()> {
    for f in frames {
        writer.write_all(f)?;
    }
    writer.shutdown(Shutdown::Write)
}

/// Whole echoes at the start of `echoed` that match `frames` in order, and whether a
/// mismatch (rather than the end of the bytes) stopped the count.
fn matching_echoes(frames: &[Vec<u8>], echoed: &[u8]) -> (usize, bool) {
    let mut at = 0;
    for (i, f) in frames.iter().enumerate() {
        let rest = &echoed[at..];
        if rest.starts_with(f) {
            at += f.len();
        } else {
            return (i, !f.starts_with(rest));
        }
    }
    (frames.len(), at != echoed.len())
}

/// How a half-close run ended: every echo and a clean end of stream, or what went wrong.
fn judge_half_close(
    frames: &[Vec<u8>],
    written: io::Result<()>,
    end: End,
    echoed: &[u8],
    started: Instant,
) -> Ending {
    let (matched, wrong) = matching_echoes(frames, echoed);
    let n = frames.len();
    let mut ending = match (&written, end, wrong, matched == n) {
        (Err(e), ..) => Ending::failed("write failed", started, format!("write: {e}")),
        (Ok(()), End::Eof, false, true) => Ending::new("every echo, then EOF", started),
        (Ok(()), _, true, _) => Ending::failed(
            "wrong echo",
            started,
            format!("echo {matched} of {n} differs (or bytes follow the last echo)"),
        ),
        (Ok(()), end, false, true) => Ending::failed(
            format!("every echo, then {end:?}"),
            started,
            format!("every echo arrived, but the stream ended with {end:?}, not a FIN"),
        ),
        (Ok(()), end, false, false) => Ending::failed(
            format!("ended {end:?} with echoes missing"),
            started,
            format!(
                "{matched} of {n} echoes, then {end:?} ({} bytes)",
                echoed.len()
            ),
        ),
    };
    ending.messages = matched as u64;
    ending.wrong = u64::from(wrong);
    ending.lost = (n - matched) as u64 - u64::from(wrong && matched < n);
    ending
}
