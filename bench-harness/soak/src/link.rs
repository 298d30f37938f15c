//! Ordered, reliable message links — TCP with a 4-byte length prefix, and WebSocket — and the
//! checked echo exchange the well-behaved clients run over them.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use tungstenite::{Message, WebSocket};

use crate::shared::{Ctx, Rng};
use crate::tally::{Fault, Proto};

/// How long a well-behaved client waits for any one read or write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a client accepts as a frame length (the server's default maximum, 16 MiB).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// Reads a WebSocket may skip (pings, pongs) while waiting for one data message.
const MAX_SKIPPED: usize = 100;

/// One message: its bytes, and for WebSocket whether it goes as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    /// Sent as a WebSocket text message (the bytes are then ASCII letters).
    pub text: bool,
    /// The payload.
    pub data: Vec<u8>,
}

/// An ordered, reliable message connection to an echo server.
pub trait Link {
    /// Sends one message.
    fn send(&mut self, msg: &Msg) -> io::Result<()>;
    /// Receives the next message.
    fn recv(&mut self) -> io::Result<Msg>;
    /// Leaves cleanly, checking that nothing follows the last echo.
    fn leave(&mut self) -> Result<(), Fault>;
}

/// A TCP stream to 127.0.0.1 with read and write timeouts.
pub fn tcp_connect(addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A TCP connection speaking the server's 4-byte big-endian length prefix.
#[derive(Debug)]
pub struct TcpLink(pub TcpStream);

impl TcpLink {
    /// Connects to the TCP echo server.
    pub fn connect(addr: SocketAddr) -> io::Result<TcpLink> {
        tcp_connect(addr, IO_TIMEOUT).map(TcpLink)
    }
}

/// `payload` with its 4-byte big-endian length prefix.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + payload.len());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

impl Link for TcpLink {
    fn send(&mut self, msg: &Msg) -> io::Result<()> {
        self.0.write_all(&frame(&msg.data))
    }

    fn recv(&mut self) -> io::Result<Msg> {
        let mut header = [0u8; 4];
        self.0.read_exact(&mut header)?;
        let len = u32::from_be_bytes(header) as usize;
        if len > MAX_FRAME {
            return Err(io::Error::other(format!("frame header claims {len} bytes")));
        }
        let mut data = vec![0; len];
        self.0.read_exact(&mut data)?;
        Ok(Msg { text: false, data })
    }

    fn leave(&mut self) -> Result<(), Fault> {
        self.0
            .shutdown(Shutdown::Write)
            .map_err(|e| Fault::broken(0, "shutdown", e))?;
        let mut rest = [0u8; 64];
        match self.0.read(&mut rest) {
            Ok(0) => Ok(()),
            Ok(n) => Err(Fault::Wrong(format!("{n} bytes after the last echo"))),
            Err(e) => Err(Fault::broken(
                0,
                "waiting for the server's end of stream",
                e,
            )),
        }
    }
}

/// A WebSocket client (tungstenite, blocking) over a TCP stream with timeouts.
#[derive(Debug)]
pub struct WsLink(pub WebSocket<TcpStream>);

impl WsLink {
    /// Connects to the WebSocket echo server and completes the upgrade.
    pub fn connect(addr: SocketAddr) -> io::Result<WsLink> {
        let stream = tcp_connect(addr, IO_TIMEOUT)?;
        let (ws, _) = tungstenite::client::client(format!("ws://{addr}/"), stream)
            .map_err(|e| io::Error::other(format!("upgrade failed: {e}")))?;
        Ok(WsLink(ws))
    }
}

/// A tungstenite error as an IO error (its own when it has one).
fn io_error(e: tungstenite::Error) -> io::Error {
    match e {
        tungstenite::Error::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

impl Link for WsLink {
    fn send(&mut self, msg: &Msg) -> io::Result<()> {
        let message = if msg.text {
            let text = String::from_utf8(msg.data.clone()).map_err(io::Error::other)?;
            Message::text(text)
        } else {
            Message::binary(msg.data.clone())
        };
        self.0.send(message).map_err(io_error)
    }

    fn recv(&mut self) -> io::Result<Msg> {
        for _ in 0..MAX_SKIPPED {
            match self.0.read().map_err(io_error)? {
                Message::Binary(b) => {
                    return Ok(Msg {
                        text: false,
                        data: b.to_vec(),
                    });
                }
                Message::Text(t) => {
                    return Ok(Msg {
                        text: true,
                        data: t.as_bytes().to_vec(),
                    });
                }
                Message::Close(frame) => {
                    return Err(io::Error::other(format!("the server closed: {frame:?}")));
                }
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
        Err(io::Error::other("only control messages arrived"))
    }

    fn leave(&mut self) -> Result<(), Fault> {
        if let Err(e) = self.0.close(None) {
            return Err(Fault::broken(0, "sending the close frame", e));
        }
        for _ in 0..MAX_SKIPPED {
            match self.0.read() {
                Ok(Message::Binary(_) | Message::Text(_)) => {
                    return Err(Fault::Wrong("a message after the last echo".into()));
                }
                Ok(_) => {}
                // The server answered the close and then closed the connection.
                Err(tungstenite::Error::ConnectionClosed) => return Ok(()),
                Err(e) => return Err(Fault::broken(0, "closing", e)),
            }
        }
        Err(Fault::broken(0, "closing", "no end of the close handshake"))
    }
}

/// How a client exchanges messages.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Messages to exchange (fewer if the run ends first).
    pub count: u64,
    /// Most messages in flight.
    pub window: usize,
    /// Pause after each echo, in milliseconds (`(0, 0)`: none).
    pub pace_ms: (u64, u64),
    /// Every how many messages one goes as WebSocket text (0: never).
    pub text_every: u64,
}

/// A random message for message number `n` of `plan`.
fn message(rng: &mut Rng, plan: &Plan, n: u64) -> Msg {
    let len = rng.message_size();
    let text = plan.text_every > 0 && n % plan.text_every == plan.text_every - 1;
    let data = if text {
        rng.letters(len)
    } else {
        rng.bytes(len)
    };
    Msg { text, data }
}

/// How echo `n` differs from what was sent.
fn difference(n: u64, want: &Msg, got: &Msg) -> String {
    let at = want.data.iter().zip(&got.data).position(|(a, b)| a != b);
    format!(
        "echo {n}: {} bytes (text {}), sent {} bytes (text {}), first differing byte {at:?}",
        got.data.len(),
        got.text,
        want.data.len(),
        want.text
    )
}

/// Sends the plan's messages with up to `window` in flight and checks every echo byte for
/// byte and in order; stops sending once the run ends, but still collects what is in flight.
pub fn exchange(
    link: &mut dyn Link,
    plan: &Plan,
    rng: &mut Rng,
    ctx: &Ctx,
    proto: &Proto,
) -> Result<(), Fault> {
    let mut in_flight: VecDeque<Msg> = VecDeque::with_capacity(plan.window);
    let (mut sent, mut echoed) = (0u64, 0u64);
    loop {
        while sent < plan.count && in_flight.len() < plan.window && ctx.running() {
            let msg = message(rng, plan, sent);
            let lost = in_flight.len() as u64 + 1;
            link.send(&msg)
                .map_err(|e| Fault::broken(lost, "send", e))?;
            in_flight.push_back(msg);
            sent += 1;
        }
        let Some(want) = in_flight.pop_front() else {
            return Ok(());
        };
        let lost = in_flight.len() as u64 + 1;
        let got = link.recv().map_err(|e| Fault::broken(lost, "receive", e))?;
        if got != want {
            return Err(Fault::Wrong(difference(echoed, &want, &got)));
        }
        echoed += 1;
        proto.messages.fetch_add(1, Ordering::Relaxed);
        if plan.pace_ms.1 > 0 {
            std::thread::sleep(rng.millis(plan.pace_ms.0, plan.pace_ms.1));
        }
    }
}
