//! One session's rate limits, sans-IO: its [`Pace`] (its own buckets and its group's, from
//! ark-reactor), the datagrams waiting for its write allowance, and its traffic counters for
//! [`UdpSessionStats`]. Counted in datagram payload bytes (no IP or UDP headers).
//!
//! A session never limited keeps no `Pace` and no waiting queue (`limited` is `None`): its
//! per-datagram cost is a branch and the counters' additions, nothing is allocated, and it
//! takes 88 bytes more in the table than before rate limits.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use ark_reactor::{EachWay, Pace, RateLimits, RateWindow, queue_delay};

use crate::proto::batch::SendBatch;
use crate::stats::UdpSessionStats;

/// A server's group buckets, shared by every session of every shard.
pub(crate) type Group = ark_reactor::GroupLimits;

/// Whether a client's or cast socket's one session may read now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadGate {
    /// Read up to this many receive slots.
    Open(usize),
    /// Read nothing before `until`; `new`: the pause begins now (it was reading).
    Paused { until: Instant, new: bool },
}

/// Datagrams released from the waiting queue into the socket's send queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Released {
    pub(crate) bytes: usize,
    /// When the rest may leave, if a wake-up is to be set for it (none is set yet).
    pub(crate) next: Option<Instant>,
}

/// A session's rate limits and counters.
#[derive(Debug, Default)]
pub(crate) struct SessionRate {
    datagrams_in: u64,
    bytes_in: u64,
    datagrams_out: u64,
    bytes_out: u64,
    window: RateWindow,
    /// Present once a limit (its own or its group's) applied: a session never limited keeps
    /// only the counters above (the table's memory per session).
    limited: Option<Box<Limited>>,
}

/// The state of a limited session.
#[derive(Debug)]
struct Limited {
    pace: Pace,
    /// Its own limits (the group's are in `pace`).
    own: RateLimits,
    /// Datagrams over the write allowance, in order.
    held: Held,
    /// The wake-up set for the held datagrams (`None`: none pending).
    release_at: Option<Instant>,
    /// The bytes the next datagram read is expected to have: the last one's (`usize::MAX`
    /// before any: a full bucket).
    read_want: usize,
    /// A client's reading is paused.
    read_paused: bool,
    /// Datagrams dropped over the read allowance (a server's session).
    rate_dropped: u64,
    /// Datagrams that waited for the write allowance.
    rate_delayed: u64,
    /// Times a client's reading paused.
    read_pauses: u64,
}

impl Limited {
    fn new(limits: RateLimits, group: &Group, now: Instant) -> Box<Limited> {
        Box::new(Limited {
            pace: Pace::new(limits, group, now),
            own: limits,
            held: Held::default(),
            release_at: None,
            read_want: usize::MAX,
            read_paused: false,
            rate_dropped: 0,
            rate_delayed: 0,
            read_pauses: 0,
        })
    }
}

/// Datagrams waiting for the write allowance: their bytes back to back (reused once empty),
/// and each one's destination and length.
#[derive(Debug, Default)]
struct Held {
    data: Vec<u8>,
    /// Bytes at the front of `data` already released.
    head: usize,
    entries: VecDeque<(Option<SocketAddr>, usize)>,
}

impl Held {
    fn bytes(&self) -> usize {
        self.data.len() - self.head
    }

    fn front_len(&self) -> Option<usize> {
        self.entries.front().map(|&(_, len)| len)
    }

    fn push(&mut self, to: Option<SocketAddr>, payload: &[u8]) {
        self.data.extend_from_slice(payload);
        self.entries.push_back((to, payload.len()));
    }

    /// Moves the front datagram into `out`; its length.
    fn pop_into(&mut self, out: &mut SendBatch) -> Option<usize> {
        let (to, len) = self.entries.pop_front()?;
        out.push(to, &self.data[self.head..self.head + len]);
        self.head += len;
        if self.entries.is_empty() {
            self.data.clear();
            self.head = 0;
        } else if self.head >= 64 * 1024 && self.head > self.data.len() / 2 {
            // A queue that never empties: drop the released half (amortised).
            self.data.drain(..self.head);
            self.head = 0;
        }
        Some(len)
    }
}

impl SessionRate {
    /// A session's rate state: `limits` of its own and its `group`'s buckets, from `now`.
    pub(crate) fn new(limits: RateLimits, group: &Group, now: Instant) -> SessionRate {
        let any = limits != RateLimits::default() || group.is_limited();
        SessionRate {
            limited: any.then(|| Limited::new(limits, group, now)),
            ..SessionRate::default()
        }
    }

