//! Every codec at its boundaries: exact header bytes, limits and typed errors.

mod util;

use ark_frame::{
    ArkDgram, ConfigError, DecodeError, Decoded, Decoder, Delimiter, EncodeError, Encoder, Endian,
    ExactSize, FrameSpan, LengthPrefix, PrefixWidth, Raw,
};

fn frame(header: usize, body: usize, trailer: usize) -> Decoded {
    Decoded::Frame(FrameSpan {
        header,
        body,
        trailer,
    })
}

fn roundtrip<C: Decoder + Encoder>(mut codec: C, len: usize) -> Vec<u8> {
    let body = util::payload(len, len);
    let mut wire = Vec::new();
    let written = codec.encode(&body, &mut wire).unwrap();
    assert_eq!(written, wire.len());
    let Decoded::Frame(span) = codec.decode(&wire).unwrap() else {
        panic!("whole frame expected for len {len}");
    };
    assert_eq!(span.total(), wire.len());
    assert_eq!(&wire[span.header..span.header + span.body], &body[..]);
    // Every strict prefix is incomplete.
    for cut in [0, 1, span.header, wire.len().saturating_sub(1)] {
        if cut < wire.len() {
            assert!(matches!(
                codec.decode(&wire[..cut]).unwrap(),
                Decoded::Incomplete { .. }
            ));
            codec.reset();
        }
    }
    wire
}

#[test]
fn ark_dgram_headers_at_every_boundary() {
    let cases: [(usize, &[u8]); 5] = [
        (0, &[0]),
        (253, &[253]),
        (254, &[254, 254, 0]),
        (65535, &[254, 0xff, 0xff]),
        (65536, &[255, 0, 0, 1, 0, 0, 0, 0, 0]),
    ];
    for (len, header) in cases {
        let wire = roundtrip(ArkDgram::new(), len);
        assert_eq!(&wire[..header.len()], header, "header for length {len}");
        assert_eq!(wire.len(), header.len() + len);
    }
}

#[test]
fn ark_dgram_incomplete_asks_for_exact_sizes() {
    let mut c = ArkDgram::new();
    assert_eq!(
        c.decode(&[]).unwrap(),
        Decoded::Incomplete { needed: Some(1) }
    );
    assert_eq!(
        c.decode(&[254]).unwrap(),
        Decoded::Incomplete { needed: Some(3) }
    );
    assert_eq!(
        c.decode(&[255, 1]).unwrap(),
        Decoded::Incomplete { needed: Some(9) }
    );
    assert_eq!(
        c.decode(&[5, 1]).unwrap(),
        Decoded::Incomplete { needed: Some(6) }
    );
    assert_eq!(c.decode(&[0]).unwrap(), frame(1, 0, 0));
}

#[test]
fn ark_dgram_rejects_non_minimal_encodings() {
    let mut c = ArkDgram::new();
    assert_eq!(
        c.decode(&[254, 253, 0]).unwrap_err(),
        DecodeError::NonMinimal {
            marker: 254,
            len: 253
        }
    );
    assert_eq!(
        c.decode(&[254, 0, 0]).unwrap_err(),
        DecodeError::NonMinimal {
            marker: 254,
            len: 0
        }
    );
    assert_eq!(
        c.decode(&[255, 0xff, 0xff, 0, 0, 0, 0, 0, 0]).unwrap_err(),
        DecodeError::NonMinimal {
            marker: 255,
            len: 65535
        }
    );
    // The smallest valid forms decode.
    assert_eq!(
        c.decode(&[254, 254, 0]).unwrap(),
        Decoded::Incomplete { needed: Some(257) }
    );
}

