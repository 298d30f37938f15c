//! Responses: a reusable [`Response`] a handler fills, encoded straight into the connection's
//! send queue (status line, the handler's headers, `content-length`, `date`, the body).

use std::any::Any;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// Where a deferred answer is left for its connection.
pub(crate) type Slot = Arc<Mutex<Option<Response>>>;

/// The reason phrase of a status.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// A response under construction. The server hands a handler one whose buffers are reused
/// from request to request: filling it allocates nothing once they have grown.
#[derive(Debug, Default)]
pub struct Response {
    status: u16,
    /// Header lines (`name: value\r\n`), as the handler added them.
    headers: Vec<u8>,
    body: Vec<u8>,
    close: bool,
    /// Wakes the connection when a deferred answer is ready.
    waker: Option<ark_tcp::TcpSessionHandle>,
    /// The handler deferred its answer to this slot.
    deferred: Option<Slot>,
    /// Per-request state, from `before` middleware to `after` (allocated only when set).
    state: Option<Box<dyn Any + Send>>,
    /// The handler that takes the connection over after this `101` answer.
    upgrade: Option<Upgrade>,
}

/// A connection's new owner after an upgrade: any ark-tcp handler.
pub(crate) struct Upgrade(pub(crate) Box<dyn ark_tcp::TcpHandler>);

impl std::fmt::Debug for Upgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Upgrade(..)")
    }
}

impl Response {
    /// An empty `200 OK`.
    pub fn new() -> Self {
        Response {
            status: 200,
            ..Response::default()
        }
    }

    /// Back to an empty `200 OK`, keeping the buffers.
    pub(crate) fn reset(&mut self) {
        self.status = 200;
        self.headers.clear();
        self.body.clear();
        self.close = false;
        self.deferred = None;
        self.state = None;
        self.upgrade = None;
    }

    /// The handler to take the connection over, if the handler upgraded it.
    pub(crate) fn take_upgrade(&mut self) -> Option<Upgrade> {
        self.upgrade.take()
    }

    /// Whether the handler deferred its answer ([`defer`](Self::defer)).
    pub(crate) fn is_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// Takes the per-request state (to carry it to a deferred answer).
    pub(crate) fn take_state_box(&mut self) -> Option<Box<dyn Any + Send>> {
        self.state.take()
    }

    /// Puts back per-request state taken with `take_state_box`.
    pub(crate) fn put_state_box(&mut self, state: Option<Box<dyn Any + Send>>) {
        self.state = state;
    }

    /// Keeps `state` with this request's answer, for the `after` middleware (a start time,
    /// a request id): `before` sets it, `after` reads it with [`state`](Self::state), also
    /// when the answer was deferred. One value per request; setting it boxes it (the one
    /// allocation, only for requests that set state).
    pub fn set_state<T: Any + Send>(&mut self, state: T) -> &mut Self {
        self.state = Some(Box::new(state));
        self
    }

    /// The state set for this request, if it is a `T`.
    pub fn state<T: Any + Send>(&self) -> Option<&T> {
        self.state.as_deref()?.downcast_ref()
    }

    /// The connection to wake when a deferred answer is ready.
    pub(crate) fn set_waker(&mut self, waker: ark_tcp::TcpSessionHandle) {
        self.waker = Some(waker);
    }

    /// The slot the handler deferred its answer to, if it did.
    pub(crate) fn take_deferred(&mut self) -> Option<Slot> {
        self.deferred.take()
    }

    /// Answers later, from any thread: the returned [`Responder`] carries the answer back to
    /// the connection, which sends it in order (answers to requests pipelined after this one
    /// wait for it). Whatever this response holds now is ignored. A responder dropped without
    /// answering answers `500`.
    pub fn defer(&mut self) -> Responder {
        self.upgrade = None;
        let slot: Slot = Arc::default();
        self.deferred = Some(slot.clone());
        Responder {
            slot,
            waker: self.waker.clone(),
            answered: false,
        }
    }

    /// Answers `101 Switching Protocols` and hands the connection to `handler` (any ark-tcp
    /// handler) once the answer is queued: it gets `on_open`, then the bytes that followed
    /// the request (a client may send its first frames right behind it), then every callback
    /// of the connection from there on; the HTTP server is done with it. Add the headers the
    /// new protocol's handshake needs (`upgrade`, `connection: upgrade`, ...); ark-ws's `http`
    /// feature does all of it for WebSocket (`ark_ws::upgrade`). Works the same over https.
    ///
    /// The upgrade is refused (400, and the connection closes) when answers to earlier
    /// pipelined requests are still waiting, and for an HTTP/1.0 request. It replaces a
    /// [`defer`](Self::defer) made for the same request.
    pub fn upgrade(&mut self, handler: impl ark_tcp::TcpHandler) -> &mut Self {
        self.deferred = None;
        self.upgrade = Some(Upgrade(Box::new(handler)));
        self.status(101)
    }

    /// Sets the status code.
    pub fn status(&mut self, status: u16) -> &mut Self {
        self.status = status;
        self
    }

    /// The status code.
    pub fn status_code(&self) -> u16 {
        self.status
    }

