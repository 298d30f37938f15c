//! The WebSocket server's frame path: random bytes (after a valid upgrade, or instead of
//! one) in random chunks into the server's session, with an echo handler, over ark-tcp's
//! simulated session. No panic, in debug assertions too; what the server writes stays within
//! its limits; the session ends by its deadlines.
#![no_main]

use std::time::Duration;

use ark_frame::Raw;
use ark_tcp::Simulator;
use ark_ws::{Message, WsConfig, WsHandler, WsSession};
use libfuzzer_sys::fuzz_target;

const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";

struct Echo;

impl WsHandler for Echo {
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        let _ = session.send(message);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, data)) = data.split_first() else {
        return;
    };
    let config = WsConfig {
        max_message: 64 * 1024,
        max_frame: 16 * 1024,
        write_buffer_limit: 128 * 1024,
        ..WsConfig::default()
    };
    let limit = config.write_buffer_limit + config.max_frame + 64 * 1024;
    let (handler, session) = ark_ws::fuzzing::server(config, Echo);
    let mut sim = Simulator::new(handler, Raw::new().with_max_frame_len(64 * 1024), session);
    sim.set_window(usize::from(selector) * 512 + 1);
    if selector % 2 == 0 {
        sim.peer_send(UPGRADE);
    }
    let chunk = usize::from(selector / 2 % 64) + 1;
    for piece in data.chunks(chunk) {
        sim.peer_send(piece);
        assert!(sim.queued() <= limit, "queue {} over {limit}", sim.queued());
        if selector % 3 == 0 {
            let _ = sim.peer_read();
        }
    }
    let _ = sim.peer_read();
    sim.peer_close();
    sim.advance(Duration::from_secs(120));
    let _ = sim.peer_read();
    assert!(sim.close_reason().is_some(), "the session ended: {sim:?}");
});
