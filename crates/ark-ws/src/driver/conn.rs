//! One WebSocket connection as an ark-tcp handler: tungstenite over an in-memory stream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ark_reactor::TimerId;
use ark_tcp::{CloseReason, TcpHandler, TcpSession};
use tungstenite::handshake::client::ClientHandshake;
use tungstenite::handshake::server::{Callback, ErrorResponse, Response, ServerHandshake};
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::{Error, Message, WebSocket};

use crate::config::WsConfig;
use crate::error::UpgradeRequest;
use crate::handle::{Command, CurrentSession, WsInbox, WsSessionHandle, WsShared};
use crate::handler::{WsHandler, WsSession};
use crate::proto::close::{BAD_UTF8, CloseCode, Initiator, OpenError, WsClose};
use crate::proto::data::ReceivedData;
use crate::proto::deflate::{self, Agreed, Deflater};
use crate::proto::inbound::{self, Frames, Inbound, Rules};
use crate::proto::stream::MemStream;
use crate::stats::{WsCounters, WsStats};

/// The open sessions of a server, by id.
pub(crate) type Registry = Arc<Mutex<HashMap<u64, WsSessionHandle>>>;

/// What every session of one server or client shares: its settings and its counters.
#[derive(Clone)]
pub(crate) struct WsOwner {
    pub(crate) config: Arc<WsConfig>,
    pub(crate) counters: Arc<WsCounters>,
}

impl WsOwner {
    /// A lone session's owner (no server or client counts it): `config` and fresh counters.
    pub(crate) fn of(config: WsConfig) -> WsOwner {
        WsOwner {
            config: Arc::new(config),
            counters: Arc::default(),
        }
    }
}

/// A close frame's code and reason, as sent or received.
type CloseInfo = (Option<CloseCode>, String);

/// The server's upgrade decision: path, hook, subprotocol, extensions; keeps a copy of the
/// request.
pub(crate) struct Accept {
    config: Arc<WsConfig>,
    slot: Arc<Mutex<Option<Accepted>>>,
}

/// What a server's handshake accepted: the request, and permessage-deflate's parameters if
/// they were agreed.
pub(crate) struct Accepted {
    request: UpgradeRequest,
    deflate: Option<Agreed>,
}

fn copy_request(request: &UpgradeRequest) -> UpgradeRequest {
    let mut copy = UpgradeRequest::new(());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    copy
}

fn error_response(status: u16, reason: &str) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(reason.to_string()));
    *response.status_mut() = tungstenite::http::StatusCode::from_u16(status)
        .unwrap_or(tungstenite::http::StatusCode::BAD_REQUEST);
    response
}

impl Callback for Accept {
    fn on_request(
        self,
        request: &UpgradeRequest,
        mut response: Response,
    ) -> Result<Response, ErrorResponse> {
        if request.uri().path() != self.config.path {
            return Err(error_response(404, "no WebSocket endpoint at this path"));
        }
        if let Some(hook) = &self.config.upgrade_hook {
            hook(request).map_err(|(status, reason)| error_response(status, &reason))?;
        }
        if let Some(offered) = request
            .headers()
            .get("sec-websocket-protocol")
            .and_then(|v| v.to_str().ok())
        {
            let offered: Vec<&str> = offered.split(',').map(str::trim).collect();
            if let Some(chosen) = self
                .config
                .subprotocols
                .iter()
                .find(|p| offered.contains(&p.as_str()))
                && let Ok(value) = chosen.parse()
            {
                response
                    .headers_mut()
                    .insert("sec-websocket-protocol", value);
            }
        }
        let offers = request.headers().get_all("sec-websocket-extensions");
        let offers = offers.iter().filter_map(|v| v.to_str().ok());
        let deflate = match deflate::server_accept(&self.config, offers) {
            Some((agreed, answer)) => {
                if let Ok(value) = answer.parse() {
                    response
                        .headers_mut()
                        .insert("sec-websocket-extensions", value);
                }
                Some(agreed)
            }
            None => None,
        };
        let accepted = Accepted {
            request: copy_request(request),
            deflate,
        };
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(accepted);
        Ok(response)
    }
}

