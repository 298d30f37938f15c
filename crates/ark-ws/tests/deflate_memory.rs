//! Memory held per session with permessage-deflate, measured and printed (docs/ws.md
//! "Compression" quotes it). Its own test binary: the counting allocator sees every thread.
//! Cargo feature `deflate`.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use ark_ws::{DeflateConfig, WsServer};

#[global_allocator]
static GLOBAL: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;

/// Live heap bytes per session of `sessions` raw clients of a server with `server` settings:
/// (after the upgrade, idle; after each sent one compressed 4 KiB message and got its echo).
/// The raw clients offer `offer` and compress with a fresh context per message.
fn held_per_session(server: Option<DeflateConfig>, offer: &str) -> (f64, f64) {
    const SESSIONS: usize = 40;
    let mut builder = WsServer::builder().bind("127.0.0.1:0");
    if let Some(config) = server {
        builder = builder.deflate(config);
    }
    let server = builder.start(|_| util::Echo::default()).unwrap();
    let settle = || std::thread::sleep(Duration::from_millis(300));
    settle();
    let before = ark_testkit::live_bytes();
    let mut streams: Vec<TcpStream> = (0..SESSIONS)
        .map(|_| util::raw_upgrade(server.local_addr(), offer).0)
        .collect();
    settle();
    let idle = (ark_testkit::live_bytes() - before) as f64 / SESSIONS as f64;
    let text: Vec<u8> = (0..4096u32).map(|i| b'a' + (i % 23) as u8).collect();
    let compressed = {
        use flate2::{Compress, Compression, FlushCompress};
        let mut engine = Compress::new(Compression::fast(), false);
        let mut out = Vec::with_capacity(8192);
        engine
            .compress_vec(&text, &mut out, FlushCompress::Sync)
            .unwrap();
        out.truncate(out.len() - 4);
        out
    };
    for stream in &mut streams {
        let first = if offer.contains("permessage-deflate") {
            0xc1
        } else {
            0x81
        };
        let payload = if first == 0xc1 { &compressed } else { &text };
        stream.write_all(&util::frame(first, payload)).unwrap();
        let mut head = [0u8; 2];
        std::io::Read::read_exact(stream, &mut head).unwrap();
        let len = match head[1] & 0x7f {
            126 => {
                let mut ext = [0u8; 2];
                std::io::Read::read_exact(stream, &mut ext).unwrap();
                usize::from(u16::from_be_bytes(ext))
            }
            len => usize::from(len),
        };
        let mut echo = vec![0u8; len];
        std::io::Read::read_exact(stream, &mut echo).unwrap();
    }
    settle();
    let active = (ark_testkit::live_bytes() - before) as f64 / SESSIONS as f64;
    drop(streams);
    server.stop().wait().unwrap();
    (idle, active)
}

/// Memory per session, measured and printed (docs/ws.md quotes it); the assertions are
/// regression bounds. Compression negotiated but unused holds no engine; with context
/// takeover a used direction keeps its engine; without, it goes at the end of the turn.
#[test]
fn memory_held_per_session_with_compression_is_bounded() {
    let plain = held_per_session(None, "none");
    let takeover = held_per_session(Some(DeflateConfig::default()), "permessage-deflate");
    let none = DeflateConfig {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        ..DeflateConfig::default()
    };
    let without = held_per_session(Some(none), "permessage-deflate");
    let small = DeflateConfig {
        server_max_window_bits: 10,
        ..DeflateConfig::default()
    };
    let windowed = held_per_session(Some(small), "permessage-deflate; client_max_window_bits=10");
    for (name, (idle, active)) in [
        ("no compression", plain),
        ("deflate, context takeover", takeover),
        ("deflate, no context takeover", without),
        ("deflate, 10-bit windows", windowed),
    ] {
        println!("{name}: {idle:.0} B per idle session, {active:.0} B after a message each");
    }
    assert!(
        takeover.0 < plain.0 + 1024.0,
        "negotiated, unused: {takeover:?} vs {plain:?}"
    );
    assert!(
        without.1 < plain.1 + 16.0 * 1024.0,
        "no context takeover: {without:?} vs {plain:?}"
    );
    assert!(
        takeover.1 < plain.1 + 512.0 * 1024.0,
        "context takeover: {takeover:?}"
    );
    assert!(
        windowed.1 < takeover.1,
        "smaller windows hold less: {windowed:?} vs {takeover:?}"
    );
}
