//! A reliable-UDP server's drain (`RudpServerHandle::drain`): sessions are told (`on_drain`),
//! still served until their clients close, a new client gets no session; what is left at the
//! deadline is stopped, and counted.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use ark_rudp::{
    CloseReason, RudpClient, RudpConfig, RudpHandler, RudpServer, RudpSession, StopReport,
};

const WAIT: Duration = Duration::from_secs(10);
const BYE: &[u8] = b"server draining";

/// Echoes; tells its client when the server drains; counts what it received.
struct Echo {
    received: Arc<AtomicU64>,
}

impl RudpHandler for Echo {
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        self.received.fetch_add(1, Ordering::SeqCst);
        session.send(message).expect("room for the echo");
    }
    fn on_drain(&mut self, session: &mut RudpSession<'_>) {
        session.send(BYE).expect("room for the notice");
    }
}

/// Counts echoes; closes once told to go and every echo came back (unless stubborn).
struct Client {
    sent: u64,
    echoed: u64,
    told: bool,
    stubborn: bool,
    events: mpsc::Sender<String>,
}

impl RudpHandler for Client {
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        for i in 0..self.sent {
            session.send(&i.to_be_bytes()).unwrap();
        }
        let _ = self.events.send("open".into());
    }
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        if message == BYE {
            self.told = true;
        } else {
            assert_eq!(message, self.echoed.to_be_bytes());
            self.echoed += 1;
        }
        if self.told && self.echoed == self.sent && !self.stubborn {
            session.close();
        }
    }
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self
            .events
            .send(format!("close {reason:?} after {} echoes", self.echoed));
    }
}

fn echo_server(received: &Arc<AtomicU64>) -> ark_rudp::RudpServerHandle {
    let r = received.clone();
    RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| Echo {
            received: r.clone(),
        })
        .unwrap()
}

fn client(sent: u64, stubborn: bool, events: &mpsc::Sender<String>) -> Client {
    Client {
        sent,
        echoed: 0,
        told: false,
        stubborn,
        events: events.clone(),
    }
}

#[test]
fn a_drain_serves_its_sessions_until_their_clients_close() {
    let received = Arc::new(AtomicU64::new(0));
    let server = echo_server(&received);
    let (events, seen) = mpsc::channel();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            RudpClient::builder()
                .server_key(server.public_key().unwrap())
                .connect(server.local_addr(), client(500, false, &events))
                .unwrap()
        })
        .collect();
    for _ in 0..4 {
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), "open");
    }
    let draining = server.drain(Duration::from_secs(20));
    for _ in 0..4 {
        assert_eq!(
            seen.recv_timeout(WAIT).unwrap(),
            "close Local after 500 echoes"
        );
    }
    assert_eq!(draining.report().unwrap(), StopReport::default());
    assert_eq!(received.load(Ordering::SeqCst), 4 * 500);
    for client in clients {
        client.stop().wait().unwrap();
    }
}

#[test]
fn a_drain_takes_no_new_session_and_stops_what_is_left_at_its_deadline() {
    let received = Arc::new(AtomicU64::new(0));
    let server = echo_server(&received);
    let (addr, key) = (server.local_addr(), server.public_key().unwrap());
    let (events, seen) = mpsc::channel();
    let stays = RudpClient::builder()
        .server_key(key)
        .connect(addr, client(10, true, &events))
        .unwrap();
    assert_eq!(seen.recv_timeout(WAIT).unwrap(), "open");
    let draining = server.drain(Duration::from_millis(1500));
    // A client that comes during the drain gets no session.
    let (late_events, late) = mpsc::channel();
    let mut config = RudpConfig::default();
    config.handshake_timeout = Duration::from_millis(300);
    let _late = RudpClient::builder()
        .server_key(key)
        .config(config)
        .connect(addr, client(1, false, &late_events))
        .unwrap();
    let refused = late.recv_timeout(WAIT).unwrap();
    assert!(refused.starts_with("close HandshakeTimeout"), "{refused}");
    // The one that stays is stopped at the deadline: the socket was cut off from its drain.
    let report = draining.report().unwrap();
    assert_eq!(report.undrained, 1);
    assert_eq!(report.forced, 0);
    let end = seen.recv_timeout(WAIT).unwrap();
    assert_eq!(end, "close PeerClosed after 10 echoes");
    stays.stop().wait().unwrap();
}
