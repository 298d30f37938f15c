//! Echo, fragmentation, ping/pong, close from either side, and bad input.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;

use ark_ws::{Message, UpgradeRequest, WsClient, WsHandler, WsSession};
use tungstenite::protocol::frame::Frame;
use tungstenite::protocol::frame::coding::{Data, OpCode};
use util::{blocking_client, echo_server};

const TIMEOUT: Duration = Duration::from_secs(10);

fn close_code(message: Message) -> u16 {
    match message {
        Message::Close(Some(frame)) => u16::from(frame.code),
        other => panic!("expected a close frame, got {other:?}"),
    }
}

#[test]
fn binary_and_text_echo_with_ark_client_and_server() {
    struct Check {
        got: mpsc::Sender<Message>,
    }
    impl WsHandler for Check {
        fn on_open(&mut self, session: &mut WsSession<'_>, request: &UpgradeRequest) {
            assert_eq!(request.uri().path(), "/");
            session.send_text("héllo").unwrap();
            session.send_binary(&[0, 1, 2, 255]).unwrap();
            session.send_binary(&vec![7u8; 300_000]).unwrap();
        }
        fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
            self.got.send(message).unwrap();
        }
    }
    let (server, _) = echo_server(16 * 1024 * 1024);
    let (tx, rx) = mpsc::channel();
    let client = WsClient::builder()
        .connect(&format!("ws://{}/", server.local_addr()), Check { got: tx })
        .unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), Message::text("héllo"));
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        Message::binary(vec![0, 1, 2, 255])
    );
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        Message::binary(vec![7u8; 300_000])
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_fragmented_message_is_delivered_whole_and_ping_gets_pong() {
    let (server, _) = echo_server(1 << 20);
    let mut ws = blocking_client(server.local_addr());
    ws.send(Message::Frame(Frame::message(
        "frag",
        OpCode::Data(Data::Text),
        false,
    )))
    .unwrap();
    ws.send(Message::Frame(Frame::message(
        "men",
        OpCode::Data(Data::Continue),
        false,
    )))
    .unwrap();
    ws.send(Message::Frame(Frame::message(
        "ted",
        OpCode::Data(Data::Continue),
        true,
    )))
    .unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("fragmented"));
    ws.send(Message::Ping("are you there".into())).unwrap();
    assert_eq!(ws.read().unwrap(), Message::Pong("are you there".into()));
    ws.close(None).unwrap();
    drop(ws);
    server.stop().wait().unwrap();
}

#[test]
fn close_initiated_by_either_side() {
    let (server, echo) = echo_server(1 << 20);
    // Client-initiated.
    let mut ws = blocking_client(server.local_addr());
    ws.close(Some(tungstenite::protocol::CloseFrame {
        code: 1000.into(),
        reason: "client done".into(),
    }))
    .unwrap();
    assert_eq!(
        close_code(ws.read().unwrap()),
        1000,
        "the server answers the close"
    );
    assert!(ark_testkit::wait_until(TIMEOUT, || echo
        .closes
        .lock()
        .unwrap()
        .len()
        == 1));
    assert_eq!(
        echo.closes.lock().unwrap()[0],
        (1000, "client done".to_string())
    );
    drop(ws);
    // Server-initiated.
    let mut ws = blocking_client(server.local_addr());
    ws.send(Message::text("bye")).unwrap();
    assert_eq!(close_code(ws.read().unwrap()), 4000);
    // tungstenite queued its reply when it read the close frame; flushing sends it.
    let _ = ws.flush();
    assert!(ark_testkit::wait_until(TIMEOUT, || echo
        .closes
        .lock()
        .unwrap()
        .len()
        == 2));
    assert_eq!(echo.closes.lock().unwrap()[1].0, 4000);
    drop(ws);
    // Server-initiated with `send(Message::Close(..))`: the same handshake as `close`.
    let mut ws = blocking_client(server.local_addr());
    ws.send(Message::text("bye as a message")).unwrap();
    assert_eq!(close_code(ws.read().unwrap()), 4001);
    let _ = ws.flush();
    assert!(ark_testkit::wait_until(TIMEOUT, || echo
        .closes
        .lock()
        .unwrap()
        .len()
        == 3));
    assert_eq!(
        echo.closes.lock().unwrap()[2],
        (4001, "sent as a message".to_string())
    );
    drop(ws);
    server.stop().wait().unwrap();
}

#[test]
fn send_takes_owned_messages_and_refuses_oversized_control_frames() {
    let (server, _) = echo_server(1 << 20);
    let mut ws = blocking_client(server.local_addr());
    // The echo sends the received binary payload back with `send(Message::Binary(data))`.
    ws.send(Message::binary(vec![9u8; 70_000])).unwrap();
    assert_eq!(ws.read().unwrap(), Message::binary(vec![9u8; 70_000]));
    // A 126-byte ping is refused with TooLarge (the handler asserts it) and nothing is sent.
    ws.send(Message::text("big ping")).unwrap();
    assert_eq!(ws.read().unwrap(), Message::text("ping refused"));
    ws.close(None).unwrap();
    drop(ws);
    server.stop().wait().unwrap();
}

fn raw_upgrade(addr: std::net::SocketAddr, path: &str, with_key: bool) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let key = if with_key {
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    } else {
        ""
    };
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n{key}Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

#[test]
fn bad_upgrades_get_an_http_error_and_other_sessions_go_on() {
    let (server, _) = echo_server(1 << 20);
    let mut good = blocking_client(server.local_addr());
    let wrong_path = raw_upgrade(server.local_addr(), "/elsewhere", true);
    assert!(wrong_path.starts_with("HTTP/1.1 404"), "{wrong_path}");
    let no_key = raw_upgrade(server.local_addr(), "/", false);
    assert!(no_key.starts_with("HTTP/1.1 400"), "{no_key}");
    good.send(Message::text("still here")).unwrap();
    assert_eq!(good.read().unwrap(), Message::text("still here"));
    drop(good);
    server.stop().wait().unwrap();
}

