//! `FrameReader` over every codec: chunking invariance, pause/resume, errors, direct reads.

mod util;

use ark_frame::{
    ArkDgram, DecodeError, Decoder, Delimiter, Encoder, Endian, ExactSize, Feed, Flow, FrameReader,
    LengthPrefix, PrefixWidth, Raw,
};
use proptest::prelude::*;
use util::{decode_chunked, encode_all, payload};

/// Messages of varied sizes that every length-carrying codec can frame.
fn mixed_messages(count: usize, max_len: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| payload(i, (i * 37 + i * i) % (max_len + 1)))
        .collect()
}

/// Checks that every block size from 1 byte to the whole stream yields the same frames.
fn every_block_size<C: Decoder + Encoder + Clone>(codec: C, messages: &[Vec<u8>]) {
    let wire = encode_all(&codec, messages);
    for block in 1..=wire.len() {
        let frames = decode_chunked(codec.clone(), &wire, &[block]);
        assert_eq!(frames, messages, "block size {block}");
    }
}

#[test]
fn every_block_size_length_prefix() {
    let messages = mixed_messages(60, 300);
    every_block_size(LengthPrefix::default(), &messages);
    every_block_size(
        LengthPrefix::new(PrefixWidth::U16, Endian::Little),
        &messages,
    );
    every_block_size(LengthPrefix::new(PrefixWidth::U64, Endian::Big), &messages);
}

#[test]
fn every_block_size_ark_dgram() {
    let mut messages = mixed_messages(40, 300);
    messages.push(payload(1, 70_000)); // 8-byte length form
    messages.push(Vec::new());
    let wire = encode_all(&ArkDgram::new(), &messages);
    // Every block size up to 1 KiB, then coarser steps to the whole stream.
    let blocks = (1..=1024)
        .chain((1025..=wire.len()).step_by(997))
        .chain([wire.len()]);
    for block in blocks {
        assert_eq!(
            decode_chunked(ArkDgram::new(), &wire, &[block]),
            messages,
            "block {block}"
        );
    }
}

#[test]
fn every_block_size_delimiter() {
    let messages: Vec<Vec<u8>> = (0..50)
        .map(|i| {
            (0..(i * 7) % 90)
                .map(|j| b'a' + ((i + j) % 26) as u8)
                .collect()
        })
        .collect();
    every_block_size(Delimiter::new(b"\r\n").unwrap(), &messages);
    every_block_size(Delimiter::new(b"\n").unwrap(), &messages);
}

#[test]
fn every_block_size_exact() {
    let messages: Vec<Vec<u8>> = (0..50).map(|i| payload(i, 13)).collect();
    every_block_size(ExactSize::new(13).unwrap(), &messages);
}

#[test]
fn raw_delivers_each_chunk() {
    let mut reader = FrameReader::new(Raw::new());
    let mut got = Vec::new();
    for chunk in [&b"abc"[..], b"de", b"f"] {
        reader.feed(chunk, |f: &[u8]| got.push(f.to_vec())).unwrap();
    }
    assert_eq!(got, [b"abc".to_vec(), b"de".to_vec(), b"f".to_vec()]);
    assert_eq!(reader.held_bytes(), 0, "raw never buffers");
}

#[test]
fn pause_keeps_the_rest_and_resume_delivers_it() {
    let messages = mixed_messages(20, 100);
    let wire = encode_all(&LengthPrefix::default(), &messages);
    let mut reader = FrameReader::new(LengthPrefix::default());
    let mut got = Vec::new();
    // Pause after every third frame, feeding in 50-byte chunks.
    let mut status = Feed::Drained;
    for chunk in wire.chunks(50) {
        while status == Feed::Paused {
            status = reader
                .resume(|f: &[u8]| {
                    got.push(f.to_vec());
                    if got.len() % 3 == 0 {
                        Flow::Pause
                    } else {
                        Flow::Continue
                    }
                })
                .unwrap();
        }
        status = reader
            .feed(chunk, |f: &[u8]| {
                got.push(f.to_vec());
                if got.len() % 3 == 0 {
                    Flow::Pause
                } else {
                    Flow::Continue
                }
            })
            .unwrap();
    }
    while status == Feed::Paused {
        status = reader.resume(|f: &[u8]| got.push(f.to_vec())).unwrap();
    }
    assert_eq!(got, messages);
    assert_eq!(reader.buffered_len(), 0);
}

