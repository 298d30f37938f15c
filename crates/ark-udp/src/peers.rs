//! The server's session table: sessions keyed by peer address, bounded, evicting the least
//! recently active when full.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

/// Entries looked at to choose a victim when the table is full.
const EVICTION_SAMPLE: usize = 8;

/// One peer's session.
pub(crate) struct Peer<H> {
    pub(crate) handler: H,
    pub(crate) last_seen: Instant,
    /// Unique per session of this table (a new session of the same peer gets a new one).
    pub(crate) serial: u64,
    /// Its place in `Peers::order`.
    slot: usize,
}

/// Sessions by peer address, plus their addresses in a vector so that a victim can be chosen
/// in constant time: when the table is full, the least recently active of a few sessions
/// sampled round the table goes (an approximation of least-recently-used, as Redis does).
/// A flood from spoofed addresses then evicts its own stale entries and other silent ones,
/// and never locks a new peer out; a peer that keeps talking stays, unless the flood brings
/// more new addresses than the table holds between two of its datagrams.
pub(crate) struct Peers<H> {
    map: HashMap<SocketAddr, Peer<H>>,
    order: Vec<SocketAddr>,
    hand: usize,
    next_serial: u64,
}

impl<H> Default for Peers<H> {
    fn default() -> Self {
        Peers {
            map: HashMap::new(),
            order: Vec::new(),
            hand: 0,
            next_serial: 0,
        }
    }
}

impl<H> Peers<H> {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn get_mut(&mut self, addr: &SocketAddr) -> Option<&mut Peer<H>> {
        self.map.get_mut(addr)
    }

    /// Adds a session and returns it.
    pub(crate) fn insert(&mut self, addr: SocketAddr, handler: H, now: Instant) -> &mut Peer<H> {
        self.order.push(addr);
        let slot = self.order.len() - 1;
        self.next_serial += 1;
        self.map.entry(addr).or_insert(Peer {
            handler,
            last_seen: now,
            serial: self.next_serial,
            slot,
        })
    }

    /// The least recently active of a few sessions, taken out of the table.
    pub(crate) fn evict(&mut self) -> Option<(SocketAddr, H)> {
        let len = self.order.len();
        if len == 0 {
            return None;
        }
        let mut victim = None::<(SocketAddr, Instant)>;
        for i in 0..EVICTION_SAMPLE.min(len) {
            let addr = self.order[(self.hand + i) % len];
            let seen = self.map[&addr].last_seen;
            if victim.is_none_or(|(_, oldest)| seen < oldest) {
                victim = Some((addr, seen));
            }
        }
        self.hand = (self.hand + EVICTION_SAMPLE) % len;
        let (addr, _) = victim?;
        self.remove(&addr).map(|peer| (addr, peer.handler))
    }

    /// Takes a session out of the table.
    pub(crate) fn remove(&mut self, addr: &SocketAddr) -> Option<Peer<H>> {
        let peer = self.map.remove(addr)?;
        self.order.swap_remove(peer.slot);
        if let Some(moved) = self.order.get(peer.slot)
            && let Some(p) = self.map.get_mut(moved)
        {
            p.slot = peer.slot;
        }
        Some(peer)
    }

    /// Keeps the sessions `keep` approves; `gone` gets each other one.
    pub(crate) fn retain(
        &mut self,
        mut keep: impl FnMut(&Peer<H>) -> bool,
        mut gone: impl FnMut(SocketAddr, Peer<H>),
    ) {
        let doomed: Vec<SocketAddr> = self
            .order
            .iter()
            .filter(|addr| !keep(&self.map[*addr]))
            .copied()
            .collect();
        for addr in doomed {
            if let Some(peer) = self.remove(&addr) {
                gone(addr, peer);
            }
        }
    }

    /// Takes every session out.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (SocketAddr, H)> + '_ {
        self.order.clear();
        self.hand = 0;
        self.map.drain().map(|(addr, peer)| (addr, peer.handler))
    }

    /// Every session, for a callback each.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&SocketAddr, &mut Peer<H>)> {
        self.map.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn addr(i: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 1000 + i))
    }

    #[test]
    fn eviction_takes_the_least_recent_of_the_sample_and_keeps_indexes_right() {
        let start = Instant::now();
        let mut peers = Peers::default();
        for i in 0..5u16 {
            peers.insert(addr(i), i, start + Duration::from_secs(u64::from(i)));
        }
        // Peer 0 talks again: now the most recent.
        peers.get_mut(&addr(0)).unwrap().last_seen = start + Duration::from_secs(10);
        assert_eq!(peers.evict(), Some((addr(1), 1)));
        assert_eq!(peers.evict(), Some((addr(2), 2)));
        peers.retain(|p| p.handler != 3, |a, _| assert_eq!(a, addr(3)));
        assert_eq!(peers.len(), 2);
        assert_eq!(peers.evict(), Some((addr(4), 4)));
        assert_eq!(peers.evict(), Some((addr(0), 0)));
        assert_eq!(peers.evict(), None);
    }
}