#[test]
fn the_upgrade_hook_can_reject() {
    let server = ark_ws::WsServer::builder()
        .bind("127.0.0.1:0")
        .on_upgrade(|request| {
            if request.headers().contains_key("x-token") {
                Ok(())
            } else {
                Err((401, "token required".to_string()))
            }
        })
        .start(|_| util::Echo::default())
        .unwrap();
    let response = raw_upgrade(server.local_addr(), "/", true);
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    assert!(response.contains("token required"));
    server.stop().wait().unwrap();
}

#[test]
fn oversized_messages_close_with_1009_and_invalid_utf8_with_1007() {
    let (server, _) = echo_server(1024);
    let mut ws = blocking_client(server.local_addr());
    ws.send(Message::binary(vec![0u8; 2000])).unwrap();
    assert_eq!(close_code(ws.read().unwrap()), 1009);
    drop(ws);

    let mut ws = blocking_client(server.local_addr());
    ws.send(Message::Frame(Frame::message(
        vec![0xff, 0xfe, 0x41],
        OpCode::Data(Data::Text),
        true,
    )))
    .unwrap();
    assert_eq!(close_code(ws.read().unwrap()), 1007);
    drop(ws);

    // A protocol violation: a continuation frame with nothing to continue.
    let mut ws = blocking_client(server.local_addr());
    ws.send(Message::Frame(Frame::message(
        "x",
        OpCode::Data(Data::Continue),
        true,
    )))
    .unwrap();
    assert_eq!(close_code(ws.read().unwrap()), 1002);

    // And the server still serves others.
    let mut ok = blocking_client(server.local_addr());
    ok.send(Message::text("fine")).unwrap();
    assert_eq!(ok.read().unwrap(), Message::text("fine"));
    drop((ws, ok));
    server.stop().wait().unwrap();
}

/// Sends `frames` as they are on a fresh connection and returns what comes back, up to and
/// including a close frame (or until the server closes or 3 s pass).
fn answers_to(addr: std::net::SocketAddr, frames: Vec<Frame>) -> Vec<Message> {
    let mut ws = blocking_client(addr);
    ws.get_ref()
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    for f in frames {
        ws.send(Message::Frame(f)).unwrap();
    }
    let mut got = Vec::new();
    while let Ok(m) = ws.read() {
        let close = matches!(m, Message::Close(_));
        got.push(m);
        if close {
            break;
        }
    }
    got
}

fn data(payload: &'static str, kind: Data, fin: bool) -> Frame {
    Frame::message(payload, OpCode::Data(kind), fin)
}

/// A ping with its FIN bit as given (`Frame::message` refuses control opcodes in debug builds).
fn ping(payload: &'static str, fin: bool) -> Frame {
    let mut frame = Frame::ping(payload);
    frame.header_mut().is_final = fin;
    frame
}

/// RFC 6455 §5.4's order of frames, case by case: what a server must refuse with 1002 and
/// what it must accept. Regression: a data frame inside a fragmented message got no close at
/// all (the frame after a fragment was taken apart as a whole message of its own).
#[test]
fn fragment_order_follows_rfc_6455_section_5_4() {
    let (server, _) = echo_server(1 << 20);
    let addr = server.local_addr();
    let protocol_error = |frames: Vec<Frame>, case: &str| {
        let got = answers_to(addr, frames);
        assert_eq!(
            got.last().cloned().map(close_code),
            Some(1002),
            "{case}: {got:?}"
        );
        assert!(
            got.iter().all(|m| !m.is_binary() && !m.is_text()),
            "{case}: nothing delivered: {got:?}"
        );
    };
    protocol_error(
        vec![
            data("a", Data::Binary, false),
            data("b", Data::Binary, true),
        ],
        "a data frame inside a fragmented message",
    );
    protocol_error(
        vec![data("a", Data::Text, false), data("b", Data::Text, false)],
        "a second start inside a fragmented message",
    );
    protocol_error(
        vec![data("a", Data::Text, false), data("b", Data::Binary, true)],
        "a binary frame inside a fragmented text message",
    );
    protocol_error(
        vec![data("x", Data::Continue, true)],
        "a continuation without a start",
    );
    protocol_error(
        vec![data("x", Data::Continue, false)],
        "a non-final continuation without a start",
    );
    protocol_error(vec![ping("p", false)], "a fragmented ping");
    protocol_error(
        vec![data("a", Data::Text, false), ping("p", false)],
        "a fragmented ping inside a fragmented message",
    );
    // Control frames may come between fragments: answered at once, the message whole after.
    let got = answers_to(
        addr,
        vec![
            data("a", Data::Text, false),
            ping("p1", true),
            data("b", Data::Continue, false),
            ping("p2", true),
            data("c", Data::Continue, true),
            Frame::close(None),
        ],
    );
    assert_eq!(
        got[..3],
        [
            Message::Pong("p1".into()),
            Message::Pong("p2".into()),
            Message::text("abc")
        ],
        "{got:?}"
    );
    // After a fragmented message, a whole one is taken as usual.
    let got = answers_to(
        addr,
        vec![
            data("a", Data::Binary, false),
            data("b", Data::Continue, true),
            data("c", Data::Binary, true),
            Frame::close(None),
        ],
    );
    assert_eq!(
        got[..2],
        [
            Message::binary(b"ab".to_vec()),
            Message::binary(b"c".to_vec())
        ],
        "{got:?}"
    );
    server.stop().wait().unwrap();
}
