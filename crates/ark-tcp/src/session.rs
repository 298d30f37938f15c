//! What a handler sees: `TcpSession`, `TcpHandler`, close reasons and send errors.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use ark_frame::{DecodeError, EncodeError, Encoder, Header};
use ark_reactor::TimerId;

use crate::core::Link;
use crate::handle::{TcpSessionHandle, TcpShared};

/// Why a session ended. Delivered to [`TcpHandler::on_close`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// Closed by [`TcpSession::close`] (graceful: everything queued was sent first).
    #[error("closed locally after flushing")]
    Local,
    /// Closed by [`TcpSession::abort`]: queued data dropped, connection reset.
    #[error("aborted locally")]
    Aborted,
    /// The peer ended its stream at a frame boundary; every whole frame it sent was delivered
    /// and everything queued for it was written before the session closed.
    #[error("peer closed the connection")]
    PeerClosed,
    /// The peer ended its stream in the middle of a frame (every whole frame before it was
    /// delivered, and what was queued for the peer was written).
    #[error("peer closed the connection mid-frame, with {buffered} bytes of the frame received")]
    EofMidFrame {
        /// Bytes of the incomplete frame that had arrived.
        buffered: usize,
    },
    /// The peer reset the connection.
    #[error("connection reset by peer")]
    Reset,
    /// A malformed or oversized frame arrived (the connection is reset).
    #[error("bad frame: {0}")]
    Frame(DecodeError),
    /// Nothing arrived for the idle timeout (`TcpConfig::idle_timeout`).
    #[error("no data for {0:?} (idle timeout)")]
    IdleTimeout(Duration),
    /// A frame had started to arrive and no byte of it came for the stall timeout
    /// (`TcpConfig::stall_timeout`).
    #[error("a frame stalled: {buffered} bytes of it received, then nothing for {after:?}")]
    FrameStalled {
        /// Bytes of the incomplete frame that had arrived.
        buffered: usize,
        /// The stall timeout.
        after: Duration,
    },
    /// Bytes were queued and none could be written for the write stall timeout
    /// (`TcpConfig::write_stall_timeout`): the peer stopped reading. The unsent bytes
    /// were dropped and the connection reset.
    #[error("the peer stopped reading: nothing written for {after:?}, {unsent} bytes dropped")]
    WriteStalled {
        /// Queued bytes that were dropped.
        unsent: usize,
        /// The write stall timeout.
        after: Duration,
    },
    /// A graceful close (for `cause`) did not finish within the close timeout
    /// (`TcpConfig::close_timeout`): the peer did not take what was queued. The unsent
    /// bytes were dropped and the connection reset.
    #[error("closing ({cause}) timed out with {unsent} bytes unsent; connection reset")]
    Unflushed {
        /// Why the session was closing.
        cause: Box<CloseReason>,
        /// Queued bytes that were dropped.
        unsent: usize,
    },
    /// The connection was not established within the connect timeout.
    #[error("connect timed out after {0:?}")]
    ConnectTimeout(Duration),
    /// The peer refused the connection.
    #[error("connection refused by {0}")]
    Refused(SocketAddr),
    /// Connecting failed otherwise.
    #[error("connect to {addr} failed: {kind:?}: {message}")]
    ConnectFailed {
        /// Address connected to.
        addr: SocketAddr,
        /// The error's kind.
        kind: io::ErrorKind,
        /// The error's message.
        message: String,
    },
    /// A read or write failed.
    #[error("I/O error: {kind:?}: {message}")]
    Io {
        /// The error's kind.
        kind: io::ErrorKind,
        /// The error's message.
        message: String,
    },
    /// The server, client or reactor stopped.
    #[error("stopped")]
    Stopped,
    /// The handler panicked in a callback: this session was closed (and reset); the others
    /// go on.
    #[error("the handler panicked")]
    Panicked,
    /// The TLS layer failed: a bad handshake (which check failed is in the error), a bad
    /// record, an alert from the peer, a handshake timeout, or a stream truncated without
    /// `close_notify`. The alert for the peer, if any, was sent before the connection closed.
    #[error("TLS: {0}")]
    Tls(#[from] ark_tls::TlsError),
}

