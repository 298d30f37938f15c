//! One TLS connection as a sans-IO byte transform: ciphertext and time in, plaintext and
//! ciphertext out. Nothing here touches a socket or a clock.

use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};

use crate::config::{ClientTls, ServerTls};
use crate::error::TlsError;

/// Ciphertext the session holds for the peer before [`TlsSession::write_plaintext`] takes no
/// more: bounds memory, and lets a stalled peer show as a stalled queue upstream.
pub const OUTGOING_LIMIT: usize = 64 * 1024;

/// What a session negotiated, fixed once the handshake completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    /// The protocol version: `"TLSv1.3"` or `"TLSv1.2"`.
    pub version: String,
    /// The cipher suite, as IANA names it (`"TLS13_AES_128_GCM_SHA256"`, say).
    pub cipher_suite: String,
    /// The application protocol agreed by ALPN, if any.
    pub alpn: Option<Vec<u8>>,
    /// The name asked for by SNI: on a server the client's, on a client its own.
    pub server_name: Option<String>,
    /// The peer's certificate chain, leaf first: the server's on a client; the client's on
    /// an mTLS server (empty when the client presented none).
    pub peer_certificates: Vec<CertificateDer<'static>>,
    /// Whether the session was resumed from an earlier one (no full handshake).
    pub resumed: bool,
}

/// What a rustls connection negotiated, named as [`TlsInfo`] names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The protocol version: `"TLSv1.3"`, `"TLSv1.2"`.
    pub version: String,
    /// The cipher suite's IANA name (empty before the handshake chose one).
    pub cipher_suite: String,
}

/// The negotiated protocol version and cipher suite of any rustls connection, as [`TlsInfo`]
/// names them: for programs that drive rustls themselves (a tokio-rustls peer, say) and
/// report the same way.
pub fn describe(state: &rustls::CommonState) -> Negotiated {
    let version = match state.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
        other => format!("{other:?}"),
    };
    let cipher_suite = state
        .negotiated_cipher_suite()
        .map(|s| {
            let id = s.suite();
            id.as_str()
                .map_or_else(|| format!("{id:?}"), str::to_string)
        })
        .unwrap_or_default();
    Negotiated {
        version,
        cipher_suite,
    }
}

/// Where a session's plaintext goes: the session core of the transport above.
pub trait PlaintextSink {
    /// The handshake completed; called once, before any plaintext.
    fn established(&mut self, info: &Arc<TlsInfo>);

    /// Plaintext from the peer, in order. Returns whether more is wanted now: `false` pauses
    /// delivery, and the session keeps the rest until [`TlsSession::resume`].
    fn plaintext(&mut self, bytes: &[u8]) -> bool;
}

/// One TLS connection, client or server side, as a state machine over byte buffers.
///
/// Feed it what the transport read ([`handle_input`](Self::handle_input)); it hands the
/// plaintext to a [`PlaintextSink`]. Give it plaintext to send
/// ([`write_plaintext`](Self::write_plaintext)) and write out what
/// [`write_to`](Self::write_to) produces whenever [`wants_write`](Self::wants_write). Keep a
/// timer at [`poll_timeout`](Self::poll_timeout) for the handshake deadline.
#[derive(Debug)]
pub struct TlsSession {
    conn: rustls::Connection,
    /// Ciphertext read from the transport while delivery was paused (allocated only then).
    backlog: Vec<u8>,
    /// The handshake's deadline, until it completes.
    deadline: Option<Instant>,
    timeout: Duration,
    info: Option<Arc<TlsInfo>>,
    /// The peer's `close_notify` arrived.
    peer_closed: bool,
    /// Delivery paused with decrypted plaintext left in rustls.
    plaintext_waiting: bool,
}

impl TlsSession {
    /// The server side of a new connection; the handshake deadline counts from `now`.
    ///
    /// # Errors
    /// [`TlsError::Protocol`] when rustls cannot start a connection with this config.
    pub fn server(config: &ServerTls, now: Instant) -> Result<Self, TlsError> {
        let conn = rustls::ServerConnection::new(config.config.clone())?;
        Ok(TlsSession::new(conn.into(), config.handshake_timeout, now))
    }

    /// The client side of a new connection to `name` (the host name verified against the
    /// server's certificate and sent by SNI); the handshake starts at once.
    ///
    /// # Errors
    /// [`TlsError::Protocol`] when rustls cannot start a connection with this config.
    pub fn client(
        config: &ClientTls,
        name: ServerName<'static>,
        now: Instant,
    ) -> Result<Self, TlsError> {
        let conn = rustls::ClientConnection::new(config.config.clone(), name)?;
        Ok(TlsSession::new(conn.into(), config.handshake_timeout, now))
    }