/// Where a connection is. Every variant holds a pointer at most, so the state is small
/// (16 bytes): [`WsConn::drive`] moves it out and back on every read, and with the handshakes
/// inline it was 352 bytes.
enum State {
    Server(Option<Box<MidHandshake<ServerHandshake<MemStream, Accept>>>>),
    Client(Option<Box<MidHandshake<ClientHandshake<MemStream>>>>),
    /// Client: the request is built, not yet sent (sent on TCP open).
    ClientPending(Option<Box<UpgradeRequest>>),
    /// Server: the handshake was answered by an HTTP server (an upgrade); opens on TCP open.
    Upgraded(Option<Box<WebSocket<MemStream>>>),
    Open(Box<WebSocket<MemStream>>),
    /// Over: the handshake failed, or the connection was failed or closed; input is ignored.
    Done,
}

/// How far a session's life has come; its protocol engine (the handshake, the open
/// WebSocket) is in [`State`].
enum Life {
    /// The opening handshake runs, or waits for the TCP connection.
    Opening,
    /// Open, and how far closed.
    Open(Closing),
    /// The session could not open, for this reason.
    NotOpened(OpenError),
}

/// The close frames of an open session, sent and received so far.
#[derive(Default)]
struct Closing {
    sent: Option<CloseInfo>,
    received: Option<CloseInfo>,
    /// Ours failed the connection for bad input (a close with 1002, 1007 or 1009).
    failed: bool,
}

impl Life {
    /// Our close frame is queued.
    fn close_sent(&self) -> bool {
        matches!(self, Life::Open(Closing { sent: Some(_), .. }))
    }

    /// The peer's close frame arrived.
    fn close_received(&self) -> bool {
        matches!(
            self,
            Life::Open(Closing {
                received: Some(_),
                ..
            })
        )
    }

    /// A close frame went either way.
    fn closing(&self) -> bool {
        self.close_sent() || self.close_received()
    }

    /// This side failed the connection for bad input.
    fn failed(&self) -> bool {
        matches!(self, Life::Open(Closing { failed: true, .. }))
    }

    /// What `on_close` is told: the close frames exchanged if any, else `lost` (the TCP
    /// connection's end), else the reason the session could not open.
    fn report(&self, lost: Option<&CloseReason>) -> WsClose {
        let lost = || lost.cloned().unwrap_or(CloseReason::Local);
        match self {
            Life::Opening => WsClose::Failed(OpenError::Connection(lost())),
            Life::NotOpened(failure) => WsClose::Failed(failure.clone()),
            Life::Open(Closing {
                sent: Some((code, reason)),
                ..
            }) => WsClose::Closed {
                by: Initiator::Local,
                code: *code,
                reason: reason.clone(),
            },
            Life::Open(Closing {
                received: Some((code, reason)),
                ..
            }) => WsClose::Closed {
                by: Initiator::Peer,
                code: *code,
                reason: reason.clone(),
            },
            Life::Open(_) => WsClose::Abnormal(lost()),
        }
    }
}

/// What a client's connections share across reconnections.
pub(crate) struct ClientOf {
    /// The handle's view of the current connection.
    pub(crate) current: CurrentSession,
    /// The upgrade request every connection's handshake sends.
    pub(crate) request: UpgradeRequest,
    /// Whether an upgrade refused with this status is final (not retried by a reconnecting
    /// client).
    pub(crate) final_status: fn(u16) -> bool,
}

pub(crate) struct WsConn<H> {
    state: State,
    handler: H,
    config: Arc<WsConfig>,
    shared: Arc<WsShared>,
    /// The server's open sessions (servers only), and this one's key there once open.
    registry: Option<Registry>,
    id: Option<u64>,
    slot: Arc<Mutex<Option<Accepted>>>,
    request: Option<UpgradeRequest>,
    /// permessage-deflate's parameters, agreed in the handshake; its engines start at open.
    agreed: Option<Agreed>,
    /// The compressor of the messages this side sends, once agreed (the decompressor is in
    /// `frames`).
    deflate: Option<Deflater>,
    /// How far the session's life has come (opening, open and how far closed, not opened).
    life: Life,
    /// `on_close` was called.
    reported: bool,
    /// The opening handshake's deadline.
    handshake_timer: Option<TimerId>,
    /// Received bytes of the open session (before it opens they go to tungstenite's stream).
    frames: Frames,
    /// The server's (or client's) counters, and this session's counts since they were last
    /// added to them.
    counters: Arc<WsCounters>,
    tally: WsStats,
    /// A client's (only a client has one, and so this side masks its frames): its handle's
    /// view of the current connection, the request each connection's handshake sends (a
    /// reconnecting client makes one per connection), and which refusals are final.
    client_of: Option<ClientOf>,
    /// TCP connections this handler has run (more than one for a reconnecting client).
    connections: u64,
}

