//! The receive side of an open session. Whole, unfragmented data frames are taken apart here,
//! straight from the received bytes — where ark-tcp read them ([`lendable`]), or in [`Frames`]
//! when they span reads: unmasked in place and lent to the handler ([`ReceivedData`]). Every
//! other frame (control frames, fragments, anything unusual or over a limit) goes to
//! tungstenite whole and in order, so it keeps judging what the protocol allows.
//!
//! Before this, every received byte was copied into tungstenite's input stream, then
//! zero-filled and copied again into its read buffer: two copies and a fill per message that
//! the hand-written tokio peer does not pay.

use bytes::{Buf, BytesMut};

use crate::proto::close::{BAD_UTF8, CloseCode};
use crate::proto::data::ReceivedData;
use crate::proto::deflate::Inflater;

/// Opcodes of data frames (RFC 6455 section 5.2).
const OPCODE_CONTINUE: u8 = 0;
pub(crate) const OPCODE_TEXT: u8 = 1;
pub(crate) const OPCODE_BINARY: u8 = 2;

/// A frame header as RFC 6455 section 5.2 lays it out; which combinations are allowed is
/// tungstenite's to judge for every frame this crate does not take apart itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) fin: bool,
    /// RSV1-3, as the high bits of the first byte leave them.
    pub(crate) rsv: u8,
    pub(crate) opcode: u8,
    pub(crate) mask: Option<[u8; 4]>,
    /// Payload length (as sent, not checked against any limit).
    pub(crate) len: u64,
    /// Bytes of the header itself.
    pub(crate) head_len: usize,
}

impl Head {
    /// The header at the front of `buf`; `None` until all of it is there.
    pub(crate) fn parse(buf: &[u8]) -> Option<Head> {
        let (&first, rest) = buf.split_first()?;
        let (&second, rest) = rest.split_first()?;
        let (len, rest) = match second & 0x7f {
            126 => {
                let (bytes, rest) = rest.split_first_chunk::<2>()?;
                (u64::from(u16::from_be_bytes(*bytes)), rest)
            }
            127 => {
                let (bytes, rest) = rest.split_first_chunk::<8>()?;
                (u64::from_be_bytes(*bytes), rest)
            }
            short => (u64::from(short), rest),
        };
        let (mask, rest) = if second & 0x80 != 0 {
            let (mask, rest) = rest.split_first_chunk::<4>()?;
            (Some(*mask), rest)
        } else {
            (None, rest)
        };
        Some(Head {
            fin: first & 0x80 != 0,
            rsv: first & 0x70,
            opcode: first & 0x0f,
            mask,
            len,
            head_len: buf.len() - rest.len(),
        })
    }

    /// Writes a final frame's header for `len` payload bytes into `out`; the bytes written.
    /// `opcode` may carry RSV1 (0x40: a compressed message).
    pub(crate) fn write_final(
        opcode: u8,
        len: usize,
        mask: Option<[u8; 4]>,
        out: &mut [u8; 14],
    ) -> usize {
        out[0] = 0x80 | opcode;
        let mask_bit = if mask.is_some() { 0x80 } else { 0 };
        let mut n = match len {
            0..=125 => {
                out[1] = mask_bit | len as u8;
                2
            }
            126..=65_535 => {
                out[1] = mask_bit | 126;
                out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                4
            }
            _ => {
                out[1] = mask_bit | 127;
                out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
                10
            }
        };
        if let Some(mask) = mask {
            out[n..n + 4].copy_from_slice(&mask);
            n += 4;
        }
        n
    }
}

/// What the next received bytes are.
pub(crate) enum Inbound {
    /// A whole text or binary message of `len` bytes at the front of the buffer, unmasked
    /// (text: valid UTF-8); [`Frames::lend`] lends it.
    Data { len: usize, text: bool },
    /// A whole compressed message, inflated (text: valid UTF-8); [`Frames::lend_inflated`]
    /// lends it.
    Inflated { text: bool },
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
    /// How far the text frame at the front is unmasked and checked as UTF-8 while it arrives.
    partial: Partial,
    /// permessage-deflate's decompressor, once negotiated.
    inflate: Option<Inflater>,
    /// A compressed message is under way (its first frame was not final): whether it is text.
    /// Its continuations are inflated here, not given to tungstenite.
    compressed: Option<bool>,
    /// A fragmented text message is under way in tungstenite: its UTF-8 so far, checked here
    /// as its bytes pass (tungstenite checks a frame only once all of it is in).
    text: Option<Utf8Stream>,
    /// The frame passing to tungstenite is one of that message's.
    passing: Option<Passing>,
}

