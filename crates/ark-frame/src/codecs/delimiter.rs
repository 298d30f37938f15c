use crate::codec::{Decoded, Decoder, Encoder, FrameSpan, Header};
use crate::error::{ConfigError, DecodeError, EncodeError};

use super::DEFAULT_MAX_FRAME_LEN;

/// Frames end with a delimiter of one or more bytes (`b"\n"`, `b"\r\n"`, ...). The delimiter
/// is not part of the message.
///
/// ```text
/// | body (no delimiter inside, at most max_frame_len bytes) | delimiter |
/// ```
///
/// The decoder remembers how far it has scanned a partial frame, so a frame that arrives in
/// many pieces is scanned once in total. A body longer than the maximum (default 16 MiB)
/// without a delimiter is [`DecodeError::DelimiterNotFound`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delimiter {
    delimiter: Box<[u8]>,
    max_frame_len: usize,
    /// Start positions already ruled out in the current partial frame.
    scanned: usize,
}

impl Delimiter {
    /// Frames ending with `delimiter`.
    ///
    /// # Errors
    /// [`ConfigError::EmptyDelimiter`] for an empty delimiter.
    pub fn new(delimiter: &[u8]) -> Result<Self, ConfigError> {
        if delimiter.is_empty() {
            return Err(ConfigError::EmptyDelimiter);
        }
        Ok(Self {
            delimiter: delimiter.into(),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            scanned: 0,
        })
    }

    /// Sets the maximum body length.
    pub fn with_max_frame_len(mut self, max: usize) -> Self {
        self.max_frame_len = max;
        self
    }

    /// The maximum body length.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// The delimiter.
    pub fn delimiter(&self) -> &[u8] {
        &self.delimiter
    }

    /// First position at or after `from` where the delimiter starts.
    #[inline]
    fn find(&self, buf: &[u8], from: usize) -> Option<usize> {
        let (&first, rest) = self.delimiter.split_first()?;
        let last_start = buf.len().checked_sub(self.delimiter.len())?;
        let mut at = from;
        while at <= last_start {
            let hit = at + buf[at..=last_start].iter().position(|&b| b == first)?;
            if buf[hit + 1..hit + 1 + rest.len()] == *rest {
                return Some(hit);
            }
            at = hit + 1;
        }
        None
    }
}

impl Decoder for Delimiter {
    #[inline]
    fn decode(&mut self, buf: &[u8]) -> Result<Decoded, DecodeError> {
        let limit = self.max_frame_len;
        match self.find(buf, self.scanned) {
            Some(body) if body <= limit => {
                self.scanned = 0;
                Ok(Decoded::Frame(FrameSpan {
                    header: 0,
                    body,
                    trailer: self.delimiter.len(),
                }))
            }
            Some(_) => {
                self.scanned = 0;
                Err(DecodeError::DelimiterNotFound { limit })
            }
            None => {
                // Every start position that leaves room for the whole delimiter is ruled out.
                self.scanned = (buf.len() + 1).saturating_sub(self.delimiter.len());
                if self.scanned > limit {
                    self.scanned = 0;
                    return Err(DecodeError::DelimiterNotFound { limit });
                }
                Ok(Decoded::Incomplete { needed: None })
            }
        }
    }

    fn max_encoded_len(&self) -> usize {
        self.max_frame_len.saturating_add(self.delimiter.len())
    }

    fn reset(&mut self) {
        self.scanned = 0;
    }
}

impl Encoder for Delimiter {
    fn header(&self, payload: &[u8]) -> Result<Header, EncodeError> {
        if payload.len() > self.max_frame_len {
            return Err(EncodeError::TooLarge {
                len: payload.len(),
                max: self.max_frame_len,
            });
        }
        if let Some(offset) = self.find(payload, 0) {
            return Err(EncodeError::DelimiterInPayload { offset });
        }
        // A delimiter that overlaps itself ("aa") could also start inside the payload's tail
        // and end inside the trailer, which would cut the frame short.
        let d = &self.delimiter[..];
        let tail_from = payload.len().saturating_sub(d.len() - 1);
        for offset in tail_from..payload.len() {
            let k = payload.len() - offset;
            if payload[offset..] == d[..k] && d[k..] == d[..d.len() - k] {
                return Err(EncodeError::DelimiterInPayload { offset });
            }
        }
        Ok(Header::EMPTY)
    }

    fn trailer(&self) -> &[u8] {
        &self.delimiter
    }
}
