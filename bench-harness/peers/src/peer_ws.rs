//! The WebSocket wire format (RFC 6455) as the hand-written peers use it: the opening
//! handshake (`httparse` for the headers, tungstenite's key derivation) and frames decoded in
//! place from a receive buffer, unmasked in place, encoded straight into a send buffer.
//!
//! Only what an echo benchmark needs: unfragmented binary messages, pings answered, a close
//! ends the connection. Anything else is an error that ends the connection.
//!
//! ```
//! use ark_peers::peer_ws::{Frame, Opcode, push_frame, split_frames};
//!
//! let mut wire = Vec::new();
//! push_frame(&mut wire, Opcode::Binary, b"echo me", Some([1, 2, 3, 4]));
//! let mut seen = Vec::new();
//! let used = split_frames(&mut wire, 1 << 20, |frame| {
//!     if let Frame::Binary(payload) = frame {
//!         seen.push(payload.to_vec());
//!     }
//! })
//! .unwrap();
//! assert_eq!((used, seen), (wire.len(), vec![b"echo me".to_vec()]));
//! ```

use std::fmt;

/// Frame opcodes the peers send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    /// A binary message.
    Binary = 0x2,
    /// Connection close.
    Close = 0x8,
    /// Ping.
    Ping = 0x9,
    /// Pong.
    Pong = 0xA,
}

/// A decoded frame, its payload unmasked.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A whole binary message.
    Binary(&'a [u8]),
    /// A ping, to be answered with its payload.
    Ping(&'a [u8]),
    /// A pong.
    Pong,
    /// The peer closes.
    Close,
}

/// Why a frame or handshake is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsError {
    /// A frame announced more than the limit.
    TooLong(u64),
    /// A fragmented message, reserved bits, or an opcode the peers do not handle.
    Unsupported(u8),
    /// The opening handshake was malformed or refused.
    Handshake(String),
}

impl fmt::Display for WsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WsError::TooLong(len) => write!(f, "frame of {len} bytes over the limit"),
            WsError::Unsupported(b) => write!(f, "unsupported frame (first byte {b:#04x})"),
            WsError::Handshake(why) => write!(f, "handshake: {why}"),
        }
    }
}

impl std::error::Error for WsError {}

/// XORs `payload` with the 4-byte `mask`, eight bytes at a time.
#[inline]
pub fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    let wide = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut chunks = payload.chunks_exact_mut(8);
    for chunk in &mut chunks {
        let word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes")) ^ wide;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    for (i, byte) in chunks.into_remainder().iter_mut().enumerate() {
        *byte ^= mask[i % 4];
    }
}

/// The header of the frame at the front of `data`: (first byte, header length, payload
/// length, mask), or `None` until the whole header is there.
#[inline]
fn header(data: &[u8]) -> Option<(u8, usize, u64, Option<[u8; 4]>)> {
    let (b0, b1) = (*data.first()?, *data.get(1)?);
    let (len, mut at) = match b1 & 0x7F {
        126 => (
            u64::from(u16::from_be_bytes(data.get(2..4)?.try_into().ok()?)),
            4,
        ),
        127 => (u64::from_be_bytes(data.get(2..10)?.try_into().ok()?), 10),
        n => (u64::from(n), 2),
    };
    let mask = if b1 & 0x80 != 0 {
        let key: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        at += 4;
        Some(key)
    } else {
        None
    };
    Some((b0, at, len, mask))
}

