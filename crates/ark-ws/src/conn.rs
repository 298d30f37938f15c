//! One WebSocket connection as an ark-tcp handler: tungstenite over an in-memory stream.

use std::sync::{Arc, Mutex, PoisonError};

use ark_reactor::TimerId;
use ark_tcp::{CloseReason, Session, TcpHandler};
use tungstenite::handshake::client::ClientHandshake;
use tungstenite::handshake::server::{Callback, ErrorResponse, Response, ServerHandshake};
use tungstenite::handshake::{HandshakeError, MidHandshake};
use tungstenite::protocol::CloseFrame;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Error, Message, WebSocket};

use crate::config::WsConfig;
use crate::session::{Request, WsHandler, WsSession};
use crate::stream::MemStream;

/// The server's upgrade decision: path, hook, subprotocol; keeps a copy of the request.
pub(crate) struct Accept {
    config: Arc<WsConfig>,
    slot: Arc<Mutex<Option<Request>>>,
}

fn copy_request(request: &Request) -> Request {
    let mut copy = Request::new(());
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
        request: &Request,
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
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(copy_request(request));
        Ok(response)
    }
}

enum State {
    Server(Option<MidHandshake<ServerHandshake<MemStream, Accept>>>),
    Client(Option<MidHandshake<ClientHandshake<MemStream>>>),
    /// Client: the request is built, not yet sent (sent on TCP open).
    ClientPending(Option<Request>),
    Open(Box<WebSocket<MemStream>>),
    Done,
}

pub(crate) struct WsConn<H> {
    state: State,
    handler: H,
    config: Arc<WsConfig>,
    slot: Arc<Mutex<Option<Request>>>,
    request: Option<Request>,
    opened: bool,
    close_sent: Option<(u16, String)>,
    close_received: Option<(u16, String)>,
    /// `on_close` was called.
    reported: bool,
    /// This side is the client (masks its frames).
    client: bool,
    /// The opening handshake's deadline.
    handshake_timer: Option<TimerId>,
}

impl<H: WsHandler> WsConn<H> {
    pub(crate) fn server(config: Arc<WsConfig>, handler: H) -> Self {
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
            Err(HandshakeError::Interrupted(mid)) => State::Server(Some(mid)),
            // Nothing was read yet, so the handshake can only be waiting for bytes.
            _ => State::Done,
        };
        WsConn {
            state,
            handler,
            config,
            slot,
            request: None,
            opened: false,
            close_sent: None,
            close_received: None,
            reported: false,
            client: false,
            handshake_timer: None,
        }
    }

    pub(crate) fn client(request: Request, config: Arc<WsConfig>, handler: H) -> Self {
        WsConn {
            state: State::ClientPending(Some(request)),
            handler,
            config,
            slot: Arc::new(Mutex::new(None)),
            request: None,
            opened: false,
            close_sent: None,
            close_received: None,
            reported: false,
            client: true,
            handshake_timer: None,
        }
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
    fn flush(&mut self, tcp: &mut Session<'_>) {
        let closing = self.close_sent.is_some() || self.close_received.is_some();
        let blocked = !closing && tcp.queued_bytes() >= self.config.write_buffer_limit;
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
    }

    /// Answers a failed upgrade with an HTTP error and closes.
    fn reject(&mut self, tcp: &mut Session<'_>, error: Error) {
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
        tcp.close();
        self.state = State::Done;
    }

    fn session<'a>(
        ws: &'a mut WebSocket<MemStream>,
        tcp: &Session<'_>,
        config: &WsConfig,
        close_sent: &'a mut Option<(u16, String)>,
        client: bool,
    ) -> WsSession<'a> {
        WsSession {
            ws,
            peer: tcp.peer_addr(),
            id: tcp.id(),
            tcp_queued: tcp.queued_bytes(),
            limit: config.write_buffer_limit,
            max_message: config.max_message,
            close_sent,
            client,
        }
    }

    /// Fails the connection for a bad message (RFC 6455 7.1.7): a close frame with `code`,
    /// then the TCP connection closes; nothing more is read from the peer (tungstenite's
    /// reading state is not to be trusted after such an error).
    fn fail(&mut self, tcp: &mut Session<'_>, code: CloseCode, reason: &str) {
        if let State::Open(ws) = &mut self.state
            && self.close_sent.is_none()
            && ws.can_write()
        {
            self.close_sent = Some((u16::from(code), reason.to_string()));
            ws.get_mut().blocked = false;
            let _ = ws.close(Some(CloseFrame {
                code,
                reason: reason.into(),
            }));
        }
        self.flush(tcp);
        self.report_close();
        tcp.close();
        self.state = State::Done;
    }

    /// Advances the handshake and reads every complete message.
    fn drive(&mut self, tcp: &mut Session<'_>) {
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Server(Some(mid)) => match mid.handshake() {
                    Ok(ws) => {
                        self.state = State::Open(Box::new(ws));
                        self.request = self
                            .slot
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .take();
                        self.open(tcp);
                    }
                    Err(HandshakeError::Interrupted(mid)) => {
                        self.state = State::Server(Some(mid));
                        break;
                    }
                    Err(HandshakeError::Failure(e)) => return self.reject(tcp, e),
                },
                State::Client(Some(mid)) => match mid.handshake() {
                    Ok((ws, _response)) => {
                        self.state = State::Open(Box::new(ws));
                        self.open(tcp);
                    }
                    Err(HandshakeError::Interrupted(mid)) => {
                        self.state = State::Client(Some(mid));
                        break;
                    }
                    Err(HandshakeError::Failure(_)) => {
                        tcp.close();
                        break;
                    }
                },
                State::Open(mut ws) => {
                    let outcome = self.read_messages(&mut ws, tcp);
                    self.state = State::Open(ws);
                    match outcome {
                        // The peer's close frame arrived (tungstenite queued the reply, or it
                        // answered ours): the handshake is complete; close the connection.
                        Read::Blocked if self.close_received.is_some() => {
                            self.report_close();
                            self.flush(tcp);
                            tcp.close();
                            self.state = State::Done;
                        }
                        Read::Blocked => {}
                        Read::Closed => {
                            self.report_close();
                            self.flush(tcp);
                            tcp.close();
                            self.state = State::Done;
                        }
                        Read::Bad(code, reason) => self.fail(tcp, code, reason),
                    }
                    break;
                }
                other => {
                    self.state = other;
                    break;
                }
            }
        }
        self.flush(tcp);
        if self.close_sent.is_some() {
            // Our close frame is queued: close the TCP side gracefully after it (bounded by
            // the close timeout, the TCP close linger).
            tcp.close();
        }
    }

    /// Calls `on_close` once, with the code of whoever closed first.
    fn report_close(&mut self) {
        if self.reported || !self.opened {
            return;
        }
        self.reported = true;
        let (code, reason) = self
            .close_sent
            .clone()
            .or_else(|| self.close_received.clone())
            .unwrap_or((1005, String::new()));
        self.handler.on_close(code, &reason);
    }

    fn open(&mut self, tcp: &mut Session<'_>) {
        self.opened = true;
        if let Some(timer) = self.handshake_timer.take() {
            tcp.cancel_timer(timer);
        }
        let request = self.request.take().unwrap_or_else(|| Request::new(()));
        if let State::Open(ws) = &mut self.state {
            let mut session =
                Self::session(ws, tcp, &self.config, &mut self.close_sent, self.client);
            self.handler.on_open(&mut session, &request);
        }
        self.request = Some(request);
    }

    fn read_messages(&mut self, ws: &mut WebSocket<MemStream>, tcp: &mut Session<'_>) -> Read {
        loop {
            match ws.read() {
                Ok(Message::Close(frame)) => {
                    self.close_received = Some(frame.map_or((1005, String::new()), |f| {
                        (u16::from(f.code), f.reason.to_string())
                    }));
                }
                Ok(Message::Ping(_)) | Ok(Message::Frame(_)) => {} // pongs are automatic
                Ok(message) => {
                    let mut session =
                        Self::session(ws, tcp, &self.config, &mut self.close_sent, self.client);
                    self.handler.on_message(&mut session, message);
                }
                Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Read::Blocked;
                }
                Err(Error::ConnectionClosed) | Err(Error::AlreadyClosed) => return Read::Closed,
                Err(Error::Utf8(_)) => {
                    return Read::Bad(CloseCode::Invalid, "invalid UTF-8 in a text message");
                }
                Err(Error::Capacity(_)) => return Read::Bad(CloseCode::Size, "message too big"),
                Err(Error::Protocol(_)) => return Read::Bad(CloseCode::Protocol, "protocol error"),
                Err(_) => return Read::Bad(CloseCode::Error, "internal error"),
            }
        }
    }
}