    /// The session's own limits.
    pub(crate) fn limits(&self) -> RateLimits {
        self.limited
            .as_ref()
            .map_or_else(RateLimits::default, |l| l.own)
    }

    /// A server's datagram of `len` bytes: whether the read allowance takes it (spent), or
    /// it is to be dropped (counted).
    #[inline]
    pub(crate) fn admit(&mut self, len: usize, now: Instant) -> bool {
        let Some(limited) = self.limited.as_mut() else {
            return true;
        };
        let read = &mut limited.pace.read;
        if !read.is_limited() {
            return true;
        }
        if read.blocked_until(len, now).is_some() {
            limited.rate_dropped += 1;
            return false;
        }
        read.spend(len);
        true
    }

    /// A client's or cast socket's datagram of `len` bytes, already read: whether the read
    /// allowance covers it now (spent), or it waits in the receive batch and reading pauses
    /// until the allowance covers it.
    #[inline]
    pub(crate) fn admit_read(&mut self, len: usize, now: Instant) -> bool {
        let Some(limited) = self.limited.as_mut() else {
            return true;
        };
        let read = &mut limited.pace.read;
        if !read.is_limited() {
            return true;
        }
        limited.read_want = len.max(1);
        if read.blocked_until(len, now).is_some() {
            return false;
        }
        read.spend(len);
        limited.read_paused = false;
        true
    }

    /// A datagram of `len` bytes goes to the handler.
    #[inline]
    pub(crate) fn delivered(&mut self, len: usize, now: Instant) {
        self.datagrams_in += 1;
        self.bytes_in += len as u64;
        self.window.record(self.totals(), now);
    }

    /// `datagrams` of `bytes` in all went into the socket's send queue.
    #[inline]
    fn sent(&mut self, datagrams: u64, bytes: usize, now: Instant) {
        self.datagrams_out += datagrams;
        self.bytes_out += bytes as u64;
        self.window.record(self.totals(), now);
    }

    /// Whether a client's or cast socket's session may read, and how many slots: as many as
    /// its allowance covers at the size of the last datagram it read (at least one once that
    /// size is covered). What a read brings past the allowance (a larger datagram, or a
    /// GRO slot of several) waits in the receive batch ([`admit_read`](Self::admit_read)).
    pub(crate) fn read_gate(&mut self, now: Instant, slots: usize) -> ReadGate {
        let Some(limited) = self.limited.as_mut().filter(|l| l.pace.read.is_limited()) else {
            return ReadGate::Open(slots);
        };
        let want = limited.read_want.max(1);
        match limited.pace.read.blocked_until(want, now) {
            Some(until) => {
                let new = !std::mem::replace(&mut limited.read_paused, true);
                limited.read_pauses += u64::from(new);
                ReadGate::Paused { until, new }
            }
            None => {
                limited.read_paused = false;
                let allowance = limited.pace.read.allowance(now);
                ReadGate::Open((allowance / want).clamp(1, slots.max(1)))
            }
        }
    }

    /// Whether sends wait for a write allowance.
    #[inline]
    pub(crate) fn write_limited(&self) -> bool {
        self.limited
            .as_ref()
            .is_some_and(|l| l.pace.write.is_limited())
    }

    /// Whether `len` bytes may go into the socket's queue now: nothing waits before them and
    /// the allowance covers them (a datagram larger than the burst: a full bucket).
    pub(crate) fn may_send_now(&mut self, len: usize, now: Instant) -> bool {
        self.limited.as_mut().is_none_or(|l| {
            l.held.entries.is_empty() && l.pace.write.blocked_until(len, now).is_none()
        })
    }

    /// `len` bytes went straight into the socket's queue: their tokens are spent.
    #[inline]
    pub(crate) fn send_now(&mut self, len: usize, now: Instant) {
        if let Some(limited) = self.limited.as_mut() {
            limited.pace.write.spend(len);
        }
        self.sent(1, len, now);
    }

    /// Queues `payload` to wait for the write allowance; returns when it may leave if no
    /// wake-up is set for this session yet (the caller sets it).
    pub(crate) fn hold(
        &mut self,
        to: Option<SocketAddr>,
        payload: &[u8],
        now: Instant,
    ) -> Option<Instant> {
        let limited = self.limited.as_mut()?;
        limited.held.push(to, payload);
        limited.rate_delayed += 1;
        if limited.release_at.is_some() {
            return None;
        }
        let front = limited.held.front_len().unwrap_or(payload.len());
        let at = limited.pace.write.blocked_until(front, now).unwrap_or(now);
        limited.release_at = Some(at);
        Some(at)
    }

