//! Well-behaved clients: short-lived ones that connect, echo 10–500 random messages and leave,
//! one after another, and long-lived ones that keep one connection for the whole run.

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::http::HttpLink;
use crate::link::{Link, Plan, TcpLink, WsLink, exchange};
use crate::rudp::RudpLink;
use crate::shared::{Ctx, Rng, pause, timed_out};
use crate::tally::{Fault, Proto};

/// How long a short-lived client's thread pauses after a failure (no tight error loops when
/// the server is gone).
const AFTER_FAILURE: Duration = Duration::from_millis(100);

/// A short-lived client's plan: 10–500 messages, up to 4 in flight.
fn short_plan(rng: &mut Rng) -> Plan {
    Plan {
        count: rng.range(10, 500),
        window: rng.range(1, 4) as usize,
        pace_ms: (0, 0),
        text_every: 0,
    }
}

/// A long-lived client's plan: one message at a time with pauses, until the run ends.
fn long_plan(text_every: u64) -> Plan {
    Plan {
        count: 10_000_000,
        window: 1,
        pace_ms: (5, 100),
        text_every,
    }
}

/// Connects with `connect`, runs `plan`, leaves cleanly.
fn one_client<L: Link>(
    ctx: &Ctx,
    rng: &mut Rng,
    proto: &Proto,
    plan: &Plan,
    connect: fn(std::net::SocketAddr) -> io::Result<L>,
    addr: std::net::SocketAddr,
) -> Result<(), Fault> {
    let mut link = connect(addr).map_err(|e| Fault::broken(0, "connect", e))?;
    exchange(&mut link, plan, rng, ctx, proto)?;
    link.leave()
}

/// Short-lived TCP clients, one after another, until the run ends.
pub fn tcp_short(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    while ctx.running() {
        let plan = short_plan(&mut rng);
        let t = &ctx.tally;
        t.tcp.clients.fetch_add(1, Ordering::Relaxed);
        let result = one_client(
            ctx,
            &mut rng,
            &t.tcp,
            &plan,
            TcpLink::connect,
            ctx.addrs.tcp,
        );
        if !t.client_ended(&t.tcp, "tcp client", result) {
            pause(ctx, AFTER_FAILURE);
        }
    }
}

/// Short-lived WebSocket clients (binary messages, clean close), until the run ends.
pub fn ws_short(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    while ctx.running() {
        let plan = short_plan(&mut rng);
        let t = &ctx.tally;
        t.ws.clients.fetch_add(1, Ordering::Relaxed);
        let result = one_client(ctx, &mut rng, &t.ws, &plan, WsLink::connect, ctx.addrs.ws);
        if !t.client_ended(&t.ws, "ws client", result) {
            pause(ctx, AFTER_FAILURE);
        }
    }
}

/// One TCP client on one connection for the whole run.
pub fn tcp_long(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    let t = &ctx.tally;
    t.tcp.clients.fetch_add(1, Ordering::Relaxed);
    t.tcp.long_lived.fetch_add(1, Ordering::Relaxed);
    let plan = long_plan(0);
    let result = one_client(
        ctx,
        &mut rng,
        &t.tcp,
        &plan,
        TcpLink::connect,
        ctx.addrs.tcp,
    );
    t.client_ended(&t.tcp, "long-lived tcp client", result);
}

/// One WebSocket client for the whole run; every 5th message goes as text.
pub fn ws_long(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    let t = &ctx.tally;
    t.ws.clients.fetch_add(1, Ordering::Relaxed);
    t.ws.long_lived.fetch_add(1, Ordering::Relaxed);
    let plan = long_plan(5);
    let result = one_client(ctx, &mut rng, &t.ws, &plan, WsLink::connect, ctx.addrs.ws);
    t.client_ended(&t.ws, "long-lived ws client", result);
}

/// Short-lived clients of one of the protocols that run a [`Link`] (kept-alive HTTP, reliable
/// UDP), one after another, until the run ends.
fn short_clients<L: Link>(
    ctx: &Ctx,
    stream: u64,
    proto: &Proto,
    name: &str,
    connect: fn(std::net::SocketAddr) -> io::Result<L>,
    addr: std::net::SocketAddr,
) {
    let mut rng = Rng::new(ctx.seed, stream);
    while ctx.running() {
        let plan = short_plan(&mut rng);
        proto.clients.fetch_add(1, Ordering::Relaxed);
        let result = one_client(ctx, &mut rng, proto, &plan, connect, addr);
        if !ctx.tally.client_ended(proto, name, result) {
            pause(ctx, AFTER_FAILURE);
        }
    }
}

/// One client of a [`Link`] protocol for the whole run.
fn long_client<L: Link>(
    ctx: &Ctx,
    stream: u64,
    proto: &Proto,
    name: &str,
    connect: fn(std::net::SocketAddr) -> io::Result<L>,
    addr: std::net::SocketAddr,
) {
    let mut rng = Rng::new(ctx.seed, stream);
    proto.clients.fetch_add(1, Ordering::Relaxed);
    proto.long_lived.fetch_add(1, Ordering::Relaxed);
    let result = one_client(ctx, &mut rng, proto, &long_plan(0), connect, addr);
    ctx.tally.client_ended(proto, name, result);
}

