//! The IO part: the relays' thread and poll loop ([`thread`]), the UDP relay ([`relay`]), the
//! TCP relay ([`tcp_relay`]) and the one-client forwarder ([`forwarder`]), each on its own
//! thread with real sockets.

pub(crate) mod forwarder;
pub(crate) mod relay;
pub(crate) mod tcp_relay;
pub(crate) mod thread;
