//! `MemStream`: the in-memory stream tungstenite reads from and writes to. ark-tcp moves bytes
//! between it and the socket, so tungstenite never touches a file descriptor.

use std::io::{self, Read, Write};

/// Bytes received and not yet consumed by tungstenite, and bytes it wrote and we have not yet
/// handed to the TCP session.
#[derive(Debug, Default)]
pub(crate) struct MemStream {
    inbox: Vec<u8>,
    read_pos: usize,
    pub(crate) outbox: Vec<u8>,
}

impl MemStream {
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
    }

    /// Unconsumed received bytes.
    pub(crate) fn pending_in(&self) -> usize {
        self.inbox.len() - self.read_pos
    }

    /// When both buffers are empty, releases any that grew past `keep` bytes (a large message
    /// passed through), so idle sessions stay small without reallocating per message.
    pub(crate) fn shrink_if_idle(&mut self, keep: usize) {
        if self.pending_in() == 0 && self.outbox.is_empty() {
            self.inbox.clear();
            self.read_pos = 0;
            if self.inbox.capacity() > keep {
                self.inbox = Vec::new();
            }
            if self.outbox.capacity() > keep {
                self.outbox = Vec::new();
            }
        }
    }
}

impl Read for MemStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = &self.inbox[self.read_pos..];
        if available.is_empty() {
            // No more bytes until the socket delivers some: tungstenite resumes later.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.read_pos += n;
        Ok(n)
    }
}

impl Write for MemStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outbox.extend_from_slice(buf);
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
        s.shrink_if_idle(0);
        assert_eq!(
            s.inbox.capacity() + s.outbox.capacity(),
            0,
            "idle buffers released"
        );
    }
}
