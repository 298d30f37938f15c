//! WebSocket on tokio through fastwebsockets (`PEER_TOKIO_WS=fastwebsockets`, issue 48): the
//! library people pick as the fastest in Rust, beside tokio-tungstenite and tokio-websockets
//! ([`crate::ws_lib`]).
//!
//! fastwebsockets is a frame reader and writer over an `AsyncRead + AsyncWrite`, not a
//! `Stream + Sink`, and it cannot run the other libraries' loop: `write_frame` ends in a
//! `write_all` of its own per frame, and `read_frame` is not cancel-safe (it consumes a
//! frame's header before it awaits the payload), so it cannot be polled with `now_or_never`
//! to learn whether more frames are already in. The batching lives in the stream it runs on
//! instead, [`Batched`]: writes are collected in memory, and when a read finds the socket
//! drained, everything collected goes out in one `write`. fastwebsockets only reads the
//! socket once every frame already in its buffer is served, so that is the same policy as
//! the others': the replies to one read leave in one write.
//!
//! Tuned as far as its API goes:
//!
//! * The opening handshake is the hand-written peer's (`ark_peers::peer_ws`): fastwebsockets
//!   does its own only through hyper (the `upgrade` feature), and the handshake is not
//!   measured. Then `WebSocket::after_handshake` over the stream.
//! * Every frame goes to [`Batched`] as two slices, header and payload (`set_writev` on, its
//!   threshold 0): one copy of the payload into the batch, where `write_frame`'s other path
//!   copies it into its own buffer first and then into ours.
//! * `set_auto_pong` and `set_auto_close`: pings and closes answered by the library, the
//!   answers joining the batch.
//! * `FragmentCollector`, as tungstenite and tokio-websockets reassemble fragmented messages
//!   too; a whole binary frame passes through it without a copy. The server echoes the
//!   payload it is given (unmasked in place by fastwebsockets, in its read buffer); the
//!   client masks every frame in place with a fresh random key (RFC 6455 5.3; fastwebsockets
//!   draws one per frame).

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_peers::peer_io::RecvBuf;
use ark_peers::peer_ws::{accept_request, check_response, client_key, client_request};
use fastwebsockets::{FragmentCollector, Frame, OpCode, Payload, Role, WebSocket};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use crate::stream::{read_until, recv_buf, write_all};

/// Receive buffer of the opening handshake (it grows if a request needs more).
const HANDSHAKE_BUF: usize = 4096;

/// A TCP stream whose writes are collected in memory and sent in one `write` when a read
/// finds nothing more to read (or when the batch reaches the connection's buffer size).
struct Batched {
    stream: TcpStream,
    /// Bytes read with the opening handshake that came after it: read before the socket.
    early: Vec<u8>,
    early_at: usize,
    /// Collected writes, sent from `written` on.
    out: Vec<u8>,
    written: usize,
    /// Past this many unsent bytes, a write sends the batch first.
    limit: usize,
}

impl Batched {
    fn new(stream: TcpStream, early: &[u8]) -> Batched {
        Batched {
            stream,
            early: early.to_vec(),
            early_at: 0,
            out: Vec::with_capacity(recv_buf()),
            written: 0,
            limit: recv_buf(),
        }
    }

    /// Writes the batch: `Ready(Ok)` once all of it is sent.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.out.len() {
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &self.out[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.out.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }

    /// Room for more: sends the batch first if it is full.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.out.len() - self.written >= self.limit {
            ready!(self.poll_send(cx))?;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Batched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.early_at < this.early.len() {
            let early = &this.early[this.early_at..];
            let n = early.len().min(buf.remaining());
            buf.put_slice(&early[..n]);
            this.early_at += n;
            return Poll::Ready(Ok(()));
        }
        if let Poll::Ready(read) = Pin::new(&mut this.stream).poll_read(cx, buf) {
            return Poll::Ready(read);
        }
        // The socket is drained (the read's interest is registered) and every frame read so
        // far is answered: send the answers, then wait for the socket either way.
        match this.poll_send(cx) {
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            _ => Poll::Pending,
        }
    }
}

impl AsyncWrite for Batched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        this.out.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_room(cx))?;
        let mut n = 0;
        for buf in bufs {
            this.out.extend_from_slice(buf);
            n += buf.len();
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.stream).poll_shutdown(cx)
    }
}

/// fastwebsockets over `stream` once the handshake is done (`early`: bytes read after it),
/// set up as the module says.
fn websocket(stream: TcpStream, early: &[u8], role: Role) -> FragmentCollector<Batched> {
    let mut ws = WebSocket::after_handshake(Batched::new(stream, early), role);
    ws.set_auto_pong(true);
    ws.set_auto_close(true);
    ws.set_writev(true);
    ws.set_writev_threshold(0);
    FragmentCollector::new(ws)
}

/// One server connection: every binary message goes back as it came.
pub async fn session(stream: TcpStream, echo: Echo) {
    let _ = serve(stream, echo).await;
}

async fn serve(mut stream: TcpStream, echo: Echo) -> io::Result<()> {
    let mut buf = RecvBuf::with_capacity(HANDSHAKE_BUF);
    let (len, response) = read_until(&mut stream, &mut buf, accept_request).await?;
    buf.consume(len);
    write_all(&mut stream, response.as_bytes()).await?;
    let mut ws = websocket(stream, buf.data(), Role::Server);
    loop {
        let frame = ws.read_frame().await.map_err(io::Error::other)?;
        match frame.opcode {
            OpCode::Binary => {
                echo.before_echo(&frame.payload);
                ws.write_frame(frame).await.map_err(io::Error::other)?;
            }
            // Answered (auto_close, in the batch): send it; the client ends the connection.
            OpCode::Close => return ws.into_inner().flush().await,
            _ => {}
        }
    }
}

/// Does the opening handshake on `stream` (connected to `server`) and returns the client's
/// task.
pub async fn connect(
    mut stream: TcpStream,
    server: SocketAddr,
    core: Core,
    payload: usize,
) -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let key = client_key();
    let request = client_request(&server.to_string(), &key);
    write_all(&mut stream, request.as_bytes()).await?;
    let mut buf = RecvBuf::with_capacity(HANDSHAKE_BUF);
    let len = read_until(&mut stream, &mut buf, |d| check_response(d, &key)).await?;
    buf.consume(len);
    let ws = websocket(stream, buf.data(), Role::Client);
    Ok(client(ws, core, payload))
}

/// A closed-loop client: writes its window, then for every echo the refills; all of it is
/// batched until the next read finds the socket drained. Outgoing payloads are written into
/// one reused buffer and masked there in place.
async fn client(mut ws: FragmentCollector<Batched>, mut core: Core, payload: usize) {
    let mut out = Vec::with_capacity(payload * 16);
    core.pump(|m| {
        out.extend_from_slice(m);
        true
    });
    loop {
        for message in out.chunks_mut(payload) {
            let frame = Frame::binary(Payload::BorrowedMut(message));
            if ws.write_frame(frame).await.is_err() {
                return core.on_disconnect();
            }
        }
        out.clear();
        match ws.read_frame().await {
            Ok(frame) => match frame.opcode {
                OpCode::Binary => core.on_echo(&frame.payload, |m| {
                    out.extend_from_slice(m);
                    true
                }),
                OpCode::Close => {
                    // Answered (auto_close): send it and end.
                    let _ = ws.into_inner().flush().await;
                    return core.on_disconnect();
                }
                _ => {}
            },
            Err(_) => return core.on_disconnect(),
        }
    }
}