/// Calls `frame` for every whole frame at the front of `data` (unmasking payloads in place);
/// returns the bytes they took.
///
/// # Errors
/// A frame over `max` bytes, fragmented, with reserved bits, or of an unknown opcode.
pub fn split_frames(
    data: &mut [u8],
    max: usize,
    mut frame: impl FnMut(Frame<'_>),
) -> Result<usize, WsError> {
    let mut at = 0;
    while let Some((b0, head, len, mask)) = header(&data[at..]) {
        if len > max as u64 {
            return Err(WsError::TooLong(len));
        }
        let end = at + head + len as usize;
        if end > data.len() {
            break;
        }
        let payload = &mut data[at + head..end];
        if let Some(mask) = mask {
            apply_mask(payload, mask);
        }
        frame(match b0 {
            0x82 => Frame::Binary(payload),
            0x89 => Frame::Ping(payload),
            0x8A => Frame::Pong,
            0x88 => Frame::Close,
            other => return Err(WsError::Unsupported(other)),
        });
        at = end;
    }
    Ok(at)
}

/// A fresh random masking key for a client frame (RFC 6455 5.3): one 32-bit draw, as ark-ws
/// makes it.
#[inline]
pub fn fresh_mask() -> [u8; 4] {
    rand::random::<u32>().to_ne_bytes()
}

/// Appends one final frame of `opcode` with `payload`, masked with `mask` if given (clients
/// mask, servers do not).
#[inline]
pub fn push_frame(out: &mut Vec<u8>, opcode: Opcode, payload: &[u8], mask: Option<[u8; 4]>) {
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    out.push(0x80 | opcode as u8);
    match payload.len() {
        n @ 0..=125 => out.push(mask_bit | n as u8),
        n @ 126..=0xFFFF => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(mask) => {
            out.extend_from_slice(&mask);
            let start = out.len();
            out.extend_from_slice(payload);
            apply_mask(&mut out[start..], mask);
        }
        None => out.extend_from_slice(payload),
    }
}

/// The client's opening request for `host` with `key` (from [`client_key`]).
pub fn client_request(host: &str, key: &str) -> String {
    format!(
        "GET / HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// A fresh `Sec-WebSocket-Key`.
pub fn client_key() -> String {
    tungstenite::handshake::client::generate_key()
}

/// Parses a client's opening request at the front of `data`: `Ok(None)` until it is whole,
/// then its length and the server's response.
///
/// # Errors
/// Malformed, or not a WebSocket upgrade.
pub fn accept_request(data: &[u8]) -> Result<Option<(usize, String)>, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut request = httparse::Request::new(&mut headers);
    let len = match request.parse(data) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(WsError::Handshake(e.to_string())),
    };
    let key = request
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-key"))
        .ok_or_else(|| WsError::Handshake("no Sec-WebSocket-Key".into()))?;
    let accept = tungstenite::handshake::derive_accept_key(key.value);
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    Ok(Some((len, response)))
}

/// Parses the server's response at the front of `data` to a request made with `key`:
/// `Ok(None)` until it is whole, then its length.
///
/// # Errors
/// Malformed, not 101, or a wrong `Sec-WebSocket-Accept`.
pub fn check_response(data: &[u8], key: &str) -> Result<Option<usize>, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(data) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(WsError::Handshake(e.to_string())),
    };
    if response.code != Some(101) {
        return Err(WsError::Handshake(format!("status {:?}", response.code)));
    }
    let expected = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let accepted = response.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("sec-websocket-accept") && h.value == expected.as_bytes()
    });
    if !accepted {
        return Err(WsError::Handshake("wrong Sec-WebSocket-Accept".into()));
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_frames_of_every_length_class_round_trip() {
        let mut wire = Vec::new();
        let sizes = [0usize, 1, 125, 126, 1000, 65_535, 65_536, 70_000];
        for (i, &n) in sizes.iter().enumerate() {
            let payload: Vec<u8> = (0..n).map(|j| (i * 7 + j) as u8).collect();
            push_frame(
                &mut wire,
                Opcode::Binary,
                &payload,
                Some([9, 8, 7, i as u8]),
            );
        }
        let mut seen = Vec::new();
        let used = split_frames(&mut wire, 1 << 20, |f| match f {
            Frame::Binary(p) => seen.push(p.to_vec()),
            other => panic!("{other:?}"),
        })
        .unwrap();
        assert_eq!(used, wire.len());
        for (i, (&n, payload)) in sizes.iter().zip(&seen).enumerate() {
            let expected: Vec<u8> = (0..n).map(|j| (i * 7 + j) as u8).collect();
            assert_eq!(payload, &expected, "size {n}");
        }
    }

    #[test]
    fn a_partial_frame_waits_and_bad_frames_are_errors() {
        let mut wire = Vec::new();
        push_frame(&mut wire, Opcode::Binary, &[1; 300], None);
        let whole = wire.len();
        assert_eq!(split_frames(&mut wire[..whole - 1], 1 << 20, |_| {}), Ok(0));
        assert_eq!(
            split_frames(&mut wire, 299, |_| {}),
            Err(WsError::TooLong(300))
        );
        let mut text = vec![0x81, 0x00];
        assert_eq!(
            split_frames(&mut text, 10, |_| {}),
            Err(WsError::Unsupported(0x81))
        );
    }

    #[test]
    fn the_handshake_agrees_with_itself_and_refuses_a_wrong_key() {
        let key = client_key();
        let request = client_request("127.0.0.1:1", &key);
        assert_eq!(accept_request(&request.as_bytes()[..10]), Ok(None));
        let (len, response) = accept_request(request.as_bytes()).unwrap().unwrap();
        assert_eq!(len, request.len());
        assert_eq!(
            check_response(response.as_bytes(), &key),
            Ok(Some(response.len()))
        );
        assert!(check_response(response.as_bytes(), &client_key()).is_err());
    }
}
