//! A WebSocket server's drain (`WsServerHandle::drain`): sessions are told (`on_drain`) and
//! still served until their peers close; what is left at the deadline gets 1001. The clients
//! are blocking tungstenite clients (an independent implementation of the client side).

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_ws::{Message, StopReport, WsHandler, WsServer, WsSession};
use tungstenite::protocol::frame::coding::CloseCode as WireCode;

const DRAINING: &str = "server draining: finish and go";

/// Echoes text; says so when the server drains.
struct DrainingEcho;

impl WsHandler for DrainingEcho {
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        if let Message::Text(text) = message {
            session.send_text(&text).expect("echo queue has room");
        }
    }
    fn on_drain(&mut self, session: &mut WsSession<'_>) {
        session.send_text(DRAINING).expect("room for the notice");
    }
}

/// Sends numbered messages with 8 in flight until told to go (or 30 s), waits for every echo,
/// closes and reads to the end; returns (sent, echoed).
fn client(addr: SocketAddr, started: Arc<AtomicU64>) -> (u64, u64) {
    let mut ws = util::blocking_client(addr);
    let (mut sent, mut echoed, mut told) = (0u64, 0u64, false);
    let until = Instant::now() + Duration::from_secs(30);
    while !told && Instant::now() < until {
        while sent - echoed < 8 {
            ws.send(Message::text(sent.to_string())).unwrap();
            sent += 1;
        }
        match ws.read().unwrap() {
            Message::Text(text) if text.as_str() == DRAINING => told = true,
            Message::Text(text) => {
                assert_eq!(text.as_str(), echoed.to_string(), "echo out of order");
                echoed += 1;
                if echoed == 100 {
                    started.fetch_add(1, Ordering::SeqCst);
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    while echoed < sent {
        match ws.read().expect("an echo was lost in the drain") {
            Message::Text(text) => assert_eq!(text.as_str(), echoed.to_string()),
            other => panic!("unexpected {other:?}"),
        }
        echoed += 1;
    }
    ws.close(None).unwrap();
    while ws.read().is_ok() {}
    (sent, echoed)
}

#[test]
fn a_drain_under_load_answers_every_message_and_cuts_nothing() {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| DrainingEcho)
        .unwrap();
    let addr = server.local_addr();
    let started = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let started = started.clone();
            std::thread::spawn(move || client(addr, started))
        })
        .collect();
    assert!(ark_testkit::wait_until(Duration::from_secs(20), || {
        started.load(Ordering::SeqCst) == 8
    }));
    let report = server.drain(Duration::from_secs(20)).report().unwrap();
    for client in clients {
        let (sent, echoed) = client.join().unwrap();
        assert_eq!(sent, echoed);
    }
    assert_eq!(report, StopReport::default());
}

#[test]
fn a_session_still_open_at_the_drains_deadline_gets_1001() {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| DrainingEcho)
        .unwrap();
    let mut ws = util::blocking_client(server.local_addr());
    ws.send(Message::text("hello")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("hello"));
    let draining = server.drain(Duration::from_millis(300));
    assert_eq!(ws.read().unwrap(), Message::text(DRAINING));
    // Served in the drain.
    ws.send(Message::text("still here")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("still here"));
    let reader = std::thread::spawn(move || {
        let close = loop {
            match ws.read() {
                Ok(Message::Close(frame)) => break frame,
                Ok(_) => {}
                Err(e) => panic!("no close frame: {e}"),
            }
        };
        while ws.read().is_ok() {}
        close
    });
    let report = draining.report().unwrap();
    assert_eq!(
        report,
        StopReport {
            undrained: 1,
            forced: 0
        }
    );
    let close = reader.join().unwrap().expect("a close code");
    assert_eq!(close.code, WireCode::Away);
}
