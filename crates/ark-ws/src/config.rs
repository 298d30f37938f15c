//! WebSocket options with their defaults.

use std::sync::Arc;
use std::time::Duration;

use tungstenite::protocol::WebSocketConfig;

use crate::error::UpgradeRequest;

/// Bytes of control frames (pongs, close) tungstenite may hold while the send queue is full.
pub(crate) const CONTROL_BACKLOG: usize = 1024;

/// tungstenite's read buffer per session, and the most it reads at once from the in-memory
/// stream. tungstenite reads only what ark-ws routes to it — control frames (at most 127 B of
/// payload: one read) and the frames of fragmented messages (reassembled in a buffer that
/// grows to the message, read in more rounds); whole data frames never reach it. Its buffer
/// is allocated with the session and lives as long, so it is most of an idle session's
/// memory: 256 B instead of the 4 KiB it was (a 10,000-connection WebSocket server measured
/// 9.6 KB per connection, 4 KiB of it this buffer).
pub(crate) const TUNGSTENITE_READ: usize = 256;

/// Decides whether to accept an upgrade request: `Err((status, reason))` rejects it with that
/// HTTP status.
pub type UpgradeHook = Arc<dyn Fn(&UpgradeRequest) -> Result<(), (u16, String)> + Send + Sync>;

