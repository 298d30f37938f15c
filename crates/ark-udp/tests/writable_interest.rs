//! Writability is asked for only while a send would block. A UDP socket reports writable
//! each time a datagram it sent leaves its buffer — on loopback, at every send — and each such
//! report was a turn with nothing to do: a request/response exchange took twice the readiness
//! events it needs, and in the shared model with two threads the extra source in a turn was
//! handed to a worker (1 client, window 1: 17.7 k against 49.8 k round trips per second).
//!
//! (Loopback frees a datagram's send-buffer charge as it is sent, so a send there never
//! blocks: the path where datagrams wait for room is not reachable from this test.)

mod util;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use ark_udp::{IoModel, ReactorConfig, ReactorPool, UdpClient, UdpHandler, UdpServer, UdpSession};
use util::Echo;

const TIMEOUT: Duration = Duration::from_secs(20);
const ROUND_TRIPS: u64 = 2000;

/// One datagram in flight: each reply sends the next, until `ROUND_TRIPS`.
struct PingPong {
    replies: u64,
    done: mpsc::Sender<()>,
}

impl UdpHandler for PingPong {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        session.send(&[0u8; 64]).unwrap();
    }
    fn on_message(&mut self, session: &mut UdpSession<'_>, _: &[u8]) {
        self.replies += 1;
        if self.replies < ROUND_TRIPS {
            session.send(&[0u8; 64]).unwrap();
        } else {
            let _ = self.done.send(());
        }
    }
}

#[test]
fn a_request_response_exchange_takes_only_readable_events() {
    let pool = Arc::new(
        ReactorPool::start(IoModel::Shared { threads: 1 }, ReactorConfig::default()).unwrap(),
    );
    let echo = Echo::default();
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .pool(pool.clone())
        .start(move |_| echo.clone())
        .unwrap();
    let before = pool.stats();
    let (done, finished) = mpsc::channel();
    let client = UdpClient::builder()
        .pool(pool.clone())
        .connect(server.local_addr(), PingPong { replies: 0, done })
        .unwrap();
    finished.recv_timeout(TIMEOUT).unwrap();
    let events = pool.stats().events - before.events;
    // Two per round trip: the server's socket readable, then the client's. (Writable reports
    // made it four.) A little slack for the client's start.
    assert!(
        events <= 2 * ROUND_TRIPS + 20,
        "{events} readiness events for {ROUND_TRIPS} round trips"
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