#[test]
fn lent_mutably_pause_keeps_the_rest_and_resume_mut_delivers_it() {
    let messages = mixed_messages(20, 100);
    let wire = encode_all(&LengthPrefix::default(), &messages);
    let mut reader = FrameReader::new(LengthPrefix::default());
    let mut got = Vec::new();
    // Each frame is overwritten where it is lent; pause after every third one.
    let mut take = |f: &mut [u8]| {
        got.push(f.to_vec());
        f.fill(0);
        if got.len() % 3 == 0 {
            Flow::Pause
        } else {
            Flow::Continue
        }
    };
    let mut status = Feed::Drained;
    for chunk in wire.chunks(50) {
        while status == Feed::Paused {
            status = reader.resume_mut(&mut take).unwrap();
        }
        status = reader.feed_mut(&mut chunk.to_vec(), &mut take).unwrap();
    }
    while status == Feed::Paused {
        status = reader.resume_mut(&mut take).unwrap();
    }
    assert_eq!(got, messages);
    assert_eq!(reader.buffered_len(), 0);
}

#[test]
fn pause_with_control_flow() {
    let wire = encode_all(&LengthPrefix::default(), &[b"a".to_vec(), b"b".to_vec()]);
    let mut reader = FrameReader::new(LengthPrefix::default());
    let mut got = Vec::new();
    let status = reader
        .feed(&wire, |f: &[u8]| {
            got.push(f.to_vec());
            std::ops::ControlFlow::Break(())
        })
        .unwrap();
    assert_eq!(status, Feed::Paused);
    assert_eq!(got, [b"a".to_vec()]);
    assert_eq!(
        reader.buffered_len(),
        5,
        "the second frame is kept, not lost"
    );
    assert_eq!(
        reader.resume(|f: &[u8]| got.push(f.to_vec())).unwrap(),
        Feed::Drained
    );
    assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn a_decode_error_ends_the_stream_with_the_same_error() {
    let mut reader = FrameReader::new(LengthPrefix::default().with_max_frame_len(100));
    let mut wire = encode_all(&LengthPrefix::default(), &[b"ok".to_vec()]);
    wire.extend_from_slice(&101u32.to_be_bytes());
    let mut got = 0;
    let err = reader.feed(&wire, |_: &[u8]| got += 1).unwrap_err();
    assert_eq!(got, 1, "frames before the bad header are delivered");
    assert_eq!(err, DecodeError::TooLarge { len: 101, max: 100 });
    assert_eq!(reader.feed(b"more", |_: &[u8]| got += 1).unwrap_err(), err);
    assert_eq!(reader.buffered_len(), 0);
    reader.reset();
    reader
        .feed(
            &encode_all(&LengthPrefix::default(), &[b"x".to_vec()]),
            |_: &[u8]| got += 1,
        )
        .unwrap();
    assert_eq!(got, 2);
}

#[test]
fn an_error_in_a_buffered_header_is_reported() {
    let mut reader = FrameReader::new(ArkDgram::new());
    reader.feed(&[254], |_: &[u8]| ()).unwrap();
    reader.feed(&[10], |_: &[u8]| ()).unwrap();
    let err = reader.feed(&[0], |_: &[u8]| ()).unwrap_err();
    assert_eq!(
        err,
        DecodeError::NonMinimal {
            marker: 254,
            len: 10
        }
    );
}

#[test]
fn large_pending_frame_is_read_directly_into_a_buffer_that_grows_with_what_arrived() {
    let body = payload(7, 200_000);
    let wire = encode_all(&LengthPrefix::default(), &[body.clone(), b"next".to_vec()]);
    let mut reader = FrameReader::new(LengthPrefix::default());
    let mut got = Vec::new();
    reader
        .feed(&wire[..1000], |f: &[u8]| got.push(f.to_vec()))
        .unwrap();
    assert_eq!(reader.pending_remaining(), 200_004 - 1000);
    let mut pos = 1000;
    // Read into the spare region as a socket read would, in 64 KiB steps.
    while reader.pending_remaining() > 0 {
        let pending = reader.pending_remaining();
        let buffered = reader.buffered_len();
        let room = reader.spare_mut().unwrap().len();
        assert!(
            room >= pending.min(buffered.max(4096)) / 2,
            "room for more of the pending frame"
        );
        let held = reader.held_bytes();
        assert!(
            held <= 2 * (buffered + 4096),
            "{held} bytes held for {buffered} received: growth follows what arrived"
        );
        let spare = reader.spare_mut().unwrap();
        let n = spare.len().min(65_536).min(wire.len() - pos);
        spare[..n].copy_from_slice(&wire[pos..pos + n]);
        reader.commit(n);
        pos += n;
    }
    reader.feed(&[], |f: &[u8]| got.push(f.to_vec())).unwrap();
    reader
        .feed(&wire[pos..], |f: &[u8]| got.push(f.to_vec()))
        .unwrap();
    assert_eq!(got, [body, b"next".to_vec()]);
    // 200,004 bytes needed 256 KiB (4 KiB doubled); the frame used more than half of it.
    assert_eq!(reader.held_bytes(), 256 * 1024);
}

#[test]
fn capacity_is_bounded_by_the_decoders_largest_frame() {
    let codec = Delimiter::new(b"\n").unwrap().with_max_frame_len(100);
    let mut reader = FrameReader::new(codec);
    let err = reader.feed(&[b'x'; 101], |_: &[u8]| ()).unwrap_err();
    assert_eq!(err, DecodeError::DelimiterNotFound { limit: 100 });
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random message sizes and random chunkings yield exactly the encoded messages.
    #[test]
    fn random_sizes_and_chunkings(
        sizes in proptest::collection::vec(0usize..3000, 1..40),
        chunks in proptest::collection::vec(1usize..5000, 1..20),
    ) {
        let messages: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| payload(i, n)).collect();
        let wire = encode_all(&LengthPrefix::default(), &messages);
        prop_assert_eq!(&decode_chunked(LengthPrefix::default(), &wire, &chunks), &messages);
        let wire = encode_all(&ArkDgram::new(), &messages);
        prop_assert_eq!(&decode_chunked(ArkDgram::new(), &wire, &chunks), &messages);
        let wire = encode_all(&LengthPrefix::new(PrefixWidth::U16, Endian::Little), &messages);
        prop_assert_eq!(
            &decode_chunked(LengthPrefix::new(PrefixWidth::U16, Endian::Little), &wire, &chunks),
            &messages
        );
        let lines: Vec<Vec<u8>> = messages
            .iter()
            .map(|m| m.iter().map(|b| b'a' + b % 26).collect())
            .collect();
        let delim = Delimiter::new(b"\r\n").unwrap();
        let wire = encode_all(&delim, &lines);
        prop_assert_eq!(&decode_chunked(delim, &wire, &chunks), &lines);
    }

    /// Random bytes into every decoder, in random chunks, never panic: each chunk either
    /// decodes or ends the stream with a typed error.
    #[test]
    fn random_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        chunk in 1usize..600,
        max in 0usize..2000,
    ) {
        fn run<D: Decoder>(decoder: D, bytes: &[u8], chunk: usize) {
            let mut reader = FrameReader::new(decoder);
            for piece in bytes.chunks(chunk) {
                if reader.feed(piece, |f: &[u8]| assert!(f.len() <= bytes.len())).is_err() {
                    break;
                }
            }
        }
        run(LengthPrefix::default().with_max_frame_len(max), &bytes, chunk);
        run(LengthPrefix::new(PrefixWidth::U8, Endian::Little), &bytes, chunk);
        run(LengthPrefix::new(PrefixWidth::U64, Endian::Little), &bytes, chunk);
        run(ArkDgram::new().with_max_frame_len(max), &bytes, chunk);
        run(ArkDgram::new(), &bytes, chunk);
        run(Delimiter::new(b"\r\n").unwrap().with_max_frame_len(max), &bytes, chunk);
        run(Delimiter::new(&[0]).unwrap().with_max_frame_len(max), &bytes, chunk);
        run(ExactSize::new(max.max(1)).unwrap(), &bytes, chunk);
        run(Raw::new().with_max_frame_len(max), &bytes, chunk);
    }
}