/// Where the checks of [`Frames::text`] are in the frame passing to tungstenite.
#[derive(Debug, Clone, Copy)]
struct Passing {
    mask: Option<[u8; 4]>,
    /// Header bytes still to pass.
    head_left: usize,
    /// Payload bytes passed.
    offset: usize,
    /// The message's last frame.
    last: bool,
}

/// UTF-8 checked across pieces: what arrived is valid but for a sequence cut at its end,
/// held here until the rest comes.
#[derive(Debug, Default, Clone, Copy)]
struct Utf8Stream {
    cut: [u8; 4],
    held: usize,
}

impl Utf8Stream {
    /// Checks the next `bytes`; `false` at the first that cannot be UTF-8.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while self.held > 0 {
            let Some((&first, rest)) = bytes.split_first() else {
                return true;
            };
            self.cut[self.held] = first;
            self.held += 1;
            bytes = rest;
            match std::str::from_utf8(&self.cut[..self.held]) {
                Ok(_) => self.held = 0,
                Err(e) if e.error_len().is_none() && self.held < 4 => {}
                Err(_) => return false,
            }
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => true,
            Err(e) if e.error_len().is_none() => {
                let cut = &bytes[e.valid_up_to()..];
                self.cut[..cut.len()].copy_from_slice(cut);
                self.held = cut.len();
                true
            }
            Err(_) => false,
        }
    }
}

/// A text frame's payload bytes unmasked in place, and checked as UTF-8, so far (a sequence
/// cut by the end of what arrived waits for the rest): bad text is refused at its first bad
/// byte, not when the whole frame is in.
#[derive(Debug, Default, Clone, Copy)]
struct Partial {
    opened: usize,
    valid: usize,
}

/// What a received frame is, for [`Frames::next`].
enum Kind {
    /// A whole plain text (`true`) or binary message this crate takes apart.
    Plain(bool),
    /// A frame of a compressed message.
    Compressed,
    /// Only tungstenite may read it.
    Tungstenite,
    Bad(CloseCode, &'static str),
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
        let head = Head::parse(&self.buf)?;
        match self.kind(&head, rules) {
            Kind::Plain(text) => self.message(&head, text),
            Kind::Compressed => self.compressed_frame(&head, rules),
            Kind::Tungstenite => self.route(&head),
            Kind::Bad(code, reason) => Some(Inbound::Bad(code, reason)),
        }
    }

    /// Decompresses the messages received from now on (permessage-deflate was negotiated).
    pub(crate) fn set_inflater(&mut self, inflater: Inflater) {
        self.inflate = Some(inflater);
    }

    /// Who reads the frame `head` starts. A compressed message (RSV1 on its first frame, RFC
    /// 7692 6) is this crate's from its first frame to its last; control frames between its
    /// frames are tungstenite's, a data frame there is a protocol error.
    fn kind(&self, head: &Head, rules: Rules) -> Kind {
        const RSV1: u8 = 0x40;
        let masked_right = head.mask.is_some() == rules.server;
        if self.compressed.is_some() {
            return match head.opcode {
                0x8.. => Kind::Tungstenite,
                OPCODE_CONTINUE if head.rsv == 0 && masked_right => Kind::Compressed,
                _ => Kind::Bad(
                    CloseCode::PROTOCOL_ERROR,
                    "a frame that cannot continue a compressed message",
                ),
            };
        }
        let starts_compressed = self.inflate.is_some()
            && head.rsv == RSV1
            && matches!(head.opcode, OPCODE_TEXT | OPCODE_BINARY)
            && !self.fragmented
            && masked_right;
        if starts_compressed {
            return Kind::Compressed;
        }
        match plain_data(head, rules, self.fragmented) {
            Some(text) => Kind::Plain(text),
            None => Kind::Tungstenite,
        }
    }

