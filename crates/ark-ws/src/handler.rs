//! What a handler sees: `WsSession`, `WsHandler` (send errors and the upgrade request type
//! are in `error.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ark_reactor::TimerId;
use tungstenite::protocol::CloseFrame;
use tungstenite::{Bytes, Message, WebSocket};

use crate::config::WsConfig;
use crate::error::{SendError, UpgradeRequest};
use crate::handle::{WsSessionHandle, WsShared};
use crate::proto::close::{CloseCode, WsClose};
use crate::proto::data::ReceivedData;
use crate::proto::deflate::Deflater;
use crate::proto::inbound::{Head, OPCODE_BINARY, OPCODE_TEXT, apply_mask};
use crate::proto::stream::MemStream;

/// A handler's view of its WebSocket session during a callback.
pub struct WsSession<'a> {
    pub(crate) ws: &'a mut WebSocket<MemStream>,
    pub(crate) tcp: ark_tcp::TcpSession<'a>,
    pub(crate) config: &'a WsConfig,
    pub(crate) shared: &'a Arc<WsShared>,
    pub(crate) close_sent: &'a mut Option<(Option<CloseCode>, String)>,
    /// The client side masks its frames.
    pub(crate) client: bool,
    /// The session's counts since they were last published.
    pub(crate) tally: &'a mut crate::WsStats,
    /// permessage-deflate's compressor, if the handshake agreed on it.
    pub(crate) deflate: Option<&'a mut Deflater>,
}

impl std::fmt::Debug for WsSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsSession")
            .field("id", &self.id())
            .field("peer", &self.peer_addr())
            .finish_non_exhaustive()
    }
}