impl<H: WsHandler> WsConn<H> {
    fn new(state: State, handler: H, owner: WsOwner, shared: Arc<WsShared>) -> Self {
        let WsOwner { config, counters } = owner;
        WsConn {
            counters,
            tally: WsStats::default(),
            client_of: None,
            connections: 0,
            state,
            handler,
            config,
            shared,
            registry: None,
            id: None,
            slot: Arc::new(Mutex::new(None)),
            request: None,
            agreed: None,
            deflate: None,
            life: Life::Opening,
            reported: false,
            handshake_timer: None,
            frames: Frames::default(),
        }
    }

    pub(crate) fn server(owner: WsOwner, handler: H, registry: Option<Registry>) -> Self {
        let config = &owner.config;
        let slot = Arc::new(Mutex::new(None));
        let accept = Accept {
            config: config.clone(),
            slot: slot.clone(),
        };
        let state = match tungstenite::accept_hdr_with_config(
            MemStream::default(),
            accept,
            Some(config.tungstenite()),
        ) {
            Err(HandshakeError::Interrupted(mid)) => State::Server(Some(Box::new(mid))),
            // Nothing was read yet, so the handshake can only be waiting for bytes.
            _ => State::Done,
        };
        let shared = WsShared::new(config.write_buffer_limit);
        let mut conn = Self::new(state, handler, owner, shared);
        conn.slot = slot;
        conn.registry = registry;
        conn
    }

    /// The server side of a connection whose handshake an HTTP server answered (`request`
    /// is the upgrade request): it opens as soon as it runs.
    pub(crate) fn upgraded(
        request: UpgradeRequest,
        agreed: Option<Agreed>,
        owner: WsOwner,
        handler: H,
        registry: Option<Registry>,
    ) -> Self {
        let config = &owner.config;
        let ws = WebSocket::from_raw_socket(
            MemStream::default(),
            tungstenite::protocol::Role::Server,
            Some(config.tungstenite()),
        );
        let shared = WsShared::new(config.write_buffer_limit);
        let state = State::Upgraded(Some(Box::new(ws)));
        let mut conn = Self::new(state, handler, owner, shared);
        conn.request = Some(request);
        conn.agreed = agreed;
        conn.registry = registry;
        conn
    }

    pub(crate) fn client(owner: WsOwner, handler: H, mut client_of: ClientOf) -> Self {
        if let Some(offer) = deflate::client_offer(&owner.config)
            && let Ok(value) = offer.parse()
        {
            client_of
                .request
                .headers_mut()
                .insert("sec-websocket-extensions", value);
        }
        let request = copy_request(&client_of.request);
        let mut conn = Self::new(
            State::ClientPending(Some(Box::new(request))),
            handler,
            owner,
            client_of.current.get(),
        );
        conn.client_of = Some(client_of);
        conn
    }

    /// A reconnecting client's next connection: a fresh session (state, handles, handshake).
    fn renew(&mut self) {
        let Some(client_of) = &self.client_of else {
            return;
        };
        self.shared = client_of.current.renew(self.config.write_buffer_limit);
        self.state = State::ClientPending(Some(Box::new(copy_request(&client_of.request))));
        self.request = None;
        self.agreed = None;
        self.deflate = None;
        self.life = Life::Opening;
        self.reported = false;
        self.handshake_timer = None;
        self.frames = Frames::default();
    }

    /// This side is the client (it masks its frames).
    fn is_client(&self) -> bool {
        self.client_of.is_some()
    }

    fn stream(&mut self) -> Option<&mut MemStream> {
        match &mut self.state {
            State::Server(Some(mid)) => Some(mid.get_mut().get_mut()),
            State::Client(Some(mid)) => Some(mid.get_mut().get_mut()),
            State::Open(ws) => Some(ws.get_mut()),
            _ => None,
        }
    }

