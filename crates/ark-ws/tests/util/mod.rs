//! Helpers shared by the ark-ws tests.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_ws::{CloseCode, Message, WsClose, WsHandler, WsServer, WsServerHandle, WsSession};
use tungstenite::WebSocket;

/// Echoes text and binary messages; "bye" makes the server close with 4000; records closes
/// as (code, reason): 1005 for a close frame without a code, 1006 for a connection lost
/// without one (as RFC 6455 reports them), 0 for a session that never opened.
#[derive(Clone, Default)]
pub struct Echo {
    pub closes: Arc<Mutex<Vec<(u16, String)>>>,
}

impl WsHandler for Echo {
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        match message {
            Message::Text(text) if text.as_str() == "bye" => {
                session.close(CloseCode::new(4000).unwrap(), "server says bye")
            }
            Message::Text(text) if text.as_str() == "bye as a message" => session
                .send(Message::Close(Some(tungstenite::protocol::CloseFrame {
                    code: 4001.into(),
                    reason: "sent as a message".into(),
                })))
                .unwrap(),
            Message::Text(text) if text.as_str() == "big ping" => {
                let refused = session.send(Message::Ping(vec![0u8; 126].into()));
                assert_eq!(
                    refused,
                    Err(ark_ws::SendError::TooLarge { len: 126, max: 125 })
                );
                session.send_text("ping refused").unwrap();
            }
            Message::Text(text) => session.send_text(&text).unwrap(),
            // The received message goes back as it is (`send` with an owned message).
            Message::Binary(data) => session.send(Message::Binary(data)).unwrap(),
            _ => {}
        }
    }
    fn on_close(&mut self, close: &WsClose) {
        let entry = match close {
            WsClose::Closed { code, reason, .. } => {
                (code.map_or(1005, CloseCode::get), reason.clone())
            }
            WsClose::Abnormal(reason) => (1006, reason.to_string()),
            WsClose::Failed(error) => (0, error.to_string()),
            other => panic!("unknown close {other:?}"),
        };
        self.closes.lock().unwrap().push(entry);
    }
}

pub fn echo_server(max_message: usize) -> (WsServerHandle, Echo) {
    let echo = Echo::default();
    let e = echo.clone();
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .max_message(max_message)
        .max_frame(max_message)
        .start(move |_| e.clone())
        .unwrap();
    (server, echo)
}

/// A blocking tungstenite client (an independent implementation of the client side).
pub fn blocking_client(addr: SocketAddr) -> WebSocket<TcpStream> {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (ws, _) = tungstenite::client::client(format!("ws://{addr}/"), stream).unwrap();
    ws
}
