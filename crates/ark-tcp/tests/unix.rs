//! Sessions over Unix-domain stream sockets (`start_unix`, `connect_unix`): ark-tcp's session
//! machinery — framing, handles, timers, stop — on a socket file instead of a TCP port, and
//! a client that vanishes mid-frame ending only its own session.
#![cfg(unix)]

mod util;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use ark_tcp::{
    CloseReason, Delimiter, TcpClient, TcpHandler, TcpServer, TcpServerHandle, TcpSession, TimerId,
};
use util::{Echo, PingResult, Pinger};

const TIMEOUT: Duration = Duration::from_secs(20);

/// A socket path of its own for each test (the process id and a counter), in the temp dir.
fn socket_path(name: &str) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("ark-tcp-{}-{n}-{name}.sock", std::process::id()))
}

fn echo_server(path: &PathBuf) -> (TcpServerHandle, Echo) {
    let echo = Echo::default();
    let handler = echo.clone();
    let server = TcpServer::builder()
        .start_unix(path, move |_| handler.clone())
        .unwrap();
    (server, echo)
}

#[test]
fn sessions_echo_small_and_large_frames_and_the_stop_removes_the_socket_file() {
    let path = socket_path("echo");
    let (server, echo) = echo_server(&path);
    assert_eq!(server.unix_path(), Some(path.as_path()));
    assert!(path.exists());
    let sizes: [fn(u64) -> usize; 2] = [|_| 64, |seq| 1 + (seq as usize * 7919) % 300_000];
    for size in sizes {
        let (tx, rx) = mpsc::channel();
        let client = TcpClient::builder()
            .connect_unix(&path, Pinger::new(300, 16, size, tx))
            .unwrap();
        assert_eq!(
            rx.recv_timeout(TIMEOUT),
            Ok(PingResult::Done { echoed: 300 })
        );
        client.stop().wait().unwrap();
    }
    assert_eq!(
        echo.closes_when(2),
        [CloseReason::PeerClosed, CloseReason::PeerClosed]
    );
    let stats = server.stats();
    assert_eq!(
        (stats.sessions_total, stats.frames_in),
        (2, 600),
        "{stats:?}"
    );
    server.stop().wait().unwrap();
    assert!(!path.exists(), "the stop removed the socket file");
}

#[test]
fn any_framing_works_and_a_peer_without_ark_sees_the_bytes() {
    let path = socket_path("lines");
    let echo = Echo::default();
    let handler = echo.clone();
    let server = TcpServer::builder()
        .framing(Delimiter::new(b"\n").unwrap())
        .start_unix(&path, move |_| handler.clone())
        .unwrap();
    let mut peer = UnixStream::connect(&path).unwrap();
    peer.set_read_timeout(Some(TIMEOUT)).unwrap();
    // Lines cut across writes are framed whole.
    for part in [&b"hel"[..], b"lo\nwor", b"ld\n"] {
        peer.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut got = [0u8; 12];
    peer.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello\nworld\n");
    assert_eq!(echo.messages.load(Ordering::Relaxed), 2);
    drop(peer);
    assert_eq!(echo.closes_when(1), [CloseReason::PeerClosed]);
    server.stop().wait().unwrap();
}

/// Answers its first message through its handle from another thread and, on a timer, sends
/// "tick"; reports what its session saw.
struct Ticker {
    seen: Arc<Mutex<Vec<String>>>,
    timer: Option<TimerId>,
}

impl TcpHandler for Ticker {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        self.timer = Some(session.set_timer(Duration::from_millis(50)));
        let addr = (session.peer_addr(), session.local_addr());
        self.seen.lock().unwrap().push(format!("open {addr:?}"));
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        let handle = session.handle();
        let reply = [b"handle:", message].concat();
        std::thread::spawn(move || handle.send(&reply).unwrap());
    }
    fn on_timer(&mut self, session: &mut TcpSession<'_>, timer: TimerId) {
        assert_eq!(Some(timer), self.timer);
        session.send(b"tick").unwrap();
    }
    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        session.send(b"bye").unwrap();
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.seen.lock().unwrap().push(format!("close {reason:?}"));
    }
}

/// Collects what a client receives.
struct Collect(mpsc::Sender<Vec<u8>>);

