//! Forward error correction: Reed–Solomon groups over whole DATA datagrams
//! (`reed-solomon-simd`). A group takes up to `k` data datagrams; when it is full, or its
//! first member has waited `RudpConfig::fec_max_delay` (or half the smoothed RTT, whichever is
//! shorter), `m` parity datagrams follow. Any `k` of the `k + m` rebuild the missing data
//! datagrams; ARQ repairs what a group cannot.
//!
//! A shard is `length u16 | datagram | zero padding`, as long as the group's longest member
//! (rounded up to even, as the codec wants).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

use crate::proto::packet::FecTag;

/// The FEC policy of a connection's sending side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fec {
    /// ARQ only.
    Off,
    /// Groups of up to `k` data datagrams with `m` parity each (a group closed early by time
    /// gets `ceil(m × members / k)`).
    Fixed {
        /// Data datagrams per full group (1..=64).
        k: u8,
        /// Parity datagrams per full group (1..=64).
        m: u8,
    },
    /// Groups of up to 16 data datagrams; parity per group from the loss measured (the
    /// peer's count of what arrived): the fewest parity datagrams for which a group stays
    /// unrecoverable with probability at most `RudpConfig::fec_residual` (none while no loss is
    /// measured).
    Adaptive,
}

/// Adaptive groups: at most this many data datagrams.
const ADAPTIVE_K: usize = 16;
/// Adaptive groups: at most this many parity datagrams.
const ADAPTIVE_MAX_M: usize = 16;
/// Groups a receiver keeps for rebuilding.
const RX_GROUPS: usize = 32;

/// The fewest parity datagrams `m` for `k` data datagrams at loss `p` such that more than `m`
/// of the `k + m` are lost with probability at most `residual`.
pub(crate) fn parity_for(k: usize, p: f64, residual: f64, max_m: usize) -> usize {
    if p <= 0.0 {
        return 0;
    }
    let p = p.min(0.5);
    (0..=max_m)
        .find(|&m| binomial_tail(k + m, p, m) <= residual)
        .unwrap_or(max_m)
}

/// P(X > m) for X ~ Binomial(n, p).
fn binomial_tail(n: usize, p: f64, m: usize) -> f64 {
    let q = 1.0 - p;
    let mut term = q.powi(n as i32); // P(X = 0)
    let mut cdf = term;
    for i in 1..=m.min(n) {
        term *= (n - i + 1) as f64 / i as f64 * p / q;
        cdf += term;
    }
    (1.0 - cdf).max(0.0)
}

/// Writes `datagram` as a shard of `shard_bytes` into `out`.
fn shard_into(out: &mut Vec<u8>, datagram: &[u8], shard_bytes: usize) {
    out.clear();
    out.extend_from_slice(&(datagram.len() as u16).to_be_bytes());
    out.extend_from_slice(datagram);
    out.resize(shard_bytes, 0);
}

fn shard_size(longest: usize) -> usize {
    (2 + longest).next_multiple_of(2)
}

