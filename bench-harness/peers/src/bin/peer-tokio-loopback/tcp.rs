//! TCP on tokio: hand-written length-prefixed framing on [`crate::stream::drive`].

use std::io;

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_peers::peer_io::{RecvBuf, push_frame, split_frames};
use tokio::net::TcpStream;

use crate::stream::{Outgoing, drive, recv_buf};

/// Largest frame accepted (ark-loopback's payloads are at most 65,507 bytes).
const MAX_FRAME: usize = 1 << 20;

/// One server connection: every whole frame goes back as it came. Whole frames are written
/// straight from the receive buffer when nothing is queued before them; only what the socket
/// does not take is copied aside.
pub async fn session(stream: TcpStream, echo: Echo) {
    if stream.set_nodelay(true).is_err() {
        return;
    }
    let mut out = Outgoing::new();
    let _ = drive(
        &stream,
        RecvBuf::with_capacity(recv_buf()),
        |buf, out| {
            let used = split_frames(buf.data(), MAX_FRAME, |frame| echo.before_echo(frame))
                .map_err(io::Error::other)?;
            let whole = &buf.data()[..used];
            let mut sent = 0;
            if !out.pending() {
                while sent < whole.len() {
                    match stream.try_write(&whole[sent..]) {
                        Ok(n) => sent += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
            }
            out.bytes.extend_from_slice(&whole[sent..]);
            buf.consume(used);
            Ok(())
        },
        &mut out,
    )
    .await;
}

/// A closed-loop client: its window goes out in one write; every echo of a read is checked,
/// and the messages that refill the window are written together.
pub async fn client(stream: TcpStream, mut core: Core) {
    let mut out = Outgoing::new();
    core.pump(|m| {
        push_frame(&mut out.bytes, m);
        true
    });
    let ended = drive(
        &stream,
        RecvBuf::with_capacity(recv_buf()),
        |buf, out| {
            let used = split_frames(buf.data(), MAX_FRAME, |frame| {
                core.on_echo(frame, |m| {
                    push_frame(&mut out.bytes, m);
                    true
                })
            })
            .map_err(io::Error::other)?;
            buf.consume(used);
            Ok(())
        },
        &mut out,
    )
    .await;
    let _ = ended;
    core.on_disconnect();
}
