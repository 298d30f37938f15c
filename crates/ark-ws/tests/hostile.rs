//! Hostile and unlucky WebSocket peers: each test reproduces a way a peer could crash the
//! server, hold memory or a core, or hang a session, and proves it no longer can. Run in debug
//! builds too (CI does): a `debug_assert` in a dependency must not take the server down.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use tungstenite::Message;
use tungstenite::protocol::WebSocketConfig;
use util::echo_server;

fn client_with_limit(addr: std::net::SocketAddr, max: usize) -> tungstenite::WebSocket<TcpStream> {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max));
    let (ws, _) =
        tungstenite::client::client_with_config(format!("ws://{addr}/"), stream, Some(config))
            .unwrap();
    ws
}

fn close_code(message: Message) -> u16 {
    match message {
        Message::Close(Some(frame)) => u16::from(frame.code),
        other => panic!("expected a close frame, got {other:?}"),
    }
}

#[test]
fn a_message_over_the_limit_closes_only_its_session_with_1009() {
    const MIB: usize = 1024 * 1024;
    let (server, _) = echo_server(4 * MIB);
    for (label, frames) in [("one 5 MiB frame", 1usize), ("five 1 MiB fragments", 5)] {
        let mut ws = client_with_limit(server.local_addr(), 64 * MIB);
        if frames == 1 {
            ws.send(Message::binary(vec![7u8; 5 * MIB])).unwrap();
        } else {
            use tungstenite::protocol::frame::Frame;
            use tungstenite::protocol::frame::coding::{Data, OpCode};
            for i in 0..frames {
                let opcode = if i == 0 {
                    OpCode::Data(Data::Binary)
                } else {
                    OpCode::Data(Data::Continue)
                };
                let frame = Frame::message(vec![7u8; MIB], opcode, i + 1 == frames);
                ws.send(Message::Frame(frame)).unwrap();
            }
        }
        assert_eq!(close_code(ws.read().unwrap()), 1009, "{label}");
        // The server goes on serving others.
        let mut ok = client_with_limit(server.local_addr(), 64 * MIB);
        ok.send(Message::text("still here")).unwrap();
        assert_eq!(ok.read().unwrap(), Message::text("still here"), "{label}");
    }
    server.stop().wait().unwrap();
}

/// Echoes binary messages; an echo the write buffer has no room for is dropped (a handler
/// that panicked on `Full` would take its reactor thread down and prove nothing).
struct TolerantEcho;

impl ark_ws::WsHandler for TolerantEcho {
    fn on_message(&mut self, session: &mut ark_ws::WsSession<'_>, message: Message) {
        if let Message::Binary(data) = message {
            let _ = session.send(Message::Binary(data));
        }
    }
}

/// A server that echoes, with a 1 MiB write-buffer limit and short deadlines.
fn small_server(write_stall: Option<Duration>) -> ark_ws::WsServerHandle {
    ark_ws::WsServer::builder()
        .bind("127.0.0.1:0")
        .write_buffer_limit(1024 * 1024)
        .write_stall_timeout(write_stall)
        .handshake_timeout(Duration::from_millis(300))
        .start(|_| TolerantEcho)
        .unwrap()
}

/// Writes `message` over and over from a blocking client that never reads, until a write
/// blocks for 1 s (the server stopped taking them) or `limit` bytes went out. Returns the
/// bytes written and the client (kept open).
fn send_without_reading(
    addr: std::net::SocketAddr,
    message: Message,
    limit: usize,
) -> (usize, tungstenite::WebSocket<TcpStream>) {
    let mut ws = client_with_limit(addr, 64 * 1024 * 1024);
    ws.get_mut()
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let size = match &message {
        Message::Ping(p) => p.len() + 6,
        other => other.len() + 14,
    };
    let mut written = 0;
    while written < limit {
        match ws.write(message.clone()).and_then(|()| ws.flush()) {
            Ok(()) => written += size,
            Err(_) => break,
        }
    }
    (written, ws)
}

