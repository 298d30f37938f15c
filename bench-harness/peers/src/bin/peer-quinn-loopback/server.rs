//! The echo server: an endpoint accepting connections, a task per connection, and in it
//! every stream the client opens echoed concurrently (`FuturesUnordered`: a connection's
//! streams stay on its task, instead of a task and its wake-ups per message).

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use ark_loopback::servers::Echo;
use ark_peers::peer_io::{PREFIX, RecvBuf, push_frame, split_frames};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use quinn::{Connection, Endpoint, RecvStream, SendStream};

use crate::error::SessionError;
use crate::mode::{Carriage, Config};

/// The connections a side has opened, for their counters (`Connection::stats`).
pub type Connections = Arc<Mutex<Vec<Connection>>>;

/// Adds `connection` to `connections`.
pub fn keep(connections: &Connections, connection: &Connection) {
    connections
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(connection.clone());
}

/// Accepts connections on `endpoint` until it closes; serves each on a task of its own (on
/// this runtime; a multi-thread runtime spreads them over its workers).
pub async fn accept(endpoint: Endpoint, echo: Echo, config: Config, connections: Connections) {
    while let Some(incoming) = endpoint.accept().await {
        let echo = echo.clone();
        let connections = connections.clone();
        tokio::spawn(async move {
            // A handshake that fails ends that connection only.
            if let Ok(connection) = incoming.await {
                keep(&connections, &connection);
                serve(connection, echo, config).await;
            }
        });
    }
}

/// Serves one connection until it ends: accepts its streams and echoes them all at once.
async fn serve(connection: Connection, echo: Echo, config: Config) {
    let mut echoes = FuturesUnordered::new();
    let mut accept = pin!(connection.accept_bi());
    loop {
        let accepted = poll_fn(|cx| {
            if let Poll::Ready(accepted) = accept.as_mut().poll(cx) {
                return Poll::Ready(accepted);
            }
            // Echoes finish on their own; a failed one (its stream or connection lost) ends
            // only itself.
            while let Poll::Ready(Some(done)) = echoes.poll_next_unpin(cx) {
                if let Err(SessionError::Write(_)) = done {
                    echo.rejected();
                }
            }
            Poll::Pending
        })
        .await;
        let Ok((send, recv)) = accepted else {
            // The connection is over (closed by the client, lost, or timed out).
            return;
        };
        echoes.push(echo_stream(send, recv, &echo, config));
        accept.set(connection.accept_bi());
    }
}

/// Echoes one stream as the mode says.
async fn echo_stream(
    send: SendStream,
    recv: RecvStream,
    echo: &Echo,
    config: Config,
) -> Result<(), SessionError> {
    match config.carriage {
        Carriage::StreamPerMessage => echo_message(send, recv, echo, config.payload).await,
        Carriage::OneStream => echo_frames(send, recv, echo, config.payload).await,
    }
}

/// A stream per message: reads the message to its end (at most `limit` bytes), echoes it on
/// the same stream and finishes.
async fn echo_message(
    mut send: SendStream,
    mut recv: RecvStream,
    echo: &Echo,
    limit: usize,
) -> Result<(), SessionError> {
    let message = recv.read_to_end(limit).await?;
    echo.before_echo(&message);
    send.write_chunk(Bytes::from(message)).await?;
    send.finish()?;
    Ok(())
}

/// One stream of length-prefixed messages (at most `limit` bytes each): every message read is
/// echoed, in order, every read's echoes in one write; finishes when the client does.
async fn echo_frames(
    mut send: SendStream,
    mut recv: RecvStream,
    echo: &Echo,
    limit: usize,
) -> Result<(), SessionError> {
    let mut buf = RecvBuf::with_capacity((2 * (limit + PREFIX)).max(65_536));
    let mut out = Vec::new();
    while let Some(n) = recv.read(buf.spare()).await? {
        buf.filled(n);
        let used = split_frames(buf.data(), limit, |frame| {
            echo.before_echo(frame);
            push_frame(&mut out, frame);
        })?;
        buf.consume(used);
        if !out.is_empty() {
            send.write_all(&out).await?;
            out.clear();
        }
    }
    send.finish()?;
    Ok(())
}
