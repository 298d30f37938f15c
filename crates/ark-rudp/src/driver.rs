//! The IO part: connections on one ark-udp socket as its handler ([`socket`]: `Driver`).

pub(crate) mod socket;
