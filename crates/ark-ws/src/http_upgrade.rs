//! WebSocket on another server's port: a handshake that an HTTP server answers (ark-http's
//! router beside a JSON API, on one listener), then the connection as a WebSocket session.
//! [`WsUpgrade::accept`] checks the request and gives the `101`'s headers and the ark-tcp
//! handler that takes the connection over; with the cargo feature `http`, [`upgrade`] does it
//! all for an ark-http route.

use tungstenite::handshake::derive_accept_key;
use tungstenite::http::{self, HeaderName, HeaderValue};

use crate::config::WsConfig;
use crate::driver::conn::{WsConn, WsOwner};
use crate::error::UpgradeRequest;
use crate::handler::WsHandler;
use crate::proto::deflate;

/// Why an upgrade request is refused, with the status to answer ([`status`](Self::status)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpgradeError {
    /// Not a `GET`.
    #[error("a WebSocket upgrade is a GET, not {0}")]
    NotGet(String),
    /// Not HTTP/1.1.
    #[error("a WebSocket upgrade needs HTTP/1.1")]
    NotHttp11,
    /// No `upgrade: websocket`.
    #[error("no `upgrade: websocket` header")]
    NoUpgradeHeader,
    /// No `upgrade` token in `connection`.
    #[error("no `connection: upgrade` header")]
    NoConnectionUpgrade,
    /// `sec-websocket-key` missing, repeated, or not 16 bytes in base64.
    #[error("missing or malformed sec-websocket-key")]
    BadKey,
    /// `sec-websocket-version` is not 13 (answered 426 with the version ark speaks).
    #[error("unsupported sec-websocket-version (13 is spoken)")]
    UnsupportedVersion,
    /// A header that is not valid HTTP.
    #[error("a header is not valid HTTP: {0}")]
    BadHeader(String),
    /// The configuration's upgrade hook refused it (its status and reason).
    #[error("refused ({status}): {reason}")]
    Refused {
        /// The status the hook gave.
        status: u16,
        /// The hook's reason.
        reason: String,
    },
}

impl UpgradeError {
    /// The status to answer with: 426 for a version ark does not speak, the hook's status for
    /// its refusals, 400 for the rest.
    pub fn status(&self) -> u16 {
        match self {
            UpgradeError::UnsupportedVersion => 426,
            UpgradeError::Refused { status, .. } => *status,
            _ => 400,
        }
    }
}

/// A checked WebSocket upgrade: the `101`'s headers to send, and the handler that takes the
/// connection over once they are queued (an ark-tcp handler: give it to the HTTP server, as
/// `ark_http::Response::upgrade` takes it).
pub struct WsUpgrade<H> {
    conn: WsConn<H>,
    headers: Vec<(&'static str, String)>,
}

impl<H> std::fmt::Debug for WsUpgrade<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsUpgrade")
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// The header `name` once (several, or none, is `None`).
fn single<'a>(headers: &[(&str, &'a [u8])], name: &str) -> Option<&'a [u8]> {
    let mut found = headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name));
    let (_, value) = found.next()?;
    found.next().is_none().then_some(value)
}

/// Whether any `name` header lists `token` (comma-separated, any case).
fn lists(headers: &[(&str, &[u8])], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Whether `key` is base64 of 16 bytes (24 characters, the last two `==`).
fn valid_key(key: &[u8]) -> bool {
    key.len() == 24
        && key.ends_with(b"==")
        && key[..22]
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
        && matches!(key[21], b'A' | b'Q' | b'g' | b'w')
}

/// The upgrade request as a WebSocket session sees it (`WsHandler::on_open`'s request).
fn request_of(target: &str, headers: &[(&str, &[u8])]) -> Result<UpgradeRequest, UpgradeError> {
    let bad = |e: &dyn std::fmt::Display| UpgradeError::BadHeader(e.to_string());
    let mut request = UpgradeRequest::new(());
    *request.uri_mut() = target.parse().map_err(|e| bad(&e))?;
    *request.version_mut() = http::Version::HTTP_11;
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(&e))?;
        let value = HeaderValue::from_bytes(value).map_err(|e| bad(&e))?;
        request.headers_mut().append(name, value);
    }
    Ok(request)
}

impl<H: WsHandler> WsUpgrade<H> {
    /// Checks an upgrade request from its parts (RFC 6455 §4.2.1: `GET`, HTTP/1.1,
    /// `upgrade: websocket`, `connection: upgrade`, one valid `sec-websocket-key`, version 13;
    /// then `config`'s upgrade hook) and chooses a subprotocol among `config.subprotocols`.
    /// The path is the route's business: `config.path` is not looked at.
    ///
    /// # Errors
    /// The [`UpgradeError`] to answer, with its [`status`](UpgradeError::status).
    pub fn accept<'h>(
        (method, target, http11): (&str, &str, bool),
        headers: impl IntoIterator<Item = (&'h str, &'h [u8])>,
        config: WsConfig,
        handler: H,
    ) -> Result<WsUpgrade<H>, UpgradeError> {
        let headers: Vec<(&str, &[u8])> = headers.into_iter().collect();
        if method != "GET" {
            return Err(UpgradeError::NotGet(method.into()));
        }
        if !http11 {
            return Err(UpgradeError::NotHttp11);
        }
        if !lists(&headers, "upgrade", "websocket") {
            return Err(UpgradeError::NoUpgradeHeader);
        }
        if !lists(&headers, "connection", "upgrade") {
            return Err(UpgradeError::NoConnectionUpgrade);
        }
        let key = single(&headers, "sec-websocket-key")
            .filter(|key| valid_key(key))
            .ok_or(UpgradeError::BadKey)?;
        if single(&headers, "sec-websocket-version") != Some(b"13") {
            return Err(UpgradeError::UnsupportedVersion);
        }
        let request = request_of(target, &headers)?;
        if let Some(hook) = &config.upgrade_hook {
            hook(&request).map_err(|(status, reason)| UpgradeError::Refused { status, reason })?;
        }
        let mut response = vec![
            ("upgrade", "websocket".to_string()),
            ("connection", "upgrade".to_string()),
            ("sec-websocket-accept", derive_accept_key(key)),
        ];
        if let Some(chosen) = config
            .subprotocols
            .iter()
            .find(|p| lists(&headers, "sec-websocket-protocol", p))
        {
            response.push(("sec-websocket-protocol", chosen.clone()));
        }
        let offers = headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("sec-websocket-extensions"))
            .filter_map(|(_, value)| std::str::from_utf8(value).ok());
        let agreed = deflate::server_accept(&config, offers).map(|(agreed, answer)| {
            response.push(("sec-websocket-extensions", answer));
            agreed
        });
        let owner = WsOwner::of(config);
        Ok(WsUpgrade {
            conn: WsConn::upgraded(request, agreed, owner, handler, None),
            headers: response,
        })
    }

    /// The headers of the `101 Switching Protocols` answer.
    pub fn response_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.headers.iter().map(|(n, v)| (*n, v.as_str()))
    }

    /// The ark-tcp handler that takes the connection over after the `101`: the WebSocket
    /// session opens (`WsHandler::on_open`) as soon as it runs, with `config`'s timeouts.
    pub fn into_handler(self) -> impl ark_tcp::TcpHandler {
        self.conn
    }
}

