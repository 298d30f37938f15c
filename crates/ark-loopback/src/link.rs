//! `--link-*`: an ark-link relay between the clients and the server, for every protocol (a
//! UDP relay for udp, a TCP relay for the stream protocols), and what it did in the record.

use std::net::SocketAddr;
use std::time::Duration;

use ark_link::{GilbertElliott, LinkConfig, RelayCounters, TcpRelay, UdpRelay};
use serde::Serialize;

use crate::args::{LinkSettings, Protocol};

impl LinkSettings {
    /// One direction's model; `back` for the way from the server to the clients.
    pub fn config(&self, back: bool) -> LinkConfig {
        let ms = |v: f64| Duration::from_secs_f64(v / 1000.0);
        let (loss, burst) = if self.burst > 1.0 {
            (0.0, Some(GilbertElliott::with_mean(self.loss, self.burst)))
        } else {
            (self.loss, None)
        };
        LinkConfig {
            loss,
            burst,
            delay: ms(self.delay_ms),
            jitter: ms(self.jitter_ms),
            reorder: self.reorder,
            duplicate: self.duplicate,
            rate_bits_per_second: (self.rate_mbit > 0.0).then_some((self.rate_mbit * 1e6) as u64),
            seed: self.seed.wrapping_add(u64::from(back)),
            ..LinkConfig::default()
        }
    }
}

/// What the record says of the link: its settings and the relay's counters.
#[derive(Debug, Clone, Serialize)]
pub struct LinkRecord {
    /// The flags.
    pub settings: LinkSettings,
    /// `udp` or `tcp`.
    pub relay: &'static str,
    /// Clients to the server: what the link did (packets are datagrams for udp, the chunks
    /// the relay read for tcp; a stream's end counts as an empty one).
    pub upstream: serde_json::Value,
    /// The server to the clients.
    pub downstream: serde_json::Value,
    /// Bytes the endpoints put on the link (both ways, every datagram or chunk offered:
    /// payloads, headers, acknowledgements, retransmissions, parity) per payload byte
    /// delivered (each echo's payload counted once each way); `None` when nothing arrived.
    pub wire_bytes_per_delivered_byte: Option<f64>,
}

fn counters_json(c: &ark_link::LinkCounters) -> serde_json::Value {
    serde_json::json!({
        "offered": c.offered,
        "offered_bytes": c.offered_bytes,
        "dropped_random": c.dropped_random,
        "dropped_burst": c.dropped_burst,
        "dropped_queue": c.dropped_queue,
        "duplicated": c.duplicated,
        "reordered": c.reordered,
        "delivered": c.delivered,
        "delivered_bytes": c.delivered_bytes,
        "out_of_order": c.out_of_order,
    })
}

/// A running relay.
#[derive(Debug)]
pub enum Relay {
    /// For udp.
    Udp(UdpRelay),
    /// For the stream protocols.
    Tcp(TcpRelay),
}

impl Relay {
    /// Starts the relay `settings` ask for in front of `server`.
    ///
    /// # Errors
    /// The relay could not start.
    pub fn start(
        settings: &LinkSettings,
        protocol: Protocol,
        server: SocketAddr,
    ) -> std::io::Result<Relay> {
        let (up, down) = (settings.config(false), settings.config(true));
        Ok(match protocol {
            Protocol::Udp | Protocol::Rudp => Relay::Udp(UdpRelay::start(server, up, down)?),
            _ => Relay::Tcp(TcpRelay::start(server, up, down)?),
        })
    }

    /// Where the clients connect.
    pub fn local_addr(&self) -> SocketAddr {
        match self {
            Relay::Udp(relay) => relay.local_addr(),
            Relay::Tcp(relay) => relay.local_addr(),
        }
    }

    /// Stops the relay; the record's part. `delivered_bytes`: payload bytes delivered over
    /// the run, both ways.
    pub fn finish(self, settings: LinkSettings, delivered_bytes: u64) -> LinkRecord {
        let (relay, counters): (_, RelayCounters) = match self {
            Relay::Udp(relay) => ("udp", relay.stop()),
            Relay::Tcp(relay) => ("tcp", relay.stop()),
        };
        let offered = counters.upstream.offered_bytes + counters.downstream.offered_bytes;
        LinkRecord {
            settings,
            relay,
            wire_bytes_per_delivered_byte: (delivered_bytes > 0)
                .then(|| offered as f64 / delivered_bytes as f64),
            upstream: counters_json(&counters.upstream),
            downstream: counters_json(&counters.downstream),
        }
    }
}
