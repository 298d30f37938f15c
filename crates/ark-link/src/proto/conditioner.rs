//! The link model, sans-IO: packets and time in, packets out at their release times. One
//! [`Conditioner`] is one direction of a link.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// Bursty loss after Gilbert and Elliott: a two-state chain (good, bad), moved once per
/// packet, each state with its own loss probability.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GilbertElliott {
    /// Probability of moving from good to bad, per packet.
    pub good_to_bad: f64,
    /// Probability of moving from bad to good, per packet.
    pub bad_to_good: f64,
    /// Loss probability in the good state.
    pub loss_good: f64,
    /// Loss probability in the bad state.
    pub loss_bad: f64,
}

impl GilbertElliott {
    /// A chain whose long-run loss is about `loss` in bursts of `burst` packets on average:
    /// every packet in the bad state is lost, none in the good one.
    pub fn with_mean(loss: f64, burst: f64) -> GilbertElliott {
        let loss = loss.clamp(0.0, 0.999);
        let bad_to_good = 1.0 / burst.max(1.0);
        GilbertElliott {
            // Stationary share of the bad state: p / (p + r) = loss.
            good_to_bad: (loss * bad_to_good / (1.0 - loss)).min(1.0),
            bad_to_good,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }
}

/// What one direction of the link does to packets. The default passes everything at once.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Independent loss probability per packet (0..1), on top of [`burst`](Self::burst).
    pub loss: f64,
    /// Bursty loss (none by default).
    pub burst: Option<GilbertElliott>,
    /// Fixed one-way delay.
    pub delay: Duration,
    /// Jitter: each packet's delay gets a uniform offset in ±jitter (never below zero).
    /// Packets keep their order unless [`reorder`](Self::reorder) says otherwise.
    pub jitter: Duration,
    /// Probability that a packet is held back by [`reorder_gap`](Self::reorder_gap) more,
    /// so that the packets behind it overtake it.
    pub reorder: f64,
    /// How long a reordered packet is held back.
    pub reorder_gap: Duration,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Link rate in bits per second (`None`: unlimited). Packets queue for the link; the
    /// queue drops what would wait longer than [`queue_limit`](Self::queue_limit).
    pub rate_bits_per_second: Option<u64>,
    /// Longest wait for the link at the rate before a packet is dropped (tail drop).
    pub queue_limit: Duration,
    /// Most packets in flight (delayed or queued) at once; more are dropped as by a full
    /// queue. Bounds the memory a long delay at a high packet rate would take.
    pub max_in_flight: usize,
    /// The seed: the same seed and the same packets at the same times give the same
    /// decisions.
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            loss: 0.0,
            burst: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            reorder: 0.0,
            reorder_gap: Duration::from_millis(2),
            duplicate: 0.0,
            rate_bits_per_second: None,
            queue_limit: Duration::from_millis(100),
            max_in_flight: 65_536,
            seed: 1,
        }
    }
}

impl LinkConfig {
    /// Whether the link changes nothing (every packet passes at once, once).
    pub fn is_transparent(&self) -> bool {
        *self
            == LinkConfig {
                seed: self.seed,
                reorder_gap: self.reorder_gap,
                queue_limit: self.queue_limit,
                max_in_flight: self.max_in_flight,
                ..LinkConfig::default()
            }
    }
}

/// What the conditioner did, by count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Packets offered to the link.
    pub offered: u64,
    /// Bytes offered.
    pub offered_bytes: u64,
    /// Dropped by independent loss.
    pub dropped_random: u64,
    /// Dropped by bursty loss.
    pub dropped_burst: u64,
    /// Dropped because the rate-limited queue (or the in-flight bound) was full.
    pub dropped_queue: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Held back to be overtaken.
    pub reordered: u64,
    /// Packets released (copies included).
    pub delivered: u64,
    /// Bytes released.
    pub delivered_bytes: u64,
    /// Packets released before one offered earlier (what the receiver sees out of order).
    pub out_of_order: u64,
}

impl LinkCounters {
    /// Every packet dropped, whatever the cause.
    pub fn dropped(&self) -> u64 {
        self.dropped_random + self.dropped_burst + self.dropped_queue
    }
}

/// A packet in flight: released at `at`; `seq` is the order it was offered in (copies share
/// it) and breaks ties.
#[derive(Debug)]
struct Scheduled<P> {
    at: Instant,
    seq: u64,
    copy: u8,
    packet: P,
}

impl<P> PartialEq for Scheduled<P> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq, self.copy) == (other.at, other.seq, other.copy)
    }
}
impl<P> Eq for Scheduled<P> {}
impl<P> PartialOrd for Scheduled<P> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> Ord for Scheduled<P> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq, self.copy).cmp(&(other.at, other.seq, other.copy))
    }
}

/// One direction of a conditioned link: [`offer`](Self::offer) packets as they are sent,
/// [`poll`](Self::poll) the ones due. Deterministic: decisions come from the seeded generator
/// in offer order.
///
/// ```
/// use ark_link::{Conditioner, LinkConfig};
/// use std::time::{Duration, Instant};
///
/// let config = LinkConfig { delay: Duration::from_millis(20), ..LinkConfig::default() };
/// let mut link = Conditioner::new(config);
/// let start = Instant::now();
/// link.offer(start, b"hello".to_vec());
/// assert!(link.poll(start + Duration::from_millis(19)).is_none());
/// assert_eq!(link.poll(start + Duration::from_millis(20)).as_deref(), Some(&b"hello"[..]));
/// ```
#[derive(Debug)]
pub struct Conditioner<P> {
    config: LinkConfig,
    rng: Xoshiro256PlusPlus,
    in_bad_state: bool,
    queue: BinaryHeap<Reverse<Scheduled<P>>>,
    /// When the rate-limited link is free again.
    link_free: Option<Instant>,
    /// The latest release time given so far to a packet not reordered (keeps order under
    /// jitter).
    last_release: Option<Instant>,
    next_seq: u64,
    highest_released: Option<u64>,
    counters: LinkCounters,
}

