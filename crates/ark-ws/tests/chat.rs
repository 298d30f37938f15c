//! The WebSocket chat example with three ark-ws clients: broadcast through session handles, a
//! leave notice, and a stop that says goodbye and closes with 1001.

#[path = "../examples/ws_chat_server.rs"]
mod chat;

use std::sync::mpsc;
use std::time::Duration;

use ark_ws::{
    CloseCode, Initiator, Message, WsClient, WsClientHandle, WsClose, WsHandler, WsSession,
};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A chat client: texts received, and how it closed, go to a channel.
struct Listener(mpsc::Sender<String>);

impl WsHandler for Listener {
    fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
        if let Message::Text(text) = message {
            let _ = self.0.send(text.to_string());
        }
    }
    fn on_close(&mut self, close: &WsClose) {
        let _ = self.0.send(format!("{close:?}"));
    }
}

fn join(
    server: &ark_ws::WsServerHandle,
    members: usize,
) -> (WsClientHandle, mpsc::Receiver<String>) {
    let (tx, rx) = mpsc::channel();
    let url = format!("ws://localhost:{}/", server.local_addr().port());
    let client = WsClient::builder().connect(&url, Listener(tx)).unwrap();
    assert!(client.wait_connected(TIMEOUT));
    assert!(ark_testkit::wait_until(TIMEOUT, || server.sessions().len() == members));
    (client, rx)
}

fn next(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(TIMEOUT)
        .expect("a message within the timeout")
}

#[test]
fn three_members_chat_one_leaves_and_the_stop_says_goodbye_with_1001() {
    let server = chat::start("127.0.0.1:0").unwrap();
    let (a, a_rx) = join(&server, 1);
    let (b, b_rx) = join(&server, 2);
    assert!(next(&a_rx).ends_with(" joined"));
    let (c, c_rx) = join(&server, 3);
    assert!(next(&a_rx).ends_with(" joined"));
    assert!(next(&b_rx).ends_with(" joined"));

    // A message from one member reaches the others, sent from this thread.
    a.send(Message::text("hello, room")).unwrap();
    assert!(next(&b_rx).ends_with(": hello, room"));
    assert!(next(&c_rx).ends_with(": hello, room"));

    // A member leaves (its client stops: close 1001 from the client side).
    c.stop().wait().unwrap();
    let closed = next(&c_rx);
    assert!(
        closed.contains("by: Local, code: Some(CloseCode(1001))"),
        "{closed}"
    );
    assert!(next(&a_rx).contains(" left ("));
    assert!(next(&b_rx).contains(" left ("));

    // The server stops: a goodbye, then a close with 1001 that the server started.
    server.stop().wait().unwrap();
    for rx in [&a_rx, &b_rx] {
        assert_eq!(next(rx), "* the server is stopping: goodbye");
        let expected = WsClose::Closed {
            by: Initiator::Peer,
            code: Some(CloseCode::GOING_AWAY),
            reason: "going away".into(),
        };
        assert_eq!(next(rx), format!("{expected:?}"));
    }
    a.stop().wait().unwrap();
    b.stop().wait().unwrap();
}