impl WsSession<'_> {
    /// The session's id (its TCP session's, unique within its server or client).
    pub fn id(&self) -> u64 {
        self.tcp.id()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.tcp.peer_addr()
    }

    /// What TLS negotiated for a `wss` session (version, cipher suite, ALPN, SNI name, the
    /// peer's certificates); `None` for `ws`.
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&ark_tls::TlsInfo> {
        self.tcp.tls()
    }

    /// A handle to this session, to send to it or close it from anywhere.
    pub fn handle(&self) -> WsSessionHandle {
        WsSessionHandle::new(self.shared.clone())
    }

    /// Changes this session's own rate limits, each way, from this turn on (bytes on the
    /// wire; see [`WsConfig::rate_limits`](crate::WsConfig::rate_limits)).
    pub fn set_rate_limits(&mut self, limits: ark_reactor::RateLimits) {
        self.tcp.set_rate_limits(limits);
    }

    /// Starts a timer: [`WsHandler::on_timer`] runs with its id once `after` has passed
    /// (one-shot). Timers end with the session.
    pub fn set_timer(&mut self, after: Duration) -> TimerId {
        self.tcp.set_timer(after)
    }

    /// Cancels a timer of this session; `true` if it was pending.
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.tcp.cancel_timer(timer)
    }

    fn check(&self, len: usize) -> Result<(), SendError> {
        if self.close_sent.is_some() || !self.ws.can_write() {
            return Err(SendError::Closed);
        }
        if len > self.config.max_message {
            return Err(SendError::TooLarge {
                len,
                max: self.config.max_message,
            });
        }
        let limit = self.config.write_buffer_limit;
        let queued = self.tcp.queued_bytes() + self.ws.get_ref().outbox.len();
        if queued > 0 && queued + len > limit {
            return Err(SendError::Full { queued, limit });
        }
        Ok(())
    }

    fn write(&mut self, message: Message) -> Result<(), SendError> {
        // The in-memory stream blocks only while the send queue is at its limit; the frame
        // then waits in tungstenite (bounded), or is refused as `Full` past that.
        match self.ws.write(message) {
            Ok(()) => Ok(()),
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            Err(tungstenite::Error::WriteBufferFull(_)) => Err(SendError::Full {
                queued: self.tcp.queued_bytes(),
                limit: self.config.write_buffer_limit,
            }),
            Err(_) => Err(SendError::Closed),
        }
    }

    /// Queues `message`: an echo can send back the [`Message`] it received. Data messages are
    /// framed by ark-ws straight into the TCP send queue (the payload copied once, nothing
    /// allocated); ping and pong payloads are limited to 125 bytes; a close message starts the
    /// close handshake as [`close`](Self::close) does (without a code, the close frame carries
    /// none).
    ///
    /// # Errors
    /// [`SendError::Full`], [`SendError::TooLarge`], [`SendError::InvalidCloseCode`] or
    /// [`SendError::Closed`].
    pub fn send(&mut self, message: Message) -> Result<(), SendError> {
        match message {
            Message::Close(frame) => {
                if self.close_sent.is_some() || !self.ws.can_write() {
                    return Err(SendError::Closed);
                }
                match frame {
                    Some(frame) => {
                        let code = CloseCode::new(u16::from(frame.code))?;
                        self.close(code, &frame.reason);
                    }
                    None => self.start_close(None, String::new()),
                }
                Ok(())
            }
            Message::Ping(ref payload) | Message::Pong(ref payload) if payload.len() > 125 => {
                Err(SendError::TooLarge {
                    len: payload.len(),
                    max: 125,
                })
            }
            Message::Binary(payload) => self.write_data(OPCODE_BINARY, &payload),
            Message::Text(text) => self.write_data(OPCODE_TEXT, text.as_bytes()),
            message => {
                self.check(message.len())?;
                self.write(message)
            }
        }
    }

    /// Encodes a data message as one frame straight into the TCP send queue (one copy of the
    /// payload, masked there on the client side with a fresh random key, as RFC 6455
    /// requires), instead of through tungstenite's frame buffer and the outgoing stream.
    ///
    /// A pong tungstenite still owes is not flushed first: control frames may go between
    /// whole data frames in any order, and every callback ends with the connection's flush,
    /// which moves it to the queue in the same turn.
    ///
    /// With permessage-deflate agreed, a message of at least its `min_size` goes compressed
    /// (RSV1 set on its frame).
    fn write_data(&mut self, opcode: u8, payload: &[u8]) -> Result<(), SendError> {
        /// RSV1: the message is compressed (RFC 7692 6).
        const COMPRESSED: u8 = 0x40;
        self.check(payload.len())?;
        let mask = self.client.then(fresh_mask);
        let mut deflate = self.deflate.take();
        let (first, payload) = match deflate.as_mut().and_then(|d| d.compress(payload)) {
            Some(compressed) => (opcode | COMPRESSED, compressed),
            None => (opcode, payload),
        };
        if !self.queue_frame(first, mask, payload) {
            self.ws.get_mut().write_frame(first, mask, payload);
        }
        self.deflate = deflate;
        self.tally.messages_out += 1;
        Ok(())
    }

    /// Frames `payload` straight into the TCP send queue (masking it there on the client
    /// side) when everything encoded before it is queued already; `false` if it must wait
    /// in the outgoing stream instead (the queue refused).
    fn queue_frame(&mut self, opcode: u8, mask: Option<[u8; 4]>, payload: &[u8]) -> bool {
        let stream = self.ws.get_mut();
        if !stream.outbox.is_empty() && self.tcp.append_raw(&mut stream.outbox).is_err() {
            return false;
        }
        let mut head = [0u8; 14];
        let head_len = Head::write_final(opcode, payload.len(), mask, &mut head);
        let parts = [&head[..head_len], payload];
        match mask {
            Some(mask) => self
                .tcp
                .send_raw_parts_edited(&parts, |queued| apply_mask(&mut queued[head_len..], mask)),
            None => self.tcp.send_raw_parts(&parts),
        }
        .is_ok()
    }

    /// Queues a binary message (written with everything else at the end of the turn): framed
    /// straight into the TCP send queue, the payload copied once, nothing allocated.
    ///
    /// # Errors
    /// [`SendError::Full`], [`SendError::TooLarge`] or [`SendError::Closed`].
    #[inline]
    pub fn send_binary(&mut self, data: &[u8]) -> Result<(), SendError> {
        self.write_data(OPCODE_BINARY, data)
    }

    /// Queues a text message.
    ///
    /// # Errors
    /// As [`send_binary`](Self::send_binary).
    pub fn send_text(&mut self, text: &str) -> Result<(), SendError> {
        self.write_data(OPCODE_TEXT, text.as_bytes())
    }

    /// Queues a ping (payload at most 125 bytes); the peer's pong arrives as
    /// [`Message::Pong`].
    ///
    /// # Errors
    /// As [`send_binary`](Self::send_binary); a payload over 125 bytes is `TooLarge`.
    pub fn ping(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.send(Message::Ping(Bytes::copy_from_slice(payload)))
    }

    /// Starts the close handshake with `code` and `reason`; `on_close` follows when it
    /// completes (or when the close timeout ends it). No-op once a close was sent.
    pub fn close(&mut self, code: CloseCode, reason: &str) {
        self.start_close(Some(code), reason.to_string());
    }

    fn start_close(&mut self, code: Option<CloseCode>, reason: String) {
        if self.close_sent.is_some() {
            return;
        }
        let frame = code.map(|code| CloseFrame {
            code: code.get().into(),
            reason: reason.clone().into(),
        });
        *self.close_sent = Some((code, reason));
        self.shared.set_ended();
        // A close frame never waits behind a full queue.
        self.ws.get_mut().blocked = false;
        let _ = self.ws.close(frame);
    }
}