impl<P: AsRef<[u8]> + Clone> Conditioner<P> {
    /// A link direction with `config`.
    pub fn new(config: LinkConfig) -> Self {
        Conditioner {
            rng: Xoshiro256PlusPlus::seed_from_u64(config.seed),
            config,
            in_bad_state: false,
            queue: BinaryHeap::new(),
            link_free: None,
            last_release: None,
            next_seq: 0,
            highest_released: None,
            counters: LinkCounters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// What the link did so far.
    pub fn counters(&self) -> LinkCounters {
        self.counters
    }

    /// Packets in flight.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// A packet sent at `now`: dropped, or scheduled (once or twice) for release.
    pub fn offer(&mut self, now: Instant, packet: P) {
        let len = packet.as_ref().len();
        self.counters.offered += 1;
        self.counters.offered_bytes += len as u64;
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.lost() {
            return;
        }
        if self.queue.len() >= self.config.max_in_flight {
            self.counters.dropped_queue += 1;
            return;
        }
        let Some(on_link) = self.serialize(now, len) else {
            self.counters.dropped_queue += 1;
            return;
        };
        let release = self.release_time(on_link);
        if self.config.duplicate > 0.0 && self.rng.random_bool(self.config.duplicate) {
            self.counters.duplicated += 1;
            self.schedule(release, seq, 1, packet.clone());
        }
        self.schedule(release, seq, 0, packet);
    }

    /// The next packet due at `now`, if any.
    pub fn poll(&mut self, now: Instant) -> Option<P> {
        if self.queue.peek().is_none_or(|Reverse(s)| s.at > now) {
            return None;
        }
        let Reverse(due) = self.queue.pop()?;
        self.counters.delivered += 1;
        self.counters.delivered_bytes += due.packet.as_ref().len() as u64;
        match self.highest_released {
            Some(highest) if due.seq < highest => self.counters.out_of_order += 1,
            _ => self.highest_released = Some(due.seq),
        }
        Some(due.packet)
    }

    /// When the next packet is due (`None`: nothing in flight).
    pub fn next_release(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse(s)| s.at)
    }

    /// Whether the next packet is lost (the burst chain moves once per packet).
    fn lost(&mut self) -> bool {
        if let Some(ge) = self.config.burst {
            let flip = if self.in_bad_state {
                ge.bad_to_good
            } else {
                ge.good_to_bad
            };
            if self.rng.random_bool(flip.clamp(0.0, 1.0)) {
                self.in_bad_state = !self.in_bad_state;
            }
            let p = if self.in_bad_state {
                ge.loss_bad
            } else {
                ge.loss_good
            };
            if self.rng.random_bool(p.clamp(0.0, 1.0)) {
                self.counters.dropped_burst += 1;
                return true;
            }
        }
        let p = self.config.loss.clamp(0.0, 1.0);
        if p > 0.0 && self.rng.random_bool(p) {
            self.counters.dropped_random += 1;
            return true;
        }
        false
    }

    /// When a packet of `len` bytes sent at `now` has left the rate-limited link; `None` if
    /// it would wait past the queue limit.
    fn serialize(&mut self, now: Instant, len: usize) -> Option<Instant> {
        let Some(rate) = self.config.rate_bits_per_second.filter(|r| *r > 0) else {
            return Some(now);
        };
        let start = self.link_free.map_or(now, |free| free.max(now));
        if start.duration_since(now) > self.config.queue_limit {
            return None;
        }
        let bits = len as u64 * 8;
        let done = start + Duration::from_nanos(bits.saturating_mul(1_000_000_000) / rate);
        self.link_free = Some(done);
        Some(done)
    }

    /// The release time of a packet off the link at `on_link`: delay, jitter (order kept),
    /// and the reorder hold-back.
    fn release_time(&mut self, on_link: Instant) -> Instant {
        let mut at = on_link + self.config.delay;
        let jitter = self.config.jitter.as_nanos() as i64;
        if jitter > 0 {
            let offset = self.rng.random_range(-jitter..=jitter);
            at = if offset >= 0 {
                at + Duration::from_nanos(offset as u64)
            } else {
                at.checked_sub(Duration::from_nanos(offset.unsigned_abs()))
                    .unwrap_or(on_link)
                    .max(on_link)
            };
        }
        if self.config.reorder > 0.0 && self.rng.random_bool(self.config.reorder.clamp(0.0, 1.0)) {
            self.counters.reordered += 1;
            return at + self.config.reorder_gap;
        }
        // Jitter alone does not reorder (as a real queue would not).
        if let Some(last) = self.last_release {
            at = at.max(last);
        }
        self.last_release = Some(at);
        at
    }

    fn schedule(&mut self, at: Instant, seq: u64, copy: u8, packet: P) {
        self.queue.push(Reverse(Scheduled {
            at,
            seq,
            copy,
            packet,
        }));
    }
}

/// What a relay (UDP or TCP) did in each direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Clients to the server.
    pub upstream: LinkCounters,
    /// The server to clients.
    pub downstream: LinkCounters,
    /// Datagrams from clients past [`MAX_CLIENTS`](crate::MAX_CLIENTS), dropped.
    pub refused_clients: u64,
    /// Datagrams the relay could not send on (the socket refused them), dropped.
    pub send_errors: u64,
}
