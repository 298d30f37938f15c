//! The IO part: the socket as a reactor source ([`socket`]: `UdpDriver`), the batched
//! syscalls ([`sys`]) and how a sharded server's sockets share the datagrams ([`steering`]).

pub(crate) mod socket;
pub(crate) mod steering;
pub(crate) mod sys;
