//! WebSocket on tokio. By default hand-written (`ark_peers::peer_ws`) on the same
//! connection loop as TCP ([`crate::stream::drive`]): frames decoded and unmasked in place,
//! every reply to a read encoded into one write, a fresh random mask per client frame (as
//! ark-ws). `PEER_TOKIO_WS=tungstenite`, `PEER_TOKIO_WS=tokio-websockets` or
//! `PEER_TOKIO_WS=fastwebsockets` runs a library instead ([`crate::ws_lib`]);
//! bench-harness/README.md logs what each measured.

use std::io;
use std::net::SocketAddr;

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_peers::peer_io::RecvBuf;
use ark_peers::peer_ws::{
    Frame, Opcode, accept_request, check_response, client_key, client_request, fresh_mask,
    push_frame, split_frames,
};
use futures_util::FutureExt;
use tokio::net::TcpStream;

use crate::stream::{Outgoing, drive, read_until, recv_buf, write_all};
use crate::ws_lib;

/// Largest frame accepted.
const MAX_FRAME: usize = 1 << 20;

/// How the peer speaks WebSocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// Hand-written framing (the default, and the fastest measured).
    Handwritten,
    /// A library.
    Library(ws_lib::Library),
}

impl Variant {
    /// The variant `PEER_TOKIO_WS` names: unset or `handwritten` is the default.
    ///
    /// # Errors
    /// Any other name: a misspelt library would otherwise measure the default under its name.
    pub fn named() -> io::Result<Variant> {
        match std::env::var("PEER_TOKIO_WS") {
            Err(std::env::VarError::NotPresent) => Ok(Variant::Handwritten),
            Ok(name) => match name.as_str() {
                "handwritten" => Ok(Variant::Handwritten),
                "tungstenite" => Ok(Variant::Library(ws_lib::Library::Tungstenite)),
                "tokio-websockets" => Ok(Variant::Library(ws_lib::Library::TokioWebsockets)),
                "fastwebsockets" => Ok(Variant::Library(ws_lib::Library::FastWebsockets)),
                other => Err(unknown(other)),
            },
            Err(std::env::VarError::NotUnicode(name)) => Err(unknown(&name.to_string_lossy())),
        }
    }

    /// The variant `PEER_TOKIO_WS` names ([`Variant::named`], checked when the stack starts).
    pub fn from_env() -> Variant {
        Variant::named().unwrap_or(Variant::Handwritten)
    }
}

fn unknown(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "PEER_TOKIO_WS={name}: expected handwritten, tungstenite, tokio-websockets or fastwebsockets"
        ),
    )
}

/// One server connection: every binary message goes back as it came, pings are answered.
pub async fn session(stream: TcpStream, echo: Echo, variant: Variant) {
    match variant {
        Variant::Library(library) => ws_lib::session(stream, echo, library).await,
        Variant::Handwritten => {
            let _ = serve(stream, echo).await;
        }
    }
}

async fn serve(mut stream: TcpStream, echo: Echo) -> io::Result<()> {
    let mut buf = RecvBuf::with_capacity(recv_buf());
    let (len, response) = read_until(&mut stream, &mut buf, accept_request).await?;
    buf.consume(len);
    write_all(&mut stream, response.as_bytes()).await?;
    let mut out = Outgoing::new();
    let on_data = |buf: &mut RecvBuf, out: &mut Outgoing| {
        let used = split_frames(buf.data_mut(), MAX_FRAME, |frame| match frame {
            Frame::Binary(payload) => {
                echo.before_echo(payload);
                push_frame(&mut out.bytes, Opcode::Binary, payload, None);
            }
            Frame::Ping(payload) => push_frame(&mut out.bytes, Opcode::Pong, payload, None),
            Frame::Pong => {}
            // Answered; the client then ends the connection.
            Frame::Close => push_frame(&mut out.bytes, Opcode::Close, &[], None),
        })
        .map_err(io::Error::other)?;
        buf.consume(used);
        Ok(())
    };
    drive(&stream, buf, on_data, &mut out).await
}

/// Connects a client to `server` (handshake included) and returns its task.
pub async fn connect(
    server: SocketAddr,
    core: Core,
    payload: usize,
    variant: Variant,
) -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let library = match variant {
        Variant::Library(library) => library,
        Variant::Handwritten => {
            let mut stream = TcpStream::connect(server).await?;
            stream.set_nodelay(true)?;
            let key = client_key();
            write_all(
                &mut stream,
                client_request(&server.to_string(), &key).as_bytes(),
            )
            .await?;
            let mut buf = RecvBuf::with_capacity(recv_buf());
            let len = read_until(&mut stream, &mut buf, |d| check_response(d, &key)).await?;
            buf.consume(len);
            return Ok(client(stream, buf, core).left_future());
        }
    };
    Ok(ws_lib::connect(server, core, payload, library)
        .await?
        .right_future())
}

/// A closed-loop client: its window goes out in one write; every echo of a read is checked,
/// and the frames that refill the window are written together.
async fn client(stream: TcpStream, buf: RecvBuf, mut core: Core) {
    let mask = || Some(fresh_mask());
    let mut out = Outgoing::new();
    core.pump(|m| {
        push_frame(&mut out.bytes, Opcode::Binary, m, mask());
        true
    });
    let on_data = |buf: &mut RecvBuf, out: &mut Outgoing| {
        let used = split_frames(buf.data_mut(), MAX_FRAME, |frame| match frame {
            Frame::Binary(echo) => core.on_echo(echo, |m| {
                push_frame(&mut out.bytes, Opcode::Binary, m, mask());
                true
            }),
            Frame::Ping(payload) => push_frame(&mut out.bytes, Opcode::Pong, payload, mask()),
            Frame::Pong | Frame::Close => {}
        })
        .map_err(io::Error::other)?;
        buf.consume(used);
        Ok(())
    };
    let _ = drive(&stream, buf, on_data, &mut out).await;
    core.on_disconnect();
}