#[test]
fn an_announced_length_reserves_nothing_only_received_bytes_grow_the_buffer() {
    // A header announcing 16 MiB, then the body in small pieces: the buffer follows what has
    // arrived (within a doubling), never the announced length.
    let mut reader = FrameReader::new(LengthPrefix::default());
    let header = (16u32 * 1024 * 1024).to_be_bytes();
    reader.feed(&header[..], |_: &[u8]| ()).unwrap();
    assert!(reader.held_bytes() <= 4096, "{} held", reader.held_bytes());
    let chunk = [7u8; 10_000];
    let mut received = header.len();
    for _ in 0..20 {
        reader.feed(&chunk, |_: &[u8]| ()).unwrap();
        received += chunk.len();
        assert!(
            reader.held_bytes() <= 2 * received + 4096,
            "{} held after {received} received",
            reader.held_bytes()
        );
    }
    // The direct-read path grows the same way.
    assert!(reader.spare_mut().unwrap().len() <= 2 * received + 4096);
}

#[test]
fn feeding_a_paused_reader_holds_the_input_within_its_limit_and_says_what_to_do_past_it() {
    // Small frames (10-byte bodies) and a small limit: 1 KiB frames + 64 KiB slack.
    let codec = LengthPrefix::default().with_max_frame_len(1024);
    let frame = {
        let mut wire = Vec::new();
        codec.encode(&[5u8; 10], &mut wire).unwrap();
        wire
    };
    let input: Vec<u8> = frame.iter().copied().cycle().take(14 * 4681).collect(); // ~64 KiB
    let mut reader = FrameReader::new(codec);
    let mut delivered = 0usize;
    // The handler takes one frame per call, then pauses.
    let mut one = |f: &[u8]| {
        assert_eq!(f, [5u8; 10]);
        delivered += 1;
        Flow::Pause
    };
    assert_eq!(reader.feed(&input, &mut one).unwrap(), Feed::Paused);
    // Feeding again while paused: the held frames go first (one more, then a pause), the new
    // input is held behind them as long as everything fits.
    let err = reader.feed(&input, &mut one).unwrap_err();
    assert!(
        matches!(err, DecodeError::PausedFull { .. }),
        "past the limit the input is refused with a typed error: {err}"
    );
    assert!(!err.ends_stream(), "the stream is intact");
    assert!(
        err.to_string().contains("resume"),
        "the error says what to do: {err}"
    );
    // Doing what it says: resume until drained, then feed the same input again.
    let mut take_all = |f: &[u8]| {
        assert_eq!(f, [5u8; 10]);
        delivered += 1;
        Flow::Continue
    };
    assert_eq!(reader.resume(&mut take_all).unwrap(), Feed::Drained);
    assert_eq!(reader.feed(&input, &mut take_all).unwrap(), Feed::Drained);
    assert_eq!(delivered, 2 * 4681);
    // A paused reader with room holds the input instead.
    let mut reader = FrameReader::new(LengthPrefix::default().with_max_frame_len(1024));
    let small = &input[..14 * 100];
    let mut count = 0;
    let mut pause = |_: &[u8]| {
        count += 1;
        Flow::Pause
    };
    assert_eq!(reader.feed(small, &mut pause).unwrap(), Feed::Paused);
    assert_eq!(reader.feed(small, &mut pause).unwrap(), Feed::Paused);
    assert_eq!(reader.buffered_len(), 2 * small.len() - 2 * 14);
    let mut rest = 0;
    assert_eq!(reader.resume(|_: &[u8]| rest += 1).unwrap(), Feed::Drained);
    assert_eq!(count + rest, 200);
}
