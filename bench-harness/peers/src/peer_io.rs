//! Byte handling shared by the peer programs (`peer-tokio-loopback`, `peer-raw-loopback`):
//! a contiguous receive buffer and the length-prefixed framing ark-loopback's TCP uses (a
//! 4-byte big-endian length, then the payload), decoded in place.
//!
//! ```
//! use ark_peers::peer_io::{RecvBuf, push_frame, split_frames};
//!
//! let mut wire = Vec::new();
//! push_frame(&mut wire, b"hello");
//! push_frame(&mut wire, b"world");
//! let mut buf = RecvBuf::with_capacity(64);
//! buf.spare()[..wire.len() - 2].copy_from_slice(&wire[..wire.len() - 2]);
//! buf.filled(wire.len() - 2);
//! let mut seen = Vec::new();
//! let used = split_frames(buf.data(), 1 << 20, |frame| seen.push(frame.to_vec())).unwrap();
//! assert_eq!(seen, vec![b"hello".to_vec()]);
//! buf.consume(used);
//! assert_eq!(buf.data(), &wire[9..wire.len() - 2]);
//! ```

/// Bytes of the length prefix.
pub const PREFIX: usize = 4;

/// A frame announced a length over the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTooLong {
    /// The announced length.
    pub len: usize,
    /// The limit.
    pub max: usize,
}

impl std::fmt::Display for FrameTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "frame of {} bytes over the limit of {}",
            self.len, self.max
        )
    }
}

impl std::error::Error for FrameTooLong {}

/// Calls `frame` for every whole frame at the front of `data`; returns the bytes they took
/// (a partial frame at the end stays).
///
/// # Errors
/// A frame announces more than `max` bytes.
#[inline]
pub fn split_frames(
    data: &[u8],
    max: usize,
    mut frame: impl FnMut(&[u8]),
) -> Result<usize, FrameTooLong> {
    let mut at = 0;
    while let Some(prefix) = data.get(at..at + PREFIX) {
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        if len > max {
            return Err(FrameTooLong { len, max });
        }
        let Some(payload) = data.get(at + PREFIX..at + PREFIX + len) else {
            break;
        };
        frame(payload);
        at += PREFIX + len;
    }
    Ok(at)
}

/// Appends `payload` to `out` as one frame.
#[inline]
pub fn push_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// A contiguous receive buffer: reads land in [`RecvBuf::spare`], decoded bytes leave from the
/// front with [`RecvBuf::consume`]; unread bytes move to the front only when the space behind
/// them runs short, and the buffer grows only when unread bytes fill it.
#[derive(Debug)]
pub struct RecvBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl RecvBuf {
    /// An empty buffer of `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        RecvBuf {
            buf: vec![0; capacity.max(PREFIX)],
            start: 0,
            end: 0,
        }
    }

    /// The unread bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The unread bytes, mutable (a peer that unmasks in place).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    /// Drops `n` bytes from the front of the unread bytes.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        self.start += n;
        debug_assert!(self.start <= self.end);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Room for the next read: at least half the buffer (or `need` more bytes, if a frame
    /// announced them), after moving unread bytes to the front or growing.
    #[inline]
    pub fn spare(&mut self) -> &mut [u8] {
        self.reserve(0);
        &mut self.buf[self.end..]
    }

    /// Makes room for `need` more bytes behind the unread ones (at least half the buffer).
    pub fn reserve(&mut self, need: usize) {
        let want = need.max(self.buf.len() / 2).max(1);
        if self.buf.len() - self.end >= want {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < want {
            let len = (self.end + want).max(self.buf.len() * 2);
            self.buf.resize(len, 0);
        }
    }

    /// Marks `n` bytes of [`RecvBuf::spare`] as received.
    #[inline]
    pub fn filled(&mut self, n: usize) {
        self.end += n;
        debug_assert!(self.end <= self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_reads_come_out_whole_and_in_order() {
        let mut wire = Vec::new();
        for i in 0..100u32 {
            push_frame(&mut wire, &vec![i as u8; (i as usize * 37) % 3000]);
        }
        let mut buf = RecvBuf::with_capacity(512);
        let mut seen = Vec::new();
        for chunk in wire.chunks(113) {
            buf.spare()[..chunk.len()].copy_from_slice(chunk);
            buf.filled(chunk.len());
            let used = split_frames(buf.data(), 1 << 20, |f| seen.push(f.to_vec())).unwrap();
            buf.consume(used);
        }
        assert_eq!(seen.len(), 100);
        for (i, frame) in seen.iter().enumerate() {
            assert_eq!(frame, &vec![i as u8; (i * 37) % 3000]);
        }
        assert!(buf.data().is_empty());
    }

    #[test]
    fn an_oversized_length_is_an_error() {
        let mut wire = Vec::new();
        push_frame(&mut wire, &[0; 100]);
        assert_eq!(
            split_frames(&wire, 99, |_| {}),
            Err(FrameTooLong { len: 100, max: 99 })
        );
    }

    #[test]
    fn spare_room_is_at_least_half_the_buffer() {
        let mut buf = RecvBuf::with_capacity(100);
        buf.filled(90);
        buf.consume(80);
        assert!(buf.spare().len() >= 50);
        assert_eq!(buf.data().len(), 10);
        buf.reserve(500);
        assert!(buf.spare().len() >= 500);
    }
}
