//! A connection's counters and estimates, and how a socket's are summed.

use std::time::Duration;

/// Counters and estimates of one connection, or of several summed with [`add`](Self::add).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct RudpStats {
    /// DATA datagrams sent (first transmissions and retransmissions).
    pub data_sent: u64,
    /// DATA datagrams sent again.
    pub retransmissions: u64,
    /// PARITY datagrams sent.
    pub parity_sent: u64,
    /// ACK datagrams sent (keep-alives and window probes included).
    pub acks_sent: u64,
    /// Data datagrams rebuilt from parity.
    pub fec_recovered: u64,
    /// Fragments that arrived more than once.
    pub duplicates: u64,
    /// Datagrams not understood.
    pub malformed: u64,
    /// Acknowledgements that named data never sent (ignored).
    pub forged_acks: u64,
    /// Datagrams that did not open under the session's keys (encrypted) or lacked its token
    /// (plaintext), answers to the handshake that did not verify, and handshake datagrams
    /// with another nonce: dropped unread (they close, feed and refresh nothing).
    pub unauthenticated: u64,
    /// Authenticated datagrams whose packet number was seen before or is older than the
    /// replay window: dropped before they did anything.
    pub replays: u64,
    /// Valid handshakes a server refused because it held `RudpConfig::max_sessions` already.
    pub refused_sessions: u64,
    /// Valid handshakes a server refused because their address held
    /// `RudpConfig::max_sessions_per_ip` already.
    pub refused_per_ip: u64,
    /// Handshakes a server refused for their protection: a client asking for the other
    /// (plaintext against encrypted), a first message that did not verify under the server's
    /// key, or a connect token its check refused.
    pub refused_handshakes: u64,
    /// New handshakes from the address of a session that was still heard from lately (see
    /// `RudpConfig::keep_alive`): refused, the session kept (an on-path attacker who spoofs
    /// the address cannot end it so).
    pub refused_replacements: u64,
    /// Sends refused with `SendError::Full` (by `RudpSession` or a handle).
    pub refused_full: u64,
    /// Sends refused with `SendError::TooLarge`.
    pub refused_too_large: u64,
    /// Sends refused with `SendError::Closed`.
    pub refused_closed: u64,
    /// Sends refused with `SendError::NoLane`.
    pub refused_no_lane: u64,
    /// Messages of a sequenced lane dropped on arrival because a newer one on their lane
    /// was delivered first (newest wins).
    pub stale_sequenced: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// Payload bytes of reliable messages accepted for sending.
    pub bytes_accepted: u64,
    /// Payload bytes of reliable messages the peer acknowledged.
    pub bytes_acked: u64,
    /// Payload bytes of reliable messages accepted and never acknowledged because a close or
    /// stop reached its deadline (`RudpConfig::close_timeout`) or the session ended first.
    pub cut_bytes: u64,
    /// CLOSE datagrams sent again because the peer had not answered.
    pub close_retries: u64,
    /// Closes whose CLOSE was never answered (sent the most times, then given up).
    pub closes_unanswered: u64,
    /// Sessions ended because the peer's receive window stayed zero for
    /// `RudpConfig::zero_window_timeout`.
    pub zero_window_closes: u64,
    /// Bytes of the datagrams sent after the handshake, whole (header and session token; not
    /// the IP and UDP headers): what a write rate limit counts.
    pub bytes_sent: u64,
    /// Bytes of the datagrams received after the handshake that were authenticated and fresh,
    /// whole: what a read rate limit counts.
    pub bytes_received: u64,
    /// The sessions whose estimates (`srtt`, `rttvar`, `srtt_max`, `loss_estimate`) are in
    /// this value: 1 for one connection's own; for a socket's sum, its live sessions (closed
    /// sessions' counters are summed, their estimates are not).
    pub sessions: u64,
    /// The loss rate measured from the peer's receive count, 0..1 (a sum: the mean over
    /// `sessions`).
    pub loss_estimate: f64,
    /// Smoothed RTT (a sum: the mean over `sessions`).
    pub srtt: Duration,
    /// RTT variation (a sum: the mean over `sessions`).
    pub rttvar: Duration,
    /// The largest smoothed RTT of the `sessions` (one connection's: its own).
    pub srtt_max: Duration,
    /// Bytes a second sent (as `bytes_sent`) over the last whole second (a sum: the
    /// `sessions`' total).
    pub send_rate: u64,
    /// Bytes a second received (as `bytes_received`) over the last whole second (a sum: the
    /// `sessions`' total).
    pub receive_rate: u64,
    /// How long a message sent now waits before it leaves: the payload bytes queued and never
    /// sent, over the session's own write limit (without one: over `send_rate`). `None`: bytes
    /// are queued and nothing left in the last second, so no estimate (or a sum of no
    /// sessions). A sum: the longest of the `sessions`, `None` if one of them has none.
    pub send_queue_delay: Option<Duration>,
}

