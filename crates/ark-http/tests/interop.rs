//! Interop with independent clients: `curl` (Debian's, installed by
//! `scripts/setup-test-deps.sh`) — keep-alive, a chunked upload, HEAD, `100-continue` — and
//! Python's `http.client`; and https with a rustls client.

use std::process::Command;

use ark_http::{HttpServer, HttpServerHandle, Router};

fn server() -> HttpServerHandle {
    let router = Router::new()
        .get("/hello", |_, res| {
            res.header("content-type", "text/plain").body("hello");
        })
        .post("/echo", |req, res| {
            res.body(req.body());
        });
    HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap()
}

fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "20"])
        .args(args)
        .output()
        .expect("curl runs (scripts/setup-test-deps.sh installs it)");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "curl {args:?}: {stderr}");
    (stdout, stderr)
}

#[test]
fn curl_keep_alive_chunked_upload_head_and_100_continue() {
    let server = server();
    let url = |path: &str| format!("http://{}{path}", server.local_addr());
    // Two requests on one connection: curl reports reusing it.
    let (body, log) = curl(&["-v", &url("/hello"), &url("/hello")]);
    assert_eq!(body, "hellohello");
    assert!(
        log.contains("Re-using existing connection") || log.contains("Reusing existing"),
        "{log}"
    );
    // A chunked upload.
    let (echo, _) = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "chunked body",
        &url("/echo"),
    ]);
    assert_eq!(echo, "chunked body");
    // HEAD: headers only.
    let (head, _) = curl(&["--head", &url("/hello")]);
    assert!(
        head.starts_with("HTTP/1.1 200 OK") && head.contains("content-length: 5"),
        "{head}"
    );
    // Expect: 100-continue with a body curl holds back until the 100 arrives.
    let (continued, log) = curl(&[
        "-v",
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        "after continue",
        &url("/echo"),
    ]);
    assert_eq!(continued, "after continue");
    assert!(log.contains("HTTP/1.1 100 Continue"), "{log}");
    server.stop().wait().unwrap();
}

const PYTHON_CLIENT: &str = r#"
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
for i in range(3):
    conn.request("POST", "/echo", body=b"python %d" % i)
    response = conn.getresponse()
    assert response.status == 200, response.status
    assert response.read() == b"python %d" % i
conn.request("GET", "/nope")
response = conn.getresponse()
assert response.status == 404, response.status
response.read()
conn.close()
print("python ok")
"#;

#[test]
fn python_http_client_posts_on_one_connection() {
    let server = server();
    let out = Command::new("python3")
        .args(["-c", PYTHON_CLIENT, &server.local_addr().port().to_string()])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "python ok");
    server.stop().wait().unwrap();
}

#[test]
#[cfg(feature = "tls")]
fn https_answers_a_verifying_rustls_client() {
    use std::io::{Read, Write};
    let pki = ark_tls::Pki::generate(&["localhost"]).unwrap();
    let router = Router::new().get("/", |req, res| {
        res.body(format!("secure {}", req.version()));
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .tls(pki.server_tls().unwrap())
        .start(router)
        .unwrap();
    let config = pki.client_tls().unwrap().rustls_config().clone();
    let name = ark_tls::server_name("localhost").unwrap();
    let conn = ark_tls::rustls::ClientConnection::new(config, name).unwrap();
    let sock = std::net::TcpStream::connect(server.local_addr()).unwrap();
    let mut tls = ark_tls::rustls::StreamOwned::new(conn, sock);
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("secure 1"),
        "{answer}"
    );
    drop(tls);
    server.stop().wait().unwrap();
}
