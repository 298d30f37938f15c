//! 10,000 idle sessions hold no receive buffer. The clients live in a second process (this
//! test binary again, running the ignored `idle_client_process` entry point), so each process
//! stays under its open-file limit.

mod util;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use ark_tcp::{TcpServer, TcpStats};
use util::Echo;

/// 10,000, or `ARK_IDLE_SESSIONS`: the Windows stage under Wine runs fewer, where a poll costs
/// time in proportion to the sockets registered (scripts/wine/limitations.txt).
fn sessions() -> usize {
    std::env::var("ARK_IDLE_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The client side, run by `ten_thousand_idle_sessions_hold_no_receive_buffer` in a child
/// process: opens the connections, reports, and holds them until its stdin closes.
#[test]
#[ignore = "entry point of the child process of the idle-sessions test"]
fn idle_client_process() {
    let addr: SocketAddr = std::env::var("ARK_IDLE_ADDR")
        .expect("run by the parent test")
        .parse()
        .unwrap();
    let count: usize = std::env::var("ARK_IDLE_COUNT").unwrap().parse().unwrap();
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        streams.push(TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect"));
    }
    println!("connected {}", streams.len());
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest); // until the parent closes our stdin
}

#[test]
fn ten_thousand_idle_sessions_hold_no_receive_buffer() {
    let sessions = sessions();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .backlog(4096)
        .start(|_| Echo::default())
        .unwrap();
    let rss_before = rss_bytes();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "idle_client_process",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("ARK_IDLE_ADDR", server.local_addr().to_string())
        .env("ARK_IDLE_COUNT", sessions.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints the test's name on the same line before the test's own output.
    let connected = lines.by_ref().map_while(Result::ok).find_map(|l| {
        l.split_once("connected ")
            .map(|(_, n)| n.trim().to_string())
    });
    assert_eq!(
        connected.as_deref(),
        Some(sessions.to_string().as_str()),
        "the client process connected"
    );
    assert!(
        ark_testkit::wait_until(Duration::from_secs(60), || server.stats().sessions_open
            == sessions as u64),
        "server sees {} sessions",
        server.stats().sessions_open
    );
    std::thread::sleep(Duration::from_millis(200));
    let stats: TcpStats = server.stats();
    let rss_after = rss_bytes();
    let per_session = rss_after.saturating_sub(rss_before) as f64 / sessions as f64;
    eprintln!(
        "idle sessions: {} open, receive buffers held {} bytes, send queues {} bytes, server RSS {:.1} MiB -> {:.1} MiB ({per_session:.0} bytes per session)",
        stats.sessions_open,
        stats.recv_buffer_bytes,
        stats.send_queue_bytes,
        rss_before as f64 / 1048576.0,
        rss_after as f64 / 1048576.0,
    );
    assert_eq!(
        stats.recv_buffer_bytes, 0,
        "idle sessions hold no receive buffer"
    );
    assert_eq!(stats.send_queue_bytes, 0);

    drop(child.stdin.take()); // the client process exits and its connections close
    child.wait().unwrap();
    assert!(ark_testkit::wait_until(Duration::from_secs(60), || server
        .stats()
        .sessions_open
        == 0));
    server.stop().wait().unwrap();
}