/// The sending side: the open group and the parity waiting to leave.
pub(crate) struct FecSender {
    policy: Fec,
    group: u32,
    /// The open group's members (copies of whole DATA datagrams).
    members: Vec<Vec<u8>>,
    used: usize,
    opened: Option<Instant>,
    /// The open group's planned size (adaptive: fixed when it opens).
    planned_k: usize,
    encoder: Option<ReedSolomonEncoder>,
    scratch: Vec<u8>,
    /// Parity ready to send: (group, k, m, index, shard).
    pub(crate) parity: VecDeque<(u32, u8, u8, u8, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
    /// The loss rate the connection measured (adaptive).
    pub(crate) loss: f64,
    /// Adaptive: the acceptable probability that a group cannot be rebuilt.
    residual: f64,
    pub(crate) parity_sent: u64,
}

impl std::fmt::Debug for FecSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FecSender")
            .field("policy", &self.policy)
            .field("group", &self.group)
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl FecSender {
    pub(crate) fn new(policy: Fec, residual: f64) -> Self {
        FecSender {
            policy,
            residual,
            group: 0,
            members: Vec::new(),
            used: 0,
            opened: None,
            planned_k: 0,
            encoder: None,
            scratch: Vec::new(),
            parity: VecDeque::new(),
            spare: Vec::new(),
            loss: 0.0,
            parity_sent: 0,
        }
    }

    /// The tag of the next DATA datagram, or `None` when it goes unprotected.
    pub(crate) fn next_tag(&mut self, now: Instant) -> Option<FecTag> {
        if self.opened.is_none() {
            self.planned_k = match self.policy {
                Fec::Off => return None,
                Fec::Fixed { k, .. } => usize::from(k),
                Fec::Adaptive => {
                    let m = parity_for(ADAPTIVE_K, self.loss, self.residual, ADAPTIVE_MAX_M);
                    if m == 0 {
                        return None;
                    }
                    ADAPTIVE_K
                }
            };
            self.opened = Some(now);
        }
        Some(FecTag {
            group: self.group,
            index: self.used as u8,
        })
    }

    /// Adds the DATA datagram just tagged; closes the group when full.
    pub(crate) fn add(&mut self, datagram: &[u8]) {
        if self.members.len() == self.used {
            self.members.push(self.spare.pop().unwrap_or_default());
        }
        let member = &mut self.members[self.used];
        member.clear();
        member.extend_from_slice(datagram);
        self.used += 1;
        if self.used >= self.planned_k {
            self.close();
        }
    }

    /// When the open group must close: `max_delay` after it opened.
    pub(crate) fn deadline(&self, max_delay: Duration) -> Option<Instant> {
        self.opened.map(|t| t + max_delay)
    }

    /// Closes the open group now if `max_delay` has passed.
    pub(crate) fn close_if_due(&mut self, now: Instant, max_delay: Duration) {
        if self.deadline(max_delay).is_some_and(|d| d <= now) {
            self.close();
        }
    }

    fn parity_count(&self, k: usize) -> usize {
        match self.policy {
            Fec::Off => 0,
            Fec::Fixed { k: full, m } => (usize::from(m) * k).div_ceil(usize::from(full)).max(1),
            // A small group may need none: its members then go unprotected (ARQ repairs).
            Fec::Adaptive => parity_for(k, self.loss, self.residual, ADAPTIVE_MAX_M),
        }
    }

    /// Encodes the open group's parity and opens the next group.
    fn close(&mut self) {
        let k = self.used;
        self.opened = None;
        self.used = 0;
        if k == 0 {
            return;
        }
        // Every group closed gets a new id, parity or not: a receiver keeps what it got of a
        // group by id, and a reused id would mix two groups' datagrams.
        let group = self.group;
        self.group = self.group.wrapping_add(1);
        let m = self.parity_count(k);
        if m == 0 {
            return;
        }
        let longest = self.members[..k].iter().map(Vec::len).max().unwrap_or(0);
        let shard_bytes = shard_size(longest);
        let encoder = match self.encoder.as_mut() {
            Some(e) => e.reset(k, m, shard_bytes).map(|()| e),
            None => ReedSolomonEncoder::new(k, m, shard_bytes).map(|e| self.encoder.insert(e)),
        };
        let Ok(encoder) = encoder else {
            return; // sizes the codec refuses: the group goes unprotected (ARQ repairs)
        };
        for member in &self.members[..k] {
            shard_into(&mut self.scratch, member, shard_bytes);
            if encoder.add_original_shard(&self.scratch).is_err() {
                return;
            }
        }
        let Ok(result) = encoder.encode() else {
            return;
        };
        for (index, shard) in result.recovery_iter().enumerate() {
            let mut buf = self.spare.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(shard);
            self.parity
                .push_back((group, k as u8, m as u8, index as u8, buf));
        }
    }

    /// Takes back a parity shard's buffer once sent.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        self.parity_sent += 1;
        self.spare.push(buf);
    }
}

/// One group as a receiver sees it.
#[derive(Debug, Default)]
struct RxGroup {
    id: u32,
    /// Data datagrams per group and parity per group, once a parity datagram told.
    k: u8,
    m: u8,
    shard_bytes: usize,
    originals: Vec<(u8, Vec<u8>)>,
    recovery: Vec<(u8, Vec<u8>)>,
    done: bool,
}

/// The receiving side: recent groups, rebuilt when enough of them arrived.
pub(crate) struct FecReceiver {
    groups: VecDeque<RxGroup>,
    decoder: Option<ReedSolomonDecoder>,
    spare: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    /// Data datagrams rebuilt.
    pub(crate) recovered: u64,
}

impl std::fmt::Debug for FecReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FecReceiver")
            .field("groups", &self.groups.len())
            .field("recovered", &self.recovered)
            .finish_non_exhaustive()
    }
}

impl FecReceiver {
    pub(crate) fn new() -> Self {
        FecReceiver {
            groups: VecDeque::new(),
            decoder: None,
            spare: Vec::new(),
            scratch: Vec::new(),
            recovered: 0,
        }
    }

