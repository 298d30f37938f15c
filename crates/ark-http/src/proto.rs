//! The sans-IO part: the rules both directions share ([`syntax`]: start lines, field lines,
//! line endings, framing fields; [`target`]: request targets and authorities), request heads
//! ([`head`]), the request decoder ([`decoder`], its chunked bodies shared with the clients),
//! the reader of a client's answers ([`answers`]) and the router ([`router`], its patterns in
//! [`pattern`]). Bytes in, requests, answers and routes out; no sockets.

pub(crate) mod answers;
pub(crate) mod decoder;
pub(crate) mod head;
pub(crate) mod pattern;
pub(crate) mod router;
pub(crate) mod syntax;
pub(crate) mod target;
