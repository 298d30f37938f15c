//! Reliable UDP zero-window peers: raw UDP sockets whose protocol is ark-rudp's sans-IO
//! `Connection` (a proper handshake, acknowledgements of everything, keep-alive pings), but
//! every acknowledgement block they send advertises a receive window of 0. Each sends the echo
//! server a message it then never takes back; the server must end each session at its
//! zero-window deadline ([`ZERO_WINDOW_TIMEOUT`], set on the soak's server) with a CLOSE, and
//! free what it held.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ark_rudp::{ClientProtection, CloseReason, Connection, Delivery, Event, RudpConfig};

use crate::shared::{Ctx, Rng};
use crate::tally::Ending;

/// The soak server's `RudpConfig::zero_window_timeout` (the default, 30 s, is longer than a
/// short soak's actors live).
pub const ZERO_WINDOW_TIMEOUT: Duration = Duration::from_secs(5);
/// How much later than the deadline the server's CLOSE may come, counted from the peer's
/// message leaving (its trip and the echo, the probes, the CLOSE's trip, a loaded machine).
const SLACK: Duration = Duration::from_secs(5);
/// The message each peer sends, for the server to echo into a window of 0: 25 fragments,
/// within the server's initial congestion window, so the peers add no burst to the server's
/// socket that could make the kernel drop other actors' datagrams.
const MESSAGE: usize = 30_000;
/// The peers' messages leave at least this far apart.
const STAGGER: Duration = Duration::from_millis(20);

/// One zero-window peer.
struct Peer {
    socket: UdpSocket,
    conn: Connection,
    /// When the server's CLOSE came (the session ended), and why.
    closed: Option<(Instant, Event)>,
    /// When its message left.
    sent: Option<Instant>,
}

impl Peer {
    fn new(server: SocketAddr, nonce: u64) -> std::io::Result<Peer> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.connect(server)?;
        socket.set_nonblocking(true)?;
        let protection = ClientProtection::Encrypted {
            server_key: crate::rudp::server_key()?,
            token: Vec::new(),
        };
        let config = Arc::new(RudpConfig::default());
        let mut conn = Connection::client(config, Instant::now(), nonce, protection);
        // Every acknowledgement it sends advertises a window of 0 (its datagrams are sealed:
        // the window is set before, not rewritten after).
        conn.advertise_zero_window(true);
        Ok(Peer {
            socket,
            conn,
            closed: None,
            sent: None,
        })
    }

    /// One round: receive, timers, the message once established (if `may_send`), send with
    /// window 0, events. Whether the message left now.
    fn pump(&mut self, buf: &mut [u8], may_send: bool) -> bool {
        let now = Instant::now();
        while let Ok(n) = self.socket.recv(buf) {
            let _ = self.conn.handle_datagram(now, &buf[..n]);
        }
        if self.conn.poll_timeout().is_some_and(|t| t <= now) {
            self.conn.handle_timeout(now);
        }
        let send = may_send && self.conn.is_established() && self.sent.is_none();
        if send && self.conn.send(&[0x5A; MESSAGE], Delivery::Ordered).is_ok() {
            self.sent = Some(now);
        }
        while let Some(m) = self.conn.recv() {
            self.conn.recycle(m);
        }
        while let Some(n) = self.conn.poll_transmit(now, buf) {
            let _ = self.socket.send(&buf[..n]);
        }
        while let Some(event) = self.conn.poll_event() {
            if matches!(event, Event::Closed(_)) && self.closed.is_none() {
                self.closed = Some((now, event));
            }
        }
        send && self.sent.is_some()
    }
}

/// Reliable UDP zero-window peers: 5–10 at once, each ended by the server within
/// [`ZERO_WINDOW_TIMEOUT`] (+ [`SLACK`]) of its message leaving, or the run fails.
pub fn zero_window(ctx: &Ctx, rng: &mut Rng) -> Ending {
    let started = Instant::now();
    let count = rng.range(5, 10) as usize;
    let mut peers = Vec::with_capacity(count);
    for _ in 0..count {
        match Peer::new(ctx.addrs.rudp, rng.next_u64()) {
            Ok(peer) => peers.push(peer),
            Err(e) => return Ending::failed("socket failed", started, format!("bind: {e}")),
        }
    }
    // The handshakes (with their retries), the staggered messages, the deadline, the slack.
    let limit = started + Duration::from_secs(10) + ZERO_WINDOW_TIMEOUT + SLACK;
    let mut buf = vec![0u8; 65_536];
    let mut last_message = started;
    while Instant::now() < limit && peers.iter().any(|p| p.closed.is_none()) {
        for peer in &mut peers {
            if peer.pump(&mut buf, last_message.elapsed() >= STAGGER) {
                last_message = Instant::now();
            }
        }
        thread::sleep(Duration::from_millis(2));
    }
    judge(&peers, started)
}

/// Every peer's session must have been established, sent its message and been ended by the
/// server's CLOSE in time.
fn judge(peers: &[Peer], started: Instant) -> Ending {
    let due = ZERO_WINDOW_TIMEOUT + SLACK;
    let mut slowest = Duration::ZERO;
    for (i, peer) in peers.iter().enumerate() {
        let (Some((at, event)), Some(sent)) = (&peer.closed, peer.sent) else {
            let why = format!(
                "zero-window peer {i} of {}: not ended within {:?} (message sent at {:?}, \
                 closed: {:?})",
                peers.len(),
                started.elapsed(),
                peer.sent.map(|t| t.duration_since(started)),
                peer.closed
            );
            return Ending::failed("zero-window session not ended", started, why);
        };
        let after = at.saturating_duration_since(sent);
        slowest = slowest.max(after);
        if after > due || !matches!(event, Event::Closed(CloseReason::PeerClosed)) {
            let why = format!(
                "zero-window peer {i}: {event:?} {after:?} after its message (due within {due:?})"
            );
            return Ending::failed("zero-window session ended wrong", started, why);
        }
    }
    Ending {
        messages: peers.len() as u64,
        seconds: slowest.as_secs_f64(),
        ..Ending::new("ended by the zero-window deadline", started)
    }
}
