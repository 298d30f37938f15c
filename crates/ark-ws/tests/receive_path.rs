//! The server's receive path without sockets (ark-tcp's `Simulator`): whole data frames are
//! taken apart by ark-ws, every other frame by tungstenite, and together they deliver the
//! same messages in the same order however the bytes are cut — frames arriving with the
//! upgrade, one byte at a time, fragments with a ping between them — and fail bad frames with
//! the close code RFC 6455 gives; and the client's receive path the same way.

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use ark_frame::Raw;
use ark_tcp::Simulator;
use ark_ws::{Message, ReceivedData, WsConfig, WsHandler, WsSession};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Control, Data, OpCode};

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Message>>>);

impl WsHandler for Recorder {
    fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
        self.0.lock().unwrap().push(message);
    }
}

/// Reads data messages where they are lent (`on_data`): every other one is copied out of
/// the lent bytes, the rest kept with `into_message`.
#[derive(Clone, Default)]
struct Lender(Arc<Mutex<Vec<Message>>>);

impl WsHandler for Lender {
    fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
        self.0.lock().unwrap().push(message);
    }
    fn on_data(&mut self, _: &mut WsSession<'_>, data: ReceivedData<'_>) {
        let mut seen = self.0.lock().unwrap();
        let message = if seen.len().is_multiple_of(2) {
            match data.text() {
                Some(text) => Message::text(text),
                None => Message::binary(data.bytes().to_vec()),
            }
        } else {
            data.into_message()
        };
        seen.push(message);
    }
}

/// One frame as a client sends it (masked unless `mask` is `None`).
fn frame(opcode: OpCode, fin: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let header = FrameHeader {
        is_final: fin,
        rsv1: false,
        rsv2: false,
        rsv3: false,
        opcode,
        mask,
    };
    let mut out = Vec::new();
    header.format(payload.len() as u64, &mut out).unwrap();
    let start = out.len();
    out.extend_from_slice(payload);
    if let Some(mask) = mask {
        for (i, b) in out[start..].iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
    }
    out
}

const MASK: Option<[u8; 4]> = Some([0xa1, 0x02, 0xf3, 0x44]);

fn binary(payload: &[u8]) -> Vec<u8> {
    frame(OpCode::Data(Data::Binary), true, payload, MASK)
}

/// Runs a server over the upgrade and `frames` cut into `chunk`-byte pieces (the first piece
/// arrives with the upgrade): the messages it delivered and the frames it wrote after its HTTP
/// answer. (The upgrade itself arrives whole: tungstenite refuses a request trickling in
/// byte by byte as an attack.)
fn serve(frames: &[u8], chunk: usize, config: WsConfig) -> (Vec<Message>, Vec<(OpCode, Vec<u8>)>) {
    serve_with(Recorder::default(), |r| r.0.clone(), frames, chunk, config)
}

/// As [`serve`], with `handler` (whose messages `seen` gives).
fn serve_with<H: WsHandler>(
    handler: H,
    seen: impl Fn(&H) -> Arc<Mutex<Vec<Message>>>,
    frames: &[u8],
    chunk: usize,
    config: WsConfig,
) -> (Vec<Message>, Vec<(OpCode, Vec<u8>)>) {
    let messages = seen(&handler);
    let (handler, session) = ark_ws::fuzzing::server(config, handler);
    let mut sim = Simulator::new(handler, Raw::new(), session);
    let first = chunk.min(frames.len());
    sim.peer_send(&[UPGRADE, &frames[..first]].concat());
    let mut written = sim.peer_read();
    for piece in frames[first..].chunks(chunk) {
        sim.peer_send(piece);
        written.extend(sim.peer_read());
    }
    let head_end = written
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer")
        + 4;
    assert!(
        written.starts_with(b"HTTP/1.1 101"),
        "upgraded: {}",
        String::from_utf8_lossy(&written)
    );
    let messages = messages.lock().unwrap().clone();
    (messages, frames_in(&written[head_end..], false))
}