impl CloseReason {
    pub(crate) fn io(e: &io::Error) -> CloseReason {
        match e.kind() {
            io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => CloseReason::Reset,
            kind => CloseReason::Io {
                kind,
                message: e.to_string(),
            },
        }
    }

    /// Whether ending the session this way resets the connection rather than closing it
    /// with a FIN: the peer must not take a truncated stream as complete.
    pub(crate) fn resets(&self) -> bool {
        matches!(
            self,
            CloseReason::Aborted
                | CloseReason::Panicked
                | CloseReason::Frame(_)
                | CloseReason::Unflushed { .. }
                | CloseReason::WriteStalled { .. }
        )
    }
}

/// Why a send was refused. Nothing of the message was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The send queue would pass its limit (`TcpConfig::send_limit`). `on_writable` follows
    /// once the queue drains under the low watermark.
    #[error("send queue full: {queued} bytes queued, the frame needs {needed}, limit {limit}")]
    Full {
        /// Bytes already queued.
        queued: usize,
        /// Bytes the frame needs.
        needed: usize,
        /// The queue limit.
        limit: usize,
    },
    /// The message cannot be framed (over `max_frame`, for example).
    #[error("cannot frame the message: {0}")]
    Encode(#[from] EncodeError),
    /// The session is closing or closed.
    #[error("the session is closing")]
    Closed,
    /// A client has no connection now (between attempts, or after it ended).
    #[error("the client is not connected")]
    NotConnected,
}

/// What a session is, apart from its state: fixed when it opens.
#[derive(Debug, Clone)]
pub(crate) struct SessionInfo {
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) local: SocketAddr,
    pub(crate) socket_buffers: (usize, usize),
    /// What TLS negotiated (`tcps` sessions).
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
            socket_buffers: (0, 0),
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

/// Object-safe framing of outgoing messages.
pub(crate) trait EncodeInto {
    /// The header and trailer that frame `payload` (computed once per message).
    fn frame(&self, payload: &[u8]) -> Result<(Header, &[u8]), EncodeError>;

    /// Frames `payload` and queues it on `link` ([`queue_frame`]): one call through the vtable
    /// per send, with the codec's header and the queueing compiled together. (Returning the
    /// header from [`frame`](Self::frame) and queueing after it moved a large `Result` through
    /// memory on every send.)
    fn send(&self, link: &mut Link, input: &[u8], payload: &[u8]) -> Result<(), SendError>;
}

impl<E: Encoder> EncodeInto for E {
    #[inline]
    fn frame(&self, payload: &[u8]) -> Result<(Header, &[u8]), EncodeError> {
        Ok((self.header(payload)?, self.trailer()))
    }

    fn send(&self, link: &mut Link, input: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let header = self.header(payload)?;
        queue_frame(link, input, [header.as_slice(), payload, self.trailer()])
    }
}

/// Queues one frame — `header`, `payload`, `trailer` — on `link`: by reference when it lies in
/// `input` just as it is to be sent (an echo), otherwise copied into the send queue.
#[inline]
fn queue_frame(link: &mut Link, input: &[u8], frame: [&[u8]; 3]) -> Result<(), SendError> {
    let [header, payload, trailer] = frame;
    let in_place = match frame_in(input, header, payload, trailer) {
        Some(range) => link.queue_in_place(range)?,
        None => false,
    };
    if !in_place {
        queue_parts(link, input, &frame)?;
    }
    link.count_frame_out();
    Ok(())
}

/// Queues `parts` one after the other on `link`, all or none (what is queued in place from
/// `input` is copied into the queue first); the bytes queued.
#[inline]
fn queue_parts<'l>(
    link: &'l mut Link,
    input: &[u8],
    parts: &[&[u8]],
) -> Result<&'l mut [u8], SendError> {
    link.settle_in_place(input);
    let queue = link.room_for(parts.iter().map(|p| p.len()).sum())?;
    let start = queue.len();
    append_parts(queue, parts);
    Ok(&mut queue[start..])
}

