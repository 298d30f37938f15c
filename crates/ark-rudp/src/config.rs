//! A connection's settings.

use std::time::Duration;

use ark_reactor::{RateLimit, RateLimits};

use crate::proto::congestion::Congestion;
use crate::proto::connection::{Delivery, SendError};
use crate::proto::fec::Fec;
use crate::proto::lane::{Lane, LaneMode};

/// The settings of reliable-UDP connections (both ends read their own).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RudpConfig {
    /// Largest fragment payload per datagram (default 1200 B). A DATA datagram adds 30 bytes
    /// of header (35 with FEC) and the 16-byte tag (encrypted; plaintext: the 8-byte session
    /// token): 1,246 bytes (1,251) of UDP payload; a PARITY datagram 81 bytes more than the
    /// fragment (73 in plaintext). Under IPv6 + UDP (48 bytes) a path MTU of 1280 takes a
    /// fragment of at most 1,186 bytes without FEC and 1,151 with it, encrypted (loopback
    /// and Ethernet take the default).
    pub mtu: usize,
    /// Largest reliable message (default 256 KiB); at most half the receive window in
    /// fragments.
    pub max_message: usize,
    /// Fragments a receiver holds past its delivery point, and so the most a sender may have
    /// unacknowledged (default 1024).
    pub receive_window: u16,
    /// Payload bytes a sender buffers (waiting or unacknowledged) before `send` refuses with
    /// `SendError::Full` (default 1 MiB).
    pub send_buffer: usize,
    /// The retransmission timeout before the first RTT sample (default 250 ms; RFC 6298 says
    /// 1 s for TCP on the open Internet). A client takes its first sample from the handshake.
    pub initial_rto: Duration,
    /// The floor of the retransmission timeout (default 10 ms: this transport is for
    /// latency; RFC 6298's 1 s floor is meant for TCP on the open Internet).
    pub min_rto: Duration,
    /// The ceiling of the backed-off retransmission timeout (default 4 s).
    pub max_rto: Duration,
    /// The congestion controller (default NewReno).
    pub congestion: Congestion,
    /// The congestion window at the start, in fragments (default 32).
    pub initial_window: u32,
    /// The congestion window's floor, in fragments (default 16: random loss on a lossy link
    /// never throttles a flow below 16 fragments per round trip).
    pub min_window: u32,
    /// Forward error correction of what this end sends (default `Fec::Off`).
    pub fec: Fec,
    /// A FEC group closes at most this long after its first datagram, or after half the
    /// smoothed RTT if that is shorter (default 50 ms, so half the RTT governs up to a
    /// 100 ms RTT): its parity then still arrives before ARQ could repair a loss. Longer
    /// groups cost fewer parity bytes per datagram and repair later.
    pub fec_max_delay: Duration,
    /// A FEC group waits at least this long for data (default 1 ms), even when half the RTT
    /// is shorter: on a fast link ARQ repairs within about the RTO floor anyway, and groups
    /// of one or two datagrams would cost a parity datagram each.
    pub fec_min_delay: Duration,
    /// `Fec::Adaptive`: the probability, at the measured loss, that a group has more losses
    /// than parity (ARQ repairs those) — the policy's latency/overhead trade-off (default
    /// 0.05; 0.01 buys a lower p99 for more parity, 0.2 fewer bytes for a higher one).
    pub fec_residual: f64,
    /// With nothing sent for this long, a keep-alive goes out (default 1 s).
    pub keep_alive: Duration,
    /// With nothing received for this long, the peer is taken for dead (default 10 s).
    pub idle_timeout: Duration,
    /// With data unacknowledged and no acknowledgement progress for this long, the peer is
    /// taken for dead (default 10 s).
    pub unacked_timeout: Duration,
    /// The handshake must finish within this (default 10 s; HELLO is sent again after 250 ms,
    /// doubling up to the initial RTO).
    pub handshake_timeout: Duration,
    /// A server's cookies are good for this long (default 10 s).
    pub cookie_lifetime: Duration,
    /// A close ([`RudpSession::close`](crate::RudpSession::close)) or stop keeps sending and
    /// repeating what was queued until the peer acknowledged all of it, for at most this long
    /// (default 5 s, as ark-udp's stop); then the CLOSE goes, repeated until answered (up to 5
    /// times, the RTO apart and doubling, at most 500 ms apart). What was still
    /// unacknowledged at the deadline is reported (`CloseReason::Cut`, `RudpStats::cut_bytes`).
    pub close_timeout: Duration,
    /// With data waiting and the peer's receive window at zero (nothing in flight), window
    /// probes go out (an ACK with PING, the RTO apart and doubling up to `max_rto`); if the
    /// window stays zero this long, the session ends with `CloseReason::ZeroWindow` and its
    /// buffers are freed (default 30 s, as ark-tcp's write stall).
    pub zero_window_timeout: Duration,
    /// A server holds at most this many sessions per source IP address (default 64); a valid
    /// HELLO past it is refused as one past `max_sessions` is, and counted in
    /// `RudpStats::refused_per_ip`. 64 leaves room for many clients behind one NAT while one
    /// address can take at most 64 of the 10,000 sessions (and 64 × about 2.2 MiB of
    /// buffers). Sessions that closed and still answer a repeated CLOSE (for at most 2 s)
    /// count too.
    pub max_sessions_per_ip: usize,
    /// A server holds at most this many sessions (default 10,000); a valid HELLO past it gets
    /// no session and no answer (the client's handshake times out), and is counted in
    /// `RudpStats::refused_sessions`. A session's memory is bounded by its send buffer
    /// and its receive window, so this bounds the server's.
    pub max_sessions: usize,
    /// Receive with UDP GRO where the kernel has it (default on): a bulk flow's datagrams
    /// come up several per buffer. It takes receive slots of a whole UDP datagram
    /// (`ark_udp::GRO_MIN_DATAGRAM`, 64 KiB) instead of `mtu + 128` bytes: about 2 MiB per
    /// socket with ark-udp's default batch of 32. Sending uses GSO either way (ark-udp's
    /// `UdpConfig::gso`): a connection's same-size datagrams leave as trains.
    pub gro: bool,
    /// Each session's own rate limits, each way (default none; the builders'
    /// `rate_limits` set it, `RudpSession::set_rate_limits` changes one session's): writes
    /// are paced (what the limit does not cover waits in the send buffer), reads limit the
    /// window advertised to the peer. A burst under the largest datagram (`mtu` + 128 bytes)
    /// is raised to it. See docs/rudp.md, "Rate limits".
    pub rate_limits: RateLimits,
    /// The session's lanes (default one reliable-ordered lane; at most
    /// [`MAX_LANES`](crate::MAX_LANES)): independent orders, each with its mode, priority
    /// and weight, which `Delivery::Lane` sends on (`Delivery::Ordered` and `Unordered` use
    /// lane 0). Both ends should configure the same lanes: a peer sending on a lane this end
    /// does not have ends the session (`CloseReason::ProtocolViolation`). Priority and weight
    /// are the sender's own. See docs/rudp.md, "Lanes".
    pub lanes: Vec<Lane>,
}

