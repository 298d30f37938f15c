//! A session's life from the handler's side: `on_close` exactly once with the reason — also
//! when the connection or the handshake fails — timers, close codes that may go on the wire,
//! and URLs the client refuses.

mod util;

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_ws::{
    CloseCode, InvalidCloseCode, Message, OpenError, SendError, TimerId, UpgradeRequest, WsClient,
    WsClose, WsHandler, WsServer, WsSession,
};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Records every `on_close`; says "tick" when its timer fires.
#[derive(Clone, Default)]
struct Recorder {
    closes: Arc<Mutex<Vec<WsClose>>>,
}

impl WsHandler for Recorder {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &UpgradeRequest) {
        session.set_timer(Duration::from_millis(20));
    }
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        match message {
            Message::Text(t) if t.as_str() == "close without a code" => {
                session.send(Message::Close(None)).unwrap();
            }
            Message::Text(t) if t.as_str() == "close with 1005" => {
                let frame = tungstenite::protocol::CloseFrame {
                    code: 1005.into(),
                    reason: "".into(),
                };
                let refused = session.send(Message::Close(Some(frame)));
                assert_eq!(
                    refused,
                    Err(SendError::InvalidCloseCode(InvalidCloseCode(1005)))
                );
                session.send_text("refused").unwrap();
            }
            _ => {}
        }
    }
    fn on_timer(&mut self, session: &mut WsSession<'_>, _: TimerId) {
        let _ = session.send_text("tick");
    }
    fn on_close(&mut self, close: &WsClose) {
        self.closes.lock().unwrap().push(close.clone());
    }
}

/// Connects a client with a fresh recorder and waits for its single `on_close`.
fn client_close(url: &str) -> WsClose {
    let recorder = Recorder::default();
    let closes = recorder.closes.clone();
    let client = WsClient::builder()
        .handshake_timeout(Duration::from_millis(300))
        .connect(url, recorder)
        .unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || !closes
        .lock()
        .unwrap()
        .is_empty()));
    client.stop().wait().unwrap();
    let closes = closes.lock().unwrap();
    assert_eq!(closes.len(), 1, "on_close exactly once: {closes:?}");
    closes[0].clone()
}

#[test]
fn a_refused_connection_is_reported_once_with_its_reason() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let close = client_close(&format!("ws://127.0.0.1:{port}/"));
    assert!(
        matches!(
            close,
            WsClose::Failed(OpenError::Connection(ark_tcp::CloseReason::Refused(_)))
        ),
        "{close:?}"
    );
}

#[test]
fn a_refused_upgrade_is_reported_once_with_the_status() {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .path("/chat")
        .start(|_| Recorder::default())
        .unwrap();
    let close = client_close(&format!("ws://{}/elsewhere", server.local_addr()));
    assert_eq!(close, WsClose::Failed(OpenError::Rejected { status: 404 }));
    server.stop().wait().unwrap();
}

#[test]
fn a_server_that_never_answers_the_upgrade_is_a_handshake_timeout() {
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let close = client_close(&format!("ws://{}/", silent.local_addr().unwrap()));
    assert_eq!(
        close,
        WsClose::Failed(OpenError::Timeout(Duration::from_millis(300)))
    );
}

#[test]
fn a_wss_url_to_a_plain_server_fails_with_a_tls_error_or_without_tls_is_refused_and_so_are_other_schemes()
 {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Recorder::default())
        .unwrap();
    let url = format!("wss://127.0.0.1:{}/", server.local_addr().port());
    // The client verifies against the system's CAs; the plain server answers its ClientHello
    // with an HTTP error, which is not TLS.
    #[cfg(feature = "tls")]
    {
        let close = client_close(&url);
        assert!(
            matches!(
                close,
                WsClose::Failed(OpenError::Connection(ark_tcp::CloseReason::Tls(
                    ark_tls::TlsError::Malformed(_)
                )))
            ),
            "{close:?}"
        );
    }
    // Built without TLS, a wss:// URL is refused at once, saying why.
    #[cfg(not(feature = "tls"))]
    {
        let error = WsClient::builder()
            .connect(&url, Recorder::default())
            .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("`tls` feature"), "{error}");
    }
    server.stop().wait().unwrap();
    let error = WsClient::builder()
        .connect("http://127.0.0.1:1/", Recorder::default())
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
}

#[test]
fn timers_fire_and_close_codes_on_the_wire_are_valid_ones() {
    let recorder = Recorder::default();
    let closes = recorder.closes.clone();
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| recorder.clone())
        .unwrap();
    let mut ws = util::blocking_client(server.local_addr());
    assert_eq!(
        ws.read().unwrap(),
        Message::text("tick"),
        "the session's timer fired"
    );
    // A reserved code is refused before it reaches the wire.
    ws.send(Message::text("close with 1005")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("refused"));
    // A close without a code carries none (not 1005, which RFC 6455 reserves).
    ws.send(Message::text("close without a code")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::Close(None));
    let _ = ws.flush();
    assert!(ark_testkit::wait_until(TIMEOUT, || !closes
        .lock()
        .unwrap()
        .is_empty()));
    assert_eq!(
        closes.lock().unwrap()[0],
        WsClose::Closed {
            by: ark_ws::Initiator::Local,
            code: None,
            reason: String::new()
        }
    );
    assert_eq!(CloseCode::new(1006), Err(InvalidCloseCode(1006)));
    assert_eq!(CloseCode::new(4000).map(CloseCode::get), Ok(4000));
    drop(ws);
    server.stop().wait().unwrap();
}