    /// A frame of a compressed message, once all of it is here: inflated (bounded by
    /// `max_message`, text checked as it comes out); the message once its last frame is in.
    /// After a close was sent or received it is read and dropped.
    fn compressed_frame(&mut self, head: &Head, rules: Rules) -> Option<Inbound> {
        let len = usize::try_from(head.len).unwrap_or(usize::MAX);
        if len > rules.max_frame {
            return Some(Inbound::Bad(CloseCode::TOO_BIG, "frame too big"));
        }
        if self.buf.len() - head.head_len < len {
            return None;
        }
        self.buf.advance(head.head_len);
        let text = *self.compressed.get_or_insert(head.opcode == OPCODE_TEXT);
        if head.fin {
            self.compressed = None;
        }
        let payload = &mut self.buf[..len];
        if let Some(mask) = head.mask {
            apply_mask(payload, mask);
        }
        let inflate = self.inflate.as_mut()?;
        let outcome = inflate.inflate(payload, head.fin, (rules.max_message, text));
        self.buf.advance(len);
        if let Err((code, reason)) = outcome {
            return Some(Inbound::Bad(code, reason));
        }
        if rules.closing {
            inflate.clear();
            return self.next(rules);
        }
        match head.fin {
            true => Some(Inbound::Inflated { text }),
            false => self.next(rules),
        }
    }

