//! The sans-IO part: a socket's sessions ([`sessions`]), the server's table of them keyed
//! by peer ([`peers`]), each session's rate limits ([`rate`]) and the datagram buffers the
//! driver's syscalls fill and drain ([`batch`]). Datagrams and time in; datagrams to send and handler callbacks out.

pub(crate) mod batch;
pub(crate) mod peers;
pub(crate) mod rate;
pub(crate) mod sessions;
