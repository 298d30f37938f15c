//! The sans-IO part: request heads ([`head`]), the request decoder ([`decoder`]), the reader
//! of a client's answers ([`answers`]) and the router ([`router`], its patterns in [`pattern`]). Bytes in, requests,
//! answers and routes out; no sockets.

pub(crate) mod answers;
pub(crate) mod decoder;
pub(crate) mod head;
pub(crate) mod pattern;
pub(crate) mod router;
