use crate::codec::{Decoded, Decoder, Encoder, FrameSpan, Header};
use crate::error::{DecodeError, EncodeError};

use super::{DEFAULT_MAX_FRAME_LEN, check_len};

/// Marker byte of the 2-byte length form.
const MARKER_U16: u8 = 254;
/// Marker byte of the 8-byte length form.
const MARKER_U64: u8 = 255;

/// arknet's `use_dgram` framing, bit for bit: a variable-length header, then the body.
///
/// ```text
/// len < 254:            | len (1 byte) | body |
/// 254 <= len <= 65535:  | 254 | len (u16 LE, 2 bytes) | body |
/// len > 65535:          | 255 | len (u64 LE, 8 bytes) | body |
/// ```
///
/// Empty frames are allowed (a single `0` byte). Only the shortest form is valid: a 254
/// header carrying a length below 254, or a 255 header carrying one below 65,536, is
/// [`DecodeError::NonMinimal`]. The maximum body defaults to 16 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArkDgram {
    max_frame_len: usize,
}

impl Default for ArkDgram {
    fn default() -> Self {
        Self::new()
    }
}

impl ArkDgram {
    /// The codec with the default 16 MiB maximum body.
    pub const fn new() -> Self {
        Self {
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
        }
    }

    /// Sets the maximum body length.
    pub const fn with_max_frame_len(mut self, max: usize) -> Self {
        self.max_frame_len = max;
        self
    }

    /// The maximum body length.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Decoder for ArkDgram {
    #[inline]
    fn decode(&mut self, buf: &[u8]) -> Result<Decoded, DecodeError> {
        let Some(&marker) = buf.first() else {
            return Ok(Decoded::Incomplete { needed: Some(1) });
        };
        let (header, len) = match marker {
            MARKER_U16 => {
                let Some(b) = buf.get(1..3) else {
                    return Ok(Decoded::Incomplete { needed: Some(3) });
                };
                let len = u64::from(u16::from_le_bytes([b[0], b[1]]));
                if len < u64::from(MARKER_U16) {
                    return Err(DecodeError::NonMinimal { marker, len });
                }
                (3, len)
            }
            MARKER_U64 => {
                let Some(b) = buf.get(1..9) else {
                    return Ok(Decoded::Incomplete { needed: Some(9) });
                };
                let mut le = [0u8; 8];
                le.copy_from_slice(b);
                let len = u64::from_le_bytes(le);
                if len <= u64::from(u16::MAX) {
                    return Err(DecodeError::NonMinimal { marker, len });
                }
                (9, len)
            }
            short => (1, u64::from(short)),
        };
        let body = check_len(len, self.max_frame_len)?;
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
        self.max_frame_len.saturating_add(9)
    }
}

impl Encoder for ArkDgram {
    #[inline]
    fn header(&self, payload: &[u8]) -> Result<Header, EncodeError> {
        let len = payload.len();
        if len > self.max_frame_len {
            return Err(EncodeError::TooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        Ok(if len < usize::from(MARKER_U16) {
            Header::new(&[len as u8])
        } else if len <= usize::from(u16::MAX) {
            let le = (len as u16).to_le_bytes();
            Header::new(&[MARKER_U16, le[0], le[1]])
        } else {
            let mut bytes = [MARKER_U64; 9];
            bytes[1..].copy_from_slice(&(len as u64).to_le_bytes());
            Header::new(&bytes)
        })
    }
}
