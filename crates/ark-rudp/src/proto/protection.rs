//! How a session is protected, as the two ends are told: encrypted (the default) — a client
//! pins the server's public key and may carry a connect token, a server holds its key pair and
//! may check the tokens — or plaintext with tokens, an explicit opt-in for trusted networks.

use std::net::SocketAddr;
use std::sync::Arc;

pub use crate::proto::crypto::{RudpPublicKey, RudpServerKey};

/// A server's check of a client's connect token (netcode.io's model: a backend issues tokens
/// that the game server verifies): the client's address and the token it sent (encrypted to
/// the server's key, so nobody on the path read it); `false` refuses the handshake.
pub type TokenCheck = Arc<dyn Fn(SocketAddr, &[u8]) -> bool + Send + Sync>;

/// The largest connect token a client may send.
pub const MAX_CONNECT_TOKEN: usize = 1024;

/// How a client protects its session.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientProtection {
    /// Encrypted and authenticated: the handshake proves the server holds the secret of
    /// `server_key`; `token` (at most [`MAX_CONNECT_TOKEN`] bytes, possibly empty) goes to
    /// the server encrypted.
    Encrypted {
        /// The server's public key, pinned.
        server_key: RudpPublicKey,
        /// A connect token for the server's [`TokenCheck`].
        token: Vec<u8>,
    },
    /// Plaintext with session tokens: an off-path attacker is kept out, an on-path one is not.
    /// Only for trusted networks.
    Plaintext,
}

/// How a server protects its sessions.
#[derive(Clone)]
#[non_exhaustive]
pub enum ServerProtection {
    /// Encrypted and authenticated with `key`; `check` (if any) decides on each client's
    /// connect token.
    Encrypted {
        /// The server's key pair.
        key: Arc<RudpServerKey>,
        /// The connect-token check.
        check: Option<TokenCheck>,
    },
    /// Plaintext with session tokens (see [`ClientProtection::Plaintext`]).
    Plaintext,
}

impl std::fmt::Debug for ServerProtection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServerProtection::Encrypted { key, check } => f
                .debug_struct("Encrypted")
                .field("key", key)
                .field("check", &check.is_some())
                .finish(),
            ServerProtection::Plaintext => f.write_str("Plaintext"),
        }
    }
}

impl ServerProtection {
    /// Encrypted with a new key pair (its public half: [`public_key`](Self::public_key)).
    pub fn generated() -> ServerProtection {
        ServerProtection::Encrypted {
            key: Arc::new(RudpServerKey::generate()),
            check: None,
        }
    }

    /// The public key clients pin (`None` in plaintext).
    pub fn public_key(&self) -> Option<RudpPublicKey> {
        match self {
            ServerProtection::Encrypted { key, .. } => Some(key.public()),
            ServerProtection::Plaintext => None,
        }
    }
}
