//! tcps: TLS sessions over real sockets on loopback — echo with the same framing, handles and
//! backpressure as plain TCP; every bad handshake ends only its own session with a typed
//! error while a good session keeps echoing; close_notify and truncation.

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_tcp::{
    CloseReason, TcpClient, TcpClientHandle, TcpHandler, TcpServer, TcpServerHandle, TcpSession,
};
use ark_tls::{ClientTls, Pki, ServerTls, TlsError, Validity};
use util::{Echo, PingResult, Pinger};

const TIMEOUT: Duration = Duration::from_secs(20);

fn pki() -> Pki {
    Pki::generate(&["localhost", "127.0.0.1"]).unwrap()
}

fn tls_server(tls: ServerTls) -> (TcpServerHandle, Echo) {
    let echo = Echo::default();
    let handler = echo.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .tls(tls)
        .start(move |_| handler.clone())
        .unwrap();
    (server, echo)
}

/// Reports what a client session saw: the negotiated version at open, then the close.
struct Probe(mpsc::Sender<Result<String, CloseReason>>);

impl TcpHandler for Probe {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        let tls = session.tls().expect("a tcps session has TLS info");
        let _ = self
            .0
            .send(Ok(format!("{} {}", tls.version, tls.cipher_suite)));
        session.close();
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.0.send(Err(reason.clone()));
    }
}

/// Connects with `tls` to `name` at `addr`; the first thing the client reports.
fn probe(
    addr: SocketAddr,
    tls: ClientTls,
    name: &str,
) -> (TcpClientHandle, Result<String, CloseReason>) {
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .tls(tls, name)
        .connect(addr, Probe(tx))
        .unwrap();
    let first = rx.recv_timeout(TIMEOUT).expect("the client reported");
    (client, first)
}

fn echo_over_tls(server: &TcpServerHandle, tls: ClientTls, total: u64, size: fn(u64) -> usize) {
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .tls(tls, "localhost")
        .connect(server.local_addr(), Pinger::new(total, 16, size, tx))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT),
        Ok(PingResult::Done { echoed: total })
    );
    client.stop().wait().unwrap();
}

#[test]
fn tcps_echoes_small_and_large_messages_with_the_same_framing() {
    let pki = pki();
    let (server, echo) = tls_server(pki.server_tls().unwrap());
    echo_over_tls(&server, pki.client_tls().unwrap(), 2000, |_| 64);
    echo_over_tls(&server, pki.client_tls().unwrap(), 200, |seq| {
        1 + (seq as usize * 7919) % 70_000
    });
    // Larger than TLS records and the TLS layer's outgoing limit: chunked both ways.
    echo_over_tls(&server, pki.client_tls().unwrap(), 4, |_| 3 << 20);
    let closes = echo.closes_when(3);
    assert_eq!(closes.len(), 3, "{closes:?}");
    for reason in &closes {
        assert_eq!(
            reason,
            &CloseReason::PeerClosed,
            "close_notify, then a clean end"
        );
    }
    server.stop().wait().unwrap();
}

