//! permessage-deflate (RFC 7692) over sockets: ark with ark under several settings, with
//! Python's `websockets` as client and as server (its own implementation, compression on by
//! default), and a decompression bomb. Cargo feature `deflate`.

mod util;

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_ws::{DeflateConfig, Message, WsClient, WsClose, WsHandler, WsServer, WsSession};

/// What the clients send: short (under the threshold) and long, text and binary,
/// compressible and not.
fn messages() -> Vec<Message> {
    let text: String = (0..3000)
        .map(|i| format!("message {i} of a compressible text; "))
        .collect();
    let noise: Vec<u8> = (0..70_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    vec![
        Message::text("hi"),
        Message::text("é".repeat(500)),
        Message::text(text),
        Message::binary(vec![0u8, 1, 0xfe, 0xff]),
        Message::binary(vec![0u8; 300_000]),
        Message::binary(noise),
        Message::text(""),
    ]
}

/// Sends `messages()` once open, keeps what comes back.
#[derive(Clone, Default)]
struct Sender {
    received: Arc<Mutex<Vec<Message>>>,
    closed: Arc<Mutex<Option<WsClose>>>,
}

impl WsHandler for Sender {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &ark_ws::UpgradeRequest) {
        for message in messages() {
            session.send(message).unwrap();
        }
    }
    fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
        self.received.lock().unwrap().push(message);
    }
    fn on_close(&mut self, close: &WsClose) {
        *self.closed.lock().unwrap() = Some(close.clone());
    }
}

/// Connects a client with `client` settings, waits for every echo; the bytes the server read.
fn echo_through(server: Option<DeflateConfig>, client: Option<DeflateConfig>) -> u64 {
    let echo = util::Echo::default();
    let mut builder = WsServer::builder().bind("127.0.0.1:0");
    if let Some(config) = server {
        builder = builder.deflate(config);
    }
    let e = echo.clone();
    let server = builder.start(move |_| e.clone()).unwrap();
    let sender = Sender::default();
    let mut builder = WsClient::builder();
    if let Some(config) = client {
        builder = builder.deflate(config);
    }
    let url = format!("ws://{}/", server.local_addr());
    let handle = builder.connect(&url, sender.clone()).unwrap();
    let expected = messages();
    assert!(
        ark_testkit::wait_until(Duration::from_secs(20), || {
            sender.received.lock().unwrap().len() == expected.len()
        }),
        "{server:?}/{client:?}: {} echoes of {}",
        sender.received.lock().unwrap().len(),
        expected.len()
    );
    assert!(
        *sender.received.lock().unwrap() == expected,
        "{server:?}/{client:?}"
    );
    // Counters are published as sessions run: wait for the last of them.
    let mut read = 0;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let now = server.tcp_stats().bytes_in;
        if now == read {
            break;
        }
        read = now;
    }
    drop(handle.stop());
    server.stop().wait().unwrap();
    read
}

#[test]
fn ark_with_ark_agrees_and_every_message_comes_back_under_every_setting() {
    let plain = echo_through(None, None);
    let declined = echo_through(None, Some(DeflateConfig::default()));
    assert!(
        declined >= plain,
        "a server without it declines: {declined} vs {plain}"
    );
    let settings = [
        DeflateConfig::default(),
        DeflateConfig {
            server_no_context_takeover: true,
            client_no_context_takeover: true,
            server_max_window_bits: 9,
            client_max_window_bits: 9,
            level: 6,
            min_size: 0,
        },
        DeflateConfig {
            server_max_window_bits: 8,
            client_max_window_bits: 8,
            ..DeflateConfig::default()
        },
    ];
    for config in settings {
        let compressed = echo_through(Some(config), Some(config));
        // An 8-bit window goes as stored blocks (zlib cannot compress with it): a few bytes
        // more than plain, but it is what the peer can inflate.
        let bound = match config.client_max_window_bits {
            8 => plain + plain / 100,
            _ => plain / 2,
        };
        assert!(
            compressed < bound,
            "{config:?}: {compressed} bytes read vs {plain}"
        );
    }
    let default = echo_through(
        Some(DeflateConfig::default()),
        Some(DeflateConfig::default()),
    );
    assert!(
        default * 3 < plain,
        "default settings: {default} bytes read vs {plain}"
    );
}

#[test]
fn bad_settings_are_refused_by_the_builders() {
    let bad = DeflateConfig {
        server_max_window_bits: 16,
        ..DeflateConfig::default()
    };
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .deflate(bad)
        .start(|_| util::Echo::default());
    assert_eq!(
        server.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::InvalidInput)
    );
    let client = WsClient::builder()
        .deflate(DeflateConfig {
            level: 10,
            ..DeflateConfig::default()
        })
        .connect("ws://127.0.0.1:9/", Sender::default());
    assert_eq!(
        client.err().map(|e| e.kind()),
        Some(std::io::ErrorKind::InvalidInput)
    );
}

/// Runs `deflate_peer.py` with `args`.
fn python(args: &[&str]) -> Command {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/deflate_peer.py");
    let mut command = Command::new("python3");
    command.arg(script).args(args);
    command
}

/// An echo server (`util::Echo`) that accepts permessage-deflate with its defaults.
fn compressing_echo_server() -> (ark_ws::WsServerHandle, util::Echo) {
    let echo = util::Echo::default();
    let e = echo.clone();
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .deflate(DeflateConfig::default())
        .start(move |_| e.clone())
        .unwrap();
    (server, echo)
}

