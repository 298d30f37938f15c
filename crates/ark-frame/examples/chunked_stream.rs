//! Run with `cargo run --release -p ark-frame --example chunked_stream`.
//!
//! Encodes a few messages with each codec, feeds the stream back in awkward chunk sizes, and
//! prints what the reader delivered and how much memory it held.

use ark_frame::{ArkDgram, Decoder, Delimiter, Encoder, FrameReader, LengthPrefix};

fn demo<C: Decoder + Encoder + Clone>(name: &str, codec: C, messages: &[&[u8]]) {
    let mut wire = Vec::new();
    for m in messages {
        codec.encode(m, &mut wire).expect("message fits the codec");
    }
    let mut reader = FrameReader::new(codec);
    let mut delivered = 0;
    let mut peak = 0;
    for chunk in wire.chunks(3) {
        reader
            .feed(chunk, |frame: &[u8]| {
                assert_eq!(frame, messages[delivered]);
                delivered += 1;
            })
            .expect("well-formed stream");
        peak = peak.max(reader.held_bytes());
    }
    reader.release();
    println!(
        "{name:>14}: {} wire bytes in 3-byte chunks -> {delivered} messages; buffer peak {peak} B, idle {} B",
        wire.len(),
        reader.held_bytes()
    );
}

fn main() {
    let messages: [&[u8]; 3] = [b"hello", b"", b"a somewhat longer message"];
    demo("length prefix", LengthPrefix::default(), &messages);
    demo("ArkDgram", ArkDgram::new(), &messages);
    demo(
        "delimiter",
        Delimiter::new(b"\r\n").expect("non-empty"),
        &messages,
    );
}
