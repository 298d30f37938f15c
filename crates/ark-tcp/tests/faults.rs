//! Faults and bad input end only their own session, each with its own reason.

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_frame::DecodeError;
use ark_tcp::{CloseReason, Reconnect, TcpClient, TcpHandler, TcpServer, TcpSession};
use util::{Echo, PingResult, Pinger};

const TIMEOUT: Duration = Duration::from_secs(20);

fn server_with(echo: Echo) -> ark_tcp::TcpServerHandle {
    TcpServer::builder()
        .bind("127.0.0.1:0")
        .max_frame(1024)
        .start(move |_| echo.clone())
        .unwrap()
}

#[test]
fn an_oversized_frame_closes_only_its_session() {
    let echo = Echo::default();
    let server = server_with(echo.clone());
    let (tx, rx) = mpsc::channel();
    let good: Vec<_> = (0..10)
        .map(|_| {
            TcpClient::builder()
                .connect(
                    server.local_addr(),
                    Pinger::new(300, 1, |s| (s % 1000) as usize, tx.clone()),
                )
                .unwrap()
        })
        .collect();
    // A raw client announcing a 2,000-byte body to a server that allows 1,024.
    let mut bad = TcpStream::connect(server.local_addr()).unwrap();
    bad.write_all(&2000u32.to_be_bytes()).unwrap();
    // The server may already have reset the connection on the header alone.
    let _ = bad.write_all(&[0u8; 100]);
    bad.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 16];
    let end = bad.read(&mut buf);
    assert!(
        matches!(end, Ok(0))
            || end
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "the bad session is closed: {end:?}"
    );
    for _ in 0..10 {
        assert_eq!(
            rx.recv_timeout(TIMEOUT).unwrap(),
            PingResult::Done { echoed: 300 }
        );
    }
    let closes = echo.closes_when(1);
    assert!(
        closes.contains(&CloseReason::Frame(DecodeError::TooLarge {
            len: 2000,
            max: 1024
        })),
        "{closes:?}"
    );
    for c in good {
        c.stop().wait().unwrap();
    }
    server.stop().wait().unwrap();
}

#[test]
fn a_peer_vanishing_mid_frame_is_reported() {
    let echo = Echo::default();
    let server = server_with(echo.clone());
    {
        let mut peer = TcpStream::connect(server.local_addr()).unwrap();
        peer.write_all(&100u32.to_be_bytes()).unwrap();
        peer.write_all(&[7u8; 10]).unwrap();
    } // dropped: FIN after 14 of 104 bytes
    assert_eq!(
        echo.closes_when(1)[0],
        CloseReason::EofMidFrame { buffered: 14 }
    );
    server.stop().wait().unwrap();
}

#[test]
fn the_idle_timeout_closes_a_silent_session() {
    let echo = Echo::default();
    let e = echo.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .idle_timeout(Some(Duration::from_millis(100)))
        .start(move |_| e.clone())
        .unwrap();
    let mut silent = TcpStream::connect(server.local_addr()).unwrap();
    silent.set_read_timeout(Some(TIMEOUT)).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 1];
    assert_eq!(
        silent.read(&mut buf).unwrap(),
        0,
        "the server ends the stream"
    );
    assert!(started.elapsed() >= Duration::from_millis(100));
    drop(silent);
    assert_eq!(
        echo.closes_when(1)[0],
        CloseReason::IdleTimeout(Duration::from_millis(100))
    );
    server.stop().wait().unwrap();
}

/// Reports how its connection ended.
struct Watch(mpsc::Sender<CloseReason>, Arc<Mutex<u32>>);

impl TcpHandler for Watch {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        *self.1.lock().unwrap() += 1;
        session.send(b"ping").unwrap();
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.0.send(reason.clone());
    }
}

#[test]
fn connect_timeout_and_refused_connections() {
    // A listener that never accepts, with its accept queue filled: new SYNs are dropped.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    socket.listen(1).unwrap();
    let full: SocketAddr = socket.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..16 {
        match TcpStream::connect_timeout(&full, Duration::from_millis(200)) {
            Ok(stream) => fillers.push(stream),
            Err(_) => break, // the queue is full
        }
    }
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .connect_timeout(Duration::from_millis(300))
        .connect(full, Watch(tx, Arc::default()))
        .unwrap();
    match rx.recv_timeout(TIMEOUT).unwrap() {
        CloseReason::ConnectTimeout(after) => assert!(after >= Duration::from_millis(300)),
        other => panic!("expected a connect timeout, got {other:?}"),
    }
    client.stop().wait().unwrap();

    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .connect(closed, Watch(tx, Arc::default()))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        CloseReason::Refused(closed)
    );
    client.stop().wait().unwrap();
    drop(fillers);
}

#[test]
fn a_client_reconnects_after_the_server_restarts() {
    let echo = Echo::default();
    let e = echo.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| e.clone())
        .unwrap();
    let addr = server.local_addr();
    let (tx, rx) = mpsc::channel();
    let opens = Arc::new(Mutex::new(0));
    let client = TcpClient::builder()
        .reconnect(Some(Reconnect::new(
            Duration::from_millis(50),
            Duration::from_millis(200),
        )))
        .connect(addr, Watch(tx, opens.clone()))
        .unwrap();
    assert!(client.wait_connected(TIMEOUT));
    assert!(ark_testkit::wait_until(TIMEOUT, || echo
        .messages
        .load(std::sync::atomic::Ordering::Relaxed)
        == 1));
    server.stop().wait().unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), CloseReason::PeerClosed);
    // Refused while the server is down: the client keeps trying with backoff.
    assert!(matches!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        CloseReason::Refused(_)
    ));
    let e = echo.clone();
    let restarted = TcpServer::builder()
        .bind(addr)
        .start(move |_| e.clone())
        .unwrap();
    assert!(
        ark_testkit::wait_until(TIMEOUT, || *opens.lock().unwrap() == 2),
        "reconnected"
    );
    assert!(ark_testkit::wait_until(TIMEOUT, || echo
        .messages
        .load(std::sync::atomic::Ordering::Relaxed)
        == 2));
    assert!(client.attempts() >= 3);
    client.stop().wait().unwrap();
    restarted.stop().wait().unwrap();
}
