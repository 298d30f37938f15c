//! `ark-soak server`: ark's TCP, UDP, WebSocket, HTTP and reliable-UDP echo servers in one
//! process, with default settings, on 127.0.0.1. Prints the addresses as one JSON line, serves until stdin closes,
//! then prints the servers' stats (taken before stopping) and how the stop went as one JSON
//! line.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_http::{HttpServer, HttpServerHandle, Router};
use ark_rudp::{RudpConfig, RudpHandler, RudpServer, RudpServerHandle, RudpSession, RudpStats};
use ark_tcp::{CloseReason, TcpHandler, TcpServer, TcpServerHandle, TcpSession, TcpStats};
use ark_udp::{UdpHandler, UdpServer, UdpServerHandle, UdpSession, UdpStats};
use ark_ws::{Message, UpgradeRequest, WsClose, WsHandler, WsServer, WsServerHandle, WsSession};
use serde_json::{Value, json};

/// Deadline of each server's graceful stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// What an echo handler counts: sessions as its handlers saw them, and refused echoes.
#[derive(Debug, Default)]
struct Counts {
    opened: AtomicU64,
    closed: AtomicU64,
    refused: AtomicU64,
}

impl Counts {
    fn json(&self) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "handlers_opened": get(&self.opened),
            "handlers_closed": get(&self.closed),
            "echoes_refused": get(&self.refused),
        })
    }
}

/// The echo handler of the TCP, UDP, WebSocket and reliable-UDP servers: every message goes back as it came. One value per
/// session (the factory clones a template), sharing the server's [`Counts`].
#[derive(Debug, Clone, Default)]
struct Echo {
    counts: Arc<Counts>,
    /// This session's `on_open` ran (only opened sessions count as closed: a WebSocket
    /// handler may also be closed without ever opening).
    open: bool,
}

impl Echo {
    fn opened(&mut self) {
        self.open = true;
        self.counts.opened.fetch_add(1, Ordering::Relaxed);
    }

