//! `RecvBuf` memory behaviour: lazy allocation, doubling growth, limits, compaction, release.

use ark_frame::{BufferError, ConfigError, Decoder, FrameReader, LengthPrefix, RecvBuf};

#[test]
fn zero_initial_capacity_is_rejected() {
    assert_eq!(
        RecvBuf::with_capacity(0, 100).unwrap_err(),
        ConfigError::ZeroInitialCapacity
    );
    assert_eq!(
        RecvBuf::with_capacity(200, 100).unwrap_err(),
        ConfigError::InitialAboveMax {
            initial: 200,
            max: 100
        }
    );
    assert_eq!(
        FrameReader::with_initial_capacity(LengthPrefix::default(), 0).unwrap_err(),
        ConfigError::ZeroInitialCapacity
    );
}

#[test]
fn allocates_nothing_until_bytes_must_be_kept() {
    let mut buf = RecvBuf::new();
    assert_eq!(buf.held_bytes(), 0);
    buf.reserve(0).unwrap();
    assert_eq!(buf.held_bytes(), 0);
    buf.extend_from_slice(b"x").unwrap();
    assert_eq!(buf.held_bytes(), 4096);
}

#[test]
fn grows_by_doubling_just_enough_and_never_past_max() {
    let mut buf = RecvBuf::with_capacity(1000, 5000).unwrap();
    buf.extend_from_slice(&[1; 1500]).unwrap();
    assert_eq!(buf.held_bytes(), 2000);
    buf.extend_from_slice(&[2; 1000]).unwrap();
    assert_eq!(buf.held_bytes(), 4000);
    // Doubling to 8000 would pass the maximum: the capacity stops at 5000.
    buf.extend_from_slice(&[3; 2000]).unwrap();
    assert_eq!(buf.held_bytes(), 5000);
    assert_eq!(
        buf.extend_from_slice(&[4; 501]).unwrap_err(),
        BufferError::CapacityExceeded {
            needed: 5001,
            max: 5000
        }
    );
    assert_eq!(buf.len(), 4500, "a failed append changes nothing");
    assert_eq!(&buf.data()[..1500], &[1; 1500][..]);
    assert!(buf.data()[4000..].iter().all(|&b| b == 3));
}

#[test]
fn compacts_instead_of_growing_when_that_suffices() {
    let mut buf = RecvBuf::with_capacity(100, 1000).unwrap();
    buf.extend_from_slice(&[7; 90]).unwrap();
    buf.consume(80);
    let before = buf.data().as_ptr();
    buf.extend_from_slice(&[8; 50]).unwrap();
    assert_eq!(
        buf.held_bytes(),
        100,
        "60 bytes fit in 100 after compaction"
    );
    assert_eq!(buf.data(), [&[7; 10][..], &[8; 50][..]].concat());
    assert_eq!(
        buf.data().as_ptr() as usize,
        before as usize - 80,
        "the unread tail moved to the front of the same allocation"
    );
}

#[test]
fn releases_excess_when_empty_unless_the_traffic_needs_it() {
    let mut buf = RecvBuf::with_capacity(1024, 1 << 20).unwrap();
    // A 100 KiB frame grows the buffer to 128 KiB, and fills more than half of it: kept.
    buf.extend_from_slice(&vec![0; 100 * 1024]).unwrap();
    assert_eq!(buf.held_bytes(), 128 * 1024);
    buf.consume(100 * 1024);
    assert_eq!(buf.held_bytes(), 128 * 1024);
    // A small frame in that large buffer: when it empties, the excess goes.
    buf.extend_from_slice(&[0; 100]).unwrap();
    buf.consume(100);
    assert_eq!(buf.held_bytes(), 1024, "back to the initial capacity");
    // Within the initial capacity nothing is released automatically...
    buf.extend_from_slice(&[0; 10]).unwrap();
    buf.consume(10);
    assert_eq!(buf.held_bytes(), 1024);
    // ...and release() gives everything back when idle.
    assert_eq!(buf.release(), 1024);
    assert_eq!(buf.held_bytes(), 0);
}

#[test]
fn release_keeps_unread_bytes() {
    let mut buf = RecvBuf::new();
    buf.extend_from_slice(b"partial").unwrap();
    assert_eq!(buf.release(), 0);
    assert_eq!(buf.data(), b"partial");
}

#[test]
fn spare_and_commit_read_directly_into_the_buffer() {
    let mut buf = RecvBuf::new();
    buf.reserve(10).unwrap();
    let spare = buf.spare_mut();
    assert!(spare.len() >= 10);
    spare[..3].copy_from_slice(b"abc");
    buf.commit(3);
    assert_eq!(buf.data(), b"abc");
}

/// Idle memory: a fresh reader holds 0 bytes; a partial frame then its completion leaves the
/// initial buffer, which the idle release returns; whole frames never allocate.
#[test]
fn idle_reader_holds_nothing() {
    let codec = LengthPrefix::default();
    let mut wire = Vec::new();
    ark_frame::Encoder::encode(&codec, &[5; 1000], &mut wire).unwrap();
    let mut reader = FrameReader::new(codec);
    assert_eq!(reader.held_bytes(), 0);
    reader.feed(&wire, |_: &[u8]| ()).unwrap();
    assert_eq!(reader.held_bytes(), 0, "a whole frame is decoded in place");
    reader.feed(&wire[..600], |_: &[u8]| ()).unwrap();
    assert_eq!(
        reader.held_bytes(),
        4096,
        "a partial frame needs the initial buffer"
    );
    reader.feed(&wire[600..], |_: &[u8]| ()).unwrap();
    assert_eq!(reader.buffered_len(), 0);
    assert_eq!(reader.release(), 4096);
    assert_eq!(reader.held_bytes(), 0);
    // A large frame: the excess above the initial capacity goes as soon as a small one follows.
    let mut big = Vec::new();
    ark_frame::Encoder::encode(&codec, &[1; 50_000], &mut big).unwrap();
    reader.feed(&big[..10], |_: &[u8]| ()).unwrap();
    reader.feed(&big[10..], |_: &[u8]| ()).unwrap();
    assert_eq!(reader.held_bytes(), 64 * 1024);
    reader.feed(&wire[..10], |_: &[u8]| ()).unwrap();
    reader.feed(&wire[10..], |_: &[u8]| ()).unwrap();
    assert_eq!(reader.held_bytes(), 4096);
    reader.release();
    assert_eq!(reader.held_bytes(), 0);
    let _ = reader.decoder().max_encoded_len();
}