    /// Bytes waiting for the write allowance.
    pub(crate) fn held_bytes(&self) -> usize {
        self.limited.as_ref().map_or(0, |l| l.held.bytes())
    }

    /// A wake-up of this session: the waiting datagrams the allowance covers go into `out`, in
    /// order; if some still wait and no later wake-up is pending, `next` says when to set one.
    pub(crate) fn release(&mut self, now: Instant, out: &mut SendBatch) -> Released {
        let mut released = Released::default();
        let Some(limited) = self.limited.as_mut() else {
            return released;
        };
        if limited.release_at.is_some_and(|at| at <= now) {
            limited.release_at = None;
        }
        let mut datagrams = 0;
        while let Some(len) = limited.held.front_len() {
            if limited.pace.write.blocked_until(len, now).is_some() {
                break;
            }
            limited.pace.write.spend(len);
            limited.held.pop_into(out);
            datagrams += 1;
            released.bytes += len;
        }
        if let Some(front) = limited.held.front_len()
            && limited.release_at.is_none()
        {
            let at = limited.pace.write.blocked_until(front, now).unwrap_or(now);
            limited.release_at = Some(at);
            released.next = Some(at);
        }
        if datagrams > 0 {
            self.sent(datagrams, released.bytes, now);
        }
        released
    }

    /// Everything waiting goes into `out` at once, whatever the allowance (a stop's or a local
    /// close's goodbye leaves); returns the bytes.
    pub(crate) fn release_all(&mut self, now: Instant, out: &mut SendBatch) -> usize {
        let Some(limited) = self.limited.as_mut() else {
            return 0;
        };
        let (mut datagrams, mut bytes) = (0, 0);
        while let Some(len) = limited.held.pop_into(out) {
            limited.pace.write.spend(len);
            datagrams += 1;
            bytes += len;
        }
        limited.release_at = None;
        if datagrams > 0 {
            self.sent(datagrams, bytes, now);
        }
        bytes
    }

    /// The session ends without its waiting datagrams leaving (it expired or was evicted):
    /// returns how many datagrams and bytes were dropped.
    pub(crate) fn discard(&mut self) -> (u64, usize) {
        let Some(limited) = self.limited.as_mut() else {
            return (0, 0);
        };
        let held = std::mem::take(&mut limited.held);
        (held.entries.len() as u64, held.bytes())
    }

    /// New limits of the session's own (its group's stay), from `now`. What waits and the new
    /// allowance covers goes into `out` (everything, when no limit is left).
    pub(crate) fn set_limits(
        &mut self,
        limits: RateLimits,
        now: Instant,
        out: &mut SendBatch,
    ) -> Released {
        let Some(limited) = self.limited.as_mut() else {
            if limits != RateLimits::default() {
                self.limited = Some(Limited::new(limits, &Group::default(), now));
            }
            return Released::default();
        };
        limited.pace.set_limits(limits, now);
        limited.own = limits;
        if !limited.pace.is_limited() {
            // The state stays (its counters with it); without buckets it costs a branch.
            let bytes = self.release_all(now, out);
            return Released { bytes, next: None };
        }
        // The wake-up set may be later than the new allowance needs: a new one is set (the
        // old one finds nothing to do).
        limited.release_at = None;
        self.release(now, out)
    }

    /// Bytes received and sent so far.
    fn totals(&self) -> EachWay {
        EachWay {
            inbound: self.bytes_in,
            outbound: self.bytes_out,
        }
    }

    /// The session's counters and rates at `now`.
    pub(crate) fn stats(&mut self, now: Instant) -> UdpSessionStats {
        let EachWay {
            inbound: in_rate,
            outbound: out_rate,
        } = self.window.record(self.totals(), now);
        let waiting = self.held_bytes() as u64;
        let limits = self.limits();
        let (rate_dropped, rate_delayed, read_pauses) =
            self.limited.as_ref().map_or((0, 0, 0), |l| {
                (l.rate_dropped, l.rate_delayed, l.read_pauses)
            });
        let drain_rate = limits.write.map_or(out_rate, |l| l.bytes_per_second);
        UdpSessionStats {
            datagrams_in: self.datagrams_in,
            bytes_in: self.bytes_in,
            datagrams_out: self.datagrams_out,
            bytes_out: self.bytes_out,
            bytes_in_per_second: in_rate,
            bytes_out_per_second: out_rate,
            rate_dropped,
            rate_delayed,
            read_pauses,
            send_wait_bytes: waiting,
            send_queue_delay: queue_delay(waiting, drain_rate),
            rate_limits: limits,
        }
    }
}
