//! The sans-IO part: a socket's sessions ([`sessions`]) and the server's table of them keyed
//! by peer ([`peers`]). Datagrams and time in; datagrams to send and handler callbacks out.

pub(crate) mod peers;
pub(crate) mod sessions;