    /// Adds a header. `content-length` and `date` are the server's; a `connection: close`
    /// added here closes the connection after this response.
    pub fn header(&mut self, name: &str, value: impl AsRef<[u8]>) -> &mut Self {
        let value = value.as_ref();
        if name.eq_ignore_ascii_case("connection") && value.eq_ignore_ascii_case(b"close") {
            self.close = true;
            return self;
        }
        self.headers.extend_from_slice(name.as_bytes());
        self.headers.extend_from_slice(b": ");
        self.headers.extend_from_slice(value);
        self.headers.extend_from_slice(b"\r\n");
        self
    }

    /// Sets the body (replacing any).
    pub fn body(&mut self, body: impl AsRef<[u8]>) -> &mut Self {
        self.body.clear();
        self.body.extend_from_slice(body.as_ref());
        self
    }

    /// The body, to write into.
    pub fn body_mut(&mut self) -> &mut Vec<u8> {
        &mut self.body
    }

    /// Answers a request the handler cannot use: the error's status, its message as a
    /// `text/plain` body.
    pub fn reject(&mut self, error: &crate::ExtractError) -> &mut Self {
        self.status(error.status())
            .header("content-type", "text/plain; charset=utf-8")
            .body(error.to_string())
    }

    /// Sets the body to `value` as JSON, with `content-type: application/json` (cargo feature
    /// `json`). A value that cannot be serialized (a map with non-string keys, a failing
    /// `Serialize`) answers 500 with the reason.
    #[cfg(feature = "json")]
    pub fn json<T: serde::Serialize + ?Sized>(&mut self, value: &T) -> &mut Self {
        self.body.clear();
        match serde_json::to_writer(&mut self.body, value) {
            Ok(()) => self.header("content-type", "application/json"),
            Err(e) => {
                self.body.clear();
                self.status(500)
                    .body(format!("answer not serializable as JSON: {e}"))
            }
        }
    }

    /// Needs the cargo feature `json`, off in this build: a call does not compile, and says
    /// so (see [`NeedsJsonFeature`](crate::NeedsJsonFeature)).
    #[cfg(not(feature = "json"))]
    pub fn json<T: crate::NeedsJsonFeature + ?Sized>(&mut self, value: &T) -> &mut Self {
        let _ = value;
        unreachable!("no type implements NeedsJsonFeature")
    }

    /// Whether the connection closes after this response.
    pub fn closes(&self) -> bool {
        self.close
    }

    /// Encodes the response for a request of HTTP/1.`version` into `out`: no body for HEAD
    /// (`head_method`), 1xx, 204 and 304; `connection: close` when `close`.
    pub(crate) fn encode(
        &self,
        out: &mut Vec<u8>,
        version: u8,
        head_method: bool,
        close: bool,
        date: &[u8],
    ) {
        let _ = write!(
            out,
            "HTTP/1.{version} {} {}\r\n",
            self.status,
            reason(self.status)
        );
        out.extend_from_slice(&self.headers);
        let bodiless = matches!(self.status, 100..=199 | 204 | 304);
        if !bodiless {
            let _ = write!(out, "content-length: {}\r\n", self.body.len());
        }
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        } else if version == 0 {
            out.extend_from_slice(b"connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n\r\n");
        if !bodiless && !head_method {
            out.extend_from_slice(&self.body);
        }
    }
}

/// An answer to give later, from any thread (see [`Response::defer`]).
#[derive(Debug)]
pub struct Responder {
    slot: Slot,
    waker: Option<ark_tcp::TcpSessionHandle>,
    answered: bool,
}

impl Responder {
    /// Answers: `fill` writes the response (status, headers, body), then the connection is
    /// woken to send it in its turn.
    pub fn respond(mut self, fill: impl FnOnce(&mut Response)) {
        let mut response = Response::new();
        fill(&mut response);
        self.deliver(response);
    }

    fn deliver(&mut self, response: Response) {
        self.answered = true;
        *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(response);
        if let Some(waker) = &self.waker {
            waker.wake();
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if !self.answered {
            let mut response = Response::new();
            response
                .status(500)
                .body("the handler dropped its responder");
            self.deliver(response);
        }
    }
}

/// The `date` header's value for `unix` seconds: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn http_date(unix: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let (days, secs) = (unix / 86_400, unix % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as usize;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as u64;
    let mut out = [0u8; 29];
    let mut w = &mut out[..];
    let _ = write!(
        w,
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        std::str::from_utf8(DAYS[(days % 7) as usize]).unwrap_or("Thu"),
        day,
        std::str::from_utf8(MONTHS[month - 1]).unwrap_or("Jan"),
        year,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    let _ = w.flush();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_imf_fixdate() {
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(1_709_251_200), b"Fri, 01 Mar 2024 00:00:00 GMT");
    }

    #[test]
    fn head_and_bodiless_statuses_carry_no_body() {
        let mut response = Response::new();
        response.header("x-a", "1").body("hello");
        let mut out = Vec::new();
        response.encode(&mut out, 1, false, false, b"D");
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\ndate: D\r\n\r\nhello"
        );
        out.clear();
        response.encode(&mut out, 1, true, true, b"D");
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nx-a: 1\r\ncontent-length: 5\r\nconnection: close\r\ndate: D\r\n\r\n"
        );
        out.clear();
        response.status(204).encode(&mut out, 0, false, false, b"D");
        assert_eq!(
            out,
            b"HTTP/1.0 204 No Content\r\nx-a: 1\r\nconnection: keep-alive\r\ndate: D\r\n\r\n"
        );
    }
}
