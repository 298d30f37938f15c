//! What a handler sees: `TcpSession` and `TcpHandler` (close reasons and send errors are in
//! `error.rs`, the framing of sends in `encode.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use ark_reactor::{SocketBuffers, TimerId};

use crate::encode::{EncodeInto, queue_parts};
use crate::error::{CloseReason, SendError};
use crate::handle::{TcpSessionHandle, TcpShared};
use crate::proto::core::link::Link;

/// What a session is, apart from its state: fixed when it opens.
#[derive(Debug, Clone)]
pub(crate) struct SessionInfo {
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) socket_buffers: SocketBuffers,
    /// What TLS negotiated (`tcps` sessions).
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<std::sync::Arc<ark_tls::TlsInfo>>,
}

impl SessionInfo {
    /// A session without a socket (the `Simulator`'s, the core's tests'): id 0, `addr` at
    /// both ends, no socket buffers, no TLS.
    pub(crate) fn without_socket(addr: SocketAddr) -> SessionInfo {
        SessionInfo {
            id: 0,
            peer: addr,
            local: addr,
            socket_buffers: SocketBuffers::default(),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// A handler's view of its session during a callback: send, close, and what the session is.
pub struct TcpSession<'a> {
    pub(crate) info: &'a SessionInfo,
    /// The input being delivered, when frames sent back unchanged from it may be queued by
    /// reference (empty otherwise).
    pub(crate) input: &'a [u8],
    pub(crate) link: &'a mut Link,
    pub(crate) encoder: &'a dyn EncodeInto,
    pub(crate) handle: &'a std::sync::Arc<TcpShared>,
}

impl std::fmt::Debug for TcpSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpSession")
            .field("id", &self.info.id)
            .field("peer", &self.info.peer)
            .field("queued", &self.link.queued())
            .finish_non_exhaustive()
    }
}

impl<'a> TcpSession<'a> {
    /// The view a handler gets of its session; `input` as the field says.
    #[inline]
    pub(crate) fn new(
        info: &'a SessionInfo,
        input: &'a [u8],
        link: &'a mut Link,
        encoder: &'a dyn EncodeInto,
        handle: &'a std::sync::Arc<TcpShared>,
    ) -> Self {
        TcpSession {
            info,
            input,
            link,
            encoder,
            handle,
        }
    }
}