    /// The index of group `id`, made if it is newer than every group kept; `None` for an old
    /// one.
    fn group(&mut self, id: u32) -> Option<usize> {
        if let Some(i) = self.groups.iter().position(|g| g.id == id) {
            return Some(i);
        }
        let newer = self
            .groups
            .back()
            .is_none_or(|g| (id.wrapping_sub(g.id) as i32) > 0);
        if !newer {
            return None;
        }
        let mut group = if self.groups.len() >= RX_GROUPS {
            self.groups.pop_front().map(|old| self.retire(old))
        } else {
            None
        }
        .unwrap_or_default();
        group.id = id;
        self.groups.push_back(group);
        Some(self.groups.len() - 1)
    }

    /// Empties a group for reuse: its buffers go back to the spares, its lists keep their
    /// room.
    fn retire(&mut self, mut group: RxGroup) -> RxGroup {
        let bufs = group.originals.drain(..).chain(group.recovery.drain(..));
        self.spare.extend(bufs.map(|(_, b)| b));
        (group.k, group.m, group.shard_bytes, group.done) = (0, 0, 0, false);
        group
    }

    fn copy(spare: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
        let mut buf = spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(bytes);
        buf
    }

    /// A protected DATA datagram arrived (whole, FEC fields included).
    pub(crate) fn on_data(&mut self, tag: FecTag, datagram: &[u8]) {
        let Some(i) = self.group(tag.group) else {
            return;
        };
        let g = &mut self.groups[i];
        if g.done {
            return;
        }
        match g.originals.iter().find(|(i, _)| *i == tag.index) {
            None => {
                let copy = Self::copy(&mut self.spare, datagram);
                g.originals.push((tag.index, copy));
            }
            // A duplicate is the same datagram; anything else means the group's members
            // cannot be trusted (forged, or ids mixed up): never rebuild from it.
            Some((_, kept)) if kept.as_slice() != datagram => g.done = true,
            Some(_) => {}
        }
    }

    /// A PARITY datagram arrived; `rebuilt` gets each data datagram it lets us rebuild.
    pub(crate) fn on_parity(
        &mut self,
        (id, k, m, index): (u32, u8, u8, u8),
        shard: &[u8],
        rebuilt: &mut impl FnMut(&[u8]),
    ) {
        let Some(i) = self.group(id) else {
            return;
        };
        let g = &mut self.groups[i];
        let consistent = g.k == 0 || (g.k == k && g.m == m && g.shard_bytes == shard.len());
        if g.done || !consistent || g.recovery.iter().any(|(i, _)| *i == index) {
            return;
        }
        (g.k, g.m, g.shard_bytes) = (k, m, shard.len());
        let copy = Self::copy(&mut self.spare, shard);
        g.recovery.push((index, copy));
        self.try_rebuild(id, rebuilt);
    }

