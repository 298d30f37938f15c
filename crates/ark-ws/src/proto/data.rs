//! [`ReceivedData`]: a whole text or binary message as [`WsHandler::on_data`] gets it — lent
//! from the bytes just read or from the session's receive buffer, or owned when tungstenite
//! reassembled it from fragments.
//!
//! [`WsHandler::on_data`]: crate::WsHandler::on_data

use bytes::{Buf, BytesMut};
use tungstenite::{Bytes, Message, Utf8Bytes};

/// A whole text or binary message, lent for the duration of
/// [`WsHandler::on_data`](crate::WsHandler::on_data): read it with [`bytes`](Self::bytes) or
/// [`text`](Self::text), or keep it with [`into_message`](Self::into_message) (a message
/// that arrived whole in one read is copied then; one that spanned reads is split off the
/// receive buffer without a copy).
#[derive(Debug)]
pub struct ReceivedData<'a> {
    inner: Inner<'a>,
}

#[derive(Debug)]
enum Inner<'a> {
    /// Where it was read (the TCP session's read buffer), unmasked; a text message is valid
    /// UTF-8 (checked on arrival). `spare` is the session's (empty) receive buffer, whose
    /// storage a kept message is copied into, so keeping messages allocates nothing once the
    /// handler drops each before the next.
    Read {
        bytes: &'a [u8],
        spare: &'a mut BytesMut,
        text: bool,
    },
    /// At the front of the receive buffer, unmasked; a text message is valid UTF-8 (checked
    /// on arrival).
    Lent {
        buf: &'a mut BytesMut,
        len: usize,
        text: bool,
    },
    /// A `Message::Text` or `Message::Binary` tungstenite reassembled from fragments.
    Owned(Message),
    /// Given away by `into_message`.
    Taken,
}

impl<'a> ReceivedData<'a> {
    /// The message of `len` bytes at the front of `buf` (text: already checked as UTF-8).
    pub(crate) fn lent(buf: &'a mut BytesMut, len: usize, text: bool) -> Self {
        debug_assert!(len <= buf.len());
        ReceivedData {
            inner: Inner::Lent { buf, len, text },
        }
    }

    /// The message `bytes`, unmasked where they were read (text: already checked as UTF-8);
    /// `spare` is the storage it is copied into if kept.
    pub(crate) fn read(bytes: &'a [u8], spare: &'a mut BytesMut, text: bool) -> Self {
        debug_assert!(spare.is_empty());
        ReceivedData {
            inner: Inner::Read { bytes, spare, text },
        }
    }

    /// A text or binary message tungstenite delivered.
    pub(crate) fn owned(message: Message) -> Self {
        debug_assert!(matches!(message, Message::Text(_) | Message::Binary(_)));
        ReceivedData {
            inner: Inner::Owned(message),
        }
    }

    /// Whether it is a text message (its bytes are valid UTF-8).
    pub fn is_text(&self) -> bool {
        match &self.inner {
            Inner::Read { text, .. } | Inner::Lent { text, .. } => *text,
            Inner::Owned(message) => message.is_text(),
            Inner::Taken => false,
        }
    }

    /// The payload.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        match &self.inner {
            Inner::Read { bytes, .. } => bytes,
            Inner::Lent { buf, len, .. } => &buf[..*len],
            Inner::Owned(Message::Text(text)) => text.as_bytes(),
            Inner::Owned(Message::Binary(bytes)) => bytes,
            Inner::Owned(_) | Inner::Taken => &[],
        }
    }

    /// The payload as text, for a text message (`None` for a binary one). Lent text is
    /// checked again here: use [`bytes`](Self::bytes) where the `&str` is not needed.
    pub fn text(&self) -> Option<&str> {
        match &self.inner {
            Inner::Owned(Message::Text(text)) => Some(text.as_str()),
            Inner::Read { text: true, .. } | Inner::Lent { text: true, .. } => {
                std::str::from_utf8(self.bytes()).ok()
            }
            _ => None,
        }
    }

    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message as an owned [`Message`]: copied when it was lent from the read, split off
    /// the receive buffer (no copy) when it spanned reads.
    pub fn into_message(mut self) -> Message {
        let (bytes, text) = match std::mem::replace(&mut self.inner, Inner::Taken) {
            Inner::Read { bytes, spare, text } => {
                spare.extend_from_slice(bytes);
                (spare.split().freeze(), text)
            }
            Inner::Lent { buf, len, text } => (buf.split_to(len).freeze(), text),
            Inner::Owned(message) => return message,
            Inner::Taken => return Message::Binary(Bytes::new()),
        };
        if text {
            // SAFETY: a lent text message was checked with `str::from_utf8` on arrival
            // (`inbound::open_payload`) and nothing changed its bytes since: this value held
            // the only borrow of them, and a copy has the same bytes. Checking again would
            // cost a second pass over every text message handlers take through `on_message`:
            // 18 ns per 1 KiB, 315 ns per 16 KiB (`str::from_utf8` on ASCII, measured on the
            // 2-core EPYC VM), against about 1 µs per 1 KiB echo.
            Message::Text(unsafe { Utf8Bytes::from_bytes_unchecked(bytes) })
        } else {
            Message::Binary(bytes)
        }
    }
}

impl Drop for ReceivedData<'_> {
    /// A lent message not taken leaves the receive buffer (no reference count touched).
    fn drop(&mut self) {
        if let Inner::Lent { buf, len, .. } = &mut self.inner {
            buf.advance(*len);
        }
    }
}