/// Short-lived HTTP clients: `POST /echo` requests pipelined on one kept-alive connection.
pub fn http_short(ctx: &Ctx, stream: u64) {
    let (t, addr) = (&ctx.tally, ctx.addrs.http);
    short_clients(ctx, stream, &t.http, "http client", HttpLink::connect, addr);
}

/// One HTTP connection kept alive for the whole run.
pub fn http_long(ctx: &Ctx, stream: u64) {
    let (t, addr) = (&ctx.tally, ctx.addrs.http);
    long_client(
        ctx,
        stream,
        &t.http,
        "long-lived http client",
        HttpLink::connect,
        addr,
    );
}

/// Short-lived reliable-UDP clients (a handshake, ordered messages, a CLOSE).
pub fn rudp_short(ctx: &Ctx, stream: u64) {
    let (t, addr) = (&ctx.tally, ctx.addrs.rudp);
    short_clients(ctx, stream, &t.rudp, "rudp client", RudpLink::connect, addr);
}

/// One reliable-UDP session for the whole run.
pub fn rudp_long(ctx: &Ctx, stream: u64) {
    let (t, addr) = (&ctx.tally, ctx.addrs.rudp);
    long_client(
        ctx,
        stream,
        &t.rudp,
        "long-lived rudp client",
        RudpLink::connect,
        addr,
    );
}

/// How long a UDP client waits for an echo before counting the datagram lost.
const UDP_WAIT: Duration = Duration::from_secs(2);

/// Short-lived UDP clients (a fresh socket, so a fresh server session, each), until the run
/// ends.
pub fn udp_short(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    while ctx.running() {
        let plan = short_plan(&mut rng);
        ctx.tally.udp.clients.fetch_add(1, Ordering::Relaxed);
        let result = udp_client(ctx, &mut rng, &plan);
        if !ctx.tally.client_ended(&ctx.tally.udp, "udp client", result) {
            pause(ctx, AFTER_FAILURE);
        }
    }
}

/// One UDP socket for the whole run, a datagram every few milliseconds.
pub fn udp_long(ctx: &Ctx, stream: u64) {
    let mut rng = Rng::new(ctx.seed, stream);
    let t = &ctx.tally;
    t.udp.clients.fetch_add(1, Ordering::Relaxed);
    t.udp.long_lived.fetch_add(1, Ordering::Relaxed);
    let result = udp_client(ctx, &mut rng, &long_plan(0));
    t.client_ended(&t.udp, "long-lived udp client", result);
}

/// A UDP client: datagrams one at a time (window 1), each starting with its sequence number;
/// an echo missing after [`UDP_WAIT`] is lost. Loss does not end the client; errors do.
fn udp_client(ctx: &Ctx, rng: &mut Rng, plan: &Plan) -> Result<(), Fault> {
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| Fault::broken(0, "bind", e))?;
    socket
        .connect(ctx.addrs.udp)
        .map_err(|e| Fault::broken(0, "connect", e))?;
    let mut buf = vec![0u8; 65_536];
    for seq in 0..plan.count {
        if !ctx.running() {
            break;
        }
        let len = rng.message_size().max(8);
        let mut datagram = rng.bytes(len);
        datagram[..8].copy_from_slice(&seq.to_be_bytes());
        socket
            .send(&datagram)
            .map_err(|e| Fault::broken(0, "send", e))?;
        if await_echo(&socket, &datagram, seq, &mut buf)? {
            ctx.tally.udp.messages.fetch_add(1, Ordering::Relaxed);
        } else {
            ctx.tally.udp.lost.fetch_add(1, Ordering::Relaxed);
            ctx.tally
                .problem(format!("udp client: datagram {seq} lost"));
        }
        if plan.pace_ms.1 > 0 {
            std::thread::sleep(rng.millis(plan.pace_ms.0, plan.pace_ms.1));
        }
    }
    Ok(())
}

/// Waits up to [`UDP_WAIT`] for the echo of datagram `seq`: `Ok(true)` when it came back
/// intact, `Ok(false)` when it did not come (lost); late echoes of earlier datagrams are
/// skipped.
fn await_echo(socket: &UdpSocket, sent: &[u8], seq: u64, buf: &mut [u8]) -> Result<bool, Fault> {
    let deadline = Instant::now() + UDP_WAIT;
    for _ in 0..10_000 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        socket
            .set_read_timeout(Some(left))
            .map_err(|e| Fault::broken(0, "set_read_timeout", e))?;
        let n = match socket.recv(buf) {
            Ok(n) => n,
            Err(e) if timed_out(&e) => return Ok(false),
            Err(e) => return Err(Fault::broken(1, "receive", e)),
        };
        let got = &buf[..n];
        let got_seq = got
            .get(..8)
            .map(|s| u64::from_be_bytes(s.try_into().unwrap_or([0; 8])));
        match got_seq {
            Some(s) if s < seq => continue, // a late echo of a datagram counted lost
            Some(s) if s == seq && got == sent => return Ok(true),
            _ => {
                return Err(Fault::Wrong(format!(
                    "datagram {seq}: {n} bytes came back (sequence {got_seq:?}), sent {} bytes",
                    sent.len()
                )));
            }
        }
    }
    Ok(false)
}
