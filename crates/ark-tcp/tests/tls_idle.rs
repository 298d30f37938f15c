//! Idle TLS sessions: 10,000 tcps sessions past their handshake (1,000 in a debug build, where
//! the handshakes are slow) hold no ark receive buffer or send queue, and the heap each holds —
//! rustls's connection state and buffers included, measured by a counting allocator — stays
//! under a bound. The clients (blocking rustls) live in a second process: this test binary
//! again, running the ignored `tls_idle_client_process` entry point.

mod util;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ark_tcp::TcpServer;
use ark_tls::{Pki, ServerTls, rustls};
use util::Echo;

#[global_allocator]
static ALLOCATOR: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;

const SESSIONS: usize = if cfg!(debug_assertions) {
    1_000
} else {
    10_000
};

/// Heap one idle TLS session may hold on the server, everything included. rustls keeps its
/// connection state (keys, the deframer's buffer) for as long as the session lives.
const MAX_HEAP_PER_SESSION: f64 = 16.0 * 1024.0;

/// The client side, run in a child process: handshakes on 8 threads, one framed message and
/// its echo per connection (so each session is past its first read), then holds them until
/// its stdin closes.
#[test]
#[ignore = "entry point of the child process of the idle TLS sessions test"]
fn tls_idle_client_process() {
    let addr: SocketAddr = std::env::var("ARK_TLS_IDLE_ADDR")
        .expect("run by the parent test")
        .parse()
        .unwrap();
    let count: usize = std::env::var("ARK_TLS_IDLE_COUNT")
        .unwrap()
        .parse()
        .unwrap();
    let ca = std::env::var("ARK_TLS_IDLE_CA").unwrap();
    let roots = ark_tls::TrustRoots::from_pem(ca.as_bytes()).unwrap();
    let config = ark_tls::ClientTls::builder(roots)
        .build()
        .unwrap()
        .rustls_config()
        .clone();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let config = config.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for _ in (t..count).step_by(8) {
                    held.push(connect(addr, config.clone()));
                }
                held
            })
        })
        .collect();
    let held: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    println!("connected {}", held.len());
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest); // until the parent closes our stdin
}

fn connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let name = ark_tls::server_name("localhost").unwrap();
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(&[0, 0, 0, 4, b'i', b'd', b'l', b'e'])
        .unwrap();
    let mut echo = [0u8; 8];
    tls.read_exact(&mut echo).unwrap();
    tls
}

#[test]
fn idle_tls_sessions_hold_no_ark_buffers_and_little_heap() {
    let pki = Pki::generate(&["localhost"]).unwrap();
    let tls: ServerTls = pki.server_tls().unwrap();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .backlog(4096)
        .tls(tls)
        .start(|_| Echo::default())
        .unwrap();
    let heap_before = ark_testkit::live_bytes();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tls_idle_client_process",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("ARK_TLS_IDLE_ADDR", server.local_addr().to_string())
        .env("ARK_TLS_IDLE_COUNT", SESSIONS.to_string())
        .env("ARK_TLS_IDLE_CA", &pki.ca_pem)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let connected = lines.by_ref().map_while(Result::ok).find_map(|l| {
        l.split_once("connected ")
            .map(|(_, n)| n.trim().to_string())
    });
    assert_eq!(
        connected,
        Some(SESSIONS.to_string()),
        "the client process connected"
    );
    assert!(ark_testkit::wait_until(Duration::from_secs(60), || {
        server.stats().sessions_open == SESSIONS as u64
            && server.stats().frames_out == SESSIONS as u64
    }));
    std::thread::sleep(Duration::from_millis(200));
    let stats = server.stats();
    let per_session = (ark_testkit::live_bytes() - heap_before) as f64 / SESSIONS as f64;
    eprintln!(
        "idle TLS sessions: {} open, receive buffers {} bytes, send queues {} bytes, heap {per_session:.0} bytes per session",
        stats.sessions_open, stats.recv_buffer_bytes, stats.send_queue_bytes
    );
    assert_eq!(
        stats.recv_buffer_bytes, 0,
        "idle sessions hold no receive buffer"
    );
    assert_eq!(stats.send_queue_bytes, 0);
    assert!(
        per_session < MAX_HEAP_PER_SESSION,
        "{per_session:.0} bytes per idle TLS session"
    );

    drop(child.stdin.take());
    child.wait().unwrap();
    assert!(ark_testkit::wait_until(Duration::from_secs(60), || server
        .stats()
        .sessions_open
        == 0));
    server.stop().wait().unwrap();
}
