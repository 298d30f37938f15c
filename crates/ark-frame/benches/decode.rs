//! Per-frame cost of the receive path: `FrameReader::feed` over a read of 16 length-prefixed
//! frames (the transports' window of 16), whole in the read or cut so that every read ends
//! mid-frame. `cargo bench -p ark-frame`; criterion reports time per read and, through its
//! throughput, per frame.

use std::hint::black_box;

use ark_frame::{Encoder, Flow, FrameReader, LengthPrefix};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const FRAMES: usize = 16;

fn wire(payload: usize) -> Vec<u8> {
    let codec = LengthPrefix::default();
    let body = vec![0x5a; payload];
    let mut wire = Vec::new();
    for _ in 0..FRAMES {
        codec.encode(&body, &mut wire).expect("encodes");
    }
    wire
}

fn whole_reads(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame_reader_feed_whole");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for payload in [64, 1024, 16 * 1024] {
        let wire = wire(payload);
        let mut reader = FrameReader::new(LengthPrefix::default());
        group.bench_with_input(BenchmarkId::from_parameter(payload), &wire, |b, wire| {
            b.iter(|| {
                let mut bytes = 0;
                reader
                    .feed(black_box(wire), |frame: &[u8]| {
                        bytes += frame.len();
                        Flow::Continue
                    })
                    .expect("decodes");
                assert_eq!(bytes, FRAMES * payload);
            });
        });
    }
    group.finish();
}

fn split_reads(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame_reader_feed_split");
    group.throughput(Throughput::Elements(FRAMES as u64));
    for payload in [64, 1024] {
        let wire = wire(payload);
        // Three reads, none ending on a frame boundary: the partial frames are kept.
        let cut = [wire.len() / 3 + 1, 2 * wire.len() / 3 + 1];
        let mut reader = FrameReader::new(LengthPrefix::default());
        group.bench_with_input(BenchmarkId::from_parameter(payload), &wire, |b, wire| {
            b.iter(|| {
                let mut frames = 0;
                for part in [&wire[..cut[0]], &wire[cut[0]..cut[1]], &wire[cut[1]..]] {
                    reader
                        .feed(black_box(part), |_: &[u8]| {
                            frames += 1;
                            Flow::Continue
                        })
                        .expect("decodes");
                }
                assert_eq!(frames, FRAMES);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, whole_reads, split_reads);
criterion_main!(benches);
