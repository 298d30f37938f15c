//! The decoder and encoder traits every wire format implements.

use bytes::BufMut;

use crate::error::{DecodeError, EncodeError};

/// Where one whole frame lies at the start of a byte slice: `header` bytes, then `body` bytes
/// (the message), then `trailer` bytes (a delimiter, for example).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSpan {
    /// Header bytes before the body.
    pub header: usize,
    /// Body bytes: the message handed to the application.
    pub body: usize,
    /// Trailer bytes after the body.
    pub trailer: usize,
}

impl FrameSpan {
    /// Total bytes the frame occupies on the wire.
    #[inline]
    pub fn total(&self) -> usize {
        self.header + self.body + self.trailer
    }
}

/// What a [`Decoder`] found at the start of a byte slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// A whole frame starts the slice.
    Frame(FrameSpan),
    /// The slice holds no whole frame yet. `needed`, when known, is the number of bytes the
    /// slice must hold before decoding again can make progress (the whole frame once its
    /// header is read); `None` means "some more bytes", as with a delimiter not yet seen.
    Incomplete {
        /// Bytes the slice must hold before the next decode, when known.
        needed: Option<usize>,
    },
}

/// Finds frame boundaries in a byte stream.
///
/// # Contract
///
/// `decode` is given the bytes of the stream starting at a frame boundary. After it returns
/// [`Decoded::Incomplete`], the next call sees the same bytes with more appended, so a decoder
/// may remember how far it has scanned; after it returns a frame or an error, the next call
/// starts at a new frame. [`reset`](Self::reset) forgets such state. `decode` never panics on
/// any input.
pub trait Decoder {
    /// Looks for a whole frame at the start of `buf`.
    ///
    /// # Errors
    /// A [`DecodeError`] when the bytes can never form a valid frame (too large, non-minimal,
    /// no delimiter within the limit).
    fn decode(&mut self, buf: &[u8]) -> Result<Decoded, DecodeError>;

    /// The most bytes one frame can occupy on the wire (header, maximum body, trailer);
    /// `FrameReader` sizes its maximum buffer capacity from it.
    fn max_encoded_len(&self) -> usize;

    /// Forgets any scanning state (called when a stream is reset).
    fn reset(&mut self) {}
}

/// A frame header of at most 9 bytes, built on the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    bytes: [u8; 9],
    len: u8,
}

impl Header {
    /// An empty header (codecs without one).
    pub const EMPTY: Header = Header {
        bytes: [0; 9],
        len: 0,
    };

    /// A header holding `bytes` (at most 9).
    ///
    /// # Panics
    /// If `bytes` is longer than 9: codecs in this crate never build one.
    pub fn new(bytes: &[u8]) -> Self {
        let mut header = Self::EMPTY;
        header.bytes[..bytes.len()].copy_from_slice(bytes);
        header.len = bytes.len() as u8;
        header
    }

    /// A header holding the first `len` bytes of `bytes`, without a copy of variable length
    /// (which compiles to a `memcpy` call: 2 % of a TCP echo benchmark's cycles).
    ///
    /// # Panics
    /// If `len` is over 8.
    #[inline]
    pub fn from_prefix(bytes: [u8; 8], len: usize) -> Self {
        assert!(len <= 8, "a header prefix of {len} bytes");
        let [a, b, c, d, e, f, g, h] = bytes;
        Header {
            bytes: [a, b, c, d, e, f, g, h, 0],
            len: len as u8,
        }
    }

    /// The header bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// Frames payloads for the wire.
///
/// Transports that gather writes use [`header`](Self::header) and [`trailer`](Self::trailer)
/// around the payload; everyone else calls [`encode`](Self::encode).
pub trait Encoder {
    /// The header to write before `payload`.
    ///
    /// # Errors
    /// An [`EncodeError`] when the payload cannot be framed (too large, contains the delimiter,
    /// wrong size).
    fn header(&self, payload: &[u8]) -> Result<Header, EncodeError>;

    /// The bytes to write after the payload (empty for most codecs).
    fn trailer(&self) -> &[u8] {
        &[]
    }

    /// Writes header, payload and trailer into `dst`, returning the bytes written.
    ///
    /// # Errors
    /// As [`header`](Self::header), plus [`EncodeError::DestinationFull`] when `dst` has no room
    /// for the whole frame; nothing is written on error.
    fn encode<B: BufMut + ?Sized>(&self, payload: &[u8], dst: &mut B) -> Result<usize, EncodeError>
    where
        Self: Sized,
    {
        let header = self.header(payload)?;
        let trailer = self.trailer();
        let needed = header.as_slice().len() + payload.len() + trailer.len();
        let remaining = dst.remaining_mut();
        if remaining < needed {
            return Err(EncodeError::DestinationFull { needed, remaining });
        }
        dst.put_slice(header.as_slice());
        dst.put_slice(payload);
        dst.put_slice(trailer);
        Ok(needed)
    }
}
