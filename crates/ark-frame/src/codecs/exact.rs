use crate::codec::{Decoded, Decoder, Encoder, FrameSpan, Header};
use crate::error::{ConfigError, DecodeError, EncodeError};

/// Every frame is exactly `N` bytes, with no header.
///
/// ```text
/// | body (N bytes) | body (N bytes) | ...
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExactSize {
    size: usize,
}

impl ExactSize {
    /// Frames of `size` bytes.
    ///
    /// # Errors
    /// [`ConfigError::ZeroExactSize`] for a size of 0.
    pub fn new(size: usize) -> Result<Self, ConfigError> {
        if size == 0 {
            return Err(ConfigError::ZeroExactSize);
        }
        Ok(Self { size })
    }

    /// The frame size.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Decoder for ExactSize {
    #[inline]
    fn decode(&mut self, buf: &[u8]) -> Result<Decoded, DecodeError> {
        Ok(if buf.len() >= self.size {
            Decoded::Frame(FrameSpan {
                header: 0,
                body: self.size,
                trailer: 0,
            })
        } else {
            Decoded::Incomplete {
                needed: Some(self.size),
            }
        })
    }

    fn max_encoded_len(&self) -> usize {
        self.size
    }
}

impl Encoder for ExactSize {
    fn header(&self, payload: &[u8]) -> Result<Header, EncodeError> {
        if payload.len() != self.size {
            return Err(EncodeError::SizeMismatch {
                len: payload.len(),
                expected: self.size,
            });
        }
        Ok(Header::EMPTY)
    }
}