/// Where `payload` lies in `input` between `header` and `trailer`: a frame that arrived in
/// `input` and is sent back unchanged. Only addresses are compared; the framing bytes around
/// the payload are checked against the ones computed for the send.
#[inline]
fn frame_in(input: &[u8], header: &[u8], payload: &[u8], trailer: &[u8]) -> Option<Range<usize>> {
    let offset = (payload.as_ptr() as usize).checked_sub(input.as_ptr() as usize)?;
    let start = offset.checked_sub(header.len())?;
    let end = offset
        .checked_add(payload.len())?
        .checked_add(trailer.len())?;
    let frame = input.get(start..end)?;
    let before = &frame[..header.len()];
    let after = &frame[header.len() + payload.len()..];
    (same_short(before, header) && same_short(after, trailer)).then_some(start..end)
}

/// `a == b` for the few bytes of a frame's header or trailer, four at a time and without a
/// call to libc's `memcmp`: its masked vector load of the header just written stalled for 8 %
/// of all cycles of a 1 KiB echo, and a byte-at-a-time loop took a quarter of the queueing of
/// a 64 B echo (perf).
#[inline]
fn same_short(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let ((words_a, rest_a), (words_b, rest_b)) = (a.as_chunks::<4>(), b.as_chunks::<4>());
    let words = words_a.iter().zip(words_b);
    let diff = words.fold(0, |diff, (x, y)| {
        diff | (u32::from_ne_bytes(*x) ^ u32::from_ne_bytes(*y))
    });
    let rest = rest_a.iter().zip(rest_b);
    rest.fold(diff, |diff, (x, y)| diff | u32::from(x ^ y)) == 0
}

/// Appends `parts` to `out`, reserving their total once.
#[inline]
pub(crate) fn append_parts(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.reserve(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.extend_from_slice(part);
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

    /// The socket's actual `(SO_SNDBUF, SO_RCVBUF)` sizes, read when the session opened (the
    /// kernel may have doubled or capped the requested sizes).
    pub fn socket_buffers(&self) -> (usize, usize) {
        self.info.socket_buffers
    }

    /// What TLS negotiated — version, cipher suite, ALPN protocol, SNI name, the peer's
    /// certificates — for a TLS session (`None` for plain TCP). Set before `on_open`.
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

    /// A timer set with [`TcpSession::set_timer`] fired.
    fn on_timer(&mut self, session: &mut TcpSession<'_>, timer: TimerId) {
        let _ = (session, timer);
    }

    /// The server or client is stopping: the last moment to send a goodbye. The session then
    /// closes gracefully (what is queued is written first) with [`CloseReason::Stopped`].
    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        let _ = session;
    }

    /// The session ended. For a reconnecting client, `on_open` follows on the next connection.
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = reason;
    }
}

#[cfg(test)]
mod tests {
    use super::{frame_in, same_short};

    #[test]
    fn same_short_compares_every_byte_of_any_length() {
        let bytes: Vec<u8> = (1..=11).collect();
        for len in 0..=bytes.len() {
            let a = &bytes[..len];
            let copy = a.to_vec();
            assert!(same_short(a, &copy));
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x80;
                assert!(!same_short(a, &b), "a difference at {at} of {len}");
            }
        }
        assert!(!same_short(&[1, 2], &[1, 2, 3]));
    }

    #[test]
    fn a_frame_is_in_the_input_only_with_its_own_header_and_trailer() {
        let input = [0, 0, 0, 3, b'a', b'b', b'c', b'\n', 0, 0, 0, 1, b'x'];
        let payload = &input[4..7];
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], payload, b"\n"), Some(0..8));
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], payload, b""), Some(0..7));
        assert_eq!(frame_in(&input, &[0, 0, 0, 4], payload, b"\n"), None);
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], payload, b"\r"), None);
        // A payload that is not in the input, or whose header would start before it.
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], b"abc", b""), None);
        assert_eq!(frame_in(&input[4..], &[0, 0, 0, 3], payload, b""), None);
        // The trailer would run past the input's end.
        assert_eq!(frame_in(&input, &[0, 0, 0, 1], &input[12..], b"\n"), None);
    }
}
