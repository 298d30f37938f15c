//! The receive side of an open session. Whole, unfragmented data frames are taken apart here,
//! straight from the received bytes: unmasked in place and handed out as the message's own
//! bytes. Every other frame (control frames, fragments, anything unusual or over a limit) goes
//! to tungstenite whole and in order, so it keeps judging what the protocol allows.
//!
//! Before this, every received byte was copied into tungstenite's input stream, then
//! zero-filled and copied again into its read buffer: two copies and a fill per message that
//! the hand-written tokio peer does not pay.

use std::io::Cursor;

use bytes::BytesMut;
use tungstenite::Message;
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};

use crate::close::CloseCode;

/// What the next received bytes are.
pub(crate) enum Inbound {
    /// A whole text or binary message.
    Message(Message),
    /// Bytes of a frame only tungstenite may read (it gets every such frame whole, in order).
    Tungstenite(BytesMut),
    /// A frame that fails the connection with this close code.
    Bad(CloseCode, &'static str),
}

/// Limits and role for [`Frames::next`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// This side is the server: frames it receives must be masked (and a client's must not).
    pub(crate) server: bool,
    /// Largest frame and largest message (`WsConfig::max_frame`, `max_message`).
    pub(crate) max_frame: usize,
    pub(crate) max_message: usize,
    /// Only tungstenite reads now (a close frame was sent or received).
    pub(crate) closing: bool,
}

/// Received bytes of an open session not yet taken apart.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    buf: BytesMut,
    /// Bytes of the frame tungstenite is reading that it has not been given yet.
    to_tungstenite: u64,
    /// A fragmented data message is under way in tungstenite: its continuations go there too.
    fragmented: bool,
    /// The most bytes held since the buffer was last empty.
    peak: usize,
}

impl Frames {
    /// Appends received bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.peak = self.peak.max(self.buf.len());
    }

    /// The next whole message or piece for tungstenite; `None` until more bytes arrive.
    pub(crate) fn next(&mut self, rules: Rules) -> Option<Inbound> {
        if self.to_tungstenite > 0 {
            return self.for_tungstenite();
        }
        let mut cursor = Cursor::new(&self.buf[..]);
        let (header, len) = match FrameHeader::parse(&mut cursor) {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return None,
            // tungstenite finds the same fault and fails the connection with its code.
            Err(_) => return Some(Inbound::Tungstenite(self.buf.split())),
        };
        let header_len = cursor.position() as usize;
        let data = match header.opcode {
            OpCode::Data(Data::Binary) => Some(false),
            OpCode::Data(Data::Text) => Some(true),
            _ => None,
        };
        let whole = header.is_final && !header.rsv1 && !header.rsv2 && !header.rsv3;
        let fits = len <= rules.max_frame.min(rules.max_message) as u64;
        match data {
            Some(text)
                if whole
                    && fits
                    && !self.fragmented
                    && !rules.closing
                    && header.mask.is_some() == rules.server =>
            {
                self.message(header, header_len, len as usize, text)
            }
            _ => {
                if matches!(header.opcode, OpCode::Data(_)) {
                    // Binary or text without FIN starts a fragmented message; a continuation
                    // with FIN ends it (tungstenite refuses every other order).
                    self.fragmented = !header.is_final;
                }
                self.to_tungstenite = header_len as u64 + len;
                self.for_tungstenite()
            }
        }
    }

    /// The whole data frame at the front, once all of it is here.
    fn message(
        &mut self,
        header: FrameHeader,
        header_len: usize,
        len: usize,
        text: bool,
    ) -> Option<Inbound> {
        if self.buf.len() < header_len + len {
            return None; // the buffer grows as the bytes come, not on the header's word
        }
        let _ = self.buf.split_to(header_len);
        let mut payload = self.buf.split_to(len);
        if let Some(mask) = header.mask {
            apply_mask(&mut payload, mask);
        }
        let payload = payload.freeze();
        Some(if text {
            match payload.try_into() {
                Ok(text) => Inbound::Message(Message::Text(text)),
                Err(_) => Inbound::Bad(CloseCode::INVALID_DATA, "invalid UTF-8 in a text message"),
            }
        } else {
            Inbound::Message(Message::Binary(payload))
        })
    }

    /// As much of tungstenite's current frame as is here.
    fn for_tungstenite(&mut self) -> Option<Inbound> {
        let take = self
            .buf
            .len()
            .min(usize::try_from(self.to_tungstenite).unwrap_or(usize::MAX));
        if take == 0 {
            return None;
        }
        self.to_tungstenite -= take as u64;
        Some(Inbound::Tungstenite(self.buf.split_to(take)))
    }

    /// With nothing held, lets go of a buffer grown past `keep` bytes if the traffic since the
    /// last such point fit in `keep` (as `MemStream::shrink_if_idle`).
    pub(crate) fn shrink_if_idle(&mut self, keep: usize) {
        if self.buf.is_empty() {
            if self.buf.capacity() > keep && self.peak <= keep {
                self.buf = BytesMut::new();
            }
            self.peak = 0;
        }
    }
}

/// XORs `bytes` with the 4-byte `mask`, RFC 6455 section 5.3, eight bytes at a time.
pub(crate) fn apply_mask(bytes: &mut [u8], mask: [u8; 4]) {
    let word = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = bytes.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        chunk.copy_from_slice(&(u64::from_ne_bytes(eight) ^ word).to_ne_bytes());
    }
    for (b, m) in chunks.into_remainder().iter_mut().zip(mask.iter().cycle()) {
        *b ^= m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking_matches_the_bytewise_rule_at_every_length() {
        let mask = [0x12, 0x34, 0x56, 0x78];
        for len in 0..40 {
            let original: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut masked = original.clone();
            apply_mask(&mut masked, mask);
            let expected: Vec<u8> = original
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ mask[i % 4])
                .collect();
            assert_eq!(masked, expected, "length {len}");
        }
    }
}
