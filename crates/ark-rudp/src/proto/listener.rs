//! The server's side of the handshake, without state: a HELLO without a valid cookie gets a
//! COOKIE (smaller than the HELLO, which is padded to 1200 bytes); a HELLO with one makes a
//! connection — encrypted, once its Noise message verifies under the server's key (and its
//! connect token passes the server's check), or in plaintext if the server was told so.
//! Nonces accepted lately are remembered (a bounded set), so a replayed HELLO makes no second
//! connection.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::config::RudpConfig;
use crate::proto::connection::Connection;
use crate::proto::cookie::CookieJar;
use crate::proto::crypto::{self, HandshakeError};
use crate::proto::packet::{self, COOKIE_LEN, Packet, PacketError};
use crate::proto::protection::ServerProtection;

/// Nonces remembered against replays.
const REMEMBERED: usize = 65_536;

/// One instant by both clocks: `now` for deadlines, `wall` (the system clock) for what a
/// restarted server must still judge the same way (its cookies' and handshakes' ages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    /// The monotonic clock.
    pub now: Instant,
    /// The system clock at the same instant.
    pub wall: SystemTime,
}

/// What to do with a datagram from an address without a connection.
#[derive(Debug)]
#[non_exhaustive]
pub enum Incoming {
    /// Nothing: not a handshake, or a replay.
    Ignore,
    /// Send the `usize` bytes written to the output buffer back (a COOKIE).
    Reply(usize),
    /// A new connection; send the `usize` bytes written (its ACCEPT) back.
    Accept(Box<Connection>, usize),
    /// A handshake refused for its protection (counted in `RudpStats::refused_handshakes`).
    Refused(Refusal),
}

/// Why a handshake with a valid cookie was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The client asked for plaintext from an encrypted server, or the other way round.
    #[error("the client asked for {asked} and the server is {server}")]
    Protection {
        /// What the client asked for.
        asked: &'static str,
        /// What the server is.
        server: &'static str,
    },
    /// The client's first message did not verify under the server's key.
    #[error("the handshake did not verify: {0}")]
    Handshake(HandshakeError),
    /// The server's check refused the client's connect token.
    #[error("the connect token was refused")]
    Token,
}

/// The stateless half of a server's handshake.
#[derive(Debug)]
pub struct Listener {
    config: Arc<RudpConfig>,
    protection: ServerProtection,
    jar: CookieJar,
    accepted: HashSet<u64>,
    order: VecDeque<u64>,
}

fn mode(encrypted: bool) -> &'static str {
    if encrypted { "encryption" } else { "plaintext" }
}

impl Listener {
    /// A listener making connections with `config`, protected as `protection` says.
    pub fn new(config: Arc<RudpConfig>, protection: ServerProtection) -> Listener {
        Listener {
            jar: CookieJar::new(config.cookie_lifetime),
            config,
            protection,
            accepted: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// The public key clients pin (`None` for a plaintext server).
    pub fn public_key(&self) -> Option<crypto::RudpPublicKey> {
        self.protection.public_key()
    }

    /// A datagram from `peer`, which has no connection, arrived at `now` (`wall`: the same
    /// instant by the system clock, for cookie ages). `out` takes the reply (at most 57
    /// bytes: an encrypted ACCEPT).
    ///
    /// # Errors
    /// The datagram was not understood.
    pub fn handle(
        &mut self,
        Timestamp { now, wall }: Timestamp,
        peer: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
    ) -> Result<Incoming, PacketError> {
        let Packet::Hello {
            nonce,
            cookie,
            encrypted,
            handshake,
        } = packet::parse(datagram)?
        else {
            return Ok(Incoming::Ignore);
        };
        let server_encrypted = matches!(self.protection, ServerProtection::Encrypted { .. });
        if encrypted != server_encrypted {
            return Ok(Incoming::Refused(Refusal::Protection {
                asked: mode(encrypted),
                server: mode(server_encrypted),
            }));
        }
        if !self.jar.check(wall, peer, nonce, cookie) {
            let fresh = self.jar.make(wall, peer, nonce);
            return Ok(Incoming::Reply(packet::write_cookie(out, nonce, &fresh)));
        }
        let Ok(cookie) = <[u8; COOKIE_LEN]>::try_from(cookie) else {
            return Ok(Incoming::Ignore);
        };
        let conn = match &self.protection {
            ServerProtection::Encrypted { key, check } => {
                let accepted = match crypto::accept(key, nonce, &cookie, handshake) {
                    Ok(accepted) => accepted,
                    Err(e) => return Ok(Incoming::Refused(Refusal::Handshake(e))),
                };
                if check.as_ref().is_some_and(|c| !c(peer, &accepted.token)) {
                    return Ok(Incoming::Refused(Refusal::Token));
                }
                if !self.remember(nonce) {
                    return Ok(Incoming::Ignore);
                }
                let mut conn = Connection::accepted_sealed(
                    self.config.clone(),
                    now,
                    nonce,
                    (accepted.keys, accepted.second),
                );
                conn.set_connect_token(accepted.token);
                conn
            }
            ServerProtection::Plaintext => {
                if !self.remember(nonce) {
                    return Ok(Incoming::Ignore);
                }
                Connection::accepted_plain(self.config.clone(), now, nonce, &cookie)
            }
        };
        let mut conn = Box::new(conn);
        // The ACCEPT leaves now (the first transmit of a new server connection).
        let n = conn.poll_transmit(now, out).unwrap_or(0);
        Ok(Incoming::Accept(conn, n))
    }

    /// Records `nonce`; `false` if it was accepted before (a replay).
    fn remember(&mut self, nonce: u64) -> bool {
        if !self.accepted.insert(nonce) {
            return false;
        }
        self.order.push_back(nonce);
        if self.order.len() > REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.accepted.remove(&old);
        }
        true
    }

    /// Whether `datagram` is a HELLO with a valid cookie for `peer` (a restarted client whose
    /// address still has a connection).
    pub fn is_new_handshake(&self, wall: SystemTime, peer: SocketAddr, datagram: &[u8]) -> bool {
        matches!(packet::parse(datagram), Ok(Packet::Hello { nonce, cookie, .. })
            if cookie != [0; COOKIE_LEN] && self.jar.check(wall, peer, nonce, cookie))
    }
}
