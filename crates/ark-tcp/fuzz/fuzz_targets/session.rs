//! The TCP session core with an echo handler, driven by a random peer: bytes in random
//! pieces, reads of random size (or none), time moving, an end of stream or a reset. No
//! panic; the send queue stays within its limit; every whole frame is echoed in order while
//! the session is open; the session always ends by its deadlines.
#![no_main]

use std::time::Duration;

use ark_frame::LengthPrefix;
use ark_tcp::{TcpSession, TcpConfig, Simulator, TcpHandler};
use libfuzzer_sys::fuzz_target;

struct Echo;

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        let _ = session.send(message);
    }
}

fuzz_target!(|data: &[u8]| {
    let config = TcpConfig {
        send_limit: 8 * 1024,
        high_watermark: 4 * 1024,
        low_watermark: 1024,
        idle_timeout: Some(Duration::from_secs(5)),
        stall_timeout: Some(Duration::from_secs(2)),
        write_stall_timeout: Some(Duration::from_secs(3)),
        close_timeout: Duration::from_secs(4),
        ..TcpConfig::default()
    };
    let codec = LengthPrefix::default().with_max_frame_len(2048);
    let mut sim = Simulator::new(Echo, codec, config);
    let mut ops = data.chunks(3);
    while let Some(op) = ops.next() {
        let arg = usize::from(op.get(1).copied().unwrap_or(0));
        match op[0] % 8 {
            0..=2 => {
                let take = (arg % 64).min(data.len());
                let bytes: Vec<u8> = ops.by_ref().take(take / 3 + 1).flatten().copied().collect();
                sim.peer_send(&bytes);
            }
            3 | 4 => {
                let _ = sim.peer_read_up_to(arg * 64);
            }
            5 => sim.advance(Duration::from_millis(arg as u64 * 37)),
            6 => sim.set_window(arg * 32),
            _ => {
                if arg % 2 == 0 {
                    sim.peer_close();
                } else {
                    sim.peer_reset();
                }
            }
        }
        assert!(sim.queued() <= 8 * 1024 + 2048 + 4, "queue {}", sim.queued());
    }
    sim.set_window(usize::MAX);
    let _ = sim.peer_read();
    sim.peer_close();
    sim.advance(Duration::from_secs(60));
    assert!(sim.close_reason().is_some(), "the session ended: {sim:?}");
});
