//! The sans-IO part: the session core (bytes and time in; bytes, deadlines and handler
//! callbacks out) and the [`Simulator`](crate::Simulator) that runs it in memory. No sockets.

pub(crate) mod core;
pub(crate) mod machine;
pub(crate) mod sim;