#[test]
fn ark_dgram_enforces_max_frame_len() {
    let mut c = ArkDgram::new().with_max_frame_len(1000);
    assert_eq!(
        c.decode(&[254, 0xe9, 0x03]).unwrap_err(), // 1001
        DecodeError::TooLarge {
            len: 1001,
            max: 1000
        }
    );
    assert_eq!(
        c.decode(&[254, 0xe8, 0x03]).unwrap(),
        Decoded::Incomplete { needed: Some(1003) }
    );
    assert_eq!(
        c.header(&[0; 1001]).unwrap_err(),
        EncodeError::TooLarge {
            len: 1001,
            max: 1000
        }
    );
    // A u64 length beyond usize or the default limit is an error, not an overflow.
    let mut d = ArkDgram::new();
    assert!(matches!(
        d.decode(&[255, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
            .unwrap_err(),
        DecodeError::TooLarge { len: u64::MAX, .. }
    ));
    let message = d
        .decode(&[255, 0, 0, 0, 2, 0, 0, 0, 0])
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("16777216"),
        "error names the limit: {message}"
    );
}

#[test]
fn one_byte_prefix_at_255_and_256() {
    let c = LengthPrefix::new(PrefixWidth::U8, Endian::Big);
    assert_eq!(c.max_frame_len(), 255);
    let wire = roundtrip(c, 255);
    assert_eq!(wire[0], 255);
    assert_eq!(
        c.header(&[0; 256]).unwrap_err(),
        EncodeError::TooLarge { len: 256, max: 255 }
    );
    // A 1-byte prefix cannot even express 256: the limit stays at the width's maximum.
    assert_eq!(c.with_max_frame_len(1 << 20).max_frame_len(), 255);
}

#[test]
fn length_prefix_every_width_and_byte_order() {
    let widths = [
        PrefixWidth::U8,
        PrefixWidth::U16,
        PrefixWidth::U32,
        PrefixWidth::U64,
    ];
    for width in widths {
        for endian in [Endian::Big, Endian::Little] {
            let c = LengthPrefix::new(width, endian);
            for len in [0usize, 1, 200, 255] {
                let wire = roundtrip(c, len);
                let n = width.bytes();
                let mut expect = [0u8; 8];
                match endian {
                    Endian::Big => {
                        expect[8 - n..].copy_from_slice(&(len as u64).to_be_bytes()[8 - n..])
                    }
                    Endian::Little => {
                        expect[8 - n..].copy_from_slice(&(len as u64).to_le_bytes()[..n])
                    }
                }
                assert_eq!(&wire[..n], &expect[8 - n..], "{width:?} {endian:?} {len}");
            }
        }
    }
    let c = LengthPrefix::new(PrefixWidth::U16, Endian::Little);
    roundtrip(c, 65535);
    assert_eq!(
        c.header(&[0; 65536]).unwrap_err(),
        EncodeError::TooLarge {
            len: 65536,
            max: 65535
        }
    );
}

#[test]
fn length_prefix_oversized_lengths_are_typed_errors() {
    let mut c = LengthPrefix::default().with_max_frame_len(1024);
    assert_eq!(
        c.decode(&1025u32.to_be_bytes()).unwrap_err(),
        DecodeError::TooLarge {
            len: 1025,
            max: 1024
        }
    );
    assert_eq!(
        c.decode(&1024u32.to_be_bytes()).unwrap(),
        Decoded::Incomplete { needed: Some(1028) }
    );
    let mut wide = LengthPrefix::new(PrefixWidth::U64, Endian::Big);
    assert!(matches!(
        wide.decode(&u64::MAX.to_be_bytes()).unwrap_err(),
        DecodeError::TooLarge {
            len: u64::MAX,
            max: 16_777_216
        }
    ));
    assert_eq!(
        c.decode(&[0, 0]).unwrap(),
        Decoded::Incomplete { needed: Some(4) }
    );
}

#[test]
fn delimiter_frames_and_limits() {
    let mut c = Delimiter::new(b"\r\n").unwrap().with_max_frame_len(8);
    assert_eq!(c.decode(b"abc\r\nrest").unwrap(), frame(0, 3, 2));
    assert_eq!(c.decode(b"\r\n").unwrap(), frame(0, 0, 2));
    assert_eq!(
        c.decode(b"abc\r").unwrap(),
        Decoded::Incomplete { needed: None }
    );
    assert_eq!(c.decode(b"abc\r\n").unwrap(), frame(0, 3, 2));
    assert_eq!(c.decode(b"12345678\r\n").unwrap(), frame(0, 8, 2));
    assert_eq!(
        c.decode(b"123456789\r\n").unwrap_err(),
        DecodeError::DelimiterNotFound { limit: 8 }
    );
    // No delimiter within the limit is detected before the delimiter ever arrives.
    assert_eq!(
        c.decode(b"123456789").unwrap(),
        Decoded::Incomplete { needed: None }
    );
    assert_eq!(
        c.decode(b"1234567890").unwrap_err(),
        DecodeError::DelimiterNotFound { limit: 8 }
    );
    assert_eq!(
        Delimiter::new(b"").unwrap_err(),
        ConfigError::EmptyDelimiter
    );
    roundtrip(Delimiter::new(b"\n").unwrap(), 100);
}

#[test]
fn delimiter_encoder_refuses_payloads_that_would_split() {
    let c = Delimiter::new(b"\r\n").unwrap();
    assert_eq!(
        c.header(b"a\r\nb").unwrap_err(),
        EncodeError::DelimiterInPayload { offset: 1 }
    );
    assert!(
        c.header(b"ab\r").is_ok(),
        "a lone \\r before the delimiter still frames correctly"
    );
    let overlapping = Delimiter::new(b"aa").unwrap();
    assert_eq!(
        overlapping.header(b"xa").unwrap_err(),
        EncodeError::DelimiterInPayload { offset: 1 }
    );
    assert!(overlapping.header(b"ab").is_ok());
    let mut wire = Vec::new();
    c.encode(b"line", &mut wire).unwrap();
    assert_eq!(wire, b"line\r\n");
}

#[test]
fn exact_size_frames() {
    let mut c = ExactSize::new(4).unwrap();
    assert_eq!(
        c.decode(b"abc").unwrap(),
        Decoded::Incomplete { needed: Some(4) }
    );
    assert_eq!(c.decode(b"abcdef").unwrap(), frame(0, 4, 0));
    assert_eq!(
        c.header(b"abc").unwrap_err(),
        EncodeError::SizeMismatch {
            len: 3,
            expected: 4
        }
    );
    assert_eq!(ExactSize::new(0).unwrap_err(), ConfigError::ZeroExactSize);
    roundtrip(c, 4);
}

#[test]
fn raw_takes_whatever_arrived() {
    let mut c = Raw::new().with_max_frame_len(4);
    assert_eq!(c.decode(b"").unwrap(), Decoded::Incomplete { needed: None });
    assert_eq!(c.decode(b"ab").unwrap(), frame(0, 2, 0));
    assert_eq!(c.decode(b"abcdef").unwrap(), frame(0, 4, 0));
    assert_eq!(
        c.header(b"abcde").unwrap_err(),
        EncodeError::TooLarge { len: 5, max: 4 }
    );
}

#[test]
fn encode_into_a_full_destination_writes_nothing() {
    let mut dst = [0u8; 6];
    let mut slice = &mut dst[..];
    let err = LengthPrefix::default()
        .encode(b"abc", &mut slice)
        .unwrap_err();
    assert_eq!(
        err,
        EncodeError::DestinationFull {
            needed: 7,
            remaining: 6
        }
    );
    assert_eq!(dst, [0; 6]);
}
