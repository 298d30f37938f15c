//! The IO part: the reactor source that owns a session's socket ([`conn`]) and the sockets it
//! can own ([`stream`]: TCP, or a Unix-domain stream). How bytes cross (plain or TLS) is the
//! session machine's (`proto::machine`), not the driver's.

pub(crate) mod conn;
pub(crate) mod stream;