    /// Moves encoded bytes to the TCP session's queue (one write per turn happens there).
    /// While the queue is at the write-buffer limit, tungstenite's own writes (pongs) wait in
    /// it (the latest pong owed replaces older ones); a close frame never waits.
    fn flush(&mut self, tcp: &mut TcpSession<'_>) {
        self.publish();
        let blocked = !self.life.closing() && tcp.queued_bytes() >= self.config.write_buffer_limit;
        let keep = self.config.read_buffer;
        if let State::Open(ws) = &mut self.state {
            ws.get_mut().blocked = blocked;
            let _ = ws.flush(); // into the in-memory stream; WouldBlock while blocked
        }
        let Some(stream) = self.stream() else { return };
        if !stream.outbox.is_empty() {
            // Handed over without a copy when the TCP queue is empty. The queue's hard limit
            // leaves room for the write-buffer limit, a frame and control frames, so it
            // refuses only when the session is closing.
            let _ = tcp.append_raw(&mut stream.outbox);
        }
        stream.shrink_if_idle(keep);
        self.frames.shrink_if_idle(keep);
        if let Some(deflate) = &mut self.deflate {
            deflate.shrink_if_idle(keep);
        }
    }

    /// Adds this session's counts to the owner's and its handles'.
    fn publish(&mut self) {
        if self.tally != WsStats::default() {
            let tally = std::mem::take(&mut self.tally);
            self.shared.count(tally.messages_in, tally.messages_out);
            self.counters.add(&tally);
        }
    }

    /// Ends a session that could not open: the reason is kept for `on_close`. A server
    /// closes gracefully (its HTTP answer goes out first); a client has nothing to say and
    /// drops the connection at once.
    fn abandon(&mut self, tcp: &mut TcpSession<'_>, failure: OpenError) {
        #[cfg(feature = "tracing")]
        ark_reactor::log_limited!(tracing::Level::INFO, %failure, "websocket session did not open");
        if let Life::Opening = self.life {
            self.life = Life::NotOpened(failure);
        }
        self.state = State::Done;
        if self.is_client() {
            tcp.abort();
        } else {
            tcp.close();
        }
    }

    /// Answers a failed upgrade with an HTTP error and closes.
    fn reject(&mut self, tcp: &mut TcpSession<'_>, error: Error) {
        let (status, reason, body) = match &error {
            Error::Http(response) => (
                response.status().as_u16(),
                response
                    .status()
                    .canonical_reason()
                    .unwrap_or("Error")
                    .to_string(),
                String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                    .into_owned(),
            ),
            other => (400, "Bad Request".to_string(), other.to_string()),
        };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = tcp.send_raw(response.as_bytes());
        let detail = if body.is_empty() { reason } else { body };
        self.abandon(tcp, OpenError::BadUpgrade { status, detail });
    }

