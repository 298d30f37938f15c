//! The sans-IO part besides tungstenite: received frames taken apart ([`inbound`]), the data
//! lent to a handler ([`data`]), close codes and how a session ended ([`close`]), and the
//! in-memory stream tungstenite reads and writes ([`stream`]). No sockets.

pub(crate) mod close;
pub(crate) mod data;
pub(crate) mod inbound;
pub(crate) mod stream;
