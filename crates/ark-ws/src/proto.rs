//! The sans-IO part besides tungstenite: received frames taken apart ([`inbound`]), the data
//! lent to a handler ([`data`]), close codes and how a session ended ([`close`]),
//! permessage-deflate's negotiation and engines ([`deflate`]), and the in-memory stream
//! tungstenite reads and writes ([`stream`]). No sockets.

pub(crate) mod close;
pub(crate) mod data;
#[cfg(feature = "deflate")]
pub(crate) mod deflate;
#[cfg(not(feature = "deflate"))]
#[path = "proto/deflate_off.rs"]
pub(crate) mod deflate;
pub(crate) mod inbound;
pub(crate) mod stream;
