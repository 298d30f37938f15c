//! The sans-IO part: a connection ([`connection`]) with its sending and receiving sides
//! ([`send`], [`recv`]), FEC ([`fec`]), congestion control ([`congestion`]), RTT estimation
//! ([`rtt`]), the wire format ([`packet`]), packet numbers and the replay window ([`replay`]),
//! lanes and their scheduler ([`lane`]), the counters ([`stats`]), the handshake cookies ([`cookie`]), the key exchange and packet
//! protection ([`crypto`]) and what the ends are told of it ([`protection`]), the
//! server's stateless side of the handshake ([`listener`]), and one socket's connections as one
//! object ([`endpoint`]: the table, limits, replacement and refusals). Datagrams and time in;
//! datagrams, messages, events and deadlines out. No sockets.

pub(crate) mod congestion;
pub(crate) mod connection;
pub(crate) mod cookie;
pub(crate) mod crypto;
pub(crate) mod endpoint;
pub(crate) mod fec;
pub(crate) mod lane;
pub(crate) mod listener;
pub(crate) mod packet;
pub(crate) mod protection;
pub(crate) mod recv;
pub(crate) mod replay;
pub(crate) mod rtt;
pub(crate) mod send;
pub(crate) mod stats;