impl TcpSession<'_> {
    /// A shorter-lived view of this session, for a protocol layer that keeps one in a view of
    /// its own (ark-ws's `WsSession` does).
    pub fn reborrow(&mut self) -> TcpSession<'_> {
        TcpSession::new(self.info, self.input, self.link, self.encoder, self.handle)
    }

    /// This session's id (unique within its server or client).
    pub fn id(&self) -> u64 {
        self.info.id
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.info.peer
    }

    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.info.local
    }

    /// The socket's actual `SO_SNDBUF` and `SO_RCVBUF` sizes, read when the session opened
    /// (the kernel may have doubled or capped the requested sizes).
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.info.socket_buffers
    }

    /// What TLS negotiated — version, cipher suite, ALPN protocol, SNI name, the peer's
    /// certificates — for a TLS session (`None` for plain TCP). Set before `on_open`.
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&ark_tls::TlsInfo> {
        self.info.tls.as_deref()
    }

    /// Bytes queued and not yet written.
    #[inline]
    pub fn queued_bytes(&self) -> usize {
        self.link.queued()
    }

    /// A handle to this session, to send to it (or close it) from anywhere: keep it in your
    /// application's registry, give it to other sessions, move it to another thread.
    pub fn handle(&self) -> TcpSessionHandle {
        TcpSessionHandle::new(self.handle.clone())
    }

    /// Queues `payload` as one frame. Never blocks: the frame is written at the end of this
    /// turn together with everything else queued. An empty queue accepts any one frame the
    /// codec can encode; otherwise the queue may not pass `send_limit`.
    ///
    /// # Errors
    /// [`SendError::Full`] when the queue would pass its limit, [`SendError::Encode`] when the
    /// payload cannot be framed, [`SendError::Closed`] after `close`/`abort` or once the
    /// session is closing. Nothing is queued on error.
    ///
    /// A message sent back unchanged from `on_message` (an echo, or a relay of the same
    /// framing) is not copied: it is written straight from the receive buffer after the
    /// delivery, and only what the socket does not take is queued.
    #[inline]
    pub fn send(&mut self, payload: &[u8]) -> Result<(), SendError> {
        self.encoder.send(self.link, self.input, payload)
    }

    /// Queues `bytes` as they are, without framing.
    ///
    /// # Errors
    /// As [`send`](Self::send), without `Encode`.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), SendError> {
        self.send_raw_parts(&[bytes])
    }

    /// Queues `parts` one after the other as they are, without framing: all of them or,
    /// on error, none (a head and a body, say, without first joining them in a buffer of
    /// your own).
    ///
    /// # Errors
    /// As [`send_raw`](Self::send_raw), for the parts' total length.
    #[inline]
    pub fn send_raw_parts(&mut self, parts: &[&[u8]]) -> Result<(), SendError> {
        queue_parts(self.link, self.input, parts).map(drop)
    }

    /// Queues `parts` as [`send_raw_parts`](Self::send_raw_parts) does, then lets `edit`
    /// change those queued bytes in place (all parts, joined) — a WebSocket client masks a
    /// frame's payload this way while it is still in cache, with no buffer of its own.
    ///
    /// # Errors
    /// As [`send_raw_parts`](Self::send_raw_parts); `edit` runs only when the parts were queued.
    pub fn send_raw_parts_edited(
        &mut self,
        parts: &[&[u8]],
        edit: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        edit(queue_parts(self.link, self.input, parts)?);
        Ok(())
    }

    /// Queues all of `bytes` as they are, without framing, and leaves `bytes` empty (as
    /// `Vec::append` does). When nothing is queued the two buffers are swapped instead of
    /// copied, so `bytes` comes back holding the queue's empty storage: a caller that keeps
    /// encoding into its own buffer hands it over without a copy.
    ///
    /// # Errors
    /// As [`send_raw`](Self::send_raw); on error `bytes` is left as it was.
    pub fn append_raw(&mut self, bytes: &mut Vec<u8>) -> Result<(), SendError> {
        self.link.settle_in_place(self.input);
        self.link.append(bytes)
    }

    /// Gives this session the idle, stall, write-stall and close timeouts of `config` from now
    /// on (its send limits and framing stay): for a protocol layer that takes a connection
    /// over, as a WebSocket session does after an HTTP upgrade.
    pub fn set_timeouts(&mut self, config: &crate::TcpConfig) {
        self.link.set_timeouts(config);
    }

    /// Sets this session's own rate limits, each way (`None`: unlimited), from now: reads
    /// take no more than the read bucket gives, and what is queued over the write bucket
    /// waits for it (see [`TcpConfig::rate_limits`](crate::TcpConfig::rate_limits)). A
    /// group's limits (a server's total) still apply beside them.
    pub fn set_rate_limits(&mut self, limits: ark_reactor::RateLimits) {
        self.link.set_rate_limits(limits);
    }

    /// Starts a timer: [`TcpHandler::on_timer`] runs with its id once `after` has passed
    /// (one-shot; set it again from `on_timer` to repeat). Timers end with the session.
    pub fn set_timer(&mut self, after: Duration) -> TimerId {
        self.link.set_timer(after)
    }

    /// Cancels a timer of this session; `true` if it was pending (it will not fire).
    pub fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.link.cancel_timer(timer)
    }

    /// Closes gracefully: no more sends; everything queued is written, writing is shut down,
    /// and the session closes when the peer ends its side. The peer's messages are delivered
    /// meanwhile. The whole close takes at most `close_timeout`; past it what is unsent is
    /// dropped and the connection reset ([`CloseReason::Unflushed`]).
    pub fn close(&mut self) {
        self.link.begin_close(CloseReason::Local);
    }

    /// Closes gracefully as [`close`](Self::close) does, for the peer's reason: a protocol
    /// layer whose peer began the close (a WebSocket close handshake the peer started) ends
    /// the session with [`CloseReason::PeerClosed`], so a reconnecting client connects again.
    pub fn close_for_peer(&mut self) {
        self.link.begin_close(CloseReason::PeerClosed);
    }

    /// Closes at once: queued data is dropped and the connection is reset.
    pub fn abort(&mut self) {
        self.link.abort();
    }
}

