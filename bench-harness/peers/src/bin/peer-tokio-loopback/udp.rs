//! UDP on tokio, written for speed: readiness-driven `try_recv_from`/`try_send_to` loops that
//! drain the socket on every wake-up, one reused buffer, no future per datagram. (tokio has no
//! batched datagram calls, so the record says `udp_batch: false`.)

use std::io;

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Largest datagram.
const MAX_DATAGRAM: usize = 65_536;

/// The echo server (one of several with `SO_REUSEPORT` in the sharded model): every datagram
/// back to its sender.
pub async fn echo(socket: UdpSocket, echo: Echo) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        if socket.readable().await.is_err() {
            return;
        }
        loop {
            let (n, peer) = match socket.try_recv_from(&mut buf) {
                Ok(received) => received,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP error of an earlier send: that peer is gone; others are not.
                Err(_) => continue,
            };
            echo.before_echo(&buf[..n]);
            let sent = match socket.try_send_to(&buf[..n], peer) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    socket.send_to(&buf[..n], peer).await
                }
                sent => sent,
            };
            if sent.is_err() {
                echo.rejected();
            }
        }
    }
}

/// Sends `message` on a connected socket, waiting only if its buffer is full. A datagram
/// the kernel refuses is lost, and counted as lost by the run.
async fn send(socket: &UdpSocket, message: &[u8]) {
    if let Err(e) = socket.try_send(message)
        && e.kind() == io::ErrorKind::WouldBlock
    {
        let _ = socket.send(message).await;
    }
}

/// A closed-loop client on a connected socket: each echo is checked and answered by the next
/// message at once. Once every message in flight is answered nothing more can arrive, so the
/// socket's readiness is dropped without a receive that would block (ark's client learns the
/// same from a short `recvmmsg` batch).
pub async fn client(socket: UdpSocket, mut core: Core, payload: usize) {
    let mut out = Vec::with_capacity(payload * 4);
    let mut buf = vec![0u8; MAX_DATAGRAM];
    core.pump(|m| {
        out.extend_from_slice(m);
        true
    });
    loop {
        for message in out.chunks(payload) {
            send(&socket, message).await;
        }
        out.clear();
        let mut awaited = core.in_flight();
        if socket.readable().await.is_err() {
            return core.on_disconnect();
        }
        while out.is_empty() {
            match socket.try_recv(&mut buf) {
                Ok(n) => core.on_echo(&buf[..n], |m| {
                    out.extend_from_slice(m);
                    true
                }),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => return core.on_disconnect(),
            }
            awaited = awaited.saturating_sub(1);
            if awaited == 0 {
                let _ = socket.try_io(Interest::READABLE, || {
                    Err::<(), _>(io::ErrorKind::WouldBlock.into())
                });
                break;
            }
        }
    }
}
