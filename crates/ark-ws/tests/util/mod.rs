//! Helpers shared by the ark-ws tests.
#![allow(dead_code)]

use std::io::{Read, Write};
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

/// Checks a run of a Python interop client: it exited 0 and printed `interop ok` (otherwise
/// the assertion shows both its outputs); its stdout.
pub fn python_ok(output: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && stdout.contains("interop ok"),
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Waits up to `timeout` for the first session `echo` served to close, and checks it was the
/// Python client's close: 1000 "python done".
pub fn closed_by_python(echo: &Echo, timeout: Duration) {
    assert!(ark_testkit::wait_until(timeout, || {
        !echo.closes.lock().unwrap().is_empty()
    }));
    assert_eq!(
        echo.closes.lock().unwrap()[0],
        (1000, "python done".to_string())
    );
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

/// A raw client's upgrade with `extensions` offered; the answer's head.
pub fn raw_upgrade(addr: SocketAddr, extensions: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let request = format!(
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Extensions: {extensions}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    (stream, String::from_utf8(head).unwrap())
}

/// Reads frames until a close frame; its code.
pub fn close_code(stream: &mut TcpStream) -> u16 {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed without a close frame");
        all.extend_from_slice(&chunk[..n]);
        // The server's frames are unmasked; a close frame is 0x88.
        let mut at = 0;
        while at + 2 <= all.len() {
            let len = usize::from(all[at + 1] & 0x7f);
            let (len, head) = match len {
                126 if at + 4 <= all.len() => (
                    usize::from(u16::from_be_bytes([all[at + 2], all[at + 3]])),
                    4,
                ),
                126 | 127 => break,
                len => (len, 2),
            };
            if all.len() < at + head + len {
                break;
            }
            if all[at] == 0x88 {
                return u16::from_be_bytes([all[at + head], all[at + head + 1]]);
            }
            at += head + len;
        }
    }
}

/// A masked client frame.
pub fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37u8, 0xfa, 0x21, 0x3d];
    let mut out = vec![first];
    match payload.len() {
        len @ 0..=125 => out.push(0x80 | len as u8),
        len @ 126..=65_535 => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}