impl TcpHandler for Collect {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        session.send(b"ping").unwrap();
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, message: &[u8]) {
        let _ = self.0.send(message.to_vec());
    }
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.0.send(format!("closed {reason:?}").into_bytes());
    }
}

#[test]
fn handles_timers_and_the_stop_reach_unix_sessions() {
    let path = socket_path("ticker");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let server = TcpServer::builder()
        .start_unix(&path, move |_| Ticker {
            seen: s.clone(),
            timer: None,
        })
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .connect_unix(&path, Collect(tx))
        .unwrap();
    let mut got = vec![
        rx.recv_timeout(TIMEOUT).unwrap(),
        rx.recv_timeout(TIMEOUT).unwrap(),
    ];
    got.sort();
    assert_eq!(got, [b"handle:ping".to_vec(), b"tick".to_vec()]);
    // The server's handles reach its session too.
    let sessions = server.sessions();
    assert_eq!(sessions.len(), 1);
    sessions[0].send(b"pushed").unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), b"pushed");
    server.stop().wait().unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), b"bye");
    assert_eq!(
        String::from_utf8(rx.recv_timeout(TIMEOUT).unwrap()).unwrap(),
        "closed PeerClosed"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], "open (0.0.0.0:0, 0.0.0.0:0)", "no IP addresses");
    assert_eq!(seen[1], "close Stopped");
    client.stop().wait().unwrap();
    assert!(!path.exists());
}

#[test]
fn a_client_vanishing_mid_frame_ends_only_its_session() {
    let path = socket_path("vanish");
    let (server, echo) = echo_server(&path);
    let (tx, rx) = mpsc::channel();
    let mut pinger = Pinger::new(400, 4, |_| 512, tx);
    pinger.close_when_done = false;
    let client = TcpClient::builder().connect_unix(&path, pinger).unwrap();
    // A peer sends a length prefix of 100 bytes and 10 of them, then is gone.
    let mut vanishing = UnixStream::connect(&path).unwrap();
    vanishing.write_all(&100u32.to_be_bytes()).unwrap();
    vanishing.write_all(&[7; 10]).unwrap();
    drop(vanishing);
    let reason = echo.closes_when(1)[0].clone();
    assert!(
        matches!(reason, CloseReason::EofMidFrame { .. }),
        "the stream ended mid-frame: {reason:?}"
    );
    assert_eq!(
        rx.recv_timeout(TIMEOUT),
        Ok(PingResult::Done { echoed: 400 })
    );
    let stats = server.stats();
    assert_eq!(
        (stats.closed_bad_input, stats.sessions_open),
        (1, 1),
        "{stats:?}"
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn connecting_to_a_missing_socket_fails_with_a_typed_reason_and_binding_a_taken_one_fails() {
    let path = socket_path("missing");
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .connect_unix(&path, Collect(tx))
        .unwrap();
    let closed = String::from_utf8(rx.recv_timeout(TIMEOUT).unwrap()).unwrap();
    assert!(
        closed.starts_with("closed ConnectFailed") && closed.contains("NotFound"),
        "{closed}"
    );
    assert!(
        closed.contains(&*path.to_string_lossy()),
        "the reason names the path: {closed}"
    );
    client.stop().wait().unwrap();
    let (server, _) = echo_server(&path);
    let taken = TcpServer::builder().start_unix(&path, |_| Echo::default());
    assert_eq!(taken.unwrap_err().kind(), std::io::ErrorKind::AddrInUse);
    assert!(
        path.exists(),
        "the failed bind left the live server's file alone"
    );
    server.stop().wait().unwrap();
}

#[cfg(feature = "tls")]
#[test]
fn tls_runs_over_a_unix_socket_too() {
    let pki = ark_tls::Pki::generate(&["localhost"]).unwrap();
    let path = socket_path("tls");
    let echo = Echo::default();
    let handler = echo.clone();
    let server = TcpServer::builder()
        .tls(pki.server_tls().unwrap())
        .start_unix(&path, move |_| handler.clone())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .tls(pki.client_tls().unwrap(), "localhost")
        .connect_unix(&path, Pinger::new(200, 8, |seq| 1 + seq as usize * 331, tx))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT),
        Ok(PingResult::Done { echoed: 200 })
    );
    assert_eq!(echo.closes_when(1), [CloseReason::PeerClosed]);
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