/// The frames written by a client (`masked`: each must be masked) or a server (none may be),
/// with their payloads unmasked.
fn frames_in(mut bytes: &[u8], masked: bool) -> Vec<(OpCode, Vec<u8>)> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let mut cursor = Cursor::new(bytes);
        let (header, len) = FrameHeader::parse(&mut cursor)
            .unwrap()
            .expect("whole frames");
        assert_eq!(
            header.mask.is_some(),
            masked,
            "a client masks, a server does not"
        );
        let mask = header.mask.unwrap_or_default();
        let start = cursor.position() as usize;
        let end = start + len as usize;
        let payload = bytes[start..end]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ mask[i % 4]);
        frames.push((header.opcode, payload.collect()));
        bytes = &bytes[end..];
    }
    frames
}

fn close_code(frames: &[(OpCode, Vec<u8>)]) -> u16 {
    let (opcode, payload) = frames.last().expect("a close frame");
    assert_eq!(*opcode, OpCode::Control(Control::Close), "{frames:?}");
    u16::from_be_bytes([payload[0], payload[1]])
}

#[test]
fn every_cut_of_the_same_bytes_delivers_the_same_messages_in_order() {
    let big: Vec<u8> = (0..70_000).map(|i| (i % 251) as u8).collect();
    let mut bytes = binary(b"first");
    bytes.extend(frame(
        OpCode::Data(Data::Text),
        true,
        "héllo".as_bytes(),
        MASK,
    ));
    // A fragmented message with a ping between its fragments (tungstenite's part).
    bytes.extend(frame(OpCode::Data(Data::Binary), false, b"ab", MASK));
    bytes.extend(frame(OpCode::Control(Control::Ping), true, b"p1", MASK));
    bytes.extend(frame(OpCode::Data(Data::Continue), false, b"cd", MASK));
    bytes.extend(frame(OpCode::Data(Data::Continue), true, b"ef", MASK));
    bytes.extend(binary(&big));
    bytes.extend(frame(OpCode::Data(Data::Text), true, b"", MASK));
    bytes.extend(binary(b""));
    for i in 0..20u8 {
        bytes.extend(binary(&[i; 125]));
    }
    let mut expected = vec![
        Message::binary(&b"first"[..]),
        Message::text("héllo"),
        Message::binary(&b"abcdef"[..]),
        Message::binary(big.clone()),
        Message::text(""),
        Message::binary(Vec::new()),
    ];
    expected.extend((0..20u8).map(|i| Message::binary(vec![i; 125])));
    // 131: the 125-byte messages' frame length, so those arrive one whole frame per read.
    for chunk in [bytes.len(), 1, 2, 3, 7, 13, 125, 131, 1000, 4096] {
        let (messages, frames) = serve(&bytes, chunk, WsConfig::default());
        assert_eq!(messages, expected, "cut in pieces of {chunk}");
        // Read where they are lent, or kept: the same messages (a lent message not kept
        // leaves the buffer exactly, or every later one would be cut wrong).
        let lender = Lender::default();
        let (lent, _) = serve_with(lender, |l| l.0.clone(), &bytes, chunk, WsConfig::default());
        assert_eq!(lent, expected, "lent, cut in pieces of {chunk}");
        assert_eq!(
            frames,
            vec![(OpCode::Control(Control::Pong), b"p1".to_vec())],
            "cut in pieces of {chunk}: the ping is answered"
        );
    }
}

#[test]
fn bad_frames_fail_the_connection_with_their_close_code() {
    let small = WsConfig {
        max_frame: 1000,
        max_message: 1000,
        ..WsConfig::default()
    };
    let mut rsv = binary(b"x");
    rsv[0] |= 0x40;
    let cases: [(&str, Vec<u8>, u16); 6] = [
        (
            "unmasked",
            frame(OpCode::Data(Data::Binary), true, b"x", None),
            1002,
        ),
        (
            "invalid UTF-8",
            frame(OpCode::Data(Data::Text), true, &[0xff, 0xfe, 0x41], MASK),
            1007,
        ),
        ("over max_frame", binary(&[7; 1001]), 1009),
        ("reserved bit", rsv, 1002),
        (
            "text inside a fragmented message",
            [
                frame(OpCode::Data(Data::Binary), false, b"a", MASK),
                frame(OpCode::Data(Data::Text), true, b"b", MASK),
            ]
            .concat(),
            1002,
        ),
        (
            "continuation of nothing",
            frame(OpCode::Data(Data::Continue), true, b"x", MASK),
            1002,
        ),
    ];
    for (what, bad, code) in cases {
        let mut bytes = binary(b"before");
        bytes.extend(bad);
        bytes.extend(binary(b"after"));
        for chunk in [bytes.len(), 1, 5] {
            let (messages, frames) = serve(&bytes, chunk, small.clone());
            assert_eq!(
                messages,
                vec![Message::binary(&b"before"[..])],
                "{what}, pieces of {chunk}: nothing after the bad frame"
            );
            assert_eq!(close_code(&frames), code, "{what}, pieces of {chunk}");
        }
    }
}