    fn new(mut conn: rustls::Connection, timeout: Duration, now: Instant) -> Self {
        conn.set_buffer_limit(Some(OUTGOING_LIMIT));
        TlsSession {
            conn,
            backlog: Vec::new(),
            deadline: Some(now + timeout),
            timeout,
            info: None,
            peer_closed: false,
            plaintext_waiting: false,
        }
    }

    /// Whether the handshake has completed.
    pub fn is_established(&self) -> bool {
        self.info.is_some()
    }

    /// What the handshake negotiated, once it has completed.
    pub fn info(&self) -> Option<&Arc<TlsInfo>> {
        self.info.as_ref()
    }

    /// Whether the peer's `close_notify` arrived: no more plaintext will come.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Whether input was held back while delivery was paused (ciphertext or decrypted
    /// plaintext): while there is some, deliver it with [`resume`](Self::resume) before
    /// reading more.
    pub fn holds_input(&self) -> bool {
        !self.backlog.is_empty() || self.plaintext_waiting
    }

    /// Feeds ciphertext the transport read and delivers the plaintext to `sink` while it
    /// wants more; what it does not take yet is kept (see [`holds_input`](Self::holds_input)).
    /// After the peer's `close_notify`, further input is ignored.
    ///
    /// # Errors
    /// The session failed (a bad handshake, a bad record, an alert from the peer). An alert
    /// for the peer may be waiting in [`write_to`](Self::write_to): send it before closing.
    pub fn handle_input(
        &mut self,
        input: &[u8],
        sink: &mut impl PlaintextSink,
    ) -> Result<(), TlsError> {
        self.input(input, sink, None)
    }

    /// As [`handle_input`](Self::handle_input), copying the plaintext through `staging`
    /// first: the plaintext of consecutive records (a message split over records, say) reaches
    /// the sink as one slice of up to `staging.len()` bytes, instead of a slice per record
    /// straight from rustls's buffer. One copy more, and no message reassembled downstream.
    ///
    /// # Errors
    /// As [`handle_input`](Self::handle_input).
    pub fn handle_input_staged(
        &mut self,
        input: &[u8],
        staging: &mut [u8],
        sink: &mut impl PlaintextSink,
    ) -> Result<(), TlsError> {
        self.input(input, sink, Some(staging))
    }

    fn input(
        &mut self,
        input: &[u8],
        sink: &mut impl PlaintextSink,
        staging: Option<&mut [u8]>,
    ) -> Result<(), TlsError> {
        if !self.backlog.is_empty() {
            self.backlog.extend_from_slice(input);
            return self.resume_with(sink, staging);
        }
        self.feed(input, sink, staging)
    }

    /// Delivers what was held back while `sink` paused, as far as it takes it.
    ///
    /// # Errors
    /// As [`handle_input`](Self::handle_input).
    pub fn resume(&mut self, sink: &mut impl PlaintextSink) -> Result<(), TlsError> {
        self.resume_with(sink, None)
    }

    /// As [`resume`](Self::resume), through `staging` (see
    /// [`handle_input_staged`](Self::handle_input_staged)).
    ///
    /// # Errors
    /// As [`handle_input`](Self::handle_input).
    pub fn resume_staged(
        &mut self,
        staging: &mut [u8],
        sink: &mut impl PlaintextSink,
    ) -> Result<(), TlsError> {
        self.resume_with(sink, Some(staging))
    }

    fn resume_with(
        &mut self,
        sink: &mut impl PlaintextSink,
        staging: Option<&mut [u8]>,
    ) -> Result<(), TlsError> {
        let backlog = std::mem::take(&mut self.backlog);
        self.feed(&backlog, sink, staging)
    }

