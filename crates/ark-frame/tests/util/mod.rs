//! Helpers shared by the ark-frame integration tests.
#![allow(dead_code)]

use ark_frame::{Decoder, Encoder, FrameReader};

/// A deterministic payload of `len` bytes that differs per message `seq`.
pub fn payload(seq: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq.wrapping_mul(31).wrapping_add(i) % 251) as u8)
        .collect()
}

/// Encodes `messages` back to back with `codec`.
pub fn encode_all<E: Encoder>(codec: &E, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut wire = Vec::new();
    for m in messages {
        codec.encode(m, &mut wire).expect("encodable test message");
    }
    wire
}

/// Feeds `wire` to a fresh reader in the given chunk sizes (cycled), collecting the frames.
pub fn decode_chunked<D: Decoder>(decoder: D, wire: &[u8], chunks: &[usize]) -> Vec<Vec<u8>> {
    let mut reader = FrameReader::new(decoder);
    let mut frames = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < wire.len() {
        let n = chunks[i % chunks.len()].max(1).min(wire.len() - pos);
        i += 1;
        reader
            .feed(&wire[pos..pos + n], |f: &[u8]| frames.push(f.to_vec()))
            .expect("valid stream");
        pos += n;
    }
    assert_eq!(
        reader.buffered_len(),
        0,
        "a whole stream leaves nothing buffered"
    );
    frames
}
