//! wss: WebSocket over ark-tls — ark's client and server, Python's `websockets` over TLS
//! (an independent client; installed by `scripts/setup-test-deps.sh`), and a client refusing
//! a server its roots do not trust.

mod util;

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use ark_tcp::CloseReason;
use ark_tls::{Pki, TlsError};
use ark_ws::{
    Message, OpenError, WsClient, WsClose, WsHandler, WsServer, WsServerHandle, WsSession,
};

const TIMEOUT: Duration = Duration::from_secs(20);

fn wss_server(pki: &Pki) -> (WsServerHandle, util::Echo) {
    let echo = util::Echo::default();
    let e = echo.clone();
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .tls(pki.server_tls().unwrap())
        .start(move |_| e.clone())
        .unwrap();
    (server, echo)
}

/// Sends one text message at open; reports the echo (with the TLS version) or the close.
struct Once(mpsc::Sender<Result<String, WsClose>>);

impl WsHandler for Once {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &ark_ws::UpgradeRequest) {
        session.send_text("over tls").unwrap();
    }
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        let version = session.tls().map(|t| t.version.clone()).unwrap_or_default();
        let _ = self
            .0
            .send(Ok(format!("{} {version}", message.to_text().unwrap_or(""))));
        session.close(ark_ws::CloseCode::new(1000).unwrap(), "done");
    }
    fn on_close(&mut self, close: &WsClose) {
        let _ = self.0.send(Err(close.clone()));
    }
}

#[test]
fn ark_client_and_server_talk_over_wss() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    let (server, echo) = wss_server(&pki);
    let (tx, rx) = mpsc::channel();
    let url = format!("wss://localhost:{}/", server.local_addr().port());
    let client = WsClient::builder()
        .tls(pki.client_tls().unwrap())
        .connect(&url, Once(tx))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        Ok("over tls TLSv1.3".to_string())
    );
    assert!(ark_testkit::wait_until(TIMEOUT, || !echo
        .closes
        .lock()
        .unwrap()
        .is_empty()));
    assert_eq!(echo.closes.lock().unwrap()[0], (1000, "done".to_string()));
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_wss_client_refuses_a_server_its_roots_do_not_trust() {
    let (pki, stranger) = (
        Pki::generate(&["localhost"]).unwrap(),
        Pki::generate(&["localhost"]).unwrap(),
    );
    let (server, _) = wss_server(&stranger);
    let (tx, rx) = mpsc::channel();
    let url = format!("wss://localhost:{}/", server.local_addr().port());
    let client = WsClient::builder()
        .tls(pki.client_tls().unwrap())
        .connect(&url, Once(tx))
        .unwrap();
    let close = rx.recv_timeout(TIMEOUT).unwrap().unwrap_err();
    assert_eq!(
        close,
        WsClose::Failed(OpenError::Connection(CloseReason::Tls(
            TlsError::UnknownIssuer
        )))
    );
    client.stop().wait().unwrap();
    // A plain ws:// client to the wss server fails too, and the server goes on.
    server.stop().wait().unwrap();
}

#[test]
fn python_websockets_over_tls_talks_to_the_wss_server() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    let (server, echo) = wss_server(&pki);
    let dir = std::env::temp_dir().join(format!("ark-ws-wss-{}", std::process::id()));
    pki.write_dir(&dir).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop_client.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(format!("wss://localhost:{}/", server.local_addr().port()))
        .env("ARK_TEST_CA", dir.join("ca.pem"))
        .output()
        .expect("python3 runs (scripts/setup-test-deps.sh installs websockets)");
    let _ = std::fs::remove_dir_all(&dir);
    util::python_ok(&output);
    util::closed_by_python(&echo, TIMEOUT);
    server.stop().wait().unwrap();
}

/// A wss client that finishes TLS and then sends nothing is closed by the handshake timeout,
/// which counts from the TCP accept, TLS included (not by the 1 h idle timeout). The client is
/// `openssl s_client` (installed by `scripts/setup-test-deps.sh`), which exits when the
/// server closes.
#[test]
fn a_wss_client_silent_after_tls_is_closed_by_the_handshake_timeout() {
    use std::process::Stdio;
    let pki = Pki::generate(&["localhost"]).unwrap();
    let echo = util::Echo::default();
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .tls(pki.server_tls().unwrap())
        .handshake_timeout(Duration::from_millis(500))
        .start(move |_| echo.clone())
        .unwrap();
    let started = std::time::Instant::now();
    let mut client = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect"])
        .arg(server.local_addr().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl (scripts/setup-test-deps.sh installs it)");
    let status = loop {
        if let Some(status) = client.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(8) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let waited = started.elapsed();
    let _ = client.kill();
    let _ = client.wait();
    assert!(status.is_some(), "still open after {waited:?}");
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    assert!(ark_testkit::wait_until(Duration::from_secs(5), || {
        server.tcp_stats().sessions_open == 0
    }));
    server.stop().wait().unwrap();
}
