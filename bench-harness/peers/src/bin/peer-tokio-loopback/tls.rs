//! tcps and wss on tokio-rustls, with the same rustls configs (and `ring` provider) as ark.
//! Written for speed as the plain peer is: one task per connection drives reads and writes
//! by polling the `TlsStream` directly (no read or write future per message, no split
//! halves and their lock); every reply to a read is encoded into one buffer, handed to rustls
//! in one `poll_write` and flushed; a pending write never keeps the connection from reading.
//! WebSocket framing is the hand-written one of the plain peer (the fastest measured; see
//! bench-harness/README.md).

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_peers::peer_io::{self, RecvBuf};
use ark_peers::peer_ws::{self, Frame, Opcode};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::stream::{read_until, recv_buf};

/// Largest frame accepted.
const MAX_FRAME: usize = 1 << 20;

/// Replies waiting for rustls, and how far they were taken.
struct Pending {
    bytes: Vec<u8>,
    taken: usize,
}

impl Pending {
    fn new() -> Self {
        Pending {
            bytes: Vec::with_capacity(recv_buf()),
            taken: 0,
        }
    }

    fn waiting(&self) -> bool {
        self.taken < self.bytes.len()
    }
}

/// Hands queued replies to the stream and flushes; `Err` ends the connection.
fn poll_send<S: AsyncWrite + Unpin>(
    stream: &mut S,
    out: &mut Pending,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    while out.waiting() {
        match Pin::new(&mut *stream).poll_write(cx, &out.bytes[out.taken..]) {
            Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
            Poll::Ready(Ok(n)) => out.taken += n,
            Poll::Ready(Err(e)) => return Err(e),
            Poll::Pending => return Ok(()),
        }
    }
    out.bytes.clear();
    out.taken = 0;
    match Pin::new(&mut *stream).poll_flush(cx) {
        Poll::Ready(Err(e)) => Err(e),
        _ => Ok(()),
    }
}