    /// Lends the message [`next`](Self::next) returned as [`Inbound::Inflated`]; the
    /// decompressor's buffer is cleared for the next one when the lent value goes.
    pub(crate) fn lend_inflated(&mut self, text: bool) -> Option<ReceivedData<'_>> {
        Some(self.inflate.as_mut()?.lend(text))
    }

    /// The inflated message was delivered.
    pub(crate) fn inflated_delivered(&mut self) {
        if let Some(inflate) = &mut self.inflate {
            inflate.clear();
        }
    }

    /// Nothing is held and no fragmented message is under way: the next received bytes may be
    /// taken apart where they were read ([`lendable`]). While tungstenite reassembles a
    /// fragmented message, every frame goes to it, so that a data frame inside the message is
    /// its protocol error (1002), not a message of its own.
    pub(crate) fn is_clear(&self) -> bool {
        self.buf.is_empty()
            && self.to_tungstenite == 0
            && !self.fragmented
            && self.compressed.is_none()
    }

    /// How many of `input`'s bytes to [`push`](Self::push) next: what the frame held lacks
    /// (up to a header's longest form while the header is incomplete), or with nothing held
    /// the whole frame `input` starts with. At least 1; the caller takes at most all of
    /// `input`. The frames after it are then lent where they were read.
    pub(crate) fn wanted(&self, input: &[u8]) -> usize {
        const LONGEST_HEAD: usize = 14;
        let held = self.buf.len();
        let need = if self.to_tungstenite > 0 {
            usize::try_from(self.to_tungstenite).unwrap_or(usize::MAX)
        } else {
            let front = if held == 0 { input } else { &self.buf[..] };
            match Head::parse(front) {
                Some(head) => usize::try_from(head.len)
                    .unwrap_or(usize::MAX)
                    .saturating_add(head.head_len)
                    .saturating_sub(held),
                None if held == 0 => input.len(),
                None => LONGEST_HEAD.saturating_sub(held),
            }
        };
        need.max(1)
    }

    /// Sends the frame `head` starts to tungstenite (checking a fragmented text message's
    /// UTF-8 on the way).
    fn route(&mut self, head: &Head) -> Option<Inbound> {
        if matches!(head.opcode, OPCODE_CONTINUE | OPCODE_TEXT | OPCODE_BINARY) {
            let continues = head.opcode == OPCODE_CONTINUE && self.fragmented;
            if !continues {
                // A new message (or a protocol error, tungstenite's to judge).
                let fragments = head.opcode == OPCODE_TEXT && !head.fin && !self.fragmented;
                self.text = fragments.then(Utf8Stream::default);
            }
            self.passing = self.text.map(|_| Passing {
                mask: head.mask,
                head_left: head.head_len,
                offset: 0,
                last: head.fin,
            });
            // Binary or text without FIN starts a fragmented message; a continuation with FIN
            // ends it (tungstenite refuses every other order).
            self.fragmented = !head.fin;
        }
        self.to_tungstenite = (head.head_len as u64).saturating_add(head.len);
        self.for_tungstenite()
    }

    /// Checks the UTF-8 of `bytes` (a piece of the frame passing to tungstenite, header
    /// first) if that frame is a fragmented text message's.
    fn check_passing(&mut self, mut bytes: &[u8]) -> bool {
        let (Some(passing), Some(text)) = (&mut self.passing, &mut self.text) else {
            return true;
        };
        let head = passing.head_left.min(bytes.len());
        passing.head_left -= head;
        bytes = &bytes[head..];
        let mut plain = [0u8; 256];
        for piece in bytes.chunks(plain.len()) {
            let plain = &mut plain[..piece.len()];
            plain.copy_from_slice(piece);
            if let Some(mask) = passing.mask {
                apply_mask(plain, rotated(mask, passing.offset));
            }
            passing.offset += piece.len();
            if !text.feed(plain) {
                return false;
            }
        }
        true
    }

    /// The whole data frame at the front, once all of it is here; a text frame's bytes are
    /// unmasked and checked as they arrive.
    fn message(&mut self, head: &Head, text: bool) -> Option<Inbound> {
        let len = head.len as usize;
        let arrived = (self.buf.len() - head.head_len).min(len);
        if arrived < len {
            if text && let Err((code, reason)) = self.check_arrived(head, arrived) {
                return Some(Inbound::Bad(code, reason));
            }
            return None; // the buffer grows as the bytes come, not on the header's word
        }
        let Partial { opened, valid } = std::mem::take(&mut self.partial);
        self.buf.advance(head.head_len);
        let payload = &mut self.buf[..len];
        if let Some(mask) = head.mask {
            apply_mask(&mut payload[opened..], rotated(mask, opened));
        }
        if text && std::str::from_utf8(&payload[valid..]).is_err() {
            return Some(Inbound::Bad(BAD_UTF8.0, BAD_UTF8.1));
        }
        Some(Inbound::Data { len, text })
    }

    /// Unmasks and checks the `arrived` payload bytes of the text frame `head` not yet seen.
    fn check_arrived(
        &mut self,
        head: &Head,
        arrived: usize,
    ) -> Result<(), (CloseCode, &'static str)> {
        let Partial { opened, valid } = &mut self.partial;
        let payload = &mut self.buf[head.head_len..head.head_len + arrived];
        if let Some(mask) = head.mask {
            apply_mask(&mut payload[*opened..], rotated(mask, *opened));
        }
        *opened = arrived;
        check_utf8_from(payload, valid)
    }

    /// Lends the message [`next`](Self::next) returned as [`Inbound::Data`]; it leaves the
    /// buffer when the lent value goes (split off if the handler keeps it).
    pub(crate) fn lend(&mut self, len: usize, text: bool) -> ReceivedData<'_> {
        ReceivedData::lent(&mut self.buf, len, text)
    }

    /// Lends a message taken apart where it was read ([`lendable`]); if the handler keeps it,
    /// it is copied into this buffer's storage (empty: nothing is held).
    pub(crate) fn lend_read<'a>(&'a mut self, bytes: &'a [u8], text: bool) -> ReceivedData<'a> {
        ReceivedData::read(bytes, &mut self.buf, text)
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
        let bytes = self.buf.split_to(take);
        if !self.check_passing(&bytes) {
            return Some(Inbound::Bad(BAD_UTF8.0, BAD_UTF8.1));
        }
        if self.to_tungstenite == 0 && self.passing.take().is_some_and(|p| p.last) {
            self.text = None;
        }
        Some(Inbound::Tungstenite(bytes))
    }

    /// With nothing held, lets go of a buffer grown past `keep` bytes if the traffic since the
    /// last such point fit in `keep` (as `MemStream::shrink_if_idle`).
    pub(crate) fn shrink_if_idle(&mut self, keep: usize) {
        // Not inside a compressed message: its frames so far may have given no output yet,
        // and its decompressor must see the rest.
        if let Some(inflate) = self.inflate.as_mut().filter(|_| self.compressed.is_none()) {
            inflate.shrink_if_idle(keep);
        }
        if self.buf.is_empty() {
            if self.buf.capacity() > keep && self.peak <= keep {
                self.buf = BytesMut::new();
            }
            self.peak = 0;
        }
    }
}