/// Runs a client over the server's upgrade answer and `frames` (as a server sends them,
/// unmasked) cut into `chunk`-byte pieces: the messages its handler got, and the frames it
/// wrote (unmasked).
fn receive_as_client<H: WsHandler>(
    handler: H,
    seen: Arc<Mutex<Vec<Message>>>,
    frames: &[u8],
    chunk: usize,
) -> (Vec<Message>, Vec<(OpCode, Vec<u8>)>) {
    let (handler, session) =
        ark_ws::fuzzing::client(WsConfig::default(), "ws://a/", handler).unwrap();
    let mut sim = Simulator::new(handler, Raw::new(), session);
    let request = String::from_utf8(sim.peer_read()).unwrap();
    let key = request
        .lines()
        .find_map(|line| line.strip_prefix("Sec-WebSocket-Key: "))
        .expect("a key in the request");
    let accept = tungstenite::handshake::derive_accept_key(key.trim().as_bytes());
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    sim.peer_send(answer.as_bytes());
    let mut written = Vec::new();
    for piece in frames.chunks(chunk) {
        sim.peer_send(piece);
        written.extend(sim.peer_read());
    }
    let messages = seen.lock().unwrap().clone();
    (messages, frames_in(&written, true))
}

#[test]
fn a_client_gets_the_same_messages_lent_from_the_read_however_the_bytes_are_cut() {
    let big: Vec<u8> = (0..70_000).map(|i| (i % 251) as u8).collect();
    let unmasked = |opcode, fin, payload: &[u8]| frame(opcode, fin, payload, None);
    let mut bytes = unmasked(OpCode::Data(Data::Binary), true, b"first");
    bytes.extend(unmasked(OpCode::Data(Data::Text), true, "héllo".as_bytes()));
    bytes.extend(unmasked(OpCode::Data(Data::Binary), false, b"ab"));
    bytes.extend(unmasked(OpCode::Control(Control::Ping), true, b"p1"));
    bytes.extend(unmasked(OpCode::Data(Data::Continue), true, b"cd"));
    bytes.extend(unmasked(OpCode::Data(Data::Binary), true, &big));
    for i in 0..20u8 {
        bytes.extend(unmasked(OpCode::Data(Data::Binary), true, &[i; 125]));
    }
    bytes.extend(unmasked(OpCode::Data(Data::Text), true, b""));
    let mut expected = vec![
        Message::binary(&b"first"[..]),
        Message::text("héllo"),
        Message::binary(&b"abcd"[..]),
        Message::binary(big.clone()),
    ];
    expected.extend((0..20u8).map(|i| Message::binary(vec![i; 125])));
    expected.push(Message::text(""));
    for chunk in [bytes.len(), 1, 3, 7, 125, 131, 1000, 4096, 65_536] {
        let recorder = Recorder::default();
        let (kept, pong) = receive_as_client(recorder.clone(), recorder.0.clone(), &bytes, chunk);
        assert_eq!(kept, expected, "owned, cut in pieces of {chunk}");
        assert_eq!(pong, [(OpCode::Control(Control::Pong), b"p1".to_vec())]);
        let lender = Lender::default();
        let (lent, _) = receive_as_client(lender.clone(), lender.0.clone(), &bytes, chunk);
        assert_eq!(lent, expected, "lent, cut in pieces of {chunk}");
    }
}

#[test]
fn a_client_fails_invalid_utf8_lent_from_the_read_with_1007() {
    let mut bytes = frame(OpCode::Data(Data::Text), true, &[0xff, 0xfe], None);
    bytes.extend(frame(OpCode::Data(Data::Binary), true, b"after", None));
    let lender = Lender::default();
    let (seen, written) = receive_as_client(lender.clone(), lender.0.clone(), &bytes, bytes.len());
    assert!(seen.is_empty(), "nothing after a bad frame: {seen:?}");
    assert_eq!(close_code(&written), 1007);
}