enum Read {
    Blocked,
    Closed,
    Bad(CloseCode, &'static str),
}

impl<H: WsHandler> TcpHandler for WsConn<H> {
    fn on_open(&mut self, tcp: &mut Session<'_>) {
        self.handshake_timer = Some(tcp.set_timer(self.config.handshake_timeout));
        if let State::ClientPending(request) = &mut self.state {
            let request = request.take().unwrap_or_else(|| Request::new(()));
            self.request = Some(copy_request(&request));
            match tungstenite::client::client_with_config(
                request,
                MemStream::default(),
                Some(self.config.tungstenite()),
            ) {
                Ok((ws, _)) => self.state = State::Open(Box::new(ws)),
                Err(HandshakeError::Interrupted(mid)) => self.state = State::Client(Some(mid)),
                Err(HandshakeError::Failure(_)) => {
                    self.state = State::Done;
                    tcp.close();
                    return;
                }
            }
            self.flush(tcp);
        }
    }

    fn on_message(&mut self, tcp: &mut Session<'_>, bytes: &[u8]) {
        match self.stream() {
            Some(stream) => stream.push(bytes),
            None => return, // closed: late bytes are dropped
        }
        self.drive(tcp);
    }

    fn on_writable(&mut self, tcp: &mut Session<'_>) {
        self.flush(tcp);
    }

    fn on_timer(&mut self, tcp: &mut Session<'_>, timer: TimerId) {
        if self.handshake_timer != Some(timer) {
            return;
        }
        self.handshake_timer = None;
        match self.state {
            State::Server(_) => {
                let response = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
                let _ = tcp.send_raw(response.as_bytes());
            }
            State::Client(_) | State::ClientPending(_) => {}
            State::Open(_) | State::Done => return,
        }
        self.state = State::Done;
        tcp.close();
    }

    fn on_close(&mut self, reason: &CloseReason) {
        if !self.opened || self.reported {
            return;
        }
        if self.close_sent.is_none() && self.close_received.is_none() {
            // No close frame either way: the connection was lost.
            self.reported = true;
            self.handler
                .on_close(1006, &format!("connection lost: {reason}"));
            return;
        }
        self.report_close();
    }
}
