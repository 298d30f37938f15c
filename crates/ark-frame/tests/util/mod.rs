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
/// Checks on the way that `feed_mut` delivers the same frames, even when each lent frame is
/// overwritten before the next (a frame decoded in place never disturbs the ones after it).
pub fn decode_chunked<D: Decoder + Clone>(
    decoder: D,
    wire: &[u8],
    chunks: &[usize],
) -> Vec<Vec<u8>> {
    let frames = decode_chunked_with(decoder.clone(), wire, chunks, |reader, input, frames| {
        reader.feed(input, |f: &[u8]| frames.push(f.to_vec()))
    });
    let lent_mutably = decode_chunked_with(decoder, wire, chunks, |reader, input, frames| {
        reader.feed_mut(&mut input.to_vec(), |f: &mut [u8]| {
            frames.push(f.to_vec());
            f.fill(0xEE);
        })
    });
    assert_eq!(lent_mutably, frames, "feed_mut delivers what feed does");
    frames
}

fn decode_chunked_with<D: Decoder>(
    decoder: D,
    wire: &[u8],
    chunks: &[usize],
    mut feed: impl FnMut(
        &mut FrameReader<D>,
        &[u8],
        &mut Vec<Vec<u8>>,
    ) -> Result<ark_frame::Feed, ark_frame::DecodeError>,
) -> Vec<Vec<u8>> {
    let mut reader = FrameReader::new(decoder);
    let mut frames = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < wire.len() {
        let n = chunks[i % chunks.len()].max(1).min(wire.len() - pos);
        i += 1;
        feed(&mut reader, &wire[pos..pos + n], &mut frames).expect("valid stream");
        pos += n;
    }
    assert_eq!(
        reader.buffered_len(),
        0,
        "a whole stream leaves nothing buffered"
    );
    frames
}
