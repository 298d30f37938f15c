//! `MemStream`: the in-memory stream tungstenite reads from and writes to. ark-tcp moves bytes
//! between it and the socket, so tungstenite never touches a file descriptor.

use std::io::{self, Read, Write};

use crate::proto::inbound::{Head, apply_mask};

/// Bytes received and not yet consumed by tungstenite, and bytes it wrote and we have not yet
/// handed to the TCP session.
#[derive(Debug)]
pub(crate) struct MemStream {
    inbox: Vec<u8>,
    read_pos: usize,
    pub(crate) outbox: Vec<u8>,
    /// The most bytes each buffer held since it was last idle: what the traffic needs.
    peak_in: usize,
    peak_out: usize,
    /// The send queue is at its limit: tungstenite's own writes (automatic pongs) wait.
    /// tungstenite then keeps only the latest pong it owes (RFC 6455 5.5.3) and writes it
    /// once the queue has room.
    pub(crate) blocked: bool,
    /// Reads end at the end of the HTTP head (`\r\n\r\n`) while the opening handshake runs,
    /// so tungstenite never reads frame bytes that came with it: those stay here for
    /// [`crate::proto::inbound::Frames`]. The count is how much of the terminator the bytes read so
    /// far end with; 4 once the head is read.
    head: Option<u8>,
}

impl Default for MemStream {
    fn default() -> Self {
        MemStream {
            inbox: Vec::new(),
            read_pos: 0,
            outbox: Vec::new(),
            peak_in: 0,
            peak_out: 0,
            blocked: false,
            head: Some(0),
        }
    }
}

impl MemStream {
    /// The handshake is over: hands out the bytes after the HTTP head and reads unlimited
    /// from now on.
    pub(crate) fn end_handshake(&mut self) -> Vec<u8> {
        self.head = None;
        let rest = self.inbox.split_off(self.read_pos);
        self.inbox.clear();
        self.read_pos = 0;
        rest
    }

    /// Appends received bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.read_pos == self.inbox.len() {
            self.inbox.clear();
            self.read_pos = 0;
        } else if self.read_pos > self.inbox.len() / 2 {
            self.inbox.drain(..self.read_pos);
            self.read_pos = 0;
        }
        self.inbox.extend_from_slice(bytes);
        self.peak_in = self.peak_in.max(self.inbox.len() - self.read_pos);
    }

    /// Unconsumed received bytes.
    pub(crate) fn pending_in(&self) -> usize {
        self.inbox.len() - self.read_pos
    }

    /// When both buffers are empty, releases any that grew past `keep` bytes if the traffic
    /// since the last such point fit in `keep` (a large message passed through; the traffic
    /// now needs less). A session whose bursts need more keeps its grown buffers, so it does
    /// not reallocate per message; idle sessions stay small. (Capacity alone says little here:
    /// the outbox trades storage with the TCP send queue, see `ark_tcp::TcpSession::append_raw`.)
    pub(crate) fn shrink_if_idle(&mut self, keep: usize) {
        if self.pending_in() == 0 && self.outbox.is_empty() {
            self.inbox.clear();
            self.read_pos = 0;
            if self.inbox.capacity() > keep && self.peak_in <= keep {
                self.inbox = Vec::new();
            }
            if self.outbox.capacity() > keep && self.peak_out <= keep {
                self.outbox = Vec::new();
            }
            self.peak_in = 0;
            self.peak_out = 0;
        }
    }

    /// Releases both buffers if they are empty (an idle session), whatever their history.
    #[cfg(test)]
    fn release_if_idle(&mut self) {
        self.peak_in = 0;
        self.peak_out = 0;
        self.shrink_if_idle(0);
    }
}

impl MemStream {
    /// Appends one whole, final data frame (its header, then `payload`, masked in the same
    /// buffer when `mask` is given) to the outbox: the payload is copied once, straight to
    /// where the TCP session takes it from.
    pub(crate) fn write_frame(&mut self, opcode: u8, mask: Option<[u8; 4]>, payload: &[u8]) {
        let mut head = [0u8; 14];
        let head_len = Head::write_final(opcode, payload.len(), mask, &mut head);
        self.outbox.extend_from_slice(&head[..head_len]);
        let start = self.outbox.len();
        self.outbox.extend_from_slice(payload);
        if let Some(mask) = mask {
            apply_mask(&mut self.outbox[start..], mask);
        }
        self.peak_out = self.peak_out.max(self.outbox.len());
    }
}

