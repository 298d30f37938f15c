//! One socket's connections as one sans-IO object (quinn-proto's `Endpoint` is the model): the
//! table of connections by peer address, the server's stateless handshake ([`Listener`]), its
//! limits (`max_sessions`, `max_sessions_per_ip`, no new sessions while draining), the
//! replacement of a silent session by a restarted client on its address, and the count of
//! every refusal. Datagrams and time in; which connection a datagram is for, what to answer and
//! which connection is new or gone out. The driver keeps, beside each connection, what it needs
//! to run it (a handler, timers): the entry `E`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::config::RudpConfig;
use crate::proto::connection::{Connection, RudpStats};
use crate::proto::listener::{Incoming, Listener, Refusal, Timestamp};
use crate::proto::packet::{self, KIND_HELLO, Packet, PacketError};

/// Where a reply is written, and what makes a new connection's entry (from its peer's address
/// and the connection the listener made).
pub type Io<'a, E> = (&'a mut [u8], &'a mut dyn FnMut(SocketAddr, Connection) -> E);

/// What the endpoint needs of an entry of its table.
pub trait EndpointEntry {
    /// The entry's connection.
    fn connection(&self) -> &Connection;
    /// The same, to feed it.
    fn connection_mut(&mut self) -> &mut Connection;
    /// Its session ended (the application heard it) and it lingers only to answer its peer's
    /// CLOSE: a new client on its address takes its place at once.
    fn has_ended(&self) -> bool;
}

/// Where a datagram went.
#[derive(Debug)]
#[non_exhaustive]
pub enum Routed {
    /// To its address's connection (the datagram's result there).
    Connection(Result<(), PacketError>),
    /// Send the `usize` bytes of the output buffer back (a COOKIE); nothing was kept.
    Reply(usize),
    /// A new connection: its entry is in the table; send its ACCEPT (`usize` bytes).
    Accepted(usize),
    /// A valid handshake refused for a limit (`max_sessions` or `max_sessions_per_ip`:
    /// counted), without an answer; its nonce is not spent.
    Full,
    /// A handshake refused for its protection (counted in `refused_handshakes`).
    Refused(Refusal),
    /// Nothing to do: not a handshake, a replayed one, or new sessions are closed.
    Dropped,
    /// The datagram was not understood (from an address without a connection).
    Malformed(PacketError),
}

/// What a HELLO from an address that has a connection does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replacement {
    /// Not a new handshake (or a client's socket): the datagram is the connection's
    /// ([`route`](Endpoint::route) it).
    No,
    /// The connection ended already and lingers: it gives way (remove it, then route).
    GiveWay,
    /// Another client on a silent connection's address (its client restarted, the system
    /// reused the port) without a valid cookie: the listener answers it
    /// ([`listen`](Endpoint::listen)), the connection stays until the client proves itself.
    Listen,
    /// The same with a valid cookie: the silent connection ends with `CloseReason::Replaced`
    /// (remove it, tell its application, then route).
    Replace,
    /// The connection's peer was heard lately and the HELLO brings a valid cookie: the
    /// handshake is dropped and counted in `refused_replacements` (nobody who can spoof the
    /// address ends a live session). One without a valid cookie goes to the connection
    /// ([`No`](Self::No)), which counts it.
    Refuse,
}

/// A socket's connections (a server's, with its listener; a client's one).
#[derive(Debug)]
pub struct Endpoint<E> {
    config: Arc<RudpConfig>,
    listener: Option<Box<Listener>>,
    entries: HashMap<SocketAddr, E>,
    per_ip: HashMap<IpAddr, usize>,
    /// Refusals, and the counters of connections removed.
    closed: RudpStats,
    /// A drain or stop is under way: no new connections.
    closed_to_new: bool,
}

impl<E: EndpointEntry> Endpoint<E> {
    /// A server's endpoint: new connections come through `listener`.
    pub fn server(config: Arc<RudpConfig>, listener: Listener) -> Self {
        Endpoint::new(config, Some(Box::new(listener)))
    }

    /// A client's endpoint: its one connection is [`insert`](Self::insert)ed.
    pub fn client(config: Arc<RudpConfig>) -> Self {
        Endpoint::new(config, None)
    }

    fn new(config: Arc<RudpConfig>, listener: Option<Box<Listener>>) -> Self {
        Endpoint {
            config,
            listener,
            entries: HashMap::new(),
            per_ip: HashMap::new(),
            closed: RudpStats::default(),
            closed_to_new: false,
        }
    }

    /// The entry of `peer`.
    pub fn get(&self, peer: &SocketAddr) -> Option<&E> {
        self.entries.get(peer)
    }

    /// The same, to change.
    pub fn get_mut(&mut self, peer: &SocketAddr) -> Option<&mut E> {
        self.entries.get_mut(peer)
    }

    /// Every entry.
    pub fn entries(&self) -> impl Iterator<Item = &E> {
        self.entries.values()
    }

    /// Every entry, to change.
    pub fn entries_mut(&mut self) -> impl Iterator<Item = &mut E> {
        self.entries.values_mut()
    }

    /// The addresses that have an entry.
    pub fn peers(&self) -> Vec<SocketAddr> {
        self.entries.keys().copied().collect()
    }

    /// Whether no entry is left.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// No new connections from now on (a drain or a stop).
    pub fn close_to_new(&mut self) {
        self.closed_to_new = true;
    }

