//! A reconnecting WebSocket client: when the server closes its session, the client connects
//! again and makes a new handshake; the handler hears `on_close`, then `on_open`; the client
//! handle sends on the new session. Without `reconnect` it stays closed.

mod util;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_ws::{
    CloseCode, Message, Reconnect, UpgradeRequest, WsClient, WsClose, WsHandler, WsSession,
};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Records the client's opens, closes and messages.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl WsHandler for Seen {
    fn on_open(&mut self, _: &mut WsSession<'_>, _: &UpgradeRequest) {
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

/// Records every open and every close (whole).
#[derive(Clone, Default)]
struct Ends(Arc<Mutex<Vec<Option<WsClose>>>>);

impl WsHandler for Ends {
    fn on_open(&mut self, _: &mut WsSession<'_>, _: &UpgradeRequest) {
        self.0.lock().unwrap().push(None);
    }
    fn on_message(&mut self, _: &mut WsSession<'_>, _: Message) {}
    fn on_close(&mut self, close: &WsClose) {
        self.0.lock().unwrap().push(Some(close.clone()));
    }
}

/// What a scripted server does with one connection.
#[derive(Clone, Copy)]
enum Answer {
    /// Answers the upgrade with this status and closes.
    Status(u16),
    /// Accepts the TCP connection and closes it at once.
    Drop,
    /// Completes the WebSocket handshake, then closes the connection at once.
    UpgradeAndDrop,
    /// Completes the handshake and sends "hello", then holds the connection.
    Upgrade,
}

/// A std server that treats its connections by `script` (the last entry for every later one)
/// and counts them.
fn scripted_server(script: Vec<Answer>) -> (String, Arc<std::sync::atomic::AtomicU64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("ws://{}/", listener.local_addr().unwrap());
    let count = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match script[n.min(script.len() - 1)] {
                Answer::Drop => drop(stream),
                Answer::Status(status) => {
                    let mut head = [0; 4096];
                    let _ = stream.read(&mut head);
                    let answer = format!(
                        "HTTP/1.1 {status} Refused\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = stream.write_all(answer.as_bytes());
                }
                Answer::UpgradeAndDrop => drop(tungstenite::accept(stream)),
                Answer::Upgrade => {
                    if let Ok(mut ws) = tungstenite::accept(stream) {
                        let _ = ws.send(tungstenite::Message::text("hello"));
                        // Reads (and so answers the close handshake) until the end.
                        held.push(std::thread::spawn(move || while ws.read().is_ok() {}));
                    }
                }
            }
        }
    });
    (url, count)
}

#[test]
fn a_reconnecting_client_retries_a_refused_handshake_until_it_opens() {
    let (url, attempts) = scripted_server(vec![
        Answer::Status(503),
        Answer::Status(502),
        Answer::Upgrade,
    ]);
    let ends = Ends::default();
    let client = WsClient::builder()
        .reconnect(Some(Reconnect::new(
            Duration::from_millis(10),
            Duration::from_millis(100),
        )))
        .connect(&url, ends.clone())
        .unwrap();
    assert!(
        client.wait_connected(TIMEOUT),
        "{:?}",
        ends.0.lock().unwrap()
    );
    let seen = ends.0.lock().unwrap().clone();
    let failed = |status| Some(WsClose::Failed(ark_ws::OpenError::Rejected { status }));
    assert_eq!(seen, [failed(503), failed(502), None]);
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 3);
    client.stop().wait().unwrap();
}

#[test]
fn a_final_refusal_ends_a_reconnecting_client() {
    let (url, attempts) = scripted_server(vec![Answer::Status(403)]);
    let ends = Ends::default();
    let client = WsClient::builder()
        .reconnect(Some(Reconnect::new(
            Duration::from_millis(10),
            Duration::from_millis(100),
        )))
        .connect(&url, ends.clone())
        .unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || !ends
        .0
        .lock()
        .unwrap()
        .is_empty()));
    // Long enough for several retries at 10-100 ms, were there any.
    std::thread::sleep(Duration::from_millis(500));
    let seen = ends.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        [Some(WsClose::Failed(ark_ws::OpenError::Rejected {
            status: 403
        }))]
    );
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 1);
    client.stop().wait().unwrap();
}

/// Attempts a reconnecting client (10 ms growing to 500 ms) makes against `answer` in 1.5 s.
fn attempts_against(answer: Answer) -> u64 {
    let (url, attempts) = scripted_server(vec![answer]);
    let client = WsClient::builder()
        .reconnect(Some(Reconnect::new(
            Duration::from_millis(10),
            Duration::from_millis(500),
        )))
        .connect(&url, Ends::default())
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    client.stop().wait().unwrap();
    attempts.load(std::sync::atomic::Ordering::SeqCst)
}

#[test]
fn the_backoff_grows_against_a_server_that_accepts_and_closes() {
    // Waits of 10, 20, 40, ... 500 ms (each at least half that with jitter) leave room for at
    // most 13 attempts in 1.5 s; a delay reset at every TCP open made ~100.
    for answer in [Answer::Drop, Answer::UpgradeAndDrop] {
        let attempts = attempts_against(answer);
        assert!((3..=13).contains(&attempts), "{attempts} attempts in 1.5 s");
    }
}
