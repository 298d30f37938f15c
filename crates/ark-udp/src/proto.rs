//! The sans-IO part: a socket's sessions ([`sessions`]), the server's table of them keyed
//! by peer ([`peers`]) and each session's rate limits ([`rate`]). Datagrams and time in; datagrams to send and handler callbacks out.

pub(crate) mod peers;
pub(crate) mod rate;
pub(crate) mod sessions;
