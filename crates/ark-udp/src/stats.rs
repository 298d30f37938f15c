//! Counters of a UDP socket (one per shard), readable from any thread.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Live counters of one socket.
        #[derive(Debug, Default)]
        pub(crate) struct UdpCounters {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A copy of a socket's (or a server's summed) counters.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct UdpStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl UdpCounters {
            pub(crate) fn snapshot(&self) -> UdpStats {
                UdpStats { $($name: self.$name.load(Ordering::Relaxed),)* }
            }

            pub(crate) fn add(&self, t: &UdpStats) {
                $(if t.$name != 0 { self.$name.fetch_add(t.$name, Ordering::Relaxed); })*
            }
        }

        impl UdpStats {
            /// Adds another socket's counters.
            pub fn merge(&mut self, other: &UdpStats) {
                $(self.$name += other.$name;)*
            }
        }
    };
}

counters! {
    /// Sessions opened (first datagram from a new peer).
    sessions_opened,
    /// Sessions closed (expired, evicted or stopped).
    sessions_closed,
    /// Sessions evicted to make room for a new peer (the table was at `max_sessions`).
    sessions_evicted,
    /// New peers turned away (only with `max_sessions` 0).
    sessions_rejected,
    /// Datagrams received and delivered.
    datagrams_in,
    /// Datagrams queued by handlers.
    datagrams_out,
    /// Datagrams actually sent.
    datagrams_sent,
    /// Payload bytes received.
    bytes_in,
    /// Datagrams that arrived truncated and were dropped.
    truncated,
    /// Receive syscalls (`recvmmsg` or `recvfrom`).
    receives,
    /// Send syscalls (`sendmmsg` or `sendto`).
    sends,
    /// Datagrams dropped by a send error (other than a full buffer).
    send_errors,
    /// Receive errors (ICMP-reported errors on connected sockets, ...).
    receive_errors,
}