#[test]
fn pings_from_a_peer_that_never_reads_owe_bounded_pongs() {
    let server = small_server(None);
    let (written, _ws) = send_without_reading(
        server.local_addr(),
        Message::Ping(vec![1u8; 125].into()),
        64 << 20,
    );
    let queued = server.tcp_stats().send_queue_bytes;
    assert!(
        written > 4 * 1024 * 1024,
        "the peer wrote {written} bytes of pings before the server stopped reading"
    );
    assert!(
        queued <= 1024 * 1024 + 64 * 1024,
        "{queued} bytes of pongs queued for {written} bytes of pings (limit 1 MiB)"
    );
}

#[test]
fn a_peer_that_sends_and_never_reads_costs_no_cpu() {
    let server = small_server(None);
    let (written, _ws) = send_without_reading(
        server.local_addr(),
        Message::binary(vec![3u8; 16 * 1024]),
        64 << 20,
    );
    assert!(
        written < 64 << 20,
        "the server stopped reading at some point"
    );
    let before = server.tcp_stats().bytes_in;
    let cpu = ark_testkit::process_cpu_seconds().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let cpu = ark_testkit::process_cpu_seconds().unwrap() - cpu;
    assert_eq!(server.tcp_stats().bytes_in, before, "reading is paused");
    assert!(
        cpu < 0.05,
        "{cpu:.3} s of CPU in 0.5 s with a paused session"
    );
}

#[test]
fn a_silent_peer_with_a_full_queue_is_dropped_by_the_write_stall_deadline() {
    let server = small_server(Some(Duration::from_millis(300)));
    let (_, mut ws) = send_without_reading(
        server.local_addr(),
        Message::binary(vec![3u8; 16 * 1024]),
        64 << 20,
    );
    // Then a close, and silence.
    let _ = ws.close(None);
    let _ = ws.flush();
    assert!(
        ark_testkit::wait_until(Duration::from_secs(10), || server.tcp_stats().sessions_open
            == 0),
        "the session is still open: {:?}",
        server.tcp_stats()
    );
    assert_eq!(
        server.tcp_stats().send_queue_bytes,
        0,
        "the queue was freed"
    );
}

#[test]
fn an_upgrade_that_stalls_is_closed_after_the_handshake_timeout() {
    use std::io::{Read, Write};
    let server = small_server(None);
    let mut stalled = TcpStream::connect(server.local_addr()).unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stalled.write_all(b"G").unwrap();
    let mut answer = String::new();
    stalled.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    drop(stalled);
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        server.tcp_stats().sessions_open == 0
    }));
}

/// Autobahn 6.4.3/6.4.4: bad UTF-8 inside one text frame that arrives in pieces fails the
/// connection with 1007 at its first bad byte, not when the whole frame is in (the rest of
/// the frame never comes here).
#[test]
fn bad_text_in_a_frame_that_arrives_in_pieces_is_refused_at_the_first_bad_byte() {
    let (server, _) = util::echo_server(1024 * 1024);
    for (piece, why) in [
        (&b"valid \xf4\x90\x80\x80"[..], "a code point past U+10FFFF"),
        (
            &b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"[..],
            "a surrogate",
        ),
    ] {
        let (mut stream, _) = util::raw_upgrade(server.local_addr(), "none");
        // A 1,000-byte text frame: its head and only its first bytes.
        let mut payload = piece.to_vec();
        payload.resize(1000, b'x');
        let whole = util::frame(0x81, &payload);
        stream.write_all(&whole[..8 + piece.len()]).unwrap();
        assert_eq!(util::close_code(&mut stream), 1007, "{why}");
    }
    // A valid character cut by the end of a piece waits for the rest.
    let (mut stream, _) = util::raw_upgrade(server.local_addr(), "none");
    let whole = util::frame(0x81, "é".repeat(100).as_bytes());
    for chunk in whole.chunks(7) {
        stream.write_all(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut echo = [0u8; 204];
    std::io::Read::read_exact(&mut stream, &mut echo).unwrap();
    assert_eq!(&echo[4..], "é".repeat(100).as_bytes());
    drop(stream);
    server.stop().wait().unwrap();
}