    /// Runs `f` with the handler and a view of the open session (nothing if not open).
    fn with_session(
        &mut self,
        tcp: &mut TcpSession<'_>,
        f: impl FnOnce(&mut H, &mut WsSession<'_>),
    ) {
        let client = self.is_client();
        let (State::Open(ws), Life::Open(closing)) = (&mut self.state, &mut self.life) else {
            return;
        };
        let (handler, mut session) = Self::view(
            &mut self.handler,
            ws,
            tcp,
            (&self.config, &self.shared, &mut self.tally),
            (&mut closing.sent, self.deflate.as_mut()),
            client,
        );
        f(handler, &mut session);
    }

    /// The handler and a view of the session over `ws` (which may be out of `self.state`, as
    /// while messages are read).
    fn view<'a>(
        handler: &'a mut H,
        ws: &'a mut WebSocket<MemStream>,
        tcp: &'a mut TcpSession<'_>,
        (config, shared, tally): (&'a WsConfig, &'a Arc<WsShared>, &'a mut WsStats),
        (close_sent, deflate): (&'a mut Option<CloseInfo>, Option<&'a mut Deflater>),
        client: bool,
    ) -> (&'a mut H, WsSession<'a>) {
        let session = WsSession {
            ws,
            tcp: tcp.reborrow(),
            config,
            shared,
            close_sent,
            client,
            tally,
            deflate,
        };
        (handler, session)
    }

    /// Fails the connection for a bad message (RFC 6455 7.1.7): a close frame with `code`,
    /// then the TCP connection closes; nothing more is read from the peer (tungstenite's
    /// reading state is not to be trusted after such an error).
    fn fail(&mut self, tcp: &mut TcpSession<'_>, code: CloseCode, reason: &str) {
        if let Life::Open(closing) = &mut self.life {
            closing.failed = true;
        }
        #[cfg(feature = "tracing")]
        ark_reactor::log_limited!(
            tracing::Level::WARN,
            code = code.get(),
            reason,
            "websocket connection failed for bad input"
        );
        self.with_session(tcp, |_, s| s.close(code, reason));
        self.flush(tcp);
        self.report_close(None);
        tcp.close();
        self.state = State::Done;
    }

    /// Advances the handshake and reads every complete message: those of `input` (bytes
    /// just read, for an open session) after those held.
    fn drive(&mut self, tcp: &mut TcpSession<'_>, input: &mut [u8]) {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Server(Some(mid)) => match (*mid).handshake() {
                    Ok(ws) => {
                        self.state = State::Open(Box::new(ws));
                        let accepted = self
                            .slot
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .take();
                        if let Some(Accepted { request, deflate }) = accepted {
                            self.request = Some(request);
                            self.agreed = deflate;
                        }
                        self.open(tcp);
                    }
                    Err(HandshakeError::Interrupted(mid)) => {
                        self.state = State::Server(Some(Box::new(mid)));
                        break;
                    }
                    Err(HandshakeError::Failure(e)) => return self.reject(tcp, e),
                },
                State::Client(Some(mid)) => match (*mid).handshake() {
                    Ok((ws, response)) => {
                        let answer = response.headers().get_all("sec-websocket-extensions");
                        let answer = answer.iter().map(|v| v.to_str().unwrap_or("?"));
                        match deflate::client_confirm(&self.config, answer) {
                            Ok(agreed) => self.agreed = agreed,
                            Err(why) => {
                                let failure = OpenError::Handshake(why.to_string());
                                return self.abandon(tcp, failure);
                            }
                        }
                        self.state = State::Open(Box::new(ws));
                        self.open(tcp);
                    }
                    Err(HandshakeError::Interrupted(mid)) => {
                        self.state = State::Client(Some(Box::new(mid)));
                        break;
                    }
                    Err(HandshakeError::Failure(e)) => {
                        let failure = match e {
                            Error::Http(response) => OpenError::Rejected {
                                status: response.status().as_u16(),
                            },
                            other => OpenError::Handshake(other.to_string()),
                        };
                        return self.abandon(tcp, failure);
                    }
                },
                State::Open(mut ws) => {
                    let outcome = self.read_frames(&mut ws, tcp, input);
                    self.state = State::Open(ws);
                    self.after_read(tcp, outcome);
                    break;
                }
                other => {
                    self.state = other;
                    break;
                }
            }
        }
        self.flush(tcp);
        if self.life.close_sent() {
            // Our close frame is queued: close the TCP side gracefully after it (bounded by
            // the close timeout).
            tcp.close();
        }
    }

    fn after_read(&mut self, tcp: &mut TcpSession<'_>, outcome: Read) {
        match outcome {
            Read::Blocked if !self.life.close_received() => {}
            // The peer's close frame arrived (tungstenite queued the reply, or it answered
            // ours), or the connection closed: the close is complete.
            Read::Blocked | Read::Closed => {
                self.report_close(None);
                self.flush(tcp);
                if !self.life.close_sent() {
                    // The peer began the close: a reconnecting client connects again.
                    tcp.close_for_peer();
                } else {
                    tcp.close();
                }
                self.state = State::Done;
            }
            Read::Bad(code, reason) => self.fail(tcp, code, reason),
        }
    }

    /// Calls `on_close` once: the close frames exchanged if any, else `lost`, else the
    /// reason the session could not open.
    fn report_close(&mut self, lost: Option<&CloseReason>) {
        if std::mem::replace(&mut self.reported, true) {
            return;
        }
        self.shared.set_ended();
        if let (Some(registry), Some(id)) = (&self.registry, self.id) {
            registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        }
        let close = self.life.report(lost);
        match &close {
            WsClose::Failed(_) => self.tally.opens_failed += 1,
            WsClose::Abnormal(_) => self.tally.closed_abnormal += 1,
            WsClose::Closed { .. } if self.life.failed() => self.tally.closed_bad_input += 1,
            WsClose::Closed {
                by: Initiator::Local,
                ..
            } => self.tally.closed_local += 1,
            WsClose::Closed { .. } => self.tally.closed_by_peer += 1,
        }
        self.publish();
        self.handler.on_close(&close);
    }

    fn open(&mut self, tcp: &mut TcpSession<'_>) {
        #[cfg(feature = "tracing")]
        ark_reactor::log_limited!(
            tracing::Level::DEBUG,
            client = self.is_client(),
            "websocket session opened"
        );
        self.life = Life::Open(Closing::default());
        self.tally.sessions_opened += 1;
        let agreed = self.agreed.take();
        if let Some((deflater, inflater)) =
            deflate::engines(&self.config, agreed, !self.is_client())
        {
            self.deflate = Some(deflater);
            self.frames.set_inflater(inflater);
        }
        if let Some(stream) = self.stream() {
            let rest = stream.end_handshake();
            self.frames.push(&rest);
        }
        if let Some(timer) = self.handshake_timer.take() {
            tcp.cancel_timer(timer);
        }
        self.shared.set_open();
        if let Some(registry) = &self.registry {
            let handle = WsSessionHandle::new(self.shared.clone());
            self.id = Some(tcp.id());
            registry
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(tcp.id(), handle);
        }
        let request = self
            .request
            .take()
            .unwrap_or_else(|| UpgradeRequest::new(()));
        self.with_session(tcp, |h, s| h.on_open(s, &request));
        self.request = Some(request);
        // Messages handles queued while the session was opening go now.
        self.take_requests(tcp);
    }

    /// Delivers every whole message received, `input` after what is held: whole data
    /// messages straight from `input` while nothing is held; a frame that spans reads, and
    /// every frame only tungstenite reads, through [`Frames`], which gets exactly that
    /// frame's bytes of `input` (see [`crate::proto::inbound`]).
    fn read_frames(
        &mut self,
        ws: &mut WebSocket<MemStream>,
        tcp: &mut TcpSession<'_>,
        mut input: &mut [u8],
    ) -> Read {
        loop {
            while self.frames.is_clear() {
                match inbound::lendable(input, self.rules()) {
                    None => break,
                    Some(Ok(frame)) => {
                        let (this, rest) =
                            std::mem::take(&mut input).split_at_mut(frame.head_len + frame.len);
                        let bytes = &this[frame.head_len..];
                        self.with_view(ws, tcp, |handler, session, frames| {
                            session.tally.messages_in += 1;
                            handler.on_data(session, frames.lend_read(bytes, frame.text));
                        });
                        input = rest;
                    }
                    Some(Err((code, reason))) => return Read::Bad(code, reason),
                }
            }
            let take = self.frames.wanted(input).min(input.len());
            let (front, rest) = std::mem::take(&mut input).split_at_mut(take);
            self.frames.push(front);
            input = rest;
            match self.read_held(ws, tcp) {
                Read::Blocked if !input.is_empty() => {}
                other => return other,
            }
        }
    }

    /// Delivers the whole messages [`Frames`] holds.
    fn read_held(&mut self, ws: &mut WebSocket<MemStream>, tcp: &mut TcpSession<'_>) -> Read {
        loop {
            match self.frames.next(self.rules()) {
                None => return Read::Blocked,
                Some(Inbound::Data { len, text }) => self.deliver_data(ws, tcp, len, text),
                Some(Inbound::Inflated { text }) => self.deliver_inflated(ws, tcp, text),
                Some(Inbound::Tungstenite(bytes)) => {
                    ws.get_mut().push(&bytes);
                    match self.read_messages(ws, tcp) {
                        Read::Blocked => {}
                        other => return other,
                    }
                }
                Some(Inbound::Bad(code, reason)) => return Read::Bad(code, reason),
            }
        }
    }

    /// What the received frames must obey now.
    fn rules(&self) -> Rules {
        Rules {
            server: !self.is_client(),
            max_frame: self.config.max_frame,
            max_message: self.config.max_message,
            closing: self.life.closing(),
        }
    }

    /// Hands a message tungstenite read to the handler: text and binary to `on_data`, the
    /// rest (pongs) to `on_message`.
    fn deliver(
        &mut self,
        ws: &mut WebSocket<MemStream>,
        tcp: &mut TcpSession<'_>,
        message: Message,
    ) {
        self.with_view(ws, tcp, |handler, session, _| match message {
            Message::Text(_) | Message::Binary(_) => {
                session.tally.messages_in += 1;
                handler.on_data(session, ReceivedData::owned(message));
            }
            message => handler.on_message(session, message),
        });
    }

    /// Lends the handler the message of `len` bytes at the front of the receive buffer.
    fn deliver_data(
        &mut self,
        ws: &mut WebSocket<MemStream>,
        tcp: &mut TcpSession<'_>,
        len: usize,
        text: bool,
    ) {
        self.with_view(ws, tcp, |handler, session, frames| {
            session.tally.messages_in += 1;
            handler.on_data(session, frames.lend(len, text));
        });
    }

    /// Lends the handler the message just inflated.
    fn deliver_inflated(
        &mut self,
        ws: &mut WebSocket<MemStream>,
        tcp: &mut TcpSession<'_>,
        text: bool,
    ) {
        self.with_view(ws, tcp, |handler, session, frames| {
            if let Some(data) = frames.lend_inflated(text) {
                session.tally.messages_in += 1;
                handler.on_data(session, data);
            }
        });
        self.frames.inflated_delivered();
    }

    /// Runs `f` with the handler, a view of the session over `ws` (taken out of
    /// `self.state` while messages are read) and the received frames.
    fn with_view(
        &mut self,
        ws: &mut WebSocket<MemStream>,
        tcp: &mut TcpSession<'_>,
        f: impl FnOnce(&mut H, &mut WsSession<'_>, &mut Frames),
    ) {
        let client = self.is_client();
        let Life::Open(closing) = &mut self.life else {
            return;
        };
        let (handler, mut session) = Self::view(
            &mut self.handler,
            ws,
            tcp,
            (&self.config, &self.shared, &mut self.tally),
            (&mut closing.sent, self.deflate.as_mut()),
            client,
        );
        f(handler, &mut session, &mut self.frames);
    }

    fn read_messages(&mut self, ws: &mut WebSocket<MemStream>, tcp: &mut TcpSession<'_>) -> Read {
        loop {
            match ws.read() {
                Ok(Message::Close(frame)) => {
                    if let Life::Open(closing) = &mut self.life {
                        closing.received = Some(frame.map_or((None, String::new()), |f| {
                            (CloseCode::new(u16::from(f.code)).ok(), f.reason.to_string())
                        }));
                    }
                    self.shared.set_ended();
                }
                Ok(Message::Ping(_)) | Ok(Message::Frame(_)) => {} // pongs are automatic
                Ok(message) => self.deliver(ws, tcp, message),
                Err(error) => return Read::from(error),
            }
        }
    }

    /// Applies what handles asked: queued messages and closes, in order, then `on_wake`.
    fn take_requests(&mut self, tcp: &mut TcpSession<'_>) {
        let Some(WsInbox { requests, wake }) = self.shared.take() else {
            return;
        };
        self.with_session(tcp, |handler, session| {
            for request in requests {
                match request {
                    // A send the session refuses now (full, closing) is dropped, as a send
                    // through a handle may be once queued.
                    Command::Send(message) => {
                        let _ = session.send(message);
                    }
                    Command::Close(code, reason) => session.close(code, &reason),
                }
            }
            if wake {
                handler.on_wake(session);
            }
        });
    }
}

