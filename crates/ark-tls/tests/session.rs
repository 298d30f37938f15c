//! Deterministic tests of `TlsSession`: two sessions joined through memory, no sockets, time
//! passed in.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_tls::{
    ClientTls, Pki, PlaintextSink, ServerTls, TlsError, TlsInfo, TlsSession, TlsVersions, Validity,
    server_name,
};

#[derive(Default)]
struct Collect {
    info: Option<Arc<TlsInfo>>,
    bytes: Vec<u8>,
    /// Take at most this many chunks, then pause.
    chunks_before_pause: Option<usize>,
}

impl PlaintextSink for Collect {
    fn established(&mut self, info: &Arc<TlsInfo>) {
        assert!(self.info.is_none(), "established twice");
        assert!(self.bytes.is_empty(), "plaintext before established");
        self.info = Some(info.clone());
    }
    fn plaintext(&mut self, bytes: &[u8]) -> bool {
        self.bytes.extend_from_slice(bytes);
        match &mut self.chunks_before_pause {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                *n > 0
            }
            None => true,
        }
    }
}

struct Pair {
    client: TlsSession,
    server: TlsSession,
    at_client: Collect,
    at_server: Collect,
}

/// One side's outgoing ciphertext.
fn drain(session: &mut TlsSession) -> Vec<u8> {
    let mut wire = Vec::new();
    while session.wants_write() {
        session.write_to(&mut wire).unwrap();
    }
    wire
}

impl Pair {
    fn new(client: &ClientTls, server: &ServerTls, name: &str) -> Pair {
        let now = Instant::now();
        Pair {
            client: TlsSession::client(client, server_name(name).unwrap(), now).unwrap(),
            server: TlsSession::server(server, now).unwrap(),
            at_client: Collect::default(),
            at_server: Collect::default(),
        }
    }

    /// Moves bytes both ways until neither side has any; the first error and its side.
    fn pump(&mut self) -> Result<(), (&'static str, TlsError)> {
        for _ in 0..20 {
            let to_server = drain(&mut self.client);
            self.server
                .handle_input(&to_server, &mut self.at_server)
                .map_err(|e| ("server", e))?;
            let to_client = drain(&mut self.server);
            self.client
                .handle_input(&to_client, &mut self.at_client)
                .map_err(|e| ("client", e))?;
            if to_server.is_empty() && to_client.is_empty() {
                return Ok(());
            }
        }
        panic!("the sessions kept talking");
    }
}

fn pki() -> Pki {
    Pki::generate(&["localhost", "127.0.0.1"]).unwrap()
}

#[test]
fn handshake_then_data_both_ways_with_what_was_negotiated() {
    let pki = pki();
    let server = ServerTls::builder(pki.server_identity().unwrap())
        .alpn(["ark", "http/1.1"])
        .build()
        .unwrap();
    let client = ClientTls::builder(pki.roots().unwrap())
        .alpn(["ark"])
        .build()
        .unwrap();
    let mut pair = Pair::new(&client, &server, "localhost");
    pair.pump().unwrap();
    assert!(pair.client.is_established() && pair.server.is_established());
    let info = pair.at_client.info.clone().unwrap();
    assert_eq!(info.version, "TLSv1.3");
    assert!(info.cipher_suite.starts_with("TLS13_"), "{info:?}");
    assert_eq!(info.alpn.as_deref(), Some(&b"ark"[..]));
    assert_eq!(info.peer_certificates.len(), 1);
    let at_server = pair.at_server.info.clone().unwrap();
    assert_eq!(at_server.server_name.as_deref(), Some("localhost"));
    assert!(at_server.peer_certificates.is_empty());
    assert_eq!(pair.server.poll_timeout(), None);

    let big: Vec<u8> = (0..50_000u32).map(|i| i as u8).collect();
    let mut sent = 0;
    while sent < big.len() {
        sent += pair.client.write_plaintext(&big[sent..]);
        pair.pump().unwrap();
    }
    assert_eq!(pair.at_server.bytes, big);
    assert_eq!(pair.server.write_plaintext(b"answer"), 6);
    pair.pump().unwrap();
    assert_eq!(pair.at_client.bytes, b"answer");
}

#[test]
fn nothing_is_taken_before_the_handshake_and_output_is_bounded() {
    let pki = pki();
    let mut pair = Pair::new(
        &pki.client_tls().unwrap(),
        &pki.server_tls().unwrap(),
        "localhost",
    );
    assert_eq!(pair.client.write_plaintext(b"early"), 0);
    pair.pump().unwrap();
    let big = vec![7u8; 1 << 20];
    let taken = pair.client.write_plaintext(&big);
    assert!(
        taken > 0 && taken <= ark_tls::OUTGOING_LIMIT,
        "took {taken}"
    );
    assert_eq!(pair.client.write_plaintext(&big), 0, "over the limit");
}

