//! quinn's own counters (`Connection::stats`), summed over one side's connections, for the
//! record's `rudp` object: the datagrams and bytes on the wire each way (so the wire bytes per
//! delivered byte can be computed without a relay), losses, congestion events, path MTU.

use std::sync::PoisonError;

use crate::server::Connections;

/// The counters of one side, summed over its connections.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Connections counted.
    pub connections: u64,
    /// UDP datagrams sent (a GSO batch counts each datagram).
    pub udp_tx_datagrams: u64,
    /// UDP payload bytes sent.
    pub udp_tx_bytes: u64,
    /// Send calls.
    pub udp_tx_ios: u64,
    /// UDP datagrams received.
    pub udp_rx_datagrams: u64,
    /// UDP payload bytes received.
    pub udp_rx_bytes: u64,
    /// Receive calls.
    pub udp_rx_ios: u64,
    /// QUIC packets sent.
    pub sent_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Bytes of those.
    pub lost_bytes: u64,
    /// Congestion events (the congestion window cut).
    pub congestion_events: u64,
    /// The smallest path MTU found (MTU discovery), over the connections.
    pub path_mtu_min: Option<u16>,
    /// The largest.
    pub path_mtu_max: Option<u16>,
}

impl Totals {
    /// The counters of `connections` now.
    pub fn of(connections: &Connections) -> Totals {
        let connections = connections.lock().unwrap_or_else(PoisonError::into_inner);
        let mut t = Totals::default();
        for stats in connections.iter().map(quinn::Connection::stats) {
            t.connections += 1;
            t.udp_tx_datagrams += stats.udp_tx.datagrams;
            t.udp_tx_bytes += stats.udp_tx.bytes;
            t.udp_tx_ios += stats.udp_tx.ios;
            t.udp_rx_datagrams += stats.udp_rx.datagrams;
            t.udp_rx_bytes += stats.udp_rx.bytes;
            t.udp_rx_ios += stats.udp_rx.ios;
            t.sent_packets += stats.path.sent_packets;
            t.lost_packets += stats.path.lost_packets;
            t.lost_bytes += stats.path.lost_bytes;
            t.congestion_events += stats.path.congestion_events;
            let mtu = stats.path.current_mtu;
            t.path_mtu_min = Some(t.path_mtu_min.map_or(mtu, |m| m.min(mtu)));
            t.path_mtu_max = Some(t.path_mtu_max.map_or(mtu, |m| m.max(mtu)));
        }
        t
    }

    /// As JSON fields.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "connections": self.connections,
            "udp_tx_datagrams": self.udp_tx_datagrams,
            "udp_tx_bytes": self.udp_tx_bytes,
            "udp_tx_ios": self.udp_tx_ios,
            "udp_rx_datagrams": self.udp_rx_datagrams,
            "udp_rx_bytes": self.udp_rx_bytes,
            "udp_rx_ios": self.udp_rx_ios,
            "sent_packets": self.sent_packets,
            "lost_packets": self.lost_packets,
            "lost_bytes": self.lost_bytes,
            "congestion_events": self.congestion_events,
            "path_mtu": self.path_mtu_min,
            "path_mtu_max": self.path_mtu_max,
        })
    }
}
