//! The closed-loop clients: one QUIC connection each, and `Core`, which fills, checks (content
//! and exact order) and times every message as ark's clients do.
//!
//! A stream per message: every message in flight is a round trip on a stream of its own (open,
//! write, finish, read the echo to its end), all of them polled together; their echoes are
//! handed to `Core` in the order the messages were sent (`FuturesOrdered`), as an ordered
//! transport delivers them: an echo that overtakes an earlier one on the wire waits for it.
//! One stream: the client writes length-prefixed messages and reads the echoes back in order.

use ark_loopback::clients::Core;
use ark_peers::peer_io::{PREFIX, RecvBuf, push_frame, split_frames};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use quinn::{Connection, Endpoint};

use crate::error::SessionError;
use crate::mode::{Carriage, Config};

/// Runs one client on `connection` until the run stops it: the messages of `config`'s mode,
/// then (drained) waits for the stop. A session error counts as a disconnect (unless the run
/// is draining) and ends the client. `endpoint` is kept for as long as the client runs.
pub async fn run(endpoint: Endpoint, connection: Connection, core: Core, config: Config) {
    let result = match config.carriage {
        Carriage::StreamPerMessage => stream_per_message(&connection, core, config.payload).await,
        Carriage::OneStream => one_stream(&connection, core, config.payload).await,
    };
    // Every message answered and none to send: the run is draining. The connection stays
    // open (so the server sees no close mid-run) until the runtime is shut down. After an
    // error (counted by `Core`), the client is over.
    if result.is_ok() {
        let _ = connection.closed().await;
    }
    drop(endpoint);
}

/// One message's round trip on a stream of its own: open, write, finish, read the echo to its
/// end (at most `limit` bytes).
async fn round_trip(
    connection: &Connection,
    message: Bytes,
    limit: usize,
) -> Result<Vec<u8>, SessionError> {
    let (mut send, mut recv) = connection.open_bi().await?;
    send.write_chunk(message).await?;
    send.finish()?;
    Ok(recv.read_to_end(limit).await?)
}

/// A stream per message until nothing is in flight (the drain); `Err` ends the session (the
/// disconnect is counted here).
async fn stream_per_message(
    connection: &Connection,
    mut core: Core,
    limit: usize,
) -> Result<(), SessionError> {
    let mut out: Vec<Bytes> = Vec::new();
    let mut pending = FuturesOrdered::new();
    core.pump(|m| {
        out.push(Bytes::copy_from_slice(m));
        true
    });
    loop {
        for message in out.drain(..) {
            pending.push_back(round_trip(connection, message, limit));
        }
        match pending.next().await {
            None => return Ok(()),
            Some(Ok(echo)) => core.on_echo(&echo, |m| {
                out.push(Bytes::copy_from_slice(m));
                true
            }),
            Some(Err(e)) => {
                core.on_disconnect();
                return Err(e);
            }
        }
    }
}

/// One length-prefixed stream until nothing is in flight (the drain); `Err` ends the session
/// (the disconnect is counted here). Writes and reads take turns: the windows hold twice what
/// is in flight, so neither side's write waits for the other's read.
async fn one_stream(
    connection: &Connection,
    mut core: Core,
    payload: usize,
) -> Result<(), SessionError> {
    let result = one_stream_loop(connection, &mut core, payload).await;
    if result.is_err() {
        core.on_disconnect();
    }
    result
}

/// The loop of [`one_stream`].
async fn one_stream_loop(
    connection: &Connection,
    core: &mut Core,
    payload: usize,
) -> Result<(), SessionError> {
    let (mut send, mut recv) = connection.open_bi().await?;
    let mut out = Vec::new();
    let mut buf = RecvBuf::with_capacity((2 * (payload + PREFIX)).max(65_536));
    core.pump(|m| {
        push_frame(&mut out, m);
        true
    });
    loop {
        if !out.is_empty() {
            send.write_all(&out).await?;
            out.clear();
        }
        if core.in_flight() == 0 {
            return Ok(());
        }
        let n = recv.read(buf.spare()).await?.ok_or(SessionError::Ended)?;
        buf.filled(n);
        let used = split_frames(buf.data(), payload, |frame| {
            core.on_echo(frame, |m| {
                push_frame(&mut out, m);
                true
            });
        })?;
        buf.consume(used);
    }
}