/// How a round of reading ended.
enum Read {
    Blocked,
    Closed,
    Bad(CloseCode, &'static str),
}

impl From<Error> for Read {
    fn from(error: Error) -> Read {
        match error {
            Error::Io(e) if e.kind() == std::io::ErrorKind::WouldBlock => Read::Blocked,
            Error::ConnectionClosed | Error::AlreadyClosed => Read::Closed,
            Error::Utf8(_) => Read::Bad(BAD_UTF8.0, BAD_UTF8.1),
            Error::Capacity(_) => Read::Bad(CloseCode::TOO_BIG, "message too big"),
            Error::Protocol(_) => Read::Bad(CloseCode::PROTOCOL_ERROR, "protocol error"),
            _ => Read::Bad(CloseCode::INTERNAL_ERROR, "internal error"),
        }
    }
}

impl<H: WsHandler> TcpHandler for WsConn<H> {
    fn on_open(&mut self, tcp: &mut TcpSession<'_>) {
        self.connections += 1;
        if self.connections > 1 {
            self.renew();
        }
        self.shared.attach(tcp.handle());
        if let State::Upgraded(ws) = &mut self.state {
            // The HTTP server answered the handshake: open now, with WebSocket's timeouts.
            let Some(ws) = ws.take() else { return };
            tcp.set_timeouts(&self.config.session_config());
            self.state = State::Open(ws);
            self.open(tcp);
            return self.flush(tcp);
        }
        self.handshake_timer = Some(tcp.set_timer(self.config.handshake_timeout));
        let State::ClientPending(request) = &mut self.state else {
            return;
        };
        let request = request
            .take()
            .map_or_else(|| UpgradeRequest::new(()), |request| *request);
        self.request = Some(copy_request(&request));
        match tungstenite::client::client_with_config(
            request,
            MemStream::default(),
            Some(self.config.tungstenite()),
        ) {
            Ok((ws, _)) => self.state = State::Open(Box::new(ws)),
            Err(HandshakeError::Interrupted(mid)) => {
                self.state = State::Client(Some(Box::new(mid)));
            }
            Err(HandshakeError::Failure(e)) => {
                return self.abandon(tcp, OpenError::Handshake(e.to_string()));
            }
        }
        self.flush(tcp);
    }