/// Runs one connection until it ends: reads whatever is there into `buf`, lets `on_data`
/// decode it (appending replies to the outgoing bytes; `true` ends the connection once they
/// are sent), sends. `Ok` at end of stream, or after a close `on_data` asked for
/// (`close_notify` and FIN sent).
pub(crate) async fn drive<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    mut buf: RecvBuf,
    mut out: Vec<u8>,
    mut on_data: impl FnMut(&mut RecvBuf, &mut Vec<u8>) -> io::Result<bool>,
) -> io::Result<()> {
    let mut pending = Pending::new();
    std::mem::swap(&mut pending.bytes, &mut out);
    let mut closing = false;
    poll_fn(|cx| {
        loop {
            poll_send(stream, &mut pending, cx)?;
            if closing {
                if pending.waiting() {
                    return Poll::Pending;
                }
                return Pin::new(&mut *stream).poll_shutdown(cx);
            }
            let mut read = ReadBuf::new(buf.spare());
            match Pin::new(&mut *stream).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    let n = read.filled().len();
                    if n == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    buf.filled(n);
                    closing = on_data(&mut buf, &mut pending.bytes)?;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await
}

/// What a server connection speaks inside TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inner {
    /// Length-prefixed frames (tcps).
    Frames,
    /// WebSocket (wss).
    WebSocket,
}

/// One server connection: the TLS handshake, then the echo.
pub async fn session(stream: TcpStream, acceptor: TlsAcceptor, echo: Echo, inner: Inner) {
    if stream.set_nodelay(true).is_err() {
        return;
    }
    let Ok(mut tls) = acceptor.accept(stream).await else {
        return;
    };
    let _ = match inner {
        Inner::Frames => serve_frames(&mut tls, echo).await,
        Inner::WebSocket => serve_ws(&mut tls, echo).await,
    };
}

/// Echoes frames; with `--reconnect-every N`, closes (after the echo) once N were echoed.
async fn serve_frames<S: AsyncRead + AsyncWrite + Unpin>(
    tls: &mut S,
    mut echo: Echo,
) -> io::Result<()> {
    drive(
        tls,
        RecvBuf::with_capacity(recv_buf()),
        Vec::new(),
        |buf, out| {
            let mut close = false;
            let used = peer_io::split_frames(buf.data(), MAX_FRAME, |frame| {
                if close {
                    return;
                }
                echo.before_echo(frame);
                out.extend_from_slice(&(frame.len() as u32).to_be_bytes());
                out.extend_from_slice(frame);
                close = echo.echoed_one();
            })
            .map_err(io::Error::other)?;
            buf.consume(used);
            Ok(close)
        },
    )
    .await
}

async fn serve_ws<S: AsyncRead + AsyncWrite + Unpin>(tls: &mut S, echo: Echo) -> io::Result<()> {
    let mut buf = RecvBuf::with_capacity(recv_buf());
    let (len, response) = read_until(tls, &mut buf, peer_ws::accept_request).await?;
    buf.consume(len);
    tls.write_all(response.as_bytes()).await?;
    tls.flush().await?;
    drive(tls, buf, Vec::new(), |buf, out| {
        let used = peer_ws::split_frames(buf.data_mut(), MAX_FRAME, |frame| match frame {
            Frame::Binary(payload) => {
                echo.before_echo(payload);
                peer_ws::push_frame(out, Opcode::Binary, payload, None);
            }
            Frame::Ping(payload) => peer_ws::push_frame(out, Opcode::Pong, payload, None),
            Frame::Pong => {}
            Frame::Close => peer_ws::push_frame(out, Opcode::Close, &[], None),
        })
        .map_err(io::Error::other)?;
        buf.consume(used);
        Ok(false)
    })
    .await
}

/// How a client reaches its server: address, TLS connector and name, what runs inside.
#[derive(Clone)]
pub struct Target {
    /// The server's address.
    pub server: SocketAddr,
    /// TLS with the client's config (its session cache kept across reconnects).
    pub connector: TlsConnector,
    /// The name verified and sent by SNI.
    pub name: tokio_rustls::rustls::pki_types::ServerName<'static>,
    /// tcps or wss.
    pub inner: Inner,
}

/// One connection: TCP, TLS and (wss) WebSocket handshakes; notes the session in `core`.
async fn open(
    target: &Target,
    core: &mut Core,
) -> io::Result<(tokio_rustls::client::TlsStream<TcpStream>, RecvBuf)> {
    let stream = TcpStream::connect(target.server).await?;
    stream.set_nodelay(true)?;
    let mut tls = target
        .connector
        .connect(target.name.clone(), stream)
        .await?;
    let session = tls.get_ref().1;
    let negotiated = ark_tls::describe(session);
    core.note_tls(&negotiated.version, &negotiated.cipher_suite);
    core.on_connected(
        session.handshake_kind() == Some(tokio_rustls::rustls::HandshakeKind::Resumed),
    );
    let mut buf = RecvBuf::with_capacity(recv_buf());
    if target.inner == Inner::WebSocket {
        let key = peer_ws::client_key();
        let request = peer_ws::client_request(&target.server.to_string(), &key);
        tls.write_all(request.as_bytes()).await?;
        tls.flush().await?;
        let len = read_until(&mut tls, &mut buf, |d| peer_ws::check_response(d, &key)).await?;
        buf.consume(len);
    }
    Ok((tls, buf))
}

/// Connects a client (bounded by the caller) and returns its task, which connects again
/// whenever the server ends a connection that carried all it should (`--reconnect-every`).
pub async fn connect(
    target: Target,
    mut core: Core,
) -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let first = open(&target, &mut core).await?;
    Ok(async move {
        let (mut tls, mut buf) = first;
        loop {
            client(&mut tls, buf, &mut core, target.inner).await;
            if !core.connection_done() {
                break;
            }
            match open(&target, &mut core).await {
                Ok(next) => (tls, buf) = next,
                Err(_) => break,
            }
        }
        core.on_disconnect();
    })
}

/// A closed-loop client on one connection: its window goes out in one write; every echo of
/// a read is checked, and the messages that refill the window are written together.
async fn client<S: AsyncRead + AsyncWrite + Unpin>(
    tls: &mut S,
    buf: RecvBuf,
    core: &mut Core,
    inner: Inner,
) {
    let mask = || Some(peer_ws::fresh_mask());
    let push = |out: &mut Vec<u8>, m: &[u8]| match inner {
        Inner::Frames => peer_io::push_frame(out, m),
        Inner::WebSocket => peer_ws::push_frame(out, Opcode::Binary, m, mask()),
    };
    let mut first = Vec::with_capacity(recv_buf());
    core.pump(|m| {
        push(&mut first, m);
        true
    });
    let _ = drive(tls, buf, first, |buf, out| {
        let used = match inner {
            Inner::Frames => peer_io::split_frames(buf.data(), MAX_FRAME, |frame| {
                core.on_echo(frame, |m| {
                    push(out, m);
                    true
                })
            })
            .map_err(io::Error::other)?,
            Inner::WebSocket => {
                peer_ws::split_frames(buf.data_mut(), MAX_FRAME, |frame| match frame {
                    Frame::Binary(echo) => core.on_echo(echo, |m| {
                        push(out, m);
                        true
                    }),
                    Frame::Ping(payload) => peer_ws::push_frame(out, Opcode::Pong, payload, mask()),
                    Frame::Pong | Frame::Close => {}
                })
                .map_err(io::Error::other)?
            }
        };
        buf.consume(used);
        Ok(false)
    })
    .await;
}