#[test]
fn the_handler_sees_what_was_negotiated_and_mtls_identities() {
    let pki = pki();
    let server_tls = ServerTls::builder(pki.server_identity().unwrap())
        .require_client_cert(pki.roots().unwrap())
        .alpn(["ark/1"])
        .build()
        .unwrap();
    let (server, _) = tls_server(server_tls);
    let client_tls = ClientTls::builder(pki.roots().unwrap())
        .identity(pki.client_identity().unwrap())
        .alpn(["ark/1"])
        .build()
        .unwrap();
    let (client, opened) = probe(server.local_addr(), client_tls, "localhost");
    let opened = opened.unwrap();
    assert!(opened.starts_with("TLSv1.3 TLS13_"), "{opened}");
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

/// A server session's close reasons, and a good client echoing throughout.
struct Hostile {
    pki: Pki,
    server: TcpServerHandle,
    echo: Echo,
}

impl Hostile {
    fn new(server_tls: ServerTls, pki: Pki) -> Hostile {
        let (server, echo) = tls_server(server_tls);
        Hostile { pki, server, echo }
    }

    /// Waits for the server to report one more closed session; returns its reason.
    fn next_close(&self, before: usize) -> CloseReason {
        assert!(
            ark_testkit::wait_until(TIMEOUT, || self.echo.closes.lock().unwrap().len() > before),
            "the server reported no close"
        );
        self.echo.closes.lock().unwrap()[before].clone()
    }

    fn closes(&self) -> usize {
        self.echo.closes.lock().unwrap().len()
    }

    /// A good session still works.
    fn still_serves(&self) {
        echo_over_tls(&self.server, self.pki.client_tls().unwrap(), 100, |_| 100);
    }
}

fn tls_error(reason: Result<String, CloseReason>) -> TlsError {
    match reason {
        Err(CloseReason::Tls(e)) => e,
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[test]
fn garbage_instead_of_a_client_hello_ends_only_that_session() {
    let pki = pki();
    let h = Hostile::new(pki.server_tls().unwrap(), pki);
    let mut raw = TcpStream::connect(h.server.local_addr()).unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let reason = h.next_close(0);
    assert!(
        matches!(reason, CloseReason::Tls(TlsError::Malformed(_))),
        "{reason:?}"
    );
    // The server's alert, then its FIN.
    raw.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut answer = Vec::new();
    let _ = raw.read_to_end(&mut answer);
    assert_eq!(
        answer.first(),
        Some(&0x15),
        "a TLS alert record: {answer:?}"
    );
    h.still_serves();
}

#[test]
fn an_unknown_ca_a_wrong_name_and_an_expired_certificate_are_told_apart() {
    let pki = pki();
    let h = Hostile::new(pki.server_tls().unwrap(), pki.clone());
    let addr = h.server.local_addr();

    let (client, first) = probe(
        addr,
        Pki::generate(&["localhost"]).unwrap().client_tls().unwrap(),
        "localhost",
    );
    assert_eq!(tls_error(first), TlsError::UnknownIssuer);
    let at_server = h.next_close(0);
    assert!(
        matches!(at_server, CloseReason::Tls(TlsError::AlertReceived(_))),
        "{at_server:?}"
    );
    client.stop().wait().unwrap();

    let (client, first) = probe(addr, pki.client_tls().unwrap(), "example.org");
    assert!(matches!(tls_error(first), TlsError::WrongHostName(_)));
    client.stop().wait().unwrap();
    h.still_serves();

    let expired = Pki::generate_with(&["localhost"], Validity::Expired).unwrap();
    let (old, _) = tls_server(expired.server_tls().unwrap());
    let (client, first) = probe(old.local_addr(), expired.client_tls().unwrap(), "localhost");
    assert!(matches!(tls_error(first), TlsError::Expired(_)));
    client.stop().wait().unwrap();
    old.stop().wait().unwrap();
    h.still_serves();
}

#[test]
fn mtls_refuses_a_client_without_a_certificate() {
    let pki = pki();
    let server_tls = ServerTls::builder(pki.server_identity().unwrap())
        .require_client_cert(pki.roots().unwrap())
        .build()
        .unwrap();
    let h = Hostile::new(server_tls, pki.clone());
    let (client, _) = probe(
        h.server.local_addr(),
        pki.client_tls().unwrap(),
        "localhost",
    );
    assert_eq!(
        h.next_close(0),
        CloseReason::Tls(TlsError::CertificateRequired)
    );
    client.stop().wait().unwrap();
    let with_cert = ClientTls::builder(pki.roots().unwrap())
        .identity(pki.client_identity().unwrap())
        .build()
        .unwrap();
    echo_over_tls(&h.server, with_cert, 100, |_| 100);
}

#[test]
fn a_handshake_stalled_midway_times_out_alone() {
    let pki = pki();
    let server_tls = ServerTls::builder(pki.server_identity().unwrap())
        .handshake_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let h = Hostile::new(server_tls, pki);
    // Half a ClientHello record header, then nothing; and a client that sends nothing at all.
    let mut half = TcpStream::connect(h.server.local_addr()).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02]).unwrap();
    let _silent = TcpStream::connect(h.server.local_addr()).unwrap();
    h.still_serves();
    let before = h.closes();
    assert!(ark_testkit::wait_until(TIMEOUT, || h.closes() >= before + 2));
    let closes = h.echo.closes.lock().unwrap().clone();
    let timeouts = closes
        .iter()
        .filter(|r| **r == CloseReason::Tls(TlsError::HandshakeTimeout(Duration::from_millis(300))))
        .count();
    assert_eq!(timeouts, 2, "{closes:?}");
}

#[test]
fn a_stream_ended_without_close_notify_is_reported_as_truncated() {
    let pki = pki();
    let h = Hostile::new(pki.server_tls().unwrap(), pki.clone());
    // A blocking rustls client: handshake, one framed message, its echo, then a bare FIN.
    let config = pki.client_tls().unwrap().rustls_config().clone();
    let conn =
        ark_tls::rustls::ClientConnection::new(config, ark_tls::server_name("localhost").unwrap())
            .unwrap();
    let sock = TcpStream::connect(h.server.local_addr()).unwrap();
    sock.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut tls = ark_tls::rustls::StreamOwned::new(conn, sock);
    tls.write_all(&[0, 0, 0, 2, b'h', b'i']).unwrap();
    let mut echo = [0u8; 6];
    tls.read_exact(&mut echo).unwrap();
    assert_eq!(&echo[4..], b"hi");
    tls.sock.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(h.next_close(0), CloseReason::Tls(TlsError::Truncated));
    h.still_serves();
}

/// Server-side sessions as the handler saw them open: their negotiated facts.
#[test]
fn a_tls_client_reconnects_with_a_new_handshake() {
    let pki = pki();
    let server_tls = ServerTls::builder(pki.server_identity().unwrap())
        .build()
        .unwrap();
    let seen: Arc<Mutex<Vec<bool>>> = Arc::default();
    struct Note(Arc<Mutex<Vec<bool>>>);
    impl TcpHandler for Note {
        fn on_open(&mut self, session: &mut TcpSession<'_>) {
            self.0.lock().unwrap().push(session.tls().unwrap().resumed);
            session.close();
        }
        fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    }
    let s = seen.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .tls(server_tls)
        .start(move |_| Note(s.clone()))
        .unwrap();
    let (tx, rx) = mpsc::channel();
    struct Count(mpsc::Sender<()>);
    impl TcpHandler for Count {
        fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
        fn on_close(&mut self, _: &CloseReason) {
            let _ = self.0.send(());
        }
    }
    let client = TcpClient::builder()
        .tls(pki.client_tls().unwrap(), "localhost")
        .reconnect(Some(ark_tcp::Reconnect::new(
            Duration::from_millis(10),
            Duration::from_millis(10),
        )))
        .connect(server.local_addr(), Count(tx))
        .unwrap();
    for _ in 0..3 {
        rx.recv_timeout(TIMEOUT).unwrap();
    }
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(!seen[0], "the first handshake is a full one");
    assert!(
        seen[1..].iter().all(|resumed| *resumed),
        "later ones resume: {seen:?}"
    );
}