/// How many of `bytes` tungstenite may read now: all of them, or during the handshake (`head`
/// is `Some`: how much of the terminator the bytes read so far end with) those up to the end
/// of the HTTP head.
fn readable(head: &mut Option<u8>, bytes: &[u8]) -> usize {
    let Some(matched) = head else {
        return bytes.len();
    };
    const END: &[u8; 4] = b"\r\n\r\n";
    for (i, &b) in bytes.iter().enumerate() {
        if *matched == 4 {
            return i;
        }
        *matched = if b == END[usize::from(*matched)] {
            *matched + 1
        } else {
            u8::from(b == b'\r')
        };
    }
    bytes.len()
}

impl Read for MemStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let start = self.read_pos;
        let limit = buf.len().min(self.inbox.len() - start);
        let n = readable(&mut self.head, &self.inbox[start..start + limit]);
        if n == 0 {
            // No more bytes until the socket delivers some: tungstenite resumes later.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        buf[..n].copy_from_slice(&self.inbox[start..start + n]);
        self.read_pos += n;
        Ok(n)
    }
}

impl Write for MemStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.blocked {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.outbox.extend_from_slice(buf);
        self.peak_out = self.peak_out.max(self.outbox.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_was_pushed_then_would_block() {
        let mut s = MemStream::default();
        let mut buf = [0u8; 4];
        assert_eq!(
            s.read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        s.push(b"abcdef");
        assert_eq!(s.read(&mut buf).unwrap(), 4);
        s.push(b"g");
        assert_eq!(s.read(&mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"efg");
        assert_eq!(
            s.read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        s.write_all(b"out").unwrap();
        assert_eq!(s.outbox, b"out");
        s.outbox.clear();
        s.release_if_idle();
        assert_eq!(
            s.inbox.capacity() + s.outbox.capacity(),
            0,
            "idle buffers released"
        );
    }

    #[test]
    fn written_frames_parse_back_with_tungstenite_masked_or_not() {
        use tungstenite::protocol::frame::FrameHeader;
        use tungstenite::protocol::frame::coding::{Data, OpCode};
        // Length encodings: 7-bit, 16-bit and 64-bit, at their edges; odd lengths too.
        for len in [0usize, 1, 5, 125, 126, 65_535, 65_536, 70_001] {
            for mask in [None, Some([0x12, 0x34, 0x56, 0x78])] {
                let payload: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
                let mut s = MemStream::default();
                s.write_frame(crate::proto::inbound::OPCODE_BINARY, mask, &payload);
                let mut cursor = std::io::Cursor::new(&s.outbox);
                let (parsed, parsed_len) = FrameHeader::parse(&mut cursor).unwrap().unwrap();
                assert_eq!(parsed_len, len as u64);
                assert_eq!(parsed.mask, mask);
                assert_eq!(parsed.opcode, OpCode::Data(Data::Binary));
                let mut body = s.outbox[cursor.position() as usize..].to_vec();
                if let Some(mask) = mask {
                    assert!(len < 4 || body != payload, "masked on the wire");
                    apply_mask(&mut body, mask);
                }
                assert_eq!(body, payload, "length {len}, mask {mask:?}");
            }
        }
    }

    #[test]
    fn bursts_that_fill_the_buffers_keep_them_a_single_large_one_does_not() {
        let mut s = MemStream::default();
        let burst = vec![1u8; 16 * 1024];
        let mut buf = vec![0u8; 64 * 1024];
        for round in 0..3 {
            s.push(&burst);
            while s.read(&mut buf).is_ok() {}
            s.write_all(&burst).unwrap();
            let capacities = (s.inbox.capacity(), s.outbox.capacity());
            s.outbox.clear();
            s.shrink_if_idle(4096);
            if round > 0 {
                assert_eq!(
                    (s.inbox.capacity(), s.outbox.capacity()),
                    capacities,
                    "round {round}: a buffer the bursts fill is kept"
                );
            }
        }
        // Small traffic after the bursts: the grown buffers go at the next idle point.
        s.push(b"small");
        while s.read(&mut buf).is_ok() {}
        s.write_all(b"small").unwrap();
        s.outbox.clear();
        s.shrink_if_idle(4096);
        assert_eq!((s.inbox.capacity(), s.outbox.capacity()), (0, 0));
    }
}
