//! TCP connections (length-prefixed frames or WebSocket), server and client side: reads of
//! up to 64 KiB until a short read drains the socket, every message of a read answered, one
//! write (`writev` when earlier bytes still wait) per read.

use std::io::{self, IoSlice, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_peers::peer_io::{RecvBuf, push_frame, split_frames};
use ark_peers::peer_ws::{self as ws, Frame, Opcode};

use crate::poller::Conn;

/// Receive buffer per connection.
pub const RECV_BUF: usize = 64 * 1024;
/// Largest frame accepted.
const MAX_FRAME: usize = 1 << 20;

/// What the bytes on the connection are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// ark-loopback's 4-byte length prefix.
    LengthPrefix,
    /// WebSocket, server side, before the opening request arrived.
    WsHandshake,
    /// WebSocket, client side, its opening request sent and the server's response awaited
    /// (in the loop, not blocking the thread that connects the next client: with 10,000
    /// clients a blocking handshake per client behind the busy echo traffic of those already
    /// connected took longer than the run).
    WsClientHandshake,
    /// WebSocket frames.
    Ws,
}

/// Which end of the connection this is.
pub enum End {
    /// The echo server's session.
    Server(Echo),
    /// A closed-loop client.
    Client(Box<Core>),
}

/// One TCP connection.
pub struct StreamConn {
    stream: TcpStream,
    buf: RecvBuf,
    out: Vec<u8>,
    written: usize,
    codec: Codec,
    end: End,
    /// The client's `Sec-WebSocket-Key` while its handshake is under way.
    key: Option<String>,
}

impl StreamConn {
    /// A connection on a nonblocking `stream`, starting with the bytes of `buf`.
    pub fn new(stream: TcpStream, buf: RecvBuf, codec: Codec, end: End) -> Self {
        let mut conn = StreamConn {
            stream,
            buf,
            out: Vec::with_capacity(RECV_BUF),
            written: 0,
            codec,
            end,
            key: None,
        };
        conn.pump();
        conn
    }

    /// A WebSocket client whose opening request (with `key`) was sent on nonblocking
    /// `stream`; its messages start when the server's response has been checked.
    pub fn ws_client(stream: TcpStream, key: String, core: Box<Core>) -> Self {
        StreamConn {
            stream,
            buf: RecvBuf::with_capacity(RECV_BUF),
            out: Vec::with_capacity(RECV_BUF),
            written: 0,
            codec: Codec::WsClientHandshake,
            end: End::Client(core),
            key: Some(key),
        }
    }

    /// A client's first messages (a window of them), encoded into `out`.
    fn pump(&mut self) {
        if let End::Client(core) = &mut self.end {
            let (out, codec) = (&mut self.out, self.codec);
            core.pump(|m| {
                encode(out, codec, m, true);
                true
            });
        }
    }

