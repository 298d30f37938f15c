//! Interop: ark's tcps client against an independent server, OpenSSL's `openssl s_server`
//! (Debian's `openssl`, installed by `scripts/setup-test-deps.sh`), over TLS 1.3 and 1.2,
//! with and without a client certificate.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ark_frame::Delimiter;
use ark_tcp::{CloseReason, TcpClient, TcpHandler, TcpSession};
use ark_tls::{ClientTls, Pki, TlsVersions};

const TIMEOUT: Duration = Duration::from_secs(20);

/// An `openssl s_server` on loopback, killed when dropped, with its certificate directory.
struct SServer {
    child: Child,
    addr: SocketAddr,
    dir: PathBuf,
}

impl SServer {
    /// `openssl s_server -rev` (answers each line reversed) with the PKI's server
    /// certificate, plus `extra` flags.
    fn start(pki: &Pki, tag: &str, extra: &[&str]) -> SServer {
        let dir = std::env::temp_dir().join(format!("ark-tcp-{tag}-{}", std::process::id()));
        pki.write_dir(&dir).unwrap();
        // A port probed free can be taken again before s_server binds it (by another test's
        // connection): s_server then exits at once, and the probe below may even reach the
        // other listener. So check it still runs after listening shows, and retry elsewhere.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
            let mut child = Command::new("openssl")
                .args(["s_server", "-accept", &addr.to_string(), "-rev", "-quiet"])
                .args([
                    "-cert",
                    &path("server.pem"),
                    "-key",
                    &path("server-key.pem"),
                ])
                .args(
                    extra
                        .iter()
                        .map(|a| a.replace("{dir}", &dir.to_string_lossy())),
                )
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("openssl runs (scripts/setup-test-deps.sh installs it)");
            let listening = ark_testkit::wait_until(TIMEOUT, || {
                TcpStream::connect(addr).is_ok() || child.try_wait().ok().flatten().is_some()
            });
            std::thread::sleep(Duration::from_millis(100));
            if listening && child.try_wait().ok().flatten().is_none() {
                return SServer { child, addr, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("openssl s_server did not start listening");
    }
}

impl Drop for SServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends one line at open; reports the answer (with the TLS version) or the close.
struct Line(mpsc::Sender<Result<String, CloseReason>>);

impl TcpHandler for Line {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        session.send(b"hello from ark").unwrap();
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        let version = session.tls().map(|t| t.version.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(message);
        let _ = self.0.send(Ok(format!("{text} {version}")));
        session.close();
    }
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.0.send(Err(reason.clone()));
    }
}

fn ask(addr: SocketAddr, tls: ClientTls) -> Result<String, CloseReason> {
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .framing(Delimiter::new(b"\n").unwrap())
        .tls(tls, "localhost")
        .connect(addr, Line(tx))
        .unwrap();
    let answer = rx.recv_timeout(TIMEOUT).expect("the client reported");
    client.stop().wait().unwrap();
    answer
}

fn ca(dir: &Path) -> String {
    dir.join("ca.pem").to_string_lossy().into_owned()
}

#[test]
fn ark_client_talks_to_openssl_s_server_over_tls13_and_tls12() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    let server = SServer::start(&pki, "s-server", &[]);
    assert_eq!(
        ask(server.addr, pki.client_tls().unwrap()),
        Ok("kra morf olleh TLSv1.3".into())
    );
    let tls12 = ClientTls::builder(pki.roots().unwrap())
        .versions(TlsVersions::Tls12Only)
        .build()
        .unwrap();
    assert_eq!(ask(server.addr, tls12), Ok("kra morf olleh TLSv1.2".into()));
}

#[test]
fn ark_client_presents_its_certificate_to_an_openssl_server_requiring_one() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    let server = SServer::start(
        &pki,
        "s-server-mtls",
        &["-Verify", "1", "-CAfile", "{dir}/ca.pem"],
    );
    let with_cert = ClientTls::builder(pki.roots().unwrap())
        .identity(pki.client_identity().unwrap())
        .build()
        .unwrap();
    assert_eq!(
        ask(server.addr, with_cert),
        Ok("kra morf olleh TLSv1.3".into())
    );
    // Without one, OpenSSL refuses the handshake with an alert.
    let answer = ask(server.addr, pki.client_tls().unwrap());
    assert!(
        matches!(
            answer,
            Err(CloseReason::Tls(ark_tls::TlsError::AlertReceived(_)))
        ),
        "{answer:?} (CA {})",
        ca(&server.dir)
    );
}