    /// Delivers what rustls holds, then takes in as many records as rustls accepts before
    /// delivering again (so consecutive records' plaintext can leave together); what is left
    /// when the sink pauses is kept.
    fn feed(
        &mut self,
        input: &[u8],
        sink: &mut impl PlaintextSink,
        mut staging: Option<&mut [u8]>,
    ) -> Result<(), TlsError> {
        let mut rest = input;
        while self.deliver(sink, staging.as_deref_mut())? && !rest.is_empty() && !self.peer_closed {
            while !rest.is_empty() && !self.peer_closed {
                match self.conn.read_tls(&mut rest) {
                    Ok(0) => break,
                    Ok(_) => self.process(sink)?,
                    // A handshake message past rustls's 64 KiB bound.
                    Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                        return Err(TlsError::Malformed(e.to_string()));
                    }
                    // Its plaintext buffer is full: deliver first.
                    Err(_) => break,
                }
            }
        }
        if !rest.is_empty() && !self.peer_closed {
            self.backlog.extend_from_slice(rest);
        }
        Ok(())
    }

    /// Processes the records rustls holds: the handshake's progress, the peer's close.
    fn process(&mut self, sink: &mut impl PlaintextSink) -> Result<(), TlsError> {
        let state = self.conn.process_new_packets()?;
        if self.info.is_none() && !self.conn.is_handshaking() {
            let info = Arc::new(self.negotiated());
            self.deadline = None;
            self.info = Some(info.clone());
            sink.established(&info);
        }
        if state.peer_has_closed() {
            self.peer_closed = true;
        }
        Ok(())
    }

    /// Hands buffered plaintext to `sink` (through `staging` when given); `false` if it
    /// paused with some left.
    fn deliver(
        &mut self,
        sink: &mut impl PlaintextSink,
        mut staging: Option<&mut [u8]>,
    ) -> Result<bool, TlsError> {
        loop {
            let more = match staging {
                Some(ref mut buf) => {
                    // `WouldBlock` when nothing is buffered, `Ok(0)` after close_notify.
                    let n = self.conn.reader().read(buf).unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    sink.plaintext(&buf[..n])
                }
                None => {
                    let mut reader = self.conn.reader();
                    let chunk = match reader.fill_buf() {
                        Ok(chunk) if !chunk.is_empty() => chunk,
                        _ => break,
                    };
                    let len = chunk.len();
                    let more = sink.plaintext(chunk);
                    reader.consume(len);
                    more
                }
            };
            if !more {
                self.plaintext_waiting =
                    matches!(self.conn.reader().fill_buf(), Ok(rest) if !rest.is_empty());
                return Ok(!self.plaintext_waiting);
            }
        }
        self.plaintext_waiting = false;
        Ok(true)
    }

    fn negotiated(&self) -> TlsInfo {
        let Negotiated {
            version,
            cipher_suite,
        } = describe(&self.conn);
        let server_name = match &self.conn {
            rustls::Connection::Server(server) => server.server_name().map(str::to_string),
            rustls::Connection::Client(_) => None,
        };
        TlsInfo {
            version,
            cipher_suite,
            alpn: self.conn.alpn_protocol().map(<[u8]>::to_vec),
            server_name,
            peer_certificates: self
                .conn
                .peer_certificates()
                .map(<[CertificateDer<'static>]>::to_vec)
                .unwrap_or_default(),
            resumed: self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
        }
    }

    /// Encrypts as much of `plaintext` as the outgoing limit allows and returns how much it
    /// took: nothing before the handshake completes, or while [`OUTGOING_LIMIT`] bytes of
    /// ciphertext wait to be written.
    pub fn write_plaintext(&mut self, plaintext: &[u8]) -> usize {
        if self.info.is_none() || plaintext.is_empty() {
            return 0;
        }
        self.conn.writer().write(plaintext).unwrap_or(0)
    }

    /// Whether ciphertext waits to be written (handshake messages, records, alerts).
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes waiting ciphertext to `out` (vectored: many records, one call).
    ///
    /// # Errors
    /// What `out` returns (`WouldBlock` from a full socket).
    pub fn write_to(&mut self, out: &mut dyn Write) -> io::Result<usize> {
        self.conn.write_tls(out)
    }

    /// Queues a `close_notify` for the peer: the graceful end of the stream (write it out,
    /// then shut down the transport's writing).
    pub fn send_close_notify(&mut self) {
        self.conn.send_close_notify();
    }

    /// The transport's stream ended.
    ///
    /// # Errors
    /// [`TlsError::Truncated`] when the peer's `close_notify` did not come first (during the
    /// handshake too).
    pub fn handle_eof(&mut self) -> Result<(), TlsError> {
        if self.peer_closed {
            Ok(())
        } else {
            Err(TlsError::Truncated)
        }
    }

    /// The handshake's deadline, while it is under way.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadline
    }

    /// Checks the handshake deadline at `now`.
    ///
    /// # Errors
    /// [`TlsError::HandshakeTimeout`] once it has passed with the handshake unfinished.
    pub fn handle_timeout(&mut self, now: Instant) -> Result<(), TlsError> {
        match self.deadline {
            Some(deadline) if now >= deadline => {
                self.deadline = None;
                Err(TlsError::HandshakeTimeout(self.timeout))
            }
            _ => Ok(()),
        }
    }
}