#[test]
fn garbage_instead_of_a_client_hello_is_malformed() {
    let pki = pki();
    let mut server = TlsSession::server(&pki.server_tls().unwrap(), Instant::now()).unwrap();
    let err = server
        .handle_input(
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            &mut Collect::default(),
        )
        .unwrap_err();
    assert!(matches!(err, TlsError::Malformed(_)), "{err:?}");
}

#[test]
fn a_certificate_from_an_unknown_ca_is_refused_by_name() {
    let (trusted, other) = (pki(), pki());
    let mut pair = Pair::new(
        &trusted.client_tls().unwrap(),
        &other.server_tls().unwrap(),
        "localhost",
    );
    let (side, err) = pair.pump().unwrap_err();
    assert_eq!((side, err), ("client", TlsError::UnknownIssuer));
    // The client's alert tells the server why.
    let alert = drain(&mut pair.client);
    let err = pair
        .server
        .handle_input(&alert, &mut Collect::default())
        .unwrap_err();
    assert!(
        matches!(err, TlsError::AlertReceived(ref a) if a.contains("UnknownCA")),
        "{err:?}"
    );
}

#[test]
fn a_wrong_host_name_is_refused_by_name() {
    let pki = pki();
    let mut pair = Pair::new(
        &pki.client_tls().unwrap(),
        &pki.server_tls().unwrap(),
        "example.org",
    );
    let (side, err) = pair.pump().unwrap_err();
    assert_eq!(side, "client");
    assert!(matches!(err, TlsError::WrongHostName(_)), "{err:?}");
}

#[test]
fn an_expired_certificate_is_refused_by_name() {
    let pki = Pki::generate_with(&["localhost"], Validity::Expired).unwrap();
    let mut pair = Pair::new(
        &pki.client_tls().unwrap(),
        &pki.server_tls().unwrap(),
        "localhost",
    );
    let (side, err) = pair.pump().unwrap_err();
    assert_eq!(side, "client");
    assert!(matches!(err, TlsError::Expired(_)), "{err:?}");
}

fn mtls_server(pki: &Pki) -> ServerTls {
    ServerTls::builder(pki.server_identity().unwrap())
        .require_client_cert(pki.roots().unwrap())
        .build()
        .unwrap()
}

#[test]
fn mtls_refuses_a_client_without_a_certificate_and_accepts_one_with() {
    let pki = pki();
    let server = mtls_server(&pki);
    let mut pair = Pair::new(&pki.client_tls().unwrap(), &server, "localhost");
    let (side, err) = pair.pump().unwrap_err();
    assert_eq!((side, err), ("server", TlsError::CertificateRequired));

    let client = ClientTls::builder(pki.roots().unwrap())
        .identity(pki.client_identity().unwrap())
        .build()
        .unwrap();
    let mut pair = Pair::new(&client, &server, "localhost");
    pair.pump().unwrap();
    let info = pair.at_server.info.clone().unwrap();
    assert_eq!(
        info.peer_certificates.len(),
        1,
        "the client's certificate is visible"
    );
}

#[test]
fn mtls_refuses_a_client_certificate_from_another_ca() {
    let (pki, other) = (pki(), pki());
    let client = ClientTls::builder(pki.roots().unwrap())
        .identity(other.client_identity().unwrap())
        .build()
        .unwrap();
    let mut pair = Pair::new(&client, &mtls_server(&pki), "localhost");
    let (side, err) = pair.pump().unwrap_err();
    assert_eq!((side, err), ("server", TlsError::UnknownIssuer));
}

#[test]
fn a_stalled_handshake_times_out_at_its_deadline() {
    let pki = pki();
    let start = Instant::now();
    let server = ServerTls::builder(pki.server_identity().unwrap())
        .handshake_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let mut session = TlsSession::server(&server, start).unwrap();
    let deadline = session.poll_timeout().unwrap();
    assert_eq!(deadline, start + Duration::from_secs(3));
    assert_eq!(
        session.handle_timeout(deadline - Duration::from_millis(1)),
        Ok(())
    );
    assert_eq!(
        session.handle_timeout(deadline),
        Err(TlsError::HandshakeTimeout(Duration::from_secs(3)))
    );
}

#[test]
fn close_notify_ends_cleanly_and_a_bare_eof_is_truncation() {
    let pki = pki();
    let mut pair = Pair::new(
        &pki.client_tls().unwrap(),
        &pki.server_tls().unwrap(),
        "localhost",
    );
    pair.pump().unwrap();
    assert_eq!(pair.server.handle_eof(), Err(TlsError::Truncated));
    pair.client.write_plaintext(b"last words");
    pair.client.send_close_notify();
    pair.pump().unwrap();
    assert_eq!(pair.at_server.bytes, b"last words");
    assert!(pair.server.peer_closed());
    assert_eq!(pair.server.handle_eof(), Ok(()));
}

