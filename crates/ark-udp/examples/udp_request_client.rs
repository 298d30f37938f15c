//! A UDP request/response client that retransmits on a timer: each request carries a
//! sequence number; the answer to the current request cancels its timer and sends the next;
//! a request without an answer within the timeout is sent again, up to a few times.
//!
//! Run against the echo server example: `cargo run --release -p ark-udp --example
//! udp_echo_server -- 127.0.0.1:7700 30` and `cargo run --release -p ark-udp --example
//! udp_request_client -- 127.0.0.1:7700 100`.

use std::sync::mpsc;
use std::time::Duration;

use ark_udp::{CloseReason, TimerId, UdpClient, UdpClientHandle, UdpHandler, UdpSession};

const TIMEOUT: Duration = Duration::from_millis(200);
const TRIES: u32 = 5;

/// How the requests went.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Requests answered.
    pub answered: u64,
    /// Requests sent again after a timeout.
    pub retransmissions: u64,
    /// Set when a request got no answer after every try.
    pub gave_up: bool,
}

/// Sends `total` requests one after the other, retransmitting on timeouts.
pub struct Requester {
    total: u64,
    seq: u64,
    tries: u32,
    timer: Option<TimerId>,
    outcome: Outcome,
    done: mpsc::Sender<Outcome>,
}

impl Requester {
    fn send_current(&mut self, session: &mut UdpSession<'_>) {
        self.tries += 1;
        let _ = session.send(&self.seq.to_be_bytes());
        self.timer = Some(session.set_timer(TIMEOUT));
    }

    fn finish(&mut self) {
        let _ = self.done.send(self.outcome.clone());
    }
}

impl UdpHandler for Requester {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        self.send_current(session);
    }

    fn on_message(&mut self, session: &mut UdpSession<'_>, answer: &[u8]) {
        if answer != self.seq.to_be_bytes() {
            return; // a late answer to an earlier try
        }
        if let Some(timer) = self.timer.take() {
            session.cancel_timer(timer);
        }
        self.outcome.answered += 1;
        self.seq += 1;
        self.tries = 0;
        if self.seq == self.total {
            return self.finish();
        }
        self.send_current(session);
    }

    fn on_timer(&mut self, session: &mut UdpSession<'_>, _: TimerId) {
        self.timer = None;
        if self.tries == TRIES {
            self.outcome.gave_up = true;
            return self.finish();
        }
        self.outcome.retransmissions += 1;
        self.send_current(session);
    }

    fn on_close(&mut self, _: &CloseReason) {}
}

/// Starts a client sending `total` requests to `server`; the outcome arrives on the channel.
pub fn start(
    server: &str,
    total: u64,
) -> std::io::Result<(UdpClientHandle, mpsc::Receiver<Outcome>)> {
    let (done, outcome) = mpsc::channel();
    let requester = Requester {
        total,
        seq: 0,
        tries: 0,
        timer: None,
        outcome: Outcome::default(),
        done,
    };
    Ok((UdpClient::builder().connect(server, requester)?, outcome))
}

#[allow(dead_code)] // the tests use `start` only
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let server = args.next().unwrap_or("127.0.0.1:7700".into());
    let total = args.next().map_or(Ok(100), |s| s.parse())?;
    let (client, outcome) = start(&server, total)?;
    println!("{:?}", outcome.recv_timeout(Duration::from_secs(60))?);
    client.stop().wait()?;
    Ok(())
}
