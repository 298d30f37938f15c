//! Every decoder behind a `FrameReader`, fed random bytes in random chunks with random
//! pauses: no panic, and exactly the frames (or the error) that decoding the whole input in
//! one piece gives.
#![no_main]

use ark_frame::{
    ArkDgram, Decoder, Delimiter, Endian, ExactSize, Feed, Flow, FrameReader, LengthPrefix,
    PrefixWidth, Raw,
};
use libfuzzer_sys::fuzz_target;

/// Decodes `stream` fed in chunks whose sizes come from `sizes`, pausing where `pauses` says.
/// Returns the frames and whether the stream ended with an error.
fn decode<D: Decoder + Clone>(
    decoder: &D,
    stream: &[u8],
    sizes: &[u8],
    pauses: u8,
) -> (Vec<Vec<u8>>, bool) {
    let mut reader = FrameReader::new(decoder.clone());
    let mut frames = Vec::new();
    let mut pos = 0;
    let mut step = 0usize;
    while pos < stream.len() {
        let size = sizes
            .get(step % sizes.len().max(1))
            .map_or(stream.len(), |&s| usize::from(s).max(1) * 7);
        let end = (pos + size).min(stream.len());
        step += 1;
        let mut count = 0u32;
        let mut on_frame = |frame: &[u8]| {
            frames.push(frame.to_vec());
            count += 1;
            if pauses != 0 && count % u32::from(pauses) == 0 {
                Flow::Pause
            } else {
                Flow::Continue
            }
        };
        let mut result = reader.feed(&stream[pos..end], &mut on_frame);
        // A paused reader is resumed until drained before more input comes (as a transport
        // under backpressure stops reading); `PausedFull` must then never appear.
        while let Ok(Feed::Paused) = result {
            result = reader.resume(&mut on_frame);
        }
        match result {
            Ok(_) => pos = end,
            Err(e) => {
                assert!(e.ends_stream(), "{e}");
                return (frames, true);
            }
        }
    }
    (frames, false)
}

/// Splits `data` into chunk sizes, a pause rhythm and the stream.
fn parts(data: &[u8]) -> (&[u8], u8, &[u8]) {
    let split = data.len().min(usize::from(data.first().copied().unwrap_or(0) % 16));
    let (sizes, stream) = data.split_at(split);
    (sizes, data.get(1).copied().unwrap_or(0) % 4, stream)
}

/// `Raw` hands out what each chunk brings: chunking changes the frames by design, but their
/// bytes, in order, are the stream.
fn check_raw(max: usize, data: &[u8]) {
    let (sizes, pauses, stream) = parts(data);
    let (frames, failed) = decode(&Raw::new().with_max_frame_len(max), stream, sizes, pauses);
    assert!(!failed, "raw framing never fails");
    assert_eq!(frames.concat(), stream);
    assert!(frames.iter().all(|f| f.len() <= max.max(1)));
}

fn check<D: Decoder + Clone>(decoder: D, data: &[u8]) {
    let (sizes, pauses, stream) = parts(data);
    let (whole, whole_failed) = decode(&decoder, stream, &[], 0);
    let (chunked, chunked_failed) = decode(&decoder, stream, sizes, pauses);
    if !whole_failed && !chunked_failed {
        assert_eq!(whole, chunked, "chunking changed the frames");
    }
    // An error may be found at a different point, but the frames before it agree.
    let common = whole.len().min(chunked.len());
    assert_eq!(whole[..common], chunked[..common]);
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, data)) = data.split_first() else {
        return;
    };
    let max = 64 + usize::from(selector) * 13;
    match selector % 8 {
        0 => check(LengthPrefix::new(PrefixWidth::U8, Endian::Big).with_max_frame_len(max), data),
        1 => check(LengthPrefix::new(PrefixWidth::U16, Endian::Little).with_max_frame_len(max), data),
        2 => check(LengthPrefix::new(PrefixWidth::U32, Endian::Big).with_max_frame_len(max), data),
        3 => check(LengthPrefix::new(PrefixWidth::U64, Endian::Little).with_max_frame_len(max), data),
        4 => check(ArkDgram::default().with_max_frame_len(max), data),
        5 => check(Delimiter::new(b"\r\n").unwrap().with_max_frame_len(max), data),
        6 => check(ExactSize::new(1 + usize::from(selector) % 50).unwrap(), data),
        _ => check_raw(max, data),
    }
});
