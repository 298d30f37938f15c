//! A reconnecting client against a flapping server (one that accepts and closes at once):
//! the backoff grows instead of restarting at every TCP open, and resets only after a
//! connection that stayed up for `stable_after`.

use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ark_tcp::{CloseReason, Raw, Reconnect, TcpClient, TcpHandler, TcpSession};

/// Reports the instant of every close.
struct Closes(mpsc::Sender<Instant>);

impl TcpHandler for Closes {
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_close(&mut self, _: &CloseReason) {
        let _ = self.0.send(Instant::now());
    }
}

/// A server on a thread: keeps the `n`th connection (from 0) for `hold[n]`, then drops it.
fn flapping_server(hold: Vec<Duration>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for held in hold {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            std::thread::sleep(held);
            drop(stream);
        }
    });
    addr
}

/// The gaps between the first `n` closes the client reports.
fn gaps(rx: &mpsc::Receiver<Instant>, n: usize) -> Vec<Duration> {
    let closes: Vec<Instant> = (0..n)
        .map(|i| {
            rx.recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("close {i}: {e}"))
        })
        .collect();
    closes.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn the_backoff_grows_against_a_server_that_accepts_and_closes() {
    let addr = flapping_server(vec![Duration::ZERO; 8]);
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .framing(Raw::new())
        .reconnect(Some(Reconnect::new(
            Duration::from_millis(10),
            Duration::from_millis(500),
        )))
        .connect(addr, Closes(tx))
        .unwrap();
    // Waits of 10, 20, 40, 80, 160, 320, 500 ms, each drawn in [half, all] by the jitter:
    // the 7th wait is at least 250 ms (every TCP open reset it to 10 ms before).
    let gaps = gaps(&rx, 8);
    assert!(
        gaps[6] >= Duration::from_millis(250),
        "gaps between attempts: {gaps:?}"
    );
    assert!(
        gaps[0] < Duration::from_millis(250),
        "gaps between attempts: {gaps:?}"
    );
    drop(client);
}

#[test]
fn a_connection_that_stayed_up_resets_the_backoff() {
    // Four quick failures, then a connection kept for 700 ms (past `stable_after`), then more.
    let mut hold = vec![Duration::ZERO; 4];
    hold.push(Duration::from_millis(700));
    hold.extend([Duration::ZERO; 2]);
    let addr = flapping_server(hold);
    let (tx, rx) = mpsc::channel();
    let reconnect = Reconnect {
        stable_after: Duration::from_millis(500),
        jitter: false,
        ..Reconnect::new(Duration::from_millis(20), Duration::from_secs(5))
    };
    let client = TcpClient::builder()
        .framing(Raw::new())
        .reconnect(Some(reconnect))
        .connect(addr, Closes(tx))
        .unwrap();
    let gaps = gaps(&rx, 6);
    // Waits of 20, 40, 80, 160 ms before the stable connection (which then lasted 700 ms),
    // and 20 ms again after it, where the next would have been 320 ms.
    assert!(
        gaps[3] >= Duration::from_millis(160) + Duration::from_millis(700),
        "gaps between closes: {gaps:?}"
    );
    assert!(
        gaps[4] < Duration::from_millis(300),
        "gaps between closes: {gaps:?}"
    );
    drop(client);
}
