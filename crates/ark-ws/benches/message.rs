//! Per-message cost of a WebSocket server session, without a socket: ark-tcp's `Simulator`
//! runs the same server connection `WsServer` runs (`ark_ws::fuzzing::server`) over a read
//! of 16 masked binary frames from a client; the handler receives each where it is lent
//! (`on_data`) and sends it back (`send_binary`), as the loopback benchmark's echo does. The
//! simulator's own pipe copies are included. `cargo bench -p ark-ws`.

use std::hint::black_box;

use ark_frame::Raw;
use ark_tcp::Simulator;
use ark_ws::{ReceivedData, WsConfig, WsHandler, WsSession};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};

const FRAMES: usize = 16;
const UPGRADE: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
const MASK: [u8; 4] = [0xa1, 0x02, 0xf3, 0x44];

/// Sends every data message back where it is lent.
struct Echo;

impl WsHandler for Echo {
    fn on_message(&mut self, _: &mut WsSession<'_>, _: ark_ws::Message) {
        unreachable!("data messages arrive through on_data");
    }
    fn on_data(&mut self, session: &mut WsSession<'_>, data: ReceivedData<'_>) {
        session
            .send_binary(data.bytes())
            .expect("room for the echo");
    }
}

/// `FRAMES` masked binary frames of `payload` bytes, as a client sends them.
fn client_frames(payload: usize) -> Vec<u8> {
    let header = FrameHeader {
        is_final: true,
        rsv1: false,
        rsv2: false,
        rsv3: false,
        opcode: OpCode::Data(Data::Binary),
        mask: Some(MASK),
    };
    let mut out = Vec::new();
    for _ in 0..FRAMES {
        header.format(payload as u64, &mut out).expect("formats");
        out.extend((0..payload).map(|i| 0x5a ^ MASK[i % 4]));
    }
    out
}

fn echo(c: &mut Criterion) {
    let mut group = c.benchmark_group("ws_server_echo");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for payload in [64, 1024] {
        let wire = client_frames(payload);
        let (handler, session) = ark_ws::fuzzing::server(WsConfig::default(), Echo);
        let mut sim = Simulator::new(handler, Raw::new(), session);
        sim.peer_send(UPGRADE);
        let answer = sim.peer_read();
        assert!(answer.starts_with(b"HTTP/1.1 101"), "upgraded");
        // The server's frames are unmasked: 4 bytes of mask less per frame.
        let expected = wire.len() - 4 * FRAMES;
        group.bench_with_input(BenchmarkId::from_parameter(payload), &wire, |b, wire| {
            b.iter(|| {
                sim.peer_send(black_box(wire));
                let out = sim.peer_read();
                assert_eq!(out.len(), expected, "every message echoed");
            });
        });
    }
    group.finish();
}

criterion_group!(benches, echo);
criterion_main!(benches);