/// A whole data message at the front of received bytes, taken apart where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lendable {
    /// Bytes of the frame's header; the payload follows.
    pub(crate) head_len: usize,
    /// Payload bytes (unmasked, and for text valid UTF-8).
    pub(crate) len: usize,
    pub(crate) text: bool,
}

/// The whole plain data frame at the front of `input`, with its payload unmasked in place
/// (and a text message's UTF-8 checked), for a session whose [`Frames`] hold nothing. `None`
/// when the front is anything else — a partial frame, a control frame, a fragment, a frame
/// over a limit — which then goes through [`Frames`] as before. Nothing is copied.
pub(crate) fn lendable(
    input: &mut [u8],
    rules: Rules,
) -> Option<Result<Lendable, (CloseCode, &'static str)>> {
    let head = Head::parse(input)?;
    let text = plain_data(&head, rules, false)?;
    let len = head.len as usize;
    let payload = input.get_mut(head.head_len..head.head_len + len)?;
    Some(open_payload(payload, head.mask, text).map(|()| Lendable {
        head_len: head.head_len,
        len,
        text,
    }))
}

/// For a text or binary frame this crate takes apart itself (whole, final, no extension bits,
/// within the limits, masked as the role requires, no fragmented message or close under way),
/// whether it is text; `None` for every frame tungstenite must read.
fn plain_data(head: &Head, rules: Rules, fragmented: bool) -> Option<bool> {
    let text = match head.opcode {
        OPCODE_BINARY => false,
        OPCODE_TEXT => true,
        _ => return None,
    };
    let plain = head.fin && head.rsv == 0 && !fragmented && !rules.closing;
    let fits = head.len <= rules.max_frame.min(rules.max_message) as u64;
    (plain && fits && head.mask.is_some() == rules.server).then_some(text)
}

/// Unmasks a whole data frame's payload in place; a text message must be valid UTF-8.
fn open_payload(
    payload: &mut [u8],
    mask: Option<[u8; 4]>,
    text: bool,
) -> Result<(), (CloseCode, &'static str)> {
    if let Some(mask) = mask {
        apply_mask(payload, mask);
    }
    if text && std::str::from_utf8(payload).is_err() {
        return Err(BAD_UTF8);
    }
    Ok(())
}

/// Checks the text of `bytes` past `checked` (what earlier calls found valid), moving
/// `checked` on; a sequence cut at the end waits for more bytes. For text that stays in one
/// buffer as it grows (a frame arriving, a message inflating); [`Utf8Stream`] checks text
/// whose earlier pieces are gone.
pub(crate) fn check_utf8_from(
    bytes: &[u8],
    checked: &mut usize,
) -> Result<(), (CloseCode, &'static str)> {
    match std::str::from_utf8(&bytes[*checked..]) {
        Ok(_) => *checked = bytes.len(),
        Err(e) if e.error_len().is_none() => *checked += e.valid_up_to(),
        Err(_) => return Err(BAD_UTF8),
    }
    Ok(())
}