/// A fresh random masking key for a client frame (RFC 6455 5.3): one 32-bit draw.
pub(crate) fn fresh_mask() -> [u8; 4] {
    rand::random::<u32>().to_ne_bytes()
}

/// The callbacks of a WebSocket session; one handler value per session, every callback on the
/// thread serving the session, never two at once.
pub trait WsHandler: Send + 'static {
    /// The handshake completed. `request` is the upgrade request (the server's received one,
    /// or the client's sent one).
    fn on_open(&mut self, session: &mut WsSession<'_>, request: &UpgradeRequest) {
        let _ = (session, request);
    }

    /// A whole message arrived: `Text` (valid UTF-8) or `Binary`, fragmented messages already
    /// reassembled (through [`on_data`](Self::on_data)'s default); `Pong` replies to our pings
    /// are delivered too. Pings are answered automatically.
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message);

    /// A whole text or binary message arrived, lent from the receive buffer. The default
    /// hands it to [`on_message`](Self::on_message) as an owned [`Message`] (split off the
    /// buffer, no copy). Override it to read messages where they are: no reference count is
    /// touched for a message that is not kept, which an echo or a parser does not need.
    fn on_data(&mut self, session: &mut WsSession<'_>, data: ReceivedData<'_>) {
        self.on_message(session, data.into_message());
    }

    /// A timer set with [`WsSession::set_timer`] fired.
    fn on_timer(&mut self, session: &mut WsSession<'_>, timer: TimerId) {
        let _ = (session, timer);
    }

    /// The session was woken through [`WsSessionHandle::wake`].
    fn on_wake(&mut self, session: &mut WsSession<'_>) {
        let _ = session;
    }

    /// The server is draining (`WsServerHandle::drain`): it takes no new connections, and this
    /// session goes on as before until its peer or the handler closes it, or the drain's
    /// deadline passes (then `on_stopping` and a close with 1001 follow). The moment to tell
    /// the peer to finish and go (to reconnect elsewhere, say), or to close a session with
    /// nothing under way. Runs once.
    fn on_drain(&mut self, session: &mut WsSession<'_>) {
        let _ = session;
    }

    /// The server or client is stopping: the last moment to send a goodbye. The session then
    /// closes with [`CloseCode::GOING_AWAY`] (1001) and waits, within the close timeout, for
    /// the peer's close.
    fn on_stopping(&mut self, session: &mut WsSession<'_>) {
        let _ = session;
    }

    /// The session ended — or never opened. Called exactly once per handler.
    fn on_close(&mut self, close: &WsClose) {
        let _ = close;
    }
}
