//! Datagram size limits.

use std::net::SocketAddr;

/// Largest UDP payload over IPv4: 65,535 − 20 (IP header) − 8 (UDP header).
pub const MAX_PAYLOAD_V4: usize = 65_507;
/// Largest UDP payload over IPv6 (without jumbograms): 65,535 − 8 (UDP header).
pub const MAX_PAYLOAD_V6: usize = 65_527;

/// The largest payload a datagram to `addr` can carry.
pub fn max_payload(addr: &SocketAddr) -> usize {
    match addr {
        SocketAddr::V4(_) => MAX_PAYLOAD_V4,
        SocketAddr::V6(_) => MAX_PAYLOAD_V6,
    }
}

/// The largest IPv4 payload that fits an MTU without fragmentation (`mtu − 28`; 1,472 at
/// 1,500). 0 if the MTU is too small for the headers.
pub fn unfragmented_payload_v4(mtu: usize) -> usize {
    mtu.saturating_sub(20 + 8)
}

/// The largest IPv6 payload that fits an MTU without fragmentation (`mtu − 48`; 1,452 at
/// 1,500).
pub fn unfragmented_payload_v6(mtu: usize) -> usize {
    mtu.saturating_sub(40 + 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets() {
        assert_eq!(unfragmented_payload_v4(1500), 1472);
        assert_eq!(unfragmented_payload_v6(1500), 1452);
        assert_eq!(unfragmented_payload_v4(10), 0);
        assert_eq!(max_payload(&"127.0.0.1:1".parse().unwrap()), 65_507);
        assert_eq!(max_payload(&"[::1]:1".parse().unwrap()), 65_527);
    }
}
