//! The IO part: the reactor source that owns a session's socket ([`conn`]), the sockets it
//! can own ([`stream`]: TCP, or a Unix-domain stream) and the two ways its bytes cross it
//! ([`transport`]: plain; [`tls`]: TLS).

pub(crate) mod conn;
pub(crate) mod stream;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub(crate) mod transport;