/// Answers an ark-http request with `101` and hands its connection to a WebSocket session of
/// `handler` (cargo feature `http`): HTTP and WebSocket on one port, over https too. A refused
/// upgrade is answered with its status and reason (the connection stays HTTP).
///
/// ```
/// use ark_http::{HttpServer, Router};
/// use ark_ws::{Message, WsConfig, WsHandler, WsSession};
///
/// struct Echo;
/// impl WsHandler for Echo {
///     fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
///         let _ = session.send(message);
///     }
/// }
///
/// let router = Router::new()
///     .get("/api/health", |_, res| { res.body("ok"); })
///     .get("/ws", |req, res| {
///         let _ = ark_ws::upgrade(req, res, WsConfig::default(), Echo);
///     });
/// let server = HttpServer::builder().bind("127.0.0.1:0").start(router)?;
/// server.stop().wait()?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// Why the upgrade was refused (already answered).
#[cfg(feature = "http")]
pub fn upgrade<H: WsHandler>(
    request: &ark_http::Request<'_>,
    response: &mut ark_http::Response,
    config: WsConfig,
    handler: H,
) -> Result<(), UpgradeError> {
    let head = (request.method(), request.target(), request.version() == 1);
    match WsUpgrade::accept(head, request.headers(), config, handler) {
        Ok(upgrade) => {
            for (name, value) in upgrade.response_headers() {
                response.header(name, value);
            }
            response.upgrade(upgrade.into_handler());
            Ok(())
        }
        Err(error) => {
            if error == UpgradeError::UnsupportedVersion {
                response.header("sec-websocket-version", "13");
            }
            response.status(error.status()).body(error.to_string());
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_base64_of_16_bytes() {
        assert!(valid_key(b"dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(!valid_key(b"dGhlIHNhbXBsZSBub25jZQ="));
        assert!(
            !valid_key(b"dGhlIHNhbXBsZSBub25jZR=="),
            "nonzero padding bits"
        );
        assert!(!valid_key(b"dGhlIHNhbXBsZSBub25j!Q=="));
    }

    #[test]
    fn every_bad_upgrade_is_refused_with_its_status() {
        struct Quiet;
        impl WsHandler for Quiet {
            fn on_message(&mut self, _: &mut crate::WsSession<'_>, _: crate::Message) {}
        }
        let good: Vec<(&str, &[u8])> = vec![
            ("host", b"x"),
            ("upgrade", b"WebSocket"),
            ("connection", b"keep-alive, Upgrade"),
            ("sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", b"13"),
        ];
        let try_with = |head: (&str, &str, bool), headers: Vec<(&str, &[u8])>| {
            WsUpgrade::accept(head, headers, WsConfig::default(), Quiet).map(|_| ())
        };
        let accepted = WsUpgrade::accept(
            ("GET", "/ws", true),
            good.clone(),
            WsConfig::default(),
            Quiet,
        )
        .unwrap();
        assert!(
            accepted
                .response_headers()
                .any(|h| h == ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="))
        );
        let without = |name: &str| good.iter().filter(|(n, _)| *n != name).cloned().collect();
        let with = |name: &'static str, value: &'static [u8]| {
            let mut headers: Vec<(&str, &[u8])> = without(name);
            headers.push((name, value));
            headers
        };
        let cases = [
            (try_with(("POST", "/ws", true), good.clone()), 400),
            (try_with(("GET", "/ws", false), good.clone()), 400),
            (try_with(("GET", "/ws", true), without("upgrade")), 400),
            (try_with(("GET", "/ws", true), without("connection")), 400),
            (
                try_with(("GET", "/ws", true), without("sec-websocket-key")),
                400,
            ),
            (
                try_with(("GET", "/ws", true), with("sec-websocket-key", b"short")),
                400,
            ),
            (
                try_with(("GET", "/ws", true), with("sec-websocket-version", b"8")),
                426,
            ),
        ];
        for (i, (result, status)) in cases.into_iter().enumerate() {
            assert_eq!(result.map_err(|e| e.status()), Err(status), "case {i}");
        }
        let mut twice = good.clone();
        twice.push(("sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ=="));
        assert_eq!(
            try_with(("GET", "/", true), twice),
            Err(UpgradeError::BadKey)
        );
    }
}
