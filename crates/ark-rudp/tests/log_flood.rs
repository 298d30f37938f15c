//! With the `tracing` feature at DEBUG, 100,000 garbage datagrams write a bounded log: the
//! drop event is rate-limited (`ark_reactor::log_limited!`: 10 a second), and the lines
//! written count those left out — every datagram is accounted for, none logged per datagram.

use std::io::Write;
use std::net::UdpSocket;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_rudp::{RudpHandler, RudpServer, RudpSession};

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

impl RudpHandler for Quiet {
    fn on_message(&mut self, _: &mut RudpSession<'_>, _: &[u8]) {}
}

/// The `suppressed=N` of a log line.
fn suppressed(line: &str) -> u64 {
    let at = line.find("suppressed=").expect("a suppressed field") + "suppressed=".len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
fn a_garbage_flood_writes_a_bounded_log_that_counts_every_datagram() {
    let log = Log::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Quiet)
        .unwrap();
    let flood = UdpSocket::bind("127.0.0.1:0").unwrap();
    let started = Instant::now();
    // Kind 0x00: no packet kind, refused by the handshake's parser.
    for _ in 0..100_000 {
        let _ = flood.send_to(&[0u8; 29], server.local_addr());
    }
    // What the server received (the kernel may drop some of a burst), once it stops growing.
    let received = || server.udp_stats().datagrams_in;
    let mut last = u64::MAX;
    while received() != last {
        last = received();
        std::thread::sleep(Duration::from_millis(200));
    }
    let seconds = started.elapsed().as_secs() + 1;
    // One more in a later interval: its line counts what the flood's interval left out.
    std::thread::sleep(Duration::from_millis(1100));
    flood.send_to(&[0u8; 29], server.local_addr()).unwrap();
    assert!(ark_testkit::wait_until(
        Duration::from_secs(10),
        || received() == last + 1
    ));
    server.stop().wait().unwrap();
    let text = String::from_utf8_lossy(&log.0.lock().unwrap()).into_owned();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("rudp handshake datagram dropped"))
        .collect();
    assert!(
        lines.len() as u64 <= 10 * (seconds + 2),
        "{} lines for {} datagrams",
        lines.len(),
        last + 1
    );
    let accounted: u64 = lines.iter().map(|l| suppressed(l)).sum::<u64>() + lines.len() as u64;
    assert_eq!(accounted, last + 1);
    assert!(text.len() < 64 * 1024, "{} bytes of log", text.len());
}