/// Options of a WebSocket server or client.
#[derive(Clone)]
pub struct WsConfig {
    /// Upgrade path a server accepts (others get 404). Default `/`.
    pub path: String,
    /// Subprotocols a server accepts, in preference order (the first one the client offers
    /// is chosen); a client offers them. Default none.
    pub subprotocols: Vec<String>,
    /// Largest message (after reassembly). Default 16 MiB; larger closes with 1009.
    pub max_message: usize,
    /// Largest frame. Default 16 MiB.
    pub max_frame: usize,
    /// How much a session's receive buffers (ark-ws's frame buffer and the in-memory stream
    /// tungstenite reads) may keep when it goes idle: one that grew past it for a large
    /// message is released once idle, unless the session's traffic keeps needing more.
    /// Default 4 KiB. (tungstenite's own read buffer is a fixed 256 B, not its 128 KiB
    /// default, which costs 128 KiB per idle session: tungstenite #480.)
    pub read_buffer: usize,
    /// Most bytes of encoded frames waiting to be written; sends beyond it return
    /// `SendError::Full`. Default 16 MiB.
    pub write_buffer_limit: usize,
    /// How long the close handshake may take before the connection is closed anyway.
    /// Default 30 s.
    pub close_timeout: Duration,
    /// How long the opening handshake (the HTTP upgrade) may take from the TCP connection's
    /// start; past it the connection is closed. Bounds what a peer that sends part of an
    /// upgrade and stalls can hold. Default 10 s.
    pub handshake_timeout: Duration,
    /// With encoded frames waiting and none written for this long (the peer stopped reading),
    /// the connection is reset and the frames dropped. Default 30 s; `None` disables it.
    pub write_stall_timeout: Option<Duration>,
    /// Close a session that received nothing for this long. Default 1 hour.
    pub idle_timeout: Option<Duration>,
    /// Server: inspects the upgrade request and accepts or rejects it.
    pub upgrade_hook: Option<UpgradeHook>,
    /// `TCP_NODELAY` on every session's socket. Default on (as ark-tcp's): a frame goes out
    /// at once.
    pub nodelay: bool,
    /// TCP keepalive on every session's socket. Default off (a WebSocket's own pings are the
    /// usual liveness check; keepalive also finds a peer that vanished while nothing is
    /// sent).
    pub keepalive: Option<ark_tcp::Keepalive>,
    /// `SO_SNDBUF` request for every session's socket. Default: the system's.
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` request for every session's socket. Default: the system's.
    pub recv_buffer: Option<usize>,
    /// Each session's own rate limits, each way, in bytes on the wire (frame heads, masks and
    /// control frames included; TLS: the plaintext's): reading pauses when the read budget is
    /// spent and frames wait in the send queue for the write budget. Default none; see
    /// [`ark_tcp::TcpConfig::rate_limits`].
    pub rate_limits: ark_reactor::RateLimits,
    /// permessage-deflate (RFC 7692): `Some` offers it (a client) or accepts offers of it (a
    /// server) with these settings; each message then goes compressed when it is at least
    /// [`DeflateConfig::min_size`](crate::DeflateConfig::min_size) bytes. Default `None`: compression is declined. See
    /// docs/ws.md "Compression" for the memory it holds per session.
    #[cfg(feature = "deflate")]
    #[cfg_attr(docsrs, doc(cfg(feature = "deflate")))]
    pub deflate: Option<crate::DeflateConfig>,
}

impl std::fmt::Debug for WsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("WsConfig");
        f.field("path", &self.path)
            .field("subprotocols", &self.subprotocols)
            .field("max_message", &self.max_message)
            .field("max_frame", &self.max_frame)
            .field("read_buffer", &self.read_buffer)
            .field("write_buffer_limit", &self.write_buffer_limit)
            .field("close_timeout", &self.close_timeout)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("write_stall_timeout", &self.write_stall_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("upgrade_hook", &self.upgrade_hook.is_some())
            .field("nodelay", &self.nodelay)
            .field("keepalive", &self.keepalive)
            .field("send_buffer", &self.send_buffer)
            .field("recv_buffer", &self.recv_buffer)
            .field("rate_limits", &self.rate_limits);
        #[cfg(feature = "deflate")]
        f.field("deflate", &self.deflate);
        f.finish()
    }
}

impl Default for WsConfig {
    fn default() -> Self {
        WsConfig {
            path: "/".to_string(),
            subprotocols: Vec::new(),
            max_message: 16 * 1024 * 1024,
            max_frame: 16 * 1024 * 1024,
            read_buffer: 4 * 1024,
            write_buffer_limit: 16 * 1024 * 1024,
            close_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(10),
            write_stall_timeout: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(3600)),
            upgrade_hook: None,
            nodelay: true,
            keepalive: None,
            send_buffer: None,
            recv_buffer: None,
            rate_limits: ark_reactor::RateLimits::default(),
            #[cfg(feature = "deflate")]
            deflate: None,
        }
    }
}

impl WsConfig {
    /// Refuses settings no session can run with (permessage-deflate's window bits outside 8
    /// to 15, or a level over 9), as a builder's `start` or `connect` error.
    pub(crate) fn check(&self) -> std::io::Result<()> {
        #[cfg(feature = "deflate")]
        if let Some(deflate) = &self.deflate
            && !deflate.is_valid()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "WsConfig::deflate: window bits must be 8 to 15 and the level at most 9: {deflate:?}"
                ),
            ));
        }
        Ok(())
    }

    /// tungstenite's configuration: frames go straight to the in-memory stream (no write
    /// buffering there; data frames bypass it and their limit is enforced by ark), sizes as
    /// configured. While the send queue is full, tungstenite may hold at most
    /// [`CONTROL_BACKLOG`] bytes of control frames; pongs beyond that collapse into the one
    /// it owes last.
    pub(crate) fn tungstenite(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            .read_buffer_size(TUNGSTENITE_READ)
            .write_buffer_size(0)
            .max_write_buffer_size(CONTROL_BACKLOG)
            .max_message_size(Some(self.max_message))
            .max_frame_size(Some(self.max_frame))
    }

    /// The TCP sessions' settings for this configuration: the socket options as set, the
    /// timeouts WebSocket's. The send queue has room for the
    /// write-buffer limit plus one maximum frame and control frames; reading pauses when
    /// answers pile up past half the write-buffer limit and resumes at a quarter (a peer that
    /// sends and never reads then costs no CPU, and the pongs its pings owe stay bounded).
    pub(crate) fn session_config(&self) -> ark_tcp::TcpConfig {
        ark_tcp::TcpConfig {
            nodelay: self.nodelay,
            keepalive: self.keepalive,
            send_buffer: self.send_buffer,
            recv_buffer: self.recv_buffer,
            idle_timeout: self.idle_timeout,
            close_timeout: self.close_timeout,
            send_limit: self
                .write_buffer_limit
                .saturating_add(self.max_frame)
                .saturating_add(64 * 1024),
            high_watermark: self.write_buffer_limit / 2,
            low_watermark: self.write_buffer_limit / 4,
            // The handshake deadline bounds a stalled upgrade; WebSocket frames are parsed by
            // tungstenite, not by the TCP session's framing.
            stall_timeout: None,
            write_stall_timeout: self.write_stall_timeout,
            rate_limits: self.rate_limits,
            ..ark_tcp::TcpConfig::default()
        }
    }
}