    /// Reads until a short read (or `WouldBlock`) drains the socket, serving each read.
    fn read(&mut self, syscalls: &mut u64) -> io::Result<bool> {
        loop {
            let spare = self.buf.spare();
            let room = spare.len();
            *syscalls += 1;
            match (&self.stream).read(spare) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.filled(n);
                    self.serve(syscalls)?;
                    if n < room {
                        return Ok(true);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) => return Err(e),
            }
        }
    }

    /// Decodes every whole message received and answers it.
    fn serve(&mut self, syscalls: &mut u64) -> io::Result<()> {
        match (self.codec, &mut self.end) {
            (Codec::LengthPrefix, End::Server(echo)) => {
                let used = split_frames(self.buf.data(), MAX_FRAME, |f| echo.before_echo(f))
                    .map_err(io::Error::other)?;
                // Whole frames go back straight from the receive buffer.
                let whole = &self.buf.data()[..used];
                let sent = write_two(&self.stream, &self.out[self.written..], whole, syscalls)?;
                let pending = self.out.len() - self.written;
                if sent >= pending {
                    self.out.clear();
                    self.written = 0;
                    self.out.extend_from_slice(&whole[sent - pending..]);
                } else {
                    self.written += sent;
                    self.out.extend_from_slice(whole);
                }
                self.buf.consume(used);
                Ok(())
            }
            (Codec::LengthPrefix, End::Client(core)) => {
                let out = &mut self.out;
                let used = split_frames(self.buf.data(), MAX_FRAME, |frame| {
                    core.on_echo(frame, |m| {
                        push_frame(out, m);
                        true
                    })
                })
                .map_err(io::Error::other)?;
                self.buf.consume(used);
                Ok(())
            }
            (Codec::WsHandshake, _) => {
                let Some((len, response)) =
                    ws::accept_request(self.buf.data()).map_err(io::Error::other)?
                else {
                    return Ok(());
                };
                self.buf.consume(len);
                self.out.extend_from_slice(response.as_bytes());
                self.codec = Codec::Ws;
                self.serve(syscalls)
            }
            (Codec::WsClientHandshake, _) => {
                let key = self.key.as_deref().unwrap_or_default();
                let Some(len) =
                    ws::check_response(self.buf.data(), key).map_err(io::Error::other)?
                else {
                    return Ok(());
                };
                self.buf.consume(len);
                self.key = None;
                self.codec = Codec::Ws;
                self.pump();
                self.serve(syscalls)
            }
            (Codec::Ws, end) => {
                let out = &mut self.out;
                let client = matches!(end, End::Client(_));
                let used = ws::split_frames(self.buf.data_mut(), MAX_FRAME, |frame| match frame {
                    Frame::Binary(payload) => match end {
                        End::Server(echo) => {
                            echo.before_echo(payload);
                            ws::push_frame(out, Opcode::Binary, payload, None);
                        }
                        End::Client(core) => core.on_echo(payload, |m| {
                            ws::push_frame(out, Opcode::Binary, m, Some(ws::fresh_mask()));
                            true
                        }),
                    },
                    Frame::Ping(payload) => {
                        let mask = client.then(ws::fresh_mask);
                        ws::push_frame(out, Opcode::Pong, payload, mask);
                    }
                    Frame::Pong => {}
                    Frame::Close if !client => ws::push_frame(out, Opcode::Close, &[], None),
                    Frame::Close => {}
                })
                .map_err(io::Error::other)?;
                self.buf.consume(used);
                Ok(())
            }
        }
    }

    /// Writes what waits until done or the socket is full.
    fn flush(&mut self, syscalls: &mut u64) -> io::Result<()> {
        while self.written < self.out.len() {
            *syscalls += 1;
            match (&self.stream).write(&self.out[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written = 0;
        Ok(())
    }
}

/// Appends `message` in `codec`'s encoding (clients mask WebSocket frames).
fn encode(out: &mut Vec<u8>, codec: Codec, message: &[u8], client: bool) {
    match codec {
        Codec::LengthPrefix => push_frame(out, message),
        _ => {
            let mask = client.then(ws::fresh_mask);
            ws::push_frame(out, Opcode::Binary, message, mask);
        }
    }
}

/// Writes `first` then `second` in one `writev` (or one `write` if `first` is empty) until
/// done or the socket is full; returns the bytes written.
fn write_two(
    stream: &TcpStream,
    first: &[u8],
    second: &[u8],
    syscalls: &mut u64,
) -> io::Result<usize> {
    let total = first.len() + second.len();
    let mut done = 0;
    while done < total {
        *syscalls += 1;
        let result = if done >= first.len() {
            (&*stream).write(&second[done - first.len()..])
        } else {
            let parts = [IoSlice::new(&first[done..]), IoSlice::new(second)];
            (&*stream).write_vectored(&parts)
        };
        match result {
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

impl Conn for StreamConn {
    fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    fn ready(&mut self, readable: bool, _writable: bool, syscalls: &mut u64) -> bool {
        let open = if readable {
            self.read(syscalls)
        } else {
            Ok(true)
        };
        let open = open.and_then(|open| self.flush(syscalls).map(|()| open));
        match open {
            Ok(true) => true,
            Ok(false) | Err(_) => {
                if let End::Client(core) = &mut self.end {
                    core.on_disconnect();
                }
                false
            }
        }
    }
}