    /// Puts `entry` in the table at `peer` (a client's connection, or one [`route`] made).
    ///
    /// [`route`]: Self::route
    pub fn insert(&mut self, peer: SocketAddr, entry: E) {
        if self.entries.insert(peer, entry).is_none() {
            *self.per_ip.entry(peer.ip()).or_default() += 1;
        }
    }

    /// Removes `peer`'s entry; its connection's counters stay in the endpoint's
    /// ([`closed_stats`](Self::closed_stats)).
    pub fn remove(&mut self, peer: &SocketAddr) -> Option<E> {
        let e = self.entries.remove(peer)?;
        self.closed.add(&e.connection().stats().counters_only());
        if let Some(count) = self.per_ip.get_mut(&peer.ip()) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&peer.ip());
            }
        }
        Some(e)
    }

    /// The refusals counted and the counters of the connections removed.
    pub fn closed_stats(&self) -> &RudpStats {
        &self.closed
    }

    /// Adds `stats` to the closed counters (what an entry kept beside its connection).
    pub fn add_closed(&mut self, stats: &RudpStats) {
        self.closed.add(stats);
    }

    /// The public key clients pin (a server's, encrypted).
    pub fn public_key(&self) -> Option<crate::proto::crypto::RudpPublicKey> {
        self.listener.as_ref().and_then(|l| l.public_key())
    }

    /// What a datagram from `peer` does to `peer`'s connection if it is a HELLO (see
    /// [`Replacement`]); counts a refused replacement.
    pub fn replacement(
        &mut self,
        Timestamp { now, wall }: Timestamp,
        peer: SocketAddr,
        datagram: &[u8],
    ) -> Replacement {
        let hello = datagram.first().map(|b| b & 0xF0) == Some(KIND_HELLO);
        let Some(entry) = self.entries.get(&peer).filter(|_| hello) else {
            return Replacement::No;
        };
        if entry.has_ended() {
            return Replacement::GiveWay;
        }
        let Some(listener) = &self.listener else {
            return Replacement::No;
        };
        let nonce = entry.connection().nonce();
        let Ok(Packet::Hello { nonce: n, .. }) = packet::parse(datagram) else {
            return Replacement::No;
        };
        if n == nonce {
            return Replacement::No; // its own client's HELLO again: the ACCEPT is repeated
        }
        let proven = listener.is_new_handshake(wall, peer, datagram);
        match (entry.connection().is_replaceable(now), proven) {
            (true, true) => Replacement::Replace,
            (true, false) => Replacement::Listen,
            (false, true) => {
                self.closed.refused_replacements += 1;
                Replacement::Refuse
            }
            // A HELLO with another nonce and no valid cookie: the connection counts it as a
            // handshake datagram that is not its own (`unauthenticated`).
            (false, false) => Replacement::No,
        }
    }

    /// A datagram from `peer` at `now` (`wall`: the same instant by the system clock, for
    /// cookie ages): to its connection, or — from an address without one, at a server — the
    /// stateless handshake, within the limits. `out` takes a reply; `make` makes a new
    /// connection's entry. Call [`replacement`](Self::replacement) first for an address that
    /// has an entry.
    pub fn route(
        &mut self,
        Timestamp { now, wall }: Timestamp,
        peer: SocketAddr,
        datagram: &[u8],
        (out, make): Io<'_, E>,
    ) -> Routed {
        if let Some(entry) = self.entries.get_mut(&peer) {
            return Routed::Connection(entry.connection_mut().handle_datagram(now, datagram));
        }
        self.listen(Timestamp { now, wall }, peer, datagram, (out, make))
    }

    /// A datagram for the listener (from an address without a connection, or
    /// [`Replacement::Listen`]): the stateless handshake, within the limits.
    pub fn listen(
        &mut self,
        Timestamp { now, wall }: Timestamp,
        peer: SocketAddr,
        datagram: &[u8],
        (out, make): Io<'_, E>,
    ) -> Routed {
        let Some(listener) = &self.listener else {
            return Routed::Dropped;
        };
        if self.closed_to_new {
            return Routed::Dropped;
        }
        // Full (for all, or for this address): no session, no answer, and the nonce not
        // spent, so the client's next HELLO may get in once a session ends.
        if listener.is_new_handshake(wall, peer, datagram) && self.over_limit(peer) {
            return Routed::Full;
        }
        let Some(listener) = self.listener.as_mut() else {
            return Routed::Dropped;
        };
        match listener.handle(Timestamp { now, wall }, peer, datagram, out) {
            Ok(Incoming::Reply(n)) => Routed::Reply(n),
            Ok(Incoming::Accept(conn, n)) => {
                let entry = make(peer, *conn);
                self.insert(peer, entry);
                Routed::Accepted(n)
            }
            Ok(Incoming::Refused(refusal)) => {
                self.closed.refused_handshakes += 1;
                Routed::Refused(refusal)
            }
            Ok(_) => Routed::Dropped,
            Err(e) => Routed::Malformed(e),
        }
    }

    /// Whether a new session from `peer` is refused for a limit (counted).
    fn over_limit(&mut self, peer: SocketAddr) -> bool {
        if self.entries.len() >= self.config.max_sessions {
            self.closed.refused_sessions += 1;
            return true;
        }
        let of_ip = self.per_ip.get(&peer.ip()).copied().unwrap_or(0);
        if of_ip >= self.config.max_sessions_per_ip {
            self.closed.refused_per_ip += 1;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
