use crate::codec::{Decoded, Decoder, Encoder, FrameSpan, Header};
use crate::error::{DecodeError, EncodeError};

use super::{DEFAULT_MAX_FRAME_LEN, check_len};

/// Width of a length prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrefixWidth {
    /// One byte: bodies up to 255 bytes.
    U8,
    /// Two bytes: bodies up to 65,535 bytes.
    U16,
    /// Four bytes.
    U32,
    /// Eight bytes.
    U64,
}

impl PrefixWidth {
    /// Header length in bytes.
    #[inline]
    pub const fn bytes(self) -> usize {
        match self {
            PrefixWidth::U8 => 1,
            PrefixWidth::U16 => 2,
            PrefixWidth::U32 => 4,
            PrefixWidth::U64 => 8,
        }
    }

    /// The largest length the prefix can carry.
    pub const fn max_value(self) -> u64 {
        match self {
            PrefixWidth::U8 => u8::MAX as u64,
            PrefixWidth::U16 => u16::MAX as u64,
            PrefixWidth::U32 => u32::MAX as u64,
            PrefixWidth::U64 => u64::MAX,
        }
    }
}

/// Byte order of a length prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Most significant byte first (network order).
    Big,
    /// Least significant byte first.
    Little,
}

/// A fixed-width length header (1, 2, 4 or 8 bytes, either byte order) followed by that many
/// body bytes. The length counts the body only.
///
/// ```text
/// +---------------- width bytes ----------------+------ len bytes ------+
/// | len (big or little endian, unsigned)         | body                  |
/// +----------------------------------------------+-----------------------+
/// ```
///
/// The default is a 4-byte big-endian prefix with a 16 MiB maximum body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthPrefix {
    width: PrefixWidth,
    endian: Endian,
    max_frame_len: usize,
}

impl Default for LengthPrefix {
    fn default() -> Self {
        Self::new(PrefixWidth::U32, Endian::Big)
    }
}

impl LengthPrefix {
    /// A prefix of the given width and byte order, with the default 16 MiB maximum body
    /// (or the width's own limit, if smaller).
    pub fn new(width: PrefixWidth, endian: Endian) -> Self {
        Self {
            width,
            endian,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
        }
        .with_max_frame_len(DEFAULT_MAX_FRAME_LEN)
    }

    /// Sets the maximum body length, capped at what the prefix width can carry.
    pub fn with_max_frame_len(mut self, max: usize) -> Self {
        self.max_frame_len = usize::try_from(self.width.max_value()).map_or(max, |w| max.min(w));
        self
    }

    /// The maximum body length.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// The prefix width.
    pub fn width(&self) -> PrefixWidth {
        self.width
    }

    /// The prefix byte order.
    pub fn endian(&self) -> Endian {
        self.endian
    }

    /// Reads the length from a header of exactly `width` bytes.
    #[inline]
    fn read_len(&self, header: &[u8]) -> u64 {
        fn array<const N: usize>(header: &[u8]) -> [u8; N] {
            let mut bytes = [0u8; N];
            bytes.copy_from_slice(&header[..N]);
            bytes
        }
        match (self.width, self.endian) {
            (PrefixWidth::U8, _) => u64::from(header[0]),
            (PrefixWidth::U16, Endian::Big) => u64::from(u16::from_be_bytes(array(header))),
            (PrefixWidth::U16, Endian::Little) => u64::from(u16::from_le_bytes(array(header))),
            (PrefixWidth::U32, Endian::Big) => u64::from(u32::from_be_bytes(array(header))),
            (PrefixWidth::U32, Endian::Little) => u64::from(u32::from_le_bytes(array(header))),
            (PrefixWidth::U64, Endian::Big) => u64::from_be_bytes(array(header)),
            (PrefixWidth::U64, Endian::Little) => u64::from_le_bytes(array(header)),
        }
    }
}

impl Decoder for LengthPrefix {
    #[inline(always)]
    fn decode(&mut self, buf: &[u8]) -> Result<Decoded, DecodeError> {
        let header = self.width.bytes();
        let Some(prefix) = buf.get(..header) else {
            return Ok(Decoded::Incomplete {
                needed: Some(header),
            });
        };
        let body = check_len(self.read_len(prefix), self.max_frame_len)?;
        let total = header + body;
        if buf.len() >= total {
            Ok(Decoded::Frame(FrameSpan {
                header,
                body,
                trailer: 0,
            }))
        } else {
            Ok(Decoded::Incomplete {
                needed: Some(total),
            })
        }
    }

    fn max_encoded_len(&self) -> usize {
        self.width.bytes().saturating_add(self.max_frame_len)
    }
}

impl Encoder for LengthPrefix {
    #[inline]
    fn header(&self, payload: &[u8]) -> Result<Header, EncodeError> {
        let len = payload.len();
        if len > self.max_frame_len {
            return Err(EncodeError::TooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        let n = self.width.bytes();
        // The length's `n` low-order bytes, in wire order, at the front of eight.
        let bytes = match self.endian {
            Endian::Big => ((len as u64) << (8 * (8 - n))).to_be_bytes(),
            Endian::Little => (len as u64).to_le_bytes(),
        };
        Ok(Header::from_prefix(bytes, n))
    }
}