    fn closed(&mut self) {
        if std::mem::take(&mut self.open) {
            self.counts.closed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn sent<E>(&self, result: Result<(), E>) {
        if result.is_err() {
            self.counts.refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl TcpHandler for Echo {
    fn on_open(&mut self, _: &mut TcpSession<'_>) {
        self.opened();
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        self.sent(session.send(message));
    }
    fn on_close(&mut self, _: &CloseReason) {
        self.closed();
    }
}

impl UdpHandler for Echo {
    fn on_open(&mut self, _: &mut UdpSession<'_>) {
        self.opened();
    }
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        self.sent(session.send(datagram));
    }
    fn on_close(&mut self, _: &ark_udp::CloseReason) {
        self.closed();
    }
}

impl WsHandler for Echo {
    fn on_open(&mut self, _: &mut WsSession<'_>, _: &UpgradeRequest) {
        self.opened();
    }
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        match message {
            Message::Binary(data) => self.sent(session.send(Message::Binary(data))),
            Message::Text(text) => self.sent(session.send_text(&text)),
            _ => {}
        }
    }
    fn on_close(&mut self, _: &WsClose) {
        self.closed();
    }
}

impl RudpHandler for Echo {
    fn on_open(&mut self, _: &mut RudpSession<'_>) {
        self.opened();
    }
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        self.sent(session.send(message));
    }
    fn on_close(&mut self, _: &ark_rudp::CloseReason) {
        self.closed();
    }
}

/// The HTTP server's routes: `POST /echo` answers 200 with the request's body, `GET /echo`
/// with an empty one. `served` counts the answers.
fn http_router(served: Arc<AtomicU64>) -> Router {
    let counted = served.clone();
    Router::new()
        .post("/echo", move |req, res| {
            counted.fetch_add(1, Ordering::Relaxed);
            res.header("content-type", "application/octet-stream")
                .body(req.body());
        })
        .get("/echo", move |_, res| {
            served.fetch_add(1, Ordering::Relaxed);
            res.body(b"");
        })
}

/// The five running servers and their handlers' counts.
struct Servers {
    tcp: (TcpServerHandle, Echo),
    udp: (UdpServerHandle, Echo),
    ws: (WsServerHandle, Echo),
    http: (HttpServerHandle, Arc<AtomicU64>),
    rudp: (RudpServerHandle, Echo),
}

/// Starts the five servers on 127.0.0.1, ports chosen by the system.
fn start() -> io::Result<Servers> {
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let (tcp_echo, udp_echo, ws_echo) = (Echo::default(), Echo::default(), Echo::default());
    let e = tcp_echo.clone();
    let tcp = TcpServer::builder().bind(any).start(move |_| e.clone())?;
    let e = udp_echo.clone();
    let udp = UdpServer::builder().bind(any).start(move |_| e.clone())?;
    let e = ws_echo.clone();
    let ws = WsServer::builder().bind(any).start(move |_| e.clone())?;
    let served = Arc::new(AtomicU64::new(0));
    let http = HttpServer::builder()
        .bind(any)
        .start(http_router(served.clone()))?;
    let rudp_echo = Echo::default();
    let e = rudp_echo.clone();
    // The zero-window deadline shortened so its bad actor sees it within a short soak.
    let mut rudp_config = RudpConfig::default();
    rudp_config.zero_window_timeout = crate::rudp_zero::ZERO_WINDOW_TIMEOUT;
    let rudp = RudpServer::builder()
        .bind(any)
        .config(rudp_config)
        .start(move |_| e.clone())?;
    Ok(Servers {
        tcp: (tcp, tcp_echo),
        udp: (udp, udp_echo),
        ws: (ws, ws_echo),
        http: (http, served),
        rudp: (rudp, rudp_echo),
    })
}

/// A TCP (or WebSocket) server's counters as JSON.
fn tcp_json(s: &TcpStats) -> Value {
    json!({
        "sessions_open": s.sessions_open, "sessions_total": s.sessions_total,
        "recv_buffer_bytes": s.recv_buffer_bytes, "send_queue_bytes": s.send_queue_bytes,
        "bytes_in": s.bytes_in, "bytes_out": s.bytes_out,
        "frames_in": s.frames_in, "frames_out": s.frames_out,
        "aborted_send_bytes": s.aborted_send_bytes, "accept_errors": s.accept_errors,
    })
}

/// The UDP server's counters as JSON.
fn udp_json(s: &UdpStats) -> Value {
    json!({
        "sessions_open": s.sessions_opened.saturating_sub(s.sessions_closed),
        "sessions_opened": s.sessions_opened, "sessions_closed": s.sessions_closed,
        "sessions_evicted": s.sessions_evicted, "datagrams_in": s.datagrams_in,
        "datagrams_out": s.datagrams_out, "datagrams_sent": s.datagrams_sent,
        "truncated": s.truncated, "send_errors": s.send_errors,
        "receive_errors": s.receive_errors,
    })
}

/// The reliable-UDP server's counters (every session's, summed) as JSON; `null` if its
/// socket's thread did not answer.
fn rudp_json(s: Option<RudpStats>) -> Value {
    s.map_or(Value::Null, |s| {
        json!({
            "data_sent": s.data_sent, "retransmissions": s.retransmissions,
            "messages_delivered": s.messages_delivered, "duplicates": s.duplicates,
            "malformed": s.malformed, "forged_acks": s.forged_acks,
            "unauthenticated": s.unauthenticated, "refused_sessions": s.refused_sessions,
            "refused_per_ip": s.refused_per_ip, "replays": s.replays,
            "zero_window_closes": s.zero_window_closes, "cut_bytes": s.cut_bytes,
        })
    })
}

/// Runs `stop`, returning how long it took and its error, if any.
fn timed_stop(stop: impl FnOnce() -> io::Result<()>) -> Value {
    let started = Instant::now();
    let result = stop();
    json!({
        "stop_ms": started.elapsed().as_millis() as u64,
        "stop_error": result.err().map(|e| e.to_string()),
    })
}

/// Takes every server's stats, stops each gracefully, and reports both with the handlers'
/// counts after the stop (every handler opened must have been closed).
fn stop(servers: Servers) -> Value {
    let Servers {
        tcp,
        udp,
        ws,
        http,
        rudp,
    } = servers;
    let (tcp_stats, udp_stats, ws_stats) = (tcp.0.stats(), udp.0.stats(), ws.0.tcp_stats());
    let (http_stats, rudp_stats) = (http.0.tcp_stats(), rudp.0.stats());
    let tcp_stop = timed_stop(|| tcp.0.stop().wait_timeout(STOP_TIMEOUT));
    let udp_stop = timed_stop(|| udp.0.stop().wait_timeout(STOP_TIMEOUT));
    let ws_stop = timed_stop(|| ws.0.stop().wait_timeout(STOP_TIMEOUT));
    let http_stop = timed_stop(|| http.0.stop().wait_timeout(STOP_TIMEOUT));
    let rudp_stop = timed_stop(|| rudp.0.stop().wait_timeout(STOP_TIMEOUT));
    json!({
        "tcp": {"stats": tcp_json(&tcp_stats), "stop": tcp_stop, "after_stop": tcp.1.counts.json()},
        "udp": {"stats": udp_json(&udp_stats), "stop": udp_stop, "after_stop": udp.1.counts.json()},
        "ws": {"stats": tcp_json(&ws_stats), "stop": ws_stop, "after_stop": ws.1.counts.json()},
        "http": {
            "stats": tcp_json(&http_stats), "stop": http_stop,
            "requests_served": http.1.load(Ordering::Relaxed),
        },
        "rudp": {"stats": rudp_json(rudp_stats), "stop": rudp_stop, "after_stop": rudp.1.counts.json()},
    })
}

/// Prints one JSON line on stdout and flushes it.
fn print_line(value: &Value) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "{value}")?;
    out.flush()
}

/// The `server` mode: start, print the addresses, serve until stdin closes, stop, print the
/// final stats.
pub fn serve() -> ExitCode {
    let servers = match start() {
        Ok(servers) => servers,
        Err(e) => {
            eprintln!("ark-soak server: could not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addrs = json!({
        "tcp": servers.tcp.0.local_addr().to_string(),
        "udp": servers.udp.0.local_addr().to_string(),
        "ws": servers.ws.0.local_addr().to_string(),
        "http": servers.http.0.local_addr().to_string(),
        "rudp": servers.rudp.0.local_addr().to_string(),
        "rudp_key": servers.rudp.0.public_key().map(|k| k.to_string()),
    });
    if print_line(&addrs).is_err() {
        return ExitCode::FAILURE;
    }
    // Serve until the runner closes our stdin (or goes away).
    let _ = io::copy(&mut io::stdin().lock(), &mut io::sink());
    match print_line(&stop(servers)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}
