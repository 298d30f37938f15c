//! Zero allocations per message, counted by a global allocator for the test's own thread only
//! (the harness's threads may allocate meanwhile). This file is its own test binary.

use ark_frame::{ArkDgram, Decoder, Delimiter, Encoder, FrameReader, LengthPrefix};

#[global_allocator]
static GLOBAL: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;

const MESSAGES: usize = 100_000;

/// Feeds `MESSAGES` frames of `body` bytes (one stream, `wire` repeated) in `block`-byte
/// blocks after a warm-up pass, and returns the allocations made during the measured pass.
fn allocations_while_decoding<C: Decoder + Encoder + Clone>(
    codec: C,
    body: usize,
    block: usize,
) -> u64 {
    // One batch of 100 frames; the batch repeats, so the stream is seamless.
    let batch: Vec<u8> = {
        let mut wire = Vec::new();
        for i in 0..100 {
            let msg: Vec<u8> = (0..body).map(|j| b'a' + ((i + j) % 26) as u8).collect();
            codec.encode(&msg, &mut wire).unwrap();
        }
        wire
    };
    let mut reader = FrameReader::new(codec);
    let mut frames = 0usize;
    let mut checksum = 0u64;
    let mut run = |reader: &mut FrameReader<C>, batches: usize| {
        let stream_len = batch.len() * batches;
        let mut pos = 0;
        while pos < stream_len {
            let start = pos % batch.len();
            let n = block.min(batch.len() - start).min(stream_len - pos);
            reader
                .feed(&batch[start..start + n], |f: &[u8]| {
                    frames += 1;
                    checksum = checksum.wrapping_add(u64::from(f[0]) + f.len() as u64);
                })
                .unwrap();
            pos += n;
        }
    };
    run(&mut reader, 10); // warm-up: buffers reach their steady size
    let before = ark_testkit::thread_allocations();
    run(&mut reader, MESSAGES / 100);
    let after = ark_testkit::thread_allocations();
    assert_eq!(frames, MESSAGES + 1000);
    assert!(checksum > 0);
    after - before
}

#[test]
fn zero_allocations_per_message() {
    for block in [65_536, 64] {
        assert_eq!(
            allocations_while_decoding(LengthPrefix::default(), 1024, block),
            0,
            "4-byte prefix, 1 KiB, block {block}"
        );
        assert_eq!(
            allocations_while_decoding(ArkDgram::new(), 1024, block),
            0,
            "ArkDgram, 1 KiB, block {block}"
        );
        assert_eq!(
            allocations_while_decoding(Delimiter::new(b"\n").unwrap(), 1024, block),
            0,
            "delimiter, 1 KiB, block {block}"
        );
    }
    // Frames larger than the 4 KiB initial buffer: it grows once, then stays.
    assert_eq!(
        allocations_while_decoding(LengthPrefix::default(), 4096, 65_536),
        0,
        "4 KiB bodies"
    );
    assert_eq!(
        allocations_while_decoding(LengthPrefix::default(), 4096, 1),
        0,
        "4 KiB bodies, bytewise"
    );
}