#[test]
fn python_websockets_client_compresses_with_the_server() {
    let (server, echo) = compressing_echo_server();
    let url = format!("ws://{}/", server.local_addr());
    let output = python(&["client", &url])
        .output()
        .expect("python3 runs (scripts/setup-test-deps.sh installs websockets)");
    let stdout = util::python_ok(&output);
    assert!(stdout.contains("answered permessage-deflate"), "{stdout}");
    util::closed_by_python(&echo, Duration::from_secs(10));
    server.stop().wait().unwrap();
}

#[test]
fn the_client_compresses_with_a_python_websockets_server() {
    let mut peer = python(&["server"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/setup-test-deps.sh installs websockets)");
    let mut stdout = std::io::BufReader::new(peer.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    let port: u16 = line
        .trim()
        .strip_prefix("port ")
        .expect(&line)
        .parse()
        .unwrap();
    let sender = Sender::default();
    let handle = WsClient::builder()
        .deflate(DeflateConfig::default())
        .connect(&format!("ws://127.0.0.1:{port}/"), sender.clone())
        .unwrap();
    let expected = messages();
    assert!(ark_testkit::wait_until(Duration::from_secs(20), || {
        sender.received.lock().unwrap().len() == expected.len()
    }));
    assert!(*sender.received.lock().unwrap() == expected);
    // The python server compressed its echoes too: 12-bit windows, its defaults.
    let mut answered = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut answered).unwrap();
    assert!(
        answered.starts_with("answered permessage-deflate"),
        "{answered}"
    );
    assert!(answered.contains("client_max_window_bits=12"), "{answered}");
    handle.stop().wait().unwrap();
    let status = peer.wait().unwrap();
    assert!(status.success());
}

/// 1 GiB of zeros as one raw-deflate stream (about 1 MiB): the first MiB compressed, then
/// the second MiB's blocks repeated (each starts on a byte after a sync flush and refers
/// back only to zeros).
fn bomb() -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut engine = Compress::new(Compression::best(), false);
    let zeros = vec![0u8; 1 << 20];
    let mut first = Vec::with_capacity(64 * 1024);
    engine
        .compress_vec(&zeros, &mut first, FlushCompress::Sync)
        .unwrap();
    let mut repeated = Vec::with_capacity(64 * 1024);
    engine
        .compress_vec(&zeros, &mut repeated, FlushCompress::Sync)
        .unwrap();
    let mut bomb = first;
    for _ in 1..1024 {
        bomb.extend_from_slice(&repeated);
    }
    bomb
}

#[test]
fn a_decompression_bomb_is_refused_with_1009_while_it_inflates_and_others_go_on() {
    let (server, echo) = compressing_echo_server();
    let (bystander, bystander_handle) = sender_to(server.local_addr());
    let (mut stream, head) = util::raw_upgrade(server.local_addr(), "permessage-deflate");
    assert!(
        head.contains("sec-websocket-extensions: permessage-deflate"),
        "{head}"
    );
    let bomb = bomb();
    assert!(bomb.len() < 2 << 20, "{} bytes", bomb.len());
    let started = std::time::Instant::now();
    // FIN | RSV1 | binary. The server closes with 1009 as soon as the output passes 16 MiB,
    // and may stop reading before the whole frame is in: write from another thread.
    let writer = std::thread::spawn({
        let mut stream = stream.try_clone().unwrap();
        move || {
            let _ = stream.write_all(&util::frame(0xc2, &bomb));
        }
    });
    assert_eq!(util::close_code(&mut stream), 1009);
    assert!(started.elapsed() < Duration::from_secs(10));
    let _ = writer.join();
    drop(stream);
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        echo.closes
            .lock()
            .unwrap()
            .iter()
            .any(|(code, _)| *code == 1009)
    }));
    assert!(
        ark_testkit::wait_until(Duration::from_secs(20), || {
            bystander.received.lock().unwrap().len() == messages().len()
        }),
        "the other session went on"
    );
    bystander_handle.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

/// A compressing client of the server at `addr` that sends `messages()`, and its handle.
fn sender_to(addr: SocketAddr) -> (Sender, ark_ws::WsClientHandle) {
    let sender = Sender::default();
    let handle = WsClient::builder()
        .deflate(DeflateConfig::default())
        .connect(&format!("ws://{addr}/"), sender.clone())
        .unwrap();
    (sender, handle)
}

#[test]
fn frames_that_break_the_compression_rules_fail_with_their_codes() {
    let (server, _) = compressing_echo_server();
    let addr = server.local_addr();
    let cases: [(&str, Vec<u8>, u16); 4] = [
        (
            "RSV1 on a continuation",
            [
                util::frame(0x42, b"\x02\x00"),
                util::frame(0xc0, b"\x02\x00"),
            ]
            .concat(),
            1002,
        ),
        (
            "a new message inside a compressed one",
            [
                util::frame(0x42, b"\x02\x00"),
                util::frame(0xc2, b"\x02\x00"),
            ]
            .concat(),
            1002,
        ),
        ("not deflate data", util::frame(0xc2, &[0xff; 16]), 1007),
        ("RSV1 on a ping", util::frame(0xc9, b""), 1002),
    ];
    for (why, bytes, code) in cases {
        let (mut stream, _) = util::raw_upgrade(addr, "permessage-deflate");
        stream.write_all(&bytes).unwrap();
        assert_eq!(util::close_code(&mut stream), code, "{why}");
    }
    // Without the extension agreed, RSV1 is a protocol error.
    let (mut stream, head) = util::raw_upgrade(addr, "x-unknown");
    assert!(!head.contains("sec-websocket-extensions"), "{head}");
    stream.write_all(&util::frame(0xc2, b"\x02\x00")).unwrap();
    assert_eq!(util::close_code(&mut stream), 1002);
    drop(stream);
    server.stop().wait().unwrap();
}
