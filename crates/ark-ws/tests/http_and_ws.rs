//! HTTP and WebSocket on one port (the `http_and_ws` example): Python's `websockets` (an
//! independent client, installed by `scripts/setup-test-deps.sh`) runs its echo checks against
//! the upgraded route, plain and over https (wss), while the same listener answers the API;
//! a bad upgrade is refused with its status and the connection stays HTTP.

#[path = "../examples/http_and_ws.rs"]
mod http_and_ws;

use std::io::{Read, Write};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ark_http::HttpServer;
use http_and_ws::{Stats, serve};

/// The python interop client (the echo checks, then a close with 1000 "python done").
fn python(url: &str, ca: Option<&std::path::Path>) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop_client.py");
    let mut command = Command::new("python3");
    command.arg(script).arg(url);
    if let Some(ca) = ca {
        command.env("ARK_TEST_CA", ca);
    }
    let output = command
        .output()
        .expect("python3 runs (scripts/setup-test-deps.sh installs websockets)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("interop ok"),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One plain HTTP request on its own connection; the whole answer.
fn http(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn python_websockets_talks_to_the_upgraded_route_beside_the_api() {
    let stats = Arc::new(Stats::default());
    let server = serve(HttpServer::builder().bind("127.0.0.1:0"), stats.clone()).unwrap();
    let addr = server.local_addr();
    python(&format!("ws://{addr}/ws"), None);
    let api = http(
        addr,
        "GET /api/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(api.starts_with("HTTP/1.1 200"), "{api}");
    // Text, binary, 1 MiB and a fragmented text: four echoes.
    assert!(api.ends_with("{\"echoed\":4}"), "{api}");
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        *stats.closed.lock().unwrap() == [1000]
    }));
    // An upgrade without a key is refused with 400 and stays HTTP (no 101).
    let refused = http(
        addr,
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade, close\r\nSec-WebSocket-Version: 13\r\n\r\n",
    );
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(refused.contains("sec-websocket-key"), "{refused}");
    let old = http(
        addr,
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade, close\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n",
    );
    assert!(old.starts_with("HTTP/1.1 426"), "{old}");
    assert!(old.contains("sec-websocket-version: 13\r\n"), "{old}");
    server.stop().wait().unwrap();
    assert_eq!(stats.echoed.load(Ordering::Relaxed), 4);
}

#[test]
fn over_https_the_same_route_serves_wss() {
    let pki = ark_tls::Pki::generate(&["localhost"]).unwrap();
    let dir = std::env::temp_dir().join(format!("ark-http-and-ws-{}", std::process::id()));
    pki.write_dir(&dir).unwrap();
    let stats = Arc::new(Stats::default());
    let builder = HttpServer::builder()
        .bind("127.0.0.1:0")
        .tls(pki.server_tls().unwrap());
    let server = serve(builder, stats.clone()).unwrap();
    let url = format!("wss://localhost:{}/ws", server.local_addr().port());
    python(&url, Some(&dir.join("ca.pem")));
    server.stop().wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(stats.echoed.load(Ordering::Relaxed), 4);
}
