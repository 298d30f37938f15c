use crate::codec::{Decoded, Decoder, Encoder, FrameSpan, Header};
use crate::error::{DecodeError, EncodeError};

use super::DEFAULT_MAX_FRAME_LEN;

/// No framing: whatever arrived is one message (split into pieces of at most
/// `max_frame_len` bytes). Encoding writes the payload as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw {
    max_frame_len: usize,
}

impl Default for Raw {
    fn default() -> Self {
        Self::new()
    }
}

impl Raw {
    /// Raw messages of up to 16 MiB each.
    pub const fn new() -> Self {
        Self {
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
        }
    }

    /// Sets the largest piece handed out as one message (at least 1 byte).
    pub fn with_max_frame_len(mut self, max: usize) -> Self {
        self.max_frame_len = max.max(1);
        self
    }

    /// The maximum body length.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Decoder for Raw {
    #[inline]
    fn decode(&mut self, buf: &[u8]) -> Result<Decoded, DecodeError> {
        Ok(if buf.is_empty() {
            Decoded::Incomplete { needed: None }
        } else {
            Decoded::Frame(FrameSpan {
                header: 0,
                body: buf.len().min(self.max_frame_len),
                trailer: 0,
            })
        })
    }

    fn max_encoded_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Encoder for Raw {
    fn header(&self, payload: &[u8]) -> Result<Header, EncodeError> {
        if payload.len() > self.max_frame_len {
            return Err(EncodeError::TooLarge {
                len: payload.len(),
                max: self.max_frame_len,
            });
        }
        Ok(Header::EMPTY)
    }
}
