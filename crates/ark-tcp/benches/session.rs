//! Per-message cost of a TCP session's core, without a socket: ark-tcp's `Simulator` feeds a
//! read of 16 length-prefixed frames to the same core the driver runs (the lending receive
//! path), the handler answers each, and the session's writes are taken. Two handlers: one
//! echoes each frame (sent back from the input by reference, then copied once), one answers
//! with a payload of its own (framed by `queue_frame` into the send queue). The simulator's
//! own pipe copies (into its inbound buffer, out of its outbound one) are included.
//! `cargo bench -p ark-tcp`.

use std::hint::black_box;

use ark_frame::{Encoder, LengthPrefix};
use ark_tcp::{Simulator, TcpConfig, TcpHandler, TcpSession};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const FRAMES: usize = 16;

/// Sends every message back unchanged.
struct Echo;

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        session.send(message).expect("room for the echo");
    }
}

/// Answers every message with a payload of the same length of its own.
struct Answer(Vec<u8>);

impl TcpHandler for Answer {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        session
            .send(&self.0[..message.len()])
            .expect("room for the answer");
    }
}

fn wire(payload: usize) -> Vec<u8> {
    let body = vec![0x5a; payload];
    let mut wire = Vec::new();
    for _ in 0..FRAMES {
        LengthPrefix::default()
            .encode(&body, &mut wire)
            .expect("encodes");
    }
    wire
}

/// One read of `wire` in, the answers out: what a turn of the driver does for a window.
fn exchange<H: TcpHandler>(sim: &mut Simulator<LengthPrefix, H>, wire: &[u8]) {
    sim.peer_send(black_box(wire));
    let out = sim.peer_read();
    assert_eq!(out.len(), wire.len(), "every frame answered");
}

fn echo(c: &mut Criterion) {
    let mut group = c.benchmark_group("tcp_session_echo");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for payload in [64, 1024] {
        let wire = wire(payload);
        let mut sim = Simulator::with_handler(Echo, TcpConfig::default());
        group.bench_with_input(BenchmarkId::from_parameter(payload), &wire, |b, wire| {
            b.iter(|| exchange(&mut sim, wire));
        });
    }
    group.finish();
}

fn answer(c: &mut Criterion) {
    let mut group = c.benchmark_group("tcp_session_answer");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for payload in [64, 1024] {
        let wire = wire(payload);
        let handler = Answer(vec![0xa5; payload]);
        let mut sim = Simulator::with_handler(handler, TcpConfig::default());
        group.bench_with_input(BenchmarkId::from_parameter(payload), &wire, |b, wire| {
            b.iter(|| exchange(&mut sim, wire));
        });
    }
    group.finish();
}

criterion_group!(benches, echo, answer);
criterion_main!(benches);
