//! tcps with no socket: two [`Simulator`]s with TLS run against each other in memory — the
//! handshake, what the handler sees of it, echo across records, `close_notify`, a bad
//! certificate, a handshake past its deadline, a stream cut without `close_notify` — on the
//! same TLS layer of the session core the driver runs.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_tcp::{CloseReason, LengthPrefix, Simulator, TcpConfig, TcpHandler, TcpSession};
use ark_tls::{Pki, TlsError, TlsSession};

/// What a session saw: its TLS version at open, the messages, its close.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Echoes every message (the server side).
struct Echo(Seen);

impl TcpHandler for Echo {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        let tls = session.tls().expect("a tcps session has TLS info at open");
        self.0
            .0
            .lock()
            .unwrap()
            .push(format!("open {}", tls.version));
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        session.send(message).unwrap();
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.0.0.lock().unwrap().push(format!("close {reason:?}"));
    }
}

/// Records what comes back (the client side).
struct Record(Seen);

impl TcpHandler for Record {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        let tls = session.tls().expect("TLS info at open");
        self.0
            .0
            .lock()
            .unwrap()
            .push(format!("open {}", tls.version));
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, message: &[u8]) {
        self.0
            .0
            .lock()
            .unwrap()
            .push(format!("message {}", message.len()));
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.0.0.lock().unwrap().push(format!("close {reason:?}"));
    }
}

type Pair = (
    Simulator<LengthPrefix, Echo>,
    Simulator<LengthPrefix, Record>,
    Seen,
    Seen,
);

/// A server and a client simulator with TLS from `server_pki` and `client_pki`, on one
/// clock, the client asking for `name`.
fn pair(server_pki: &Pki, client_pki: &Pki, name: &str) -> Pair {
    let now = Instant::now();
    let (at_server, at_client) = (Seen::default(), Seen::default());
    let server_tls = TlsSession::server(&server_pki.server_tls().unwrap(), now).unwrap();
    let name = ark_tls::server_name(name).unwrap();
    let client_tls = TlsSession::client(&client_pki.client_tls().unwrap(), name, now).unwrap();
    let codec = LengthPrefix::default();
    let server = Simulator::with_tls(
        Echo(at_server.clone()),
        codec,
        TcpConfig::default(),
        server_tls,
        now,
    );
    let client = Simulator::with_tls(
        Record(at_client.clone()),
        codec,
        TcpConfig::default(),
        client_tls,
        now,
    );
    (server, client, at_server, at_client)
}

/// A message of `len` bytes.
fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| i as u8).collect()
}

#[test]
fn the_handshake_echo_across_records_and_close_notify_run_in_memory() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    let (mut server, mut client, at_server, at_client) = pair(&pki, &pki, "localhost");
    assert!(client.exchange(&mut server, 20) > 0);
    assert_eq!(at_server.events(), ["open TLSv1.3"]);
    assert_eq!(at_client.events(), ["open TLSv1.3"]);
    // Messages of one byte, of a record and more, of several records.
    for len in [1, 16_384, 100_000] {
        client.with_session(|_, session| session.send(&message(len)).unwrap());
    }
    client.exchange(&mut server, 100);
    assert_eq!(
        at_client.events()[1..],
        ["message 1", "message 16384", "message 100000"]
    );
    // A graceful close: close_notify and the end of the stream, both ways.
    client.with_session(|_, session| session.close());
    client.exchange(&mut server, 20);
    assert!(client.ended_stream() && server.ended_stream());
    assert_eq!(server.close_reason(), Some(&CloseReason::PeerClosed));
    assert_eq!(client.close_reason(), Some(&CloseReason::Local));
}

#[test]
fn a_certificate_from_an_unknown_issuer_fails_both_sides_with_a_typed_error() {
    let (pki, other) = (
        Pki::generate(&["localhost"]).unwrap(),
        Pki::generate(&["localhost"]).unwrap(),
    );
    let (mut server, mut client, at_server, at_client) = pair(&pki, &other, "localhost");
    client.exchange(&mut server, 20);
    assert_eq!(
        client.close_reason(),
        Some(&CloseReason::Tls(TlsError::UnknownIssuer))
    );
    assert!(
        matches!(
            server.close_reason(),
            Some(CloseReason::Tls(TlsError::AlertReceived(_)))
        ),
        "{:?}",
        server.close_reason()
    );
    assert_eq!(
        at_client.events().len(),
        1,
        "no on_open: {:?}",
        at_client.events()
    );
    assert!(!at_server.events()[0].starts_with("open"));
}

#[test]
fn a_handshake_past_its_deadline_and_a_stream_cut_without_close_notify_are_typed() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    // The client never answers: the server's handshake deadline ends the session.
    let (mut server, _silent, at_server, _) = pair(&pki, &pki, "localhost");
    let deadline = server
        .next_deadline()
        .expect("the handshake has a deadline");
    server.advance(deadline - server.now() + Duration::from_millis(1));
    assert!(
        matches!(
            server.close_reason(),
            Some(CloseReason::Tls(TlsError::HandshakeTimeout(_)))
        ),
        "{:?}",
        server.close_reason()
    );
    assert_eq!(at_server.events().len(), 1, "closed without opening");
    // Established, then the peer's stream ends with no close_notify: truncated.
    let (mut server, mut client, at_server, _) = pair(&pki, &pki, "localhost");
    client.exchange(&mut server, 20);
    client.with_session(|_, session| session.send(b"half").unwrap());
    let _ = client.peer_read();
    server.peer_close();
    assert_eq!(
        server.close_reason(),
        Some(&CloseReason::Tls(TlsError::Truncated))
    );
    assert_eq!(at_server.events().len(), 2);
}