/// The mask for payload bytes from `offset` on.
fn rotated(mask: [u8; 4], offset: usize) -> [u8; 4] {
    let mut rotated = mask;
    rotated.rotate_left(offset % 4);
    rotated
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
    fn headers_written_and_parsed_agree_with_tungstenite() {
        use tungstenite::protocol::frame::FrameHeader;
        use tungstenite::protocol::frame::coding::{Data, OpCode};
        for len in [0usize, 1, 125, 126, 65_535, 65_536, 70_001] {
            for mask in [None, Some([1, 2, 3, 4])] {
                for (opcode, data) in [(OPCODE_BINARY, Data::Binary), (OPCODE_TEXT, Data::Text)] {
                    let mut head = [0u8; 14];
                    let n = Head::write_final(opcode, len, mask, &mut head);
                    let mut cursor = std::io::Cursor::new(&head[..n]);
                    let (theirs, their_len) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
                    assert_eq!(cursor.position() as usize, n);
                    assert_eq!(their_len, len as u64);
                    assert_eq!((theirs.mask, theirs.opcode), (mask, OpCode::Data(data)));
                    assert!(theirs.is_final && !theirs.rsv1 && !theirs.rsv2 && !theirs.rsv3);
                    let ours = Head::parse(&head[..n]).unwrap();
                    let expected = Head {
                        fin: true,
                        rsv: 0,
                        opcode,
                        mask,
                        len: len as u64,
                        head_len: n,
                    };
                    assert_eq!(ours, expected);
                    for cut in 0..n {
                        assert_eq!(Head::parse(&head[..cut]), None, "{cut} of {n} bytes");
                    }
                }
            }
        }
    }

    const RULES: Rules = Rules {
        server: true,
        max_frame: 1000,
        max_message: 1000,
        closing: false,
    };

    /// A final frame with `opcode` and `payload`, masked with `mask` if given.
    fn frame(first: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
        let mut head = [0u8; 14];
        let n = Head::write_final(first & 0x0f, payload.len(), mask, &mut head);
        head[0] = first;
        let mut out = head[..n].to_vec();
        let start = out.len();
        out.extend_from_slice(payload);
        if let Some(mask) = mask {
            apply_mask(&mut out[start..], mask);
        }
        out
    }

    #[test]
    fn whole_plain_data_frames_are_unmasked_where_they_were_read_and_nothing_else_is_taken() {
        const MASK: Option<[u8; 4]> = Some([9, 8, 7, 6]);
        let mut read = frame(0x82, b"binary", MASK);
        read.extend(frame(0x81, b"text", MASK));
        let first = lendable(&mut read, RULES).unwrap().unwrap();
        assert_eq!((first.head_len, first.len, first.text), (6, 6, false));
        assert_eq!(&read[6..12], b"binary", "unmasked in place");
        let second = lendable(&mut read[12..], RULES).unwrap().unwrap();
        assert_eq!(&read[12 + second.head_len..], b"text");
        assert!(second.text);

        let closing = Rules {
            closing: true,
            ..RULES
        };
        let client = Rules {
            server: false,
            ..RULES
        };
        let untaken: [(Vec<u8>, Rules, &str); 8] = [
            (frame(0x82, b"whole", MASK)[..8].to_vec(), RULES, "partial"),
            (
                frame(0x82, b"", MASK)[..3].to_vec(),
                RULES,
                "partial header",
            ),
            (frame(0x89, b"ping", MASK), RULES, "control frame"),
            (frame(0x02, b"fragment", MASK), RULES, "not final"),
            (frame(0xc2, b"compressed", MASK), RULES, "RSV1"),
            (frame(0x82, &[0; 1001], MASK), RULES, "over max_frame"),
            (frame(0x82, b"late", MASK), closing, "closing"),
            (
                frame(0x82, b"masked", MASK),
                client,
                "a server's frames are not masked",
            ),
        ];
        for (mut bytes, rules, why) in untaken {
            let before = bytes.clone();
            assert_eq!(lendable(&mut bytes, rules), None, "{why}");
            assert_eq!(bytes, before, "{why}: left as read");
        }
        let mut bad_text = frame(0x81, &[0xff, 0xfe], MASK);
        assert_eq!(lendable(&mut bad_text, RULES), Some(Err(BAD_UTF8)));
    }

    #[test]
    fn what_is_wanted_is_the_rest_of_the_frame_held_or_the_whole_next_one() {
        let ping = frame(0x89, b"ping", Some([1, 2, 3, 4]));
        let mut frames = Frames::default();
        assert_eq!(
            frames.wanted(&ping),
            ping.len(),
            "nothing held: the whole frame"
        );
        assert_eq!(
            frames.wanted(&ping[..1]),
            1,
            "nothing held, header cut: all of it"
        );
        frames.push(&ping[..1]);
        assert_eq!(
            frames.wanted(&ping[1..]),
            13,
            "header cut: its longest form"
        );
        frames.push(&ping[1..3]);
        assert_eq!(frames.wanted(&ping[3..]), 11, "header still cut");
        frames.push(&ping[3..6]);
        assert_eq!(
            frames.wanted(&ping[6..]),
            4,
            "header whole: the rest of the frame"
        );
        frames.push(&ping[6..]);
        assert!(matches!(frames.next(RULES), Some(Inbound::Tungstenite(_))));
        assert!(frames.is_clear());
    }

    #[test]
    fn utf8_is_checked_across_pieces_cut_anywhere() {
        let good = "κόσμε €𝄞 text".as_bytes();
        for cut in 0..=good.len() {
            for second in cut..=good.len() {
                let mut stream = Utf8Stream::default();
                assert!(stream.feed(&good[..cut]) && stream.feed(&good[cut..second]));
                assert!(
                    stream.feed(&good[second..]) && stream.held == 0,
                    "{cut}/{second}"
                );
            }
        }
        for bad in [
            &b"ok\xf4\x90\x80\x80"[..],
            b"\xed\xa0\x80",
            b"\xc0\xaf",
            b"\xff",
        ] {
            let refused = (0..bad.len()).any(|cut| {
                let mut stream = Utf8Stream::default();
                !(stream.feed(&bad[..cut]) && stream.feed(&bad[cut..]))
            });
            let whole = !Utf8Stream::default().feed(bad);
            assert!(refused && whole, "{bad:?}");
        }
    }

    #[test]
    fn a_fragmented_text_message_is_refused_at_its_first_bad_byte() {
        const MASK: Option<[u8; 4]> = Some([3, 1, 4, 1]);
        let mut first = frame(
            0x01,
            b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90\x80\x80edited",
            MASK,
        );
        let mut frames = Frames::default();
        frames.push(&first[..8]);
        assert!(matches!(frames.next(RULES), Some(Inbound::Tungstenite(_))));
        frames.push(&first[8..]);
        assert_eq!(
            frames.next(RULES).map(|i| matches!(i, Inbound::Bad(..))),
            Some(true)
        );
        // A valid one passes whole, across frames, with a control frame between.
        first = frame(0x01, "κό".as_bytes(), MASK);
        let mut rest = frame(0x89, b"", MASK);
        rest.extend(frame(0x80, "σμε".as_bytes(), MASK));
        let mut frames = Frames::default();
        for piece in first.iter().chain(&rest) {
            frames.push(&[*piece]);
            while let Some(inbound) = frames.next(RULES) {
                assert!(matches!(inbound, Inbound::Tungstenite(_)));
            }
        }
        assert!(frames.is_clear() && frames.text.is_none());
    }

    /// A compressed message in two frames, with the end of a turn (and without context
    /// takeover, the decompressor's release) between them: the first frame gives no output
    /// yet, and the message still comes out whole.
    #[cfg(feature = "deflate")]
    #[test]
    fn a_compressed_message_survives_a_turn_between_its_frames() {
        use crate::proto::deflate::{Agreed, Deflater, Inflater};
        let agreed = Agreed {
            server_no_context_takeover: true,
            client_no_context_takeover: true,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
        };
        let config = crate::DeflateConfig::default();
        let message = b"compress me, compress me, compress me".repeat(40);
        let compressed = Deflater::new(agreed.outbound(false), &config)
            .compress(&message)
            .unwrap()
            .to_vec();
        let mut frames = Frames::default();
        frames.set_inflater(Inflater::new(agreed.inbound(true)));
        const MASK: Option<[u8; 4]> = Some([5, 6, 7, 8]);
        frames.push(&frame(0x42, &compressed[..1], MASK)); // RSV1, binary, not final
        assert!(frames.next(RULES).is_none());
        frames.shrink_if_idle(4096);
        frames.push(&frame(0x80, &compressed[1..], MASK)); // final continuation
        let rules = Rules {
            max_message: 1 << 20,
            ..RULES
        };
        assert!(matches!(
            frames.next(rules),
            Some(Inbound::Inflated { text: false })
        ));
        assert_eq!(frames.lend_inflated(false).unwrap().bytes(), &message[..]);
    }

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
