//! One KCP conversation and how it is driven: [`Wire`], KCP's output (one datagram per
//! write, retransmissions counted on the way out), and [`Link`], the KCP object with its
//! timer.
//!
//! Driving: before a batch of received datagrams is input, `update(now)` sets KCP's clock
//! (and runs its interval flush if due); after the batch and the application's sends,
//! `flush()` sends data and ACKs at once. The timer calls `update(now)` when `check()` says
//! so, and `flush()` when a retransmission is due before the next interval tick (the strongest
//! driving KCP allows: a retransmission waits for its RTO, not for the tick after it).

use std::io::{self, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kcp::{KCP_OVERHEAD, Kcp};
use mio::net::UdpSocket;

use crate::mode::Config;

/// KCP's data segment command (`IKCP_CMD_PUSH`).
const CMD_PUSH: u8 = 81;

/// The process's KCP clock origin.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// KCP's clock: milliseconds since the process's first call.
pub fn now_ms() -> u32 {
    epoch().elapsed().as_millis() as u32
}

/// The instant of KCP time `ms`.
pub fn instant_of(ms: u32) -> Instant {
    epoch() + Duration::from_millis(u64::from(ms))
}

/// What the wires of a run did, both ends, warm-up to drain.
#[derive(Debug, Default)]
pub struct Counters {
    /// Data segments sent again (by timeout or fast retransmit).
    pub retransmissions: AtomicU64,
    /// Datagrams the kernel refused (lost; KCP sends them again).
    pub refused: AtomicU64,
}

/// KCP's output: every write one datagram, to `peer` (a server session) or on a connected
/// socket (a client).
pub struct Wire {
    socket: Rc<UdpSocket>,
    peer: Option<SocketAddr>,
    /// One past the highest data segment number sent: a data segment below it is a
    /// retransmission (first transmissions go out in sequence order).
    sent_upto: u32,
    counters: Arc<Counters>,
}

impl Wire {
    /// KCP's output on `socket`, to `peer` if the socket is not connected.
    pub fn new(socket: Rc<UdpSocket>, peer: Option<SocketAddr>, counters: Arc<Counters>) -> Wire {
        Wire {
            socket,
            peer,
            sent_upto: 0,
            counters,
        }
    }

    /// Counts the retransmitted data segments of `datagram` (it may carry several segments).
    fn count_retransmissions(&mut self, datagram: &[u8]) {
        let mut rest = datagram;
        while rest.len() >= KCP_OVERHEAD {
            let field = |at: usize| {
                u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]])
            };
            let (sn, len) = (field(12), field(20) as usize);
            if rest[4] == CMD_PUSH {
                if sn < self.sent_upto {
                    self.counters
                        .retransmissions
                        .fetch_add(1, Ordering::Relaxed);
                } else {
                    self.sent_upto = sn + 1;
                }
            }
            rest = rest.get(KCP_OVERHEAD + len..).unwrap_or_default();
        }
    }
}

impl Write for Wire {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        self.count_retransmissions(datagram);
        let sent = match self.peer {
            Some(peer) => self.socket.send_to(datagram, peer),
            None => self.socket.send(datagram),
        };
        if sent.is_err() {
            // A full buffer or an ICMP error: the datagram is lost, and repaired as a loss.
            self.counters.refused.fetch_add(1, Ordering::Relaxed);
        }
        Ok(datagram.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A KCP object and when its timer is due.
pub struct Link {
    kcp: Kcp<Wire>,
    /// KCP time at which `update` is next due.
    due: u32,
}

impl Link {
    /// A conversation `conv` on `wire`, set up as `config` says and started at `now`.
    pub fn new(conv: u32, wire: Wire, config: &Config, now: u32) -> Link {
        let mut kcp = Kcp::new(conv, wire);
        config.apply(&mut kcp);
        let mut link = Link { kcp, due: now };
        link.on_timer(now);
        link
    }

    /// The conversation id.
    pub fn conv(&self) -> u32 {
        self.kcp.conv()
    }

    /// Sets KCP's clock to `now` before input (its round-trip samples and retransmission
    /// times are read from it); runs the interval flush if due.
    pub fn begin(&mut self, now: u32) {
        let _ = self.kcp.update(now);
    }

    /// Feeds one received datagram (one that is not KCP's, or not this conversation's, is
    /// dropped).
    pub fn input(&mut self, datagram: &[u8]) {
        let _ = self.kcp.input(datagram);
    }

    /// The next whole message into `buf`: its length, or `None` if none is complete.
    pub fn recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        self.kcp.recv(buf).ok()
    }

    /// Queues `message`; whether KCP took it.
    pub fn send(&mut self, message: &[u8]) -> bool {
        self.kcp.send(message).is_ok()
    }

    /// Sends what is queued and the ACKs owed, now; returns when the timer is next due.
    pub fn finish(&mut self, now: u32) -> u32 {
        let _ = self.kcp.flush();
        self.reschedule(now)
    }

    /// Runs the timer if due at `now`; returns when it is next due.
    pub fn on_timer(&mut self, now: u32) -> u32 {
        if self.due <= now {
            let _ = self.kcp.update(now);
            if self.kcp.check(now) == 0 {
                // A retransmission is due before the next interval tick.
                let _ = self.kcp.flush();
            }
            self.reschedule(now);
        }
        self.due
    }

    /// Whether KCP gave up (a segment sent 20 times unacknowledged).
    pub fn is_dead(&self) -> bool {
        self.kcp.is_dead_link()
    }

    fn reschedule(&mut self, now: u32) -> u32 {
        self.due = now + self.kcp.check(now).max(1);
        self.due
    }
}