    fn on_message(&mut self, tcp: &mut TcpSession<'_>, bytes: &[u8]) {
        match &mut self.state {
            State::Open(_) => self.frames.push(bytes),
            _ => match self.stream() {
                Some(stream) => stream.push(bytes),
                None => return, // over: late bytes are dropped
            },
        }
        self.drive(tcp, &mut []);
    }

    /// Whole data messages are unmasked and lent where they were read; only what is left
    /// (a partial frame, frames for tungstenite) is copied.
    fn on_message_mut(&mut self, tcp: &mut TcpSession<'_>, bytes: &mut [u8]) {
        match self.state {
            State::Open(_) => self.drive(tcp, bytes),
            _ => self.on_message(tcp, bytes),
        }
    }

    fn decodes_in_place(&self) -> bool {
        true
    }

    fn on_writable(&mut self, tcp: &mut TcpSession<'_>) {
        self.flush(tcp);
    }

    fn on_timer(&mut self, tcp: &mut TcpSession<'_>, timer: TimerId) {
        if self.handshake_timer != Some(timer) {
            self.with_session(tcp, |h, s| h.on_timer(s, timer));
            return self.flush(tcp);
        }
        self.handshake_timer = None;
        if let State::Server(_) = self.state {
            let response =
                "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
            let _ = tcp.send_raw(response.as_bytes());
        }
        if let Life::Opening = self.life {
            self.abandon(tcp, OpenError::Timeout(self.config.handshake_timeout));
        }
    }

