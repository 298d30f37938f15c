//! With the `tracing` feature at DEBUG, a peer that opens and closes connections as fast as it
//! can writes a bounded number of log lines: each event a peer can trigger is rate-limited per
//! call site (`ark_reactor::log_limited!`), and the lines written count those left out.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ark_tcp::{TcpHandler, TcpServer, TcpSession};

struct Quiet;

impl TcpHandler for Quiet {
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
}

#[test]
fn a_connection_flood_writes_a_bounded_log() {
    let log = ark_testkit::CapturedLog::install(tracing::Level::DEBUG);
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Quiet)
        .unwrap();
    let started = Instant::now();
    let floods = 2000;
    for _ in 0..floods {
        // Half-frames and abrupt ends: closes of both kinds (peer closed, mid-frame).
        let mut stream = TcpStream::connect(server.local_addr()).unwrap();
        let _ = stream.write_all(&[0, 0]);
    }
    let settled = |server: &ark_tcp::TcpServerHandle, total| {
        ark_testkit::wait_until(Duration::from_secs(30), || {
            let stats = server.stats();
            stats.sessions_total == total && stats.sessions_open == 0
        })
    };
    assert!(settled(&server, floods));
    let seconds = started.elapsed().as_secs() + 1;
    // One more connection in a later interval: its line says how many were left out.
    std::thread::sleep(Duration::from_millis(1100));
    drop(TcpStream::connect(server.local_addr()).unwrap());
    assert!(settled(&server, floods + 1));
    server.stop().wait().unwrap();
    let opened = log.lines_of("tcp session opened");
    let closed = log.lines_of("tcp session closed");
    // 10 a second per call site: one for opens, two for closes (orderly and failed).
    assert!(opened.lines <= 10 * (seconds + 2), "{opened:?}");
    assert!(closed.lines <= 20 * (seconds + 2), "{closed:?}");
    // Every open is accounted for: written, or counted in a later line's `suppressed`.
    assert!(opened.suppressed > 0);
    assert_eq!(opened.events(), floods + 1);
}
