//! Round-trip time estimation and the retransmission timeout of RFC 6298.

use std::time::Duration;

/// RFC 6298's estimator: SRTT and RTTVAR from samples, RTO = SRTT + max(G, 4 RTTVAR), bounded
/// by a floor and a ceiling, doubled per expiry (back-off) until a new sample.
#[derive(Debug, Clone)]
pub(crate) struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    latest: Duration,
    min_rto: Duration,
    max_rto: Duration,
    initial_rto: Duration,
    backoff: u32,
}

/// The clock granularity G: this implementation's timers are driven at millisecond precision.
const GRANULARITY: Duration = Duration::from_millis(1);

impl RttEstimator {
    pub(crate) fn new(initial_rto: Duration, min_rto: Duration, max_rto: Duration) -> Self {
        RttEstimator {
            srtt: None,
            rttvar: Duration::ZERO,
            latest: Duration::ZERO,
            min_rto,
            max_rto,
            initial_rto,
            backoff: 0,
        }
    }

    /// A sample from a segment sent once (Karn's rule: never from a retransmitted one).
    pub(crate) fn sample(&mut self, rtt: Duration) {
        self.latest = rtt;
        self.backoff = 0;
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let delta = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + delta) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// The smoothed RTT (the initial RTO before any sample).
    pub(crate) fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.initial_rto)
    }

    /// The RTT variation (zero before any sample).
    pub(crate) fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// The latest sample.
    pub(crate) fn latest(&self) -> Duration {
        self.latest
    }

    /// The retransmission timeout now, back-off included.
    pub(crate) fn rto(&self) -> Duration {
        let base = match self.srtt {
            None => self.initial_rto,
            Some(srtt) => srtt + (self.rttvar * 4).max(GRANULARITY),
        };
        let base = base.clamp(self.min_rto, self.max_rto);
        (base * (1u32 << self.backoff.min(16))).min(self.max_rto)
    }

    /// New data was acknowledged: the path works again, the back-off ends (as QUIC resets its
    /// probe count on any acknowledgement; without it, a run of lost retransmissions, which
    /// give no RTT sample, would keep doubling the timeout).
    pub(crate) fn reset_backoff(&mut self) {
        self.backoff = 0;
    }

    /// The timer expired: double the timeout (RFC 6298 5.5).
    pub(crate) fn back_off(&mut self) {
        self.backoff = self.backoff.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn follows_rfc_6298() {
        let mut rtt = RttEstimator::new(ms(1000), ms(10), ms(60_000));
        assert_eq!(rtt.rto(), ms(1000), "initial RTO");
        rtt.sample(ms(100));
        // SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR.
        assert_eq!(rtt.rto(), ms(300));
        rtt.sample(ms(100));
        // RTTVAR = 3/4 * 50 + 1/4 * 0 = 37.5; SRTT = 100.
        assert_eq!(rtt.rto(), ms(250));
        rtt.back_off();
        assert_eq!(rtt.rto(), ms(500));
        rtt.back_off();
        assert_eq!(rtt.rto(), ms(1000));
        rtt.sample(ms(100));
        assert!(rtt.rto() < ms(300), "a new sample ends the back-off");
    }

    #[test]
    fn bounded_by_floor_and_ceiling() {
        let mut rtt = RttEstimator::new(ms(1000), ms(20), ms(2000));
        rtt.sample(Duration::from_micros(50));
        assert_eq!(rtt.rto(), ms(20));
        for _ in 0..40 {
            rtt.back_off();
        }
        assert_eq!(rtt.rto(), ms(2000));
    }
}
