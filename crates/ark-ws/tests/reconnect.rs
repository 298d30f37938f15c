//! A reconnecting WebSocket client: when the server closes its session, the client connects
//! again and makes a new handshake; the handler hears `on_close`, then `on_open`; the client
//! handle sends on the new session. Without `reconnect` it stays closed.

mod util;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_ws::{CloseCode, Message, Reconnect, Request, WsClient, WsClose, WsHandler, WsSession};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Records the client's opens, closes and messages.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl WsHandler for Seen {
    fn on_open(&mut self, _: &mut WsSession<'_>, _: &Request) {
        self.0.lock().unwrap().push("open".into());
    }
    fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
        self.0
            .lock()
            .unwrap()
            .push(message.to_text().unwrap_or("?").into());
    }
    fn on_close(&mut self, close: &WsClose) {
        self.0
            .lock()
            .unwrap()
            .push(format!("close {:?}", close.code().map(CloseCode::get)));
    }
}

fn wait_for(seen: &Seen, entries: usize) -> Vec<String> {
    assert!(
        ark_testkit::wait_until(TIMEOUT, || seen.0.lock().unwrap().len() >= entries),
        "{:?}",
        seen.0.lock().unwrap()
    );
    seen.0.lock().unwrap().clone()
}

#[test]
fn a_reconnecting_client_opens_a_new_session_after_the_server_closes_one() {
    let (server, _) = util::echo_server(1024 * 1024);
    let url = format!("ws://{}/", server.local_addr());
    let seen = Seen::default();
    let reconnect = Reconnect::new(Duration::from_millis(20), Duration::from_millis(100));
    let client = WsClient::builder()
        .reconnect(Some(reconnect))
        .connect(&url, seen.clone())
        .unwrap();
    assert!(client.wait_connected(TIMEOUT));
    client.send(Message::text("first")).unwrap();
    assert_eq!(wait_for(&seen, 2), ["open", "first"]);
    // The server ends the session: the client hears the close, connects again, opens.
    for session in server.sessions() {
        session.close(CloseCode::new(4001).unwrap(), "go away");
    }
    assert_eq!(wait_for(&seen, 4)[2..], ["close Some(4001)", "open"]);
    assert!(client.wait_connected(TIMEOUT));
    client.send(Message::text("second")).unwrap();
    assert_eq!(wait_for(&seen, 5)[4], "second");
    assert_eq!(client.stats().sessions_opened, 2);
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn without_reconnect_a_closed_client_stays_closed() {
    let (server, _) = util::echo_server(1024 * 1024);
    let seen = Seen::default();
    let client = WsClient::builder()
        .connect(&format!("ws://{}/", server.local_addr()), seen.clone())
        .unwrap();
    assert!(client.wait_connected(TIMEOUT));
    for session in server.sessions() {
        session.close(CloseCode::new(4001).unwrap(), "go away");
    }
    wait_for(&seen, 2);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(*seen.0.lock().unwrap(), ["open", "close Some(4001)"]);
    assert!(!client.is_connected());
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
