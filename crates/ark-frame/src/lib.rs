//! # ark-frame
//!
//! Sans-IO message framing for the ark networking library: turn a byte stream, delivered in
//! chunks of any size, into whole messages, with **no allocation per message** and **no
//! memory held by an idle stream**. No sockets and no clocks: feed it byte slices.
//!
//! * [`RecvBuf`]: a contiguous receive buffer with read and write cursors that allocates only
//!   when it must keep a partial frame, grows by doubling up to a maximum, compacts instead of
//!   growing when it can, and gives back what it no longer needs.
//! * Codecs, each a [`Decoder`] and an [`Encoder`]: [`LengthPrefix`] (1, 2, 4 or 8 bytes, big
//!   or little endian), [`Delimiter`], [`ExactSize`], [`Raw`] and [`ArkDgram`] (arknet's
//!   `use_dgram` format, bit for bit).
//! * [`FrameReader`]: a decoder plus a `RecvBuf`. Frames are decoded straight from the input
//!   when possible and lent to a handler as `&[u8]`; only a trailing partial frame is copied.
//!   The handler can pause delivery (backpressure) and resume it later.
//!
//! ```
//! use ark_frame::{Encoder, Flow, FrameReader, LengthPrefix};
//!
//! // Encode two messages with a 4-byte big-endian length prefix.
//! let codec = LengthPrefix::default();
//! let mut wire = Vec::new();
//! codec.encode(b"ping", &mut wire)?;
//! codec.encode(b"pong", &mut wire)?;
//!
//! // Decode them from 5-byte chunks, as a socket might deliver them.
//! let mut reader = FrameReader::new(codec);
//! let mut messages = 0;
//! for chunk in wire.chunks(5) {
//!     reader.feed(chunk, |frame: &[u8]| {
//!         assert!(frame == b"ping" || frame == b"pong");
//!         messages += 1;
//!         Flow::Continue
//!     })?;
//! }
//! assert_eq!(messages, 2);
//! assert_eq!(reader.held_bytes(), 4096); // the partial frame needed the 4 KiB buffer
//! reader.release(); // the stream is idle: give the buffer back
//! assert_eq!(reader.held_bytes(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The wire formats and the buffer policy are described with byte diagrams in
//! `docs/framing.md` of the ark repository.

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
#![forbid(unsafe_code)]

mod codec;
mod codecs;
mod error;
mod reader;
mod recv_buf;

pub use codec::{Decoded, Decoder, Encoder, FrameSpan, Header};
pub use codecs::{
    ArkDgram, DEFAULT_MAX_FRAME_LEN, Delimiter, Endian, ExactSize, LengthPrefix, PrefixWidth, Raw,
};
pub use error::{BufferError, ConfigError, DecodeError, EncodeError};
pub use reader::{Feed, Flow, FrameReader};
pub use recv_buf::{DEFAULT_INITIAL_CAPACITY, DEFAULT_MAX_CAPACITY, RecvBuf};

/// The README's examples, compiled as doctests so the README cannot drift from the code.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