    fn on_wake(&mut self, tcp: &mut TcpSession<'_>) {
        self.take_requests(tcp);
        self.drive(tcp, &mut []);
    }

    fn on_drain(&mut self, tcp: &mut TcpSession<'_>) {
        self.with_session(tcp, |h, s| h.on_drain(s));
        self.flush(tcp);
    }

    fn on_stopping(&mut self, tcp: &mut TcpSession<'_>) {
        self.with_session(tcp, |h, s| {
            h.on_stopping(s);
            s.close(CloseCode::GOING_AWAY, "going away");
        });
        self.flush(tcp);
    }

    /// A reconnecting client connects again after a failed opening handshake too (its own
    /// abort ended the connection), unless the server refused the upgrade with a final
    /// status ([`WsClientBuilder::final_status`](crate::WsClientBuilder::final_status)); after
    /// an open session, as ark-tcp decides (not after this side's own close).
    fn reconnect_after(&self, reason: &CloseReason) -> bool {
        match (&self.life, &self.client_of) {
            (Life::NotOpened(OpenError::Rejected { status }), Some(client_of)) => {
                !(client_of.final_status)(*status)
            }
            (Life::NotOpened(_), _) => true,
            _ => !reason.is_local_choice(),
        }
    }

    fn on_close(&mut self, reason: &CloseReason) {
        self.report_close(Some(reason));
    }
}
