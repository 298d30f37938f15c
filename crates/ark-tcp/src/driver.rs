//! The IO part: the reactor source that owns a session's socket ([`conn`]) and the two ways
//! its bytes cross it ([`transport`]: plain TCP; [`tls`]: TLS).

pub(crate) mod conn;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod transport;
