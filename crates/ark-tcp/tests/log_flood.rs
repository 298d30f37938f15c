//! With the `tracing` feature at DEBUG, a peer that opens and closes connections as fast as it
//! can writes a bounded number of log lines: each event a peer can trigger is rate-limited per
//! call site (`ark_reactor::log_limited!`), and the lines written count those left out.

use std::io::Write;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_tcp::{TcpHandler, TcpServer, TcpSession};

/// Where the subscriber writes: a shared buffer.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Quiet;

impl TcpHandler for Quiet {
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
}

#[test]
fn a_connection_flood_writes_a_bounded_log() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
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
    let text = String::from_utf8_lossy(&log.0.lock().unwrap()).into_owned();
    let opened: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("tcp session opened"))
        .collect();
    let closed = text.matches("tcp session closed").count() as u64;
    // 10 a second per call site: one for opens, two for closes (orderly and failed).
    assert!(
        opened.len() as u64 <= 10 * (seconds + 2),
        "{} open lines",
        opened.len()
    );
    assert!(closed <= 20 * (seconds + 2), "{closed} close lines");
    // Every open is accounted for: written, or counted in a later line's `suppressed`.
    let left_out: u64 = opened
        .iter()
        .map(|line| {
            let at = line.find("suppressed=").expect("a suppressed field") + "suppressed=".len();
            let digits: String = line[at..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<u64>().unwrap()
        })
        .sum();
    assert!(left_out > 0);
    assert_eq!(left_out + opened.len() as u64, floods + 1);
}
