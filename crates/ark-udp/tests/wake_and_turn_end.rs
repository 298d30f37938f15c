//! `UdpHandler::on_wake` and `on_turn_end` of client and cast sockets: a wake from another
//! thread runs `on_wake` on the socket's thread, and every turn that delivered datagrams ends
//! with `on_turn_end` after them, where the handler can answer a whole batch at once.

use std::sync::mpsc;
use std::time::Duration;

use ark_udp::{UdpCast, UdpClient, UdpHandler, UdpServer, UdpSession};

/// Sends every datagram back.
struct Echo;

impl UdpHandler for Echo {
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        let _ = session.send(datagram);
    }
}

/// Counts what it received since the last turn end and reports each turn's count there.
struct Batches {
    received: usize,
    turns: mpsc::Sender<usize>,
    woken: mpsc::Sender<std::thread::ThreadId>,
}

impl UdpHandler for Batches {
    fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {
        self.received += 1;
    }

    fn on_turn_end(&mut self, _: &mut UdpSession<'_>) {
        if self.received > 0 {
            let _ = self.turns.send(std::mem::take(&mut self.received));
        }
    }

    fn on_wake(&mut self, session: &mut UdpSession<'_>) {
        let _ = self.woken.send(std::thread::current().id());
        // A wake may send: this datagram is echoed back and counted at a later turn end.
        session.send(b"woken").unwrap();
    }
}

#[test]
fn a_wake_runs_on_the_socket_thread_and_turns_end_after_their_datagrams() {
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo)
        .unwrap();
    let (turns_tx, turns) = mpsc::channel();
    let (woken_tx, woken) = mpsc::channel();
    let handler = Batches {
        received: 0,
        turns: turns_tx,
        woken: woken_tx,
    };
    let client = UdpClient::builder()
        .connect(server.local_addr(), handler)
        .unwrap();
    let waker = client.waker();
    let from = std::thread::spawn(move || waker.wake());
    from.join().unwrap();
    let thread = woken.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_ne!(
        thread,
        std::thread::current().id(),
        "on the socket's thread"
    );
    // The echo of the woken send arrives and its turn ends with a count of at least one.
    let counted = turns.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(counted >= 1);
    for _ in 0..20 {
        client.send(b"x").unwrap();
    }
    let mut total = 0;
    while total < 20 {
        total += turns.recv_timeout(Duration::from_secs(10)).unwrap();
    }
    assert_eq!(total, 20, "every datagram counted once, at a turn end");
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_cast_socket_is_woken_too() {
    let (turns_tx, _turns) = mpsc::channel();
    let (woken_tx, woken) = mpsc::channel();
    let handler = Batches {
        received: 0,
        turns: turns_tx,
        woken: woken_tx,
    };
    let cast = UdpCast::builder()
        .bind("127.0.0.1:0")
        .start(handler)
        .unwrap();
    cast.wake();
    woken.recv_timeout(Duration::from_secs(10)).unwrap();
    cast.stop().wait().unwrap();
}
