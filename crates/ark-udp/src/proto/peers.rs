//! The server's session table: sessions keyed by peer address, bounded, evicting a session
//! that has been silent when full (CLOCK, the second-chance approximation of LRU).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use crate::proto::rate::SessionRate;

/// One peer's session.
pub(crate) struct Peer<H> {
    pub(crate) handler: H,
    /// Its rate limits, waiting datagrams and counters.
    pub(crate) rate: SessionRate,
    pub(crate) last_seen: Instant,
    /// Unique per session of this table (a new session of the same peer gets a new one).
    pub(crate) serial: u64,
    /// A datagram arrived since the eviction hand last passed (CLOCK's reference bit).
    pub(crate) referenced: bool,
    /// Its place in `Peers::order`.
    slot: usize,
}

/// Sessions by peer address, plus their addresses in a ring for the eviction hand (CLOCK):
/// every datagram sets its session's reference bit; when the table is full, the hand moves
/// round the ring clearing bits and evicts the first session whose bit was already clear — one
/// that has been silent since the hand last passed. Amortised constant time per eviction. A
/// flood from spoofed addresses then evicts its own one-shot entries and other silent ones and
/// never locks a new peer out; a session that gets a datagram at least once every
/// `max_sessions` evictions is never evicted.
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

    pub(crate) fn contains(&self, addr: &SocketAddr) -> bool {
        self.map.contains_key(addr)
    }

    /// Adds a session and returns it.
    pub(crate) fn insert(
        &mut self,
        addr: SocketAddr,
        handler: H,
        rate: SessionRate,
        now: Instant,
    ) -> &mut Peer<H> {
        self.order.push(addr);
        let slot = self.order.len() - 1;
        self.next_serial += 1;
        self.map.entry(addr).or_insert(Peer {
            handler,
            rate,
            last_seen: now,
            serial: self.next_serial,
            referenced: false,
            slot,
        })
    }

    /// A session that has been silent since the hand last passed, taken out of the table.
    pub(crate) fn evict(&mut self) -> Option<(SocketAddr, Peer<H>)> {
        // Two rounds at most: the first clears every reference bit.
        for _ in 0..2 * self.order.len() {
            self.hand %= self.order.len();
            let addr = self.order[self.hand];
            let peer = self.map.get_mut(&addr)?;
            if !std::mem::replace(&mut peer.referenced, false) {
                // `remove` moves the ring's last entry here: the hand stays.
                return self.remove(&addr).map(|peer| (addr, peer));
            }
            self.hand += 1;
        }
        None
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
    fn eviction_skips_sessions_heard_from_since_the_hand_passed_and_keeps_indexes_right() {
        let start = Instant::now();
        let mut peers = Peers::default();
        for i in 0..5u16 {
            let seen = start + Duration::from_secs(u64::from(i));
            peers.insert(addr(i), i, SessionRate::default(), seen);
        }
        let evict = |peers: &mut Peers<u16>| peers.evict().map(|(a, p)| (a, p.handler));
        // Peer 0 talks again: it gets a second chance.
        peers.get_mut(&addr(0)).unwrap().referenced = true;
        assert_eq!(evict(&mut peers), Some((addr(1), 1)));
        assert_eq!(evict(&mut peers), Some((addr(4), 4)));
        peers.retain(|p| p.handler != 3, |a, _| assert_eq!(a, addr(3)));
        assert_eq!(peers.len(), 2);
        // Peer 0's bit was cleared as the hand passed: now it can go.
        assert_eq!(evict(&mut peers), Some((addr(2), 2)));
        assert_eq!(evict(&mut peers), Some((addr(0), 0)));
        assert_eq!(evict(&mut peers), None);
    }
}
