//! The server's side of the handshake, without state: a HELLO without a valid cookie gets a
//! COOKIE (smaller than the HELLO, which is padded to 1200 bytes); a HELLO with one makes a
//! connection. Nonces accepted lately are remembered (a bounded set), so a replayed HELLO
//! makes no second connection.

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::config::RudpConfig;
use crate::proto::connection::Connection;
use crate::proto::cookie::CookieJar;
use crate::proto::packet::{self, COOKIE_LEN, Packet, PacketError};

/// Nonces remembered against replays.
const REMEMBERED: usize = 65_536;

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
}

/// The stateless half of a server's handshake.
#[derive(Debug)]
pub struct Listener {
    config: Arc<RudpConfig>,
    jar: CookieJar,
    accepted: HashSet<u64>,
    order: VecDeque<u64>,
}

impl Listener {
    /// A listener making connections with `config`.
    pub fn new(config: Arc<RudpConfig>) -> Listener {
        Listener {
            jar: CookieJar::new(config.cookie_lifetime),
            config,
            accepted: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// A datagram from `peer`, which has no connection, arrived at `now` (`wall`: the same
    /// instant by the system clock, for cookie ages). `out` takes the reply (29 bytes at most).
    ///
    /// # Errors
    /// The datagram was not understood.
    pub fn handle(
        &mut self,
        (now, wall): (Instant, SystemTime),
        peer: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
    ) -> Result<Incoming, PacketError> {
        let Packet::Hello { nonce, cookie } = packet::parse(datagram)? else {
            return Ok(Incoming::Ignore);
        };
        if !self.jar.check(wall, peer, nonce, cookie) {
            let fresh = self.jar.make(wall, peer, nonce);
            return Ok(Incoming::Reply(packet::write_cookie(out, nonce, &fresh)));
        }
        if !self.remember(nonce) {
            return Ok(Incoming::Ignore);
        }
        let Ok(cookie) = <[u8; COOKIE_LEN]>::try_from(cookie) else {
            return Ok(Incoming::Ignore);
        };
        let conn = Connection::accepted(self.config.clone(), now, nonce, &cookie);
        Ok(Incoming::Accept(
            Box::new(conn),
            packet::write_accept(out, nonce),
        ))
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
        matches!(packet::parse(datagram), Ok(Packet::Hello { nonce, cookie })
            if cookie != [0; COOKIE_LEN] && self.jar.check(wall, peer, nonce, cookie))
    }
}