    /// Rebuilds group `id` once `k` of its datagrams are in and some data is missing.
    fn try_rebuild(&mut self, id: u32, rebuilt: &mut impl FnMut(&[u8])) {
        let Some(gi) = self.groups.iter().position(|g| g.id == id) else {
            return;
        };
        let g = &mut self.groups[gi];
        let (k, m) = (usize::from(g.k), usize::from(g.m));
        if g.done || g.originals.len() + g.recovery.len() < k {
            return;
        }
        g.done = true;
        if g.originals.len() >= k {
            return;
        }
        let decoder = match self.decoder.as_mut() {
            Some(d) => d.reset(k, m, g.shard_bytes).map(|()| d),
            None => ReedSolomonDecoder::new(k, m, g.shard_bytes).map(|d| self.decoder.insert(d)),
        };
        let Ok(decoder) = decoder else {
            return;
        };
        for (index, datagram) in &g.originals {
            if usize::from(*index) >= k || datagram.len() + 2 > g.shard_bytes {
                return; // a member that does not fit the group: leave it to ARQ
            }
            shard_into(&mut self.scratch, datagram, g.shard_bytes);
            if decoder
                .add_original_shard(usize::from(*index), &self.scratch)
                .is_err()
            {
                return;
            }
        }
        for (index, shard) in &g.recovery {
            if decoder
                .add_recovery_shard(usize::from(*index), shard)
                .is_err()
            {
                return;
            }
        }
        let Ok(result) = decoder.decode() else {
            return;
        };
        for (_, shard) in result.restored_original_iter() {
            let len = usize::from(u16::from_be_bytes([shard[0], shard[1]]));
            if let Some(datagram) = shard.get(2..2 + len) {
                self.recovered += 1;
                rebuilt(datagram);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parity_grows_with_loss() {
        assert_eq!(parity_for(16, 0.0, 0.01, 16), 0);
        let low = parity_for(16, 0.01, 0.01, 16);
        let mid = parity_for(16, 0.05, 0.01, 16);
        let high = parity_for(16, 0.20, 0.01, 16);
        assert!(low >= 1 && low < mid && mid < high, "{low} {mid} {high}");
        // 16 + 2 at 1 %: P(more than 2 lost) is about 0.08 %.
        assert_eq!(low, 2);
        assert!((binomial_tail(10, 0.5, 10)).abs() < 1e-12);
    }

    fn datagram(i: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|j| i.wrapping_mul(31).wrapping_add(j as u8))
            .collect()
    }

    #[test]
    fn a_group_rebuilds_any_m_lost_data_datagrams() {
        let now = Instant::now();
        let mut tx = FecSender::new(Fec::Fixed { k: 4, m: 2 }, 0.05);
        let mut sent = Vec::new();
        for i in 0..4u8 {
            let tag = tx.next_tag(now).expect("protected");
            assert_eq!((tag.group, tag.index), (0, i));
            let d = datagram(i, 100 + usize::from(i) * 7);
            tx.add(&d);
            sent.push((tag, d));
        }
        assert_eq!(tx.parity.len(), 2, "a full group closes with its parity");
        let mut rx = FecReceiver::new();
        // Data 1 and 3 lost.
        for (tag, d) in [&sent[0], &sent[2]] {
            rx.on_data(*tag, d);
        }
        let mut rebuilt = Vec::new();
        for (group, k, m, index, shard) in &tx.parity {
            rx.on_parity((*group, *k, *m, *index), shard, &mut |d| {
                rebuilt.push(d.to_vec())
            });
        }
        rebuilt.sort();
        let mut lost = vec![sent[1].1.clone(), sent[3].1.clone()];
        lost.sort();
        assert_eq!(rebuilt, lost);
        assert_eq!(rx.recovered, 2);
    }

    #[test]
    fn a_group_closes_by_time_and_adaptive_starts_unprotected() {
        let now = Instant::now();
        let mut tx = FecSender::new(Fec::Fixed { k: 8, m: 2 }, 0.05);
        tx.next_tag(now);
        tx.add(&datagram(0, 50));
        tx.close_if_due(now, Duration::from_millis(5));
        assert!(tx.parity.is_empty());
        tx.close_if_due(now + Duration::from_millis(5), Duration::from_millis(5));
        assert_eq!(tx.parity.len(), 1, "ceil(2 × 1 / 8)");
        let mut adaptive = FecSender::new(Fec::Adaptive, 0.05);
        assert_eq!(adaptive.next_tag(now), None, "no loss measured yet");
        adaptive.loss = 0.05;
        assert!(adaptive.next_tag(now).is_some());
    }

    #[test]
    fn a_group_closed_without_parity_still_uses_up_its_id() {
        let now = Instant::now();
        let mut tx = FecSender::new(Fec::Adaptive, 0.05);
        tx.loss = 0.01;
        assert_eq!(tx.next_tag(now).map(|t| t.group), Some(0));
        tx.add(&datagram(0, 40));
        // One member at 1 % loss needs no parity.
        tx.close_if_due(now + Duration::from_millis(5), Duration::from_millis(5));
        assert!(tx.parity.is_empty());
        assert_eq!(tx.next_tag(now).map(|t| (t.group, t.index)), Some((1, 0)));
    }

    #[test]
    fn a_group_with_two_different_datagrams_at_one_index_is_never_rebuilt() {
        let now = Instant::now();
        let mut tx = FecSender::new(Fec::Fixed { k: 2, m: 1 }, 0.05);
        let mut sent = Vec::new();
        for i in 0..2u8 {
            let tag = tx.next_tag(now).unwrap();
            let d = datagram(i, 60);
            tx.add(&d);
            sent.push((tag, d));
        }
        let mut rx = FecReceiver::new();
        rx.on_data(sent[0].0, &sent[0].1);
        rx.on_data(sent[0].0, &datagram(9, 60)); // same group and index, other bytes
        let (group, k, m, index, shard) = &tx.parity[0];
        let mut never = |_: &[u8]| panic!("rebuilt from a group that mixes datagrams");
        rx.on_parity((*group, *k, *m, *index), shard, &mut never);
        assert_eq!(rx.recovered, 0);
    }

    #[test]
    fn inconsistent_or_stale_parity_is_ignored() {
        let mut rx = FecReceiver::new();
        let mut never = |_: &[u8]| panic!("nothing to rebuild");
        rx.on_parity((5, 2, 1, 0), &[0; 10], &mut never);
        rx.on_parity((5, 3, 1, 0), &[0; 10], &mut never);
        rx.on_parity((4, 2, 1, 0), &[0; 10], &mut never);
        // Garbage shards decode to garbage lengths, never past the shard.
        rx.on_parity((5, 2, 1, 0), &[0xFF; 10], &mut never);
    }
}
