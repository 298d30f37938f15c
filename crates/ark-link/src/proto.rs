//! The sans-IO part: the link model ([`conditioner`]), packets and time in, packets out at
//! their release times. No sockets.

pub(crate) mod conditioner;