/// The callbacks of a TCP session. One handler value per session (its fields are the
/// session's typed state); every callback runs on the thread serving the session, never two
/// at once.
pub trait TcpHandler: Send + 'static {
    /// The connection is established.
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// A whole message arrived. The slice is lent for this call only.
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]);

    /// A whole message arrived, lent mutably for this call only: called instead of
    /// [`on_message`](Self::on_message) when [`decodes_in_place`](Self::decodes_in_place)
    /// says so and the session holds the bytes mutably (plain TCP; TLS plaintext still goes
    /// to `on_message`). For a protocol layer that decodes where the bytes were read (a
    /// WebSocket server unmasks its client's frames there). The default calls `on_message`.
    fn on_message_mut(&mut self, session: &mut TcpSession<'_>, message: &mut [u8]) {
        self.on_message(session, message);
    }

    /// Whether messages go to [`on_message_mut`](Self::on_message_mut). A frame such a
    /// handler sends back unchanged with [`TcpSession::send`] is copied into the send queue
    /// rather than written from where it was read. Default `false`.
    fn decodes_in_place(&self) -> bool {
        false
    }

    /// The send queue drained to the low watermark after a `SendError::Full` or a read pause.
    fn on_writable(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// The session was woken through [`TcpSessionHandle::wake`]: work reached it from elsewhere.
    fn on_wake(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// Nothing arrived for the idle timeout (`TcpConfig::idle_timeout`): the last moment to
    /// send a goodbye that says why. The session then closes gracefully (what is queued is
    /// written first) with [`CloseReason::IdleTimeout`].
    fn on_idle(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// A timer set with [`TcpSession::set_timer`] fired.
    fn on_timer(&mut self, session: &mut TcpSession<'_>, timer: TimerId) {
        let _ = (session, timer);
    }

    /// The server is draining (`TcpServerHandle::drain`): it takes no new connections, and
    /// this session goes on as before — messages, sends, timers — until its peer or the
    /// handler closes it, or the drain's deadline passes (then `on_stopping` and a graceful
    /// close follow). The moment to tell the peer to finish and go (a protocol's goodbye or
    /// "reconnect elsewhere"), or to close a session that has nothing under way. Runs once,
    /// when the drain begins or, for a session still opening then, once it opens.
    fn on_drain(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// The server or client is stopping: the last moment to send a goodbye. The session then
    /// closes gracefully (what is queued is written first) with [`CloseReason::Stopped`].
    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// For a reconnecting client ([`TcpClientBuilder::reconnect`](crate::TcpClientBuilder::reconnect)):
    /// whether to connect again after this connection ended for `reason` (asked after
    /// [`on_close`](Self::on_close)). The default reconnects after every end this side did not
    /// choose: not after its own [`close`](TcpSession::close), [`abort`](TcpSession::abort),
    /// a stop or a handler's panic. A protocol layer overrides it: a WebSocket client aborts a
    /// refused handshake itself and still reconnects, unless the refusal was final.
    fn reconnect_after(&self, reason: &CloseReason) -> bool {
        !reason.is_local_choice()
    }

    /// The session ended. For a reconnecting client, `on_open` follows on the next connection.
    /// The handler value is the session's own: keep `session.id()` from `on_open` to know which
    /// session this was.
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = reason;
    }
}
