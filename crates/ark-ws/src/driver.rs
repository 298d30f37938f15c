//! The driving part: one WebSocket connection as an ark-tcp handler ([`conn`]: `WsConn`),
//! moving bytes between ark-tcp's session and tungstenite.

pub(crate) mod conn;