/// The mean of `a` over `na` sessions and `b` over `nb`.
fn mean_duration(a: Duration, na: u64, b: Duration, nb: u64) -> Duration {
    let total = u128::from(na + nb).max(1);
    let nanos = (a.as_nanos() * u128::from(na) + b.as_nanos() * u128::from(nb)) / total;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl RudpStats {
    /// Adds `other`'s counters, and merges the estimates: `srtt`, `rttvar` and
    /// `loss_estimate` become the mean over the sessions of both (weighted by
    /// [`sessions`](Self::sessions)), `srtt_max` the larger, `send_rate` and `receive_rate`
    /// the sum, `send_queue_delay` the longer. A value with `sessions` 0 brings counters only.
    pub fn add(&mut self, other: &RudpStats) {
        let (na, nb) = (self.sessions, other.sessions);
        if nb > 0 {
            self.send_queue_delay = match (self.send_queue_delay, other.send_queue_delay) {
                _ if na == 0 => other.send_queue_delay,
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            self.send_rate += other.send_rate;
            self.receive_rate += other.receive_rate;
            self.srtt = mean_duration(self.srtt, na, other.srtt, nb);
            self.rttvar = mean_duration(self.rttvar, na, other.rttvar, nb);
            self.loss_estimate = (self.loss_estimate * na as f64 + other.loss_estimate * nb as f64)
                / (na + nb) as f64;
            self.srtt_max = self.srtt_max.max(other.srtt_max);
            self.sessions = na + nb;
        }
        self.add_counters(other);
    }

    /// The counters alone (not the estimates) of `other`.
    fn add_counters(&mut self, other: &RudpStats) {
        self.data_sent += other.data_sent;
        self.retransmissions += other.retransmissions;
        self.parity_sent += other.parity_sent;
        self.acks_sent += other.acks_sent;
        self.fec_recovered += other.fec_recovered;
        self.duplicates += other.duplicates;
        self.malformed += other.malformed;
        self.forged_acks += other.forged_acks;
        self.unauthenticated += other.unauthenticated;
        self.replays += other.replays;
        self.refused_sessions += other.refused_sessions;
        self.refused_per_ip += other.refused_per_ip;
        self.refused_handshakes += other.refused_handshakes;
        self.refused_replacements += other.refused_replacements;
        self.refused_full += other.refused_full;
        self.refused_too_large += other.refused_too_large;
        self.refused_closed += other.refused_closed;
        self.refused_no_lane += other.refused_no_lane;
        self.stale_sequenced += other.stale_sequenced;
        self.messages_delivered += other.messages_delivered;
        self.bytes_accepted += other.bytes_accepted;
        self.bytes_acked += other.bytes_acked;
        self.cut_bytes += other.cut_bytes;
        self.close_retries += other.close_retries;
        self.closes_unanswered += other.closes_unanswered;
        self.zero_window_closes += other.zero_window_closes;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
    }

    /// The same counters without estimates (`sessions` 0): what a closed session leaves in a
    /// socket's sum.
    pub(crate) fn counters_only(mut self) -> RudpStats {
        self.sessions = 0;
        self.srtt = Duration::ZERO;
        self.rttvar = Duration::ZERO;
        self.srtt_max = Duration::ZERO;
        self.loss_estimate = 0.0;
        self.send_rate = 0;
        self.receive_rate = 0;
        self.send_queue_delay = None;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(srtt_ms: u64, loss: f64, sent: u64) -> RudpStats {
        RudpStats {
            data_sent: sent,
            send_rate: sent * 100,
            receive_rate: sent * 10,
            send_queue_delay: Some(Duration::from_millis(sent)),
            sessions: 1,
            srtt: Duration::from_millis(srtt_ms),
            rttvar: Duration::from_millis(srtt_ms / 2),
            srtt_max: Duration::from_millis(srtt_ms),
            loss_estimate: loss,
            ..RudpStats::default()
        }
    }

    #[test]
    fn a_sum_of_one_session_has_its_estimates_and_of_several_their_mean() {
        let mut total = RudpStats::default();
        total.add(&one(10, 0.1, 5));
        assert_eq!(total, one(10, 0.1, 5), "one session: its own values");
        total.add(&one(30, 0.3, 7));
        assert_eq!(total.sessions, 2);
        assert_eq!(total.data_sent, 12);
        assert_eq!(total.srtt, Duration::from_millis(20));
        assert_eq!(total.rttvar, Duration::from_millis(10));
        assert_eq!(total.srtt_max, Duration::from_millis(30));
        assert!((total.loss_estimate - 0.2).abs() < 1e-9);
        assert_eq!((total.send_rate, total.receive_rate), (1_200, 120));
        assert_eq!(total.send_queue_delay, Some(Duration::from_millis(7)));
        // A closed session's counters count, its estimates do not.
        total.add(&one(1000, 1.0, 1).counters_only());
        assert_eq!((total.sessions, total.data_sent), (2, 13));
        assert_eq!(total.srtt, Duration::from_millis(20));
        assert!((total.loss_estimate - 0.2).abs() < 1e-9);
        assert_eq!(total.send_rate, 1_200);
        // A session with bytes queued and nothing sent: no estimate for the sum either.
        let stuck = RudpStats {
            send_queue_delay: None,
            ..one(10, 0.0, 0)
        };
        total.add(&stuck);
        assert_eq!(total.send_queue_delay, None);
    }
}
