//! Interop: independent TLS clients — OpenSSL's `openssl s_client` and Python's `ssl` module
//! (installed by `scripts/setup-test-deps.sh`) — against `ark-loopback --role server
//! --protocol tcps`, each verifying the server's chain and name and getting its framed
//! message echoed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(20);

/// `ark-loopback --role server --protocol tcps` with certificates from a directory; killed
/// (and the directory removed) when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Server {
    fn start(tag: &str) -> Server {
        let dir =
            std::env::temp_dir().join(format!("ark-loopback-interop-{tag}-{}", std::process::id()));
        ark_tls::Pki::generate(&["localhost"])
            .unwrap()
            .write_dir(&dir)
            .unwrap();
        // A port probed free can be taken before the server binds it (the server then exits
        // at once): check it still runs once listening shows, else retry on another.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new(env!("CARGO_BIN_EXE_ark-loopback"))
                .args(["--role", "server", "--protocol", "tcps", "--seconds", "60"])
                .args(["--bind", &format!("127.0.0.1:{port}")])
                .arg("--certs")
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let listening = ark_testkit::wait_until(TIMEOUT, || {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
                    || child.try_wait().ok().flatten().is_some()
            });
            std::thread::sleep(Duration::from_millis(100));
            if listening && child.try_wait().ok().flatten().is_none() {
                return Server { child, port, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("ark-loopback --role server did not start listening");
    }

    fn ca(&self) -> String {
        self.dir.join("ca.pem").to_string_lossy().into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One length-prefixed message, as ark-loopback's TCP framing carries it.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(payload);
    bytes
}

#[test]
fn openssl_s_client_gets_its_message_echoed_after_verifying_the_server() {
    let server = Server::start("openssl");
    let mut client = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{}", server.port),
        ])
        .args(["-servername", "localhost", "-verify_hostname", "localhost"])
        .args(["-CAfile", &server.ca(), "-verify_return_error", "-quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl runs (scripts/setup-test-deps.sh installs it)");
    let message = frame(b"hello from openssl");
    client.stdin.as_mut().unwrap().write_all(&message).unwrap();
    let mut stdout = client.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut echo = vec![0u8; message.len()];
        let _ = tx.send(stdout.read_exact(&mut echo).map(|_| echo));
    });
    let echo = rx
        .recv_timeout(TIMEOUT)
        .expect("s_client answered")
        .unwrap();
    let _ = client.kill();
    let _ = client.wait();
    assert_eq!(echo, frame(b"hello from openssl"));
}

const PYTHON_CLIENT: &str = r#"
import socket, ssl, struct, sys
port, ca = int(sys.argv[1]), sys.argv[2]
context = ssl.create_default_context(cafile=ca)
with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        payload = b"hello from python"
        tls.sendall(struct.pack(">I", len(payload)) + payload)
        echo = b""
        while len(echo) < 4 + len(payload):
            chunk = tls.recv(4096)
            assert chunk, "connection closed before the echo"
            echo += chunk
        assert echo == struct.pack(">I", len(payload)) + payload, echo
        print("python ok", tls.version(), tls.cipher()[0])
        tls.unwrap()  # close_notify
"#;

#[test]
fn python_ssl_gets_its_message_echoed_after_verifying_the_server() {
    let server = Server::start("python");
    let started = Instant::now();
    let output = Command::new("python3")
        .args(["-c", PYTHON_CLIENT, &server.port.to_string(), &server.ca()])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("python ok TLSv1.3"), "{stdout}");
    assert!(started.elapsed() < TIMEOUT);
}