impl Default for RudpConfig {
    fn default() -> Self {
        RudpConfig {
            mtu: 1200,
            max_message: 256 * 1024,
            receive_window: 1024,
            send_buffer: 1024 * 1024,
            initial_rto: Duration::from_millis(250),
            min_rto: Duration::from_millis(10),
            max_rto: Duration::from_secs(4),
            congestion: Congestion::NewReno,
            initial_window: 32,
            min_window: 16,
            fec: Fec::Off,
            fec_max_delay: Duration::from_millis(50),
            fec_min_delay: Duration::from_millis(1),
            fec_residual: 0.05,
            keep_alive: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(10),
            unacked_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            cookie_lifetime: Duration::from_secs(10),
            close_timeout: Duration::from_secs(5),
            zero_window_timeout: Duration::from_secs(30),
            max_sessions_per_ip: 64,
            max_sessions: 10_000,
            gro: true,
            rate_limits: RateLimits::default(),
            lanes: vec![Lane::ordered()],
        }
    }
}

impl RudpConfig {
    /// The UDP receive slot: a whole UDP datagram with GRO (a coalesced buffer must fit),
    /// else the largest datagram this transport sends.
    pub(crate) fn receive_slot(&self) -> usize {
        if self.gro {
            ark_udp::GRO_MIN_DATAGRAM
        } else {
            self.mtu + 128
        }
    }

    /// The largest datagram a connection writes (a PARITY one is the largest: the fragment
    /// and 68 bytes), with room to spare; a rate limit's burst is at least this.
    pub(crate) fn max_datagram(&self) -> usize {
        self.mtu + 128
    }

    /// `limits` with every burst at least one datagram: a datagram goes whole or waits.
    pub(crate) fn clamp_limits(&self, limits: RateLimits) -> RateLimits {
        let floor = self.max_datagram() as u64;
        let clamp = |l: Option<RateLimit>| l.map(|l| l.with_burst(l.burst.max(floor)));
        RateLimits {
            read: clamp(limits.read),
            write: clamp(limits.write),
        }
    }

    /// The lanes the session has: `lanes`, cut to `MAX_LANES`, at least one.
    pub(crate) fn lane_count(&self) -> usize {
        self.lanes.len().clamp(1, crate::proto::lane::MAX_LANES)
    }

    /// The mode of `lane`, if the session has it (lane 0 always: ordered by default).
    pub(crate) fn lane_mode(&self, lane: u8) -> Option<LaneMode> {
        let lane = usize::from(lane);
        if lane >= self.lane_count() {
            return None;
        }
        Some(self.lanes.get(lane).map_or(LaneMode::Ordered, |l| l.mode))
    }

    /// The largest message `delivery` takes: an unreliable or sequenced one is one datagram
    /// (`mtu`), a reliable one [`message_limit`](Self::message_limit).
    ///
    /// # Errors
    /// [`SendError::NoLane`] for a lane the session does not have.
    pub(crate) fn limit_for(&self, delivery: Delivery) -> Result<usize, SendError> {
        let unreliable = match delivery {
            Delivery::Ordered | Delivery::Unordered => false,
            Delivery::Unreliable => true,
            Delivery::Lane(lane) => {
                let mode = self.lane_mode(lane).ok_or(SendError::NoLane {
                    lane,
                    lanes: self.lane_count(),
                })?;
                mode == LaneMode::Sequenced
            }
        };
        Ok(if unreliable {
            self.mtu
        } else {
            self.message_limit()
        })
    }

    /// The largest message these settings can carry: `max_message`, cut to half the receive
    /// window in fragments.
    pub(crate) fn message_limit(&self) -> usize {
        self.max_message
            .min(usize::from(self.receive_window / 2).max(1) * self.mtu)
    }
}
