//! WebSocket options with their defaults.

use std::sync::Arc;
use std::time::Duration;

use tungstenite::protocol::WebSocketConfig;

use crate::session::Request;

/// Decides whether to accept an upgrade request: `Err((status, reason))` rejects it with that
/// HTTP status.
pub type UpgradeHook = Arc<dyn Fn(&Request) -> Result<(), (u16, String)> + Send + Sync>;

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
    /// tungstenite's read buffer per session. Default 4 KiB — not tungstenite's 128 KiB, which
    /// costs 128 KiB per idle session (tungstenite #480); large messages are reassembled in a
    /// growing buffer either way, so a small read buffer costs only extra copy rounds on
    /// messages larger than it.
    pub read_buffer: usize,
    /// Most bytes of encoded frames waiting to be written; sends beyond it return
    /// `SendError::Full`. Default 16 MiB.
    pub write_buffer_limit: usize,
    /// How long the close handshake may take before the connection is closed anyway.
    /// Default 30 s.
    pub close_timeout: Duration,
    /// Close a session that received nothing for this long. Default 1 hour.
    pub idle_timeout: Option<Duration>,
    /// Server: inspects the upgrade request and accepts or rejects it.
    pub upgrade_hook: Option<UpgradeHook>,
}

impl std::fmt::Debug for WsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsConfig")
            .field("path", &self.path)
            .field("subprotocols", &self.subprotocols)
            .field("max_message", &self.max_message)
            .field("max_frame", &self.max_frame)
            .field("read_buffer", &self.read_buffer)
            .field("write_buffer_limit", &self.write_buffer_limit)
            .field("close_timeout", &self.close_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("upgrade_hook", &self.upgrade_hook.is_some())
            .finish()
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
            idle_timeout: Some(Duration::from_secs(3600)),
            upgrade_hook: None,
        }
    }
}

impl WsConfig {
    /// tungstenite's configuration: frames go straight to the in-memory stream (no write
    /// buffering there; the limit is enforced by ark), sizes as configured.
    pub(crate) fn tungstenite(&self) -> WebSocketConfig {
        WebSocketConfig::default()
            .read_buffer_size(self.read_buffer.max(1))
            .write_buffer_size(0)
            .max_write_buffer_size(usize::MAX)
            .max_message_size(Some(self.max_message))
            .max_frame_size(Some(self.max_frame))
    }
}
