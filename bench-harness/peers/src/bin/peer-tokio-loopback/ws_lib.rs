//! WebSocket on tokio through a library: tokio-tungstenite (the most used),
//! tokio-websockets or fastwebsockets, for comparison with the hand-written default
//! ([`crate::ws`]).
//!
//! tokio-tungstenite and tokio-websockets run the same loop shape: a connection is one
//! `Stream + Sink` of messages (not split into halves); every message already received is
//! served before the sink is flushed, so the replies to one read leave in one write.
//! fastwebsockets has no `Stream + Sink`; it gets the same policy from the stream it runs on
//! ([`crate::ws_fast`]).

use std::io;
use std::net::SocketAddr;

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use tokio::net::TcpStream;

/// A WebSocket library the peer can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library {
    /// tokio-websockets.
    TokioWebsockets,
    /// tokio-tungstenite.
    Tungstenite,
    /// fastwebsockets ([`crate::ws_fast`]).
    FastWebsockets,
}

impl Library {
    /// The record's `implementation` for a websocket run on this library.
    pub fn implementation(self) -> &'static str {
        match self {
            Library::TokioWebsockets => "tokio-websockets",
            Library::Tungstenite => "tokio-tungstenite",
            Library::FastWebsockets => "fastwebsockets",
        }
    }
}

/// Serves every message already received through `on_message` (which may feed replies),
/// then flushes and waits for the next: replies to one read leave in one write.
async fn serve<C, M, E>(
    connection: &mut C,
    mut on_message: impl FnMut(M) -> Option<M>,
) -> Result<(), E>
where
    C: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    loop {
        let next = match connection.next().now_or_never() {
            Some(next) => next,
            None => {
                connection.flush().await?;
                connection.next().await
            }
        };
        match next {
            Some(Ok(message)) => {
                if let Some(reply) = on_message(message) {
                    connection.feed(reply).await?;
                }
            }
            Some(Err(e)) => return Err(e),
            None => return Ok(()),
        }
    }
}

/// One server connection: every binary message goes back as it came.
pub async fn session(stream: TcpStream, echo: Echo, library: Library) {
    match library {
        Library::TokioWebsockets => {
            let Ok((_, mut ws)) = tokio_websockets::ServerBuilder::new().accept(stream).await
            else {
                return;
            };
            let _ = serve(&mut ws, |m: tokio_websockets::Message| {
                m.is_binary().then(|| {
                    echo.before_echo(m.as_payload());
                    m
                })
            })
            .await;
        }
        Library::Tungstenite => {
            use tokio_tungstenite::tungstenite::Message;
            let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
                return;
            };
            let _ = serve(&mut ws, |m| match m {
                Message::Binary(data) => {
                    echo.before_echo(&data);
                    Some(Message::Binary(data))
                }
                _ => None,
            })
            .await;
        }
        Library::FastWebsockets => crate::ws_fast::session(stream, echo).await,
    }
}

/// Connects a client to `server` and returns its task.
pub async fn connect(
    server: SocketAddr,
    core: Core,
    payload: usize,
    library: Library,
) -> io::Result<impl Future<Output = ()> + Send + 'static> {
    let stream = TcpStream::connect(server).await?;
    stream.set_nodelay(true)?;
    let uri = format!("ws://{server}/");
    Ok(match library {
        Library::FastWebsockets => crate::ws_fast::connect(stream, server, core, payload)
            .await?
            .right_future(),
        Library::TokioWebsockets => {
            let uri = uri.parse().map_err(io::Error::other)?;
            let (ws, _) = tokio_websockets::ClientBuilder::from_uri(uri)
                .connect_on(stream)
                .await
                .map_err(io::Error::other)?;
            client(ws, core, payload, tokio_websockets::Message::binary, |m| {
                m.is_binary().then(|| &**m.as_payload())
            })
            .left_future()
            .left_future()
        }
        Library::Tungstenite => {
            use tokio_tungstenite::tungstenite::Message;
            let (ws, _) = tokio_tungstenite::client_async(uri, stream)
                .await
                .map_err(io::Error::other)?;
            client(ws, core, payload, Message::Binary, |m| match m {
                Message::Binary(data) => Some(data),
                _ => None,
            })
            .right_future()
            .left_future()
        }
    })
}

/// A closed-loop client: feeds its window, serves every echo already received, and flushes
/// only before waiting. Outgoing payloads are carved from one reused buffer without copying.
async fn client<C, M, E>(
    mut connection: C,
    mut core: Core,
    payload: usize,
    wrap: fn(Bytes) -> M,
    data: fn(&M) -> Option<&[u8]>,
) where
    C: Stream<Item = Result<M, E>> + Sink<M, Error = E> + Unpin,
{
    let mut out = BytesMut::with_capacity(payload * 16);
    core.pump(|m| {
        out.extend_from_slice(m);
        true
    });
    loop {
        while !out.is_empty() {
            let message = out.split_to(payload).freeze();
            if connection.feed(wrap(message)).await.is_err() {
                return core.on_disconnect();
            }
        }
        let next = match connection.next().now_or_never() {
            Some(next) => next,
            None => {
                if connection.flush().await.is_err() {
                    return core.on_disconnect();
                }
                connection.next().await
            }
        };
        match next {
            Some(Ok(message)) => {
                if let Some(echo) = data(&message) {
                    core.on_echo(echo, |m| {
                        out.extend_from_slice(m);
                        true
                    });
                }
            }
            Some(Err(_)) | None => return core.on_disconnect(),
        }
    }
}