#[test]
fn a_paused_sink_gets_everything_in_order_on_resume() {
    let pki = pki();
    let mut pair = Pair::new(
        &pki.client_tls().unwrap(),
        &pki.server_tls().unwrap(),
        "localhost",
    );
    pair.pump().unwrap();
    // Many small records in one input.
    let mut expected = Vec::new();
    for i in 0..200u32 {
        let message = i.to_be_bytes();
        assert_eq!(pair.client.write_plaintext(&message), 4);
        expected.extend_from_slice(&message);
    }
    let wire = drain(&mut pair.client);
    pair.at_server.chunks_before_pause = Some(3);
    pair.server
        .handle_input(&wire, &mut pair.at_server)
        .unwrap();
    assert_eq!(pair.at_server.bytes.len(), 12);
    assert!(pair.server.holds_input());
    let mut rounds = 0;
    while pair.server.holds_input() {
        pair.at_server.chunks_before_pause = Some(7);
        pair.server.resume(&mut pair.at_server).unwrap();
        rounds += 1;
        assert!(rounds < 1000);
    }
    assert_eq!(pair.at_server.bytes, expected);
}

#[test]
fn tls12_only_negotiates_tls12() {
    let pki = pki();
    let client = ClientTls::builder(pki.roots().unwrap())
        .versions(TlsVersions::Tls12Only)
        .build()
        .unwrap();
    let mut pair = Pair::new(&client, &pki.server_tls().unwrap(), "localhost");
    pair.pump().unwrap();
    let info = pair.at_server.info.clone().unwrap();
    assert_eq!(info.version, "TLSv1.2");
    assert!(info.cipher_suite.starts_with("TLS_ECDHE_"), "{info:?}");
}

#[test]
fn resumption_is_used_when_on_and_not_when_off() {
    let pki = pki();
    for (on, version) in [
        (true, TlsVersions::Tls13Only),
        (true, TlsVersions::Tls12Only),
        (false, TlsVersions::Tls12And13),
    ] {
        let server = ServerTls::builder(pki.server_identity().unwrap())
            .resumption(on)
            .build()
            .unwrap();
        let client = ClientTls::builder(pki.roots().unwrap())
            .resumption(on)
            .versions(version)
            .build()
            .unwrap();
        let mut first = Pair::new(&client, &server, "localhost");
        first.pump().unwrap();
        assert!(!first.at_client.info.clone().unwrap().resumed);
        let mut second = Pair::new(&client, &server, "localhost");
        second.pump().unwrap();
        let resumed = second.at_client.info.clone().unwrap().resumed;
        assert_eq!(resumed, on, "resumption {on}, {version:?}");
    }
}

#[test]
fn sni_picks_the_certificate_for_the_name() {
    let (main, other) = (pki(), Pki::generate(&["other.test"]).unwrap());
    let server = ServerTls::builder(main.server_identity().unwrap())
        .sni_identity("other.test", other.server_identity().unwrap())
        .build()
        .unwrap();
    let mut pair = Pair::new(&other.client_tls().unwrap(), &server, "other.test");
    pair.pump().unwrap();
    let mut pair = Pair::new(&main.client_tls().unwrap(), &server, "localhost");
    pair.pump().unwrap();
}

#[test]
fn staged_delivery_joins_records_and_keeps_order_across_pauses() {
    let pki = pki();
    let mut pair = Pair::new(
        &pki.client_tls().unwrap(),
        &pki.server_tls().unwrap(),
        "localhost",
    );
    pair.pump().unwrap();
    // 20,000 bytes: two records (16 KiB + the rest) on the wire.
    let message: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(pair.client.write_plaintext(&message), message.len());
    let wire = drain(&mut pair.client);
    let mut staging = vec![0u8; 32 * 1024];
    let mut at_server = Collect::default();
    pair.server
        .handle_input_staged(&wire, &mut staging, &mut at_server)
        .unwrap();
    assert_eq!(
        at_server.bytes, message,
        "both records' plaintext, in one slice"
    );

    // Many small records, a sink that pauses after each slice: all of it, in order.
    let mut expected = Vec::new();
    for i in 0..300u32 {
        pair.client.write_plaintext(&i.to_be_bytes());
        expected.extend_from_slice(&i.to_be_bytes());
    }
    let wire = drain(&mut pair.client);
    let mut small = vec![0u8; 64];
    let mut at_server = Collect {
        chunks_before_pause: Some(0),
        ..Collect::default()
    };
    at_server.info = pair.at_server.info.clone();
    pair.server
        .handle_input_staged(&wire, &mut small, &mut at_server)
        .unwrap();
    let mut rounds = 0;
    while pair.server.holds_input() {
        pair.server
            .resume_staged(&mut small, &mut at_server)
            .unwrap();
        rounds += 1;
        assert!(rounds < 10_000);
    }
    assert_eq!(at_server.bytes, expected);
}
