//! The sans-IO part of a UDP socket: its sessions (per peer for a server, one for a client
//! or cast socket), their handlers, timers, expiry and the handles' requests. It takes the
//! datagrams a receive gave and the time, and queues what the handlers send; the driver
//! (`driver/socket.rs`) owns the socket, makes the syscalls and keeps the reactor timers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crate::config::UdpConfig;
use crate::driver::sys::RecvBatch;
use crate::error::{CloseReason, DatagramError};
use crate::handler::{SessionIo, UdpHandler, UdpSession};
use crate::proto::peers::Peers;
use crate::stats::UdpStats;

/// Makes the handler of a new peer's session.
pub(crate) type Factory<H> = Arc<dyn Fn(SocketAddr) -> H + Send + Sync>;

/// What kind of socket the sessions belong to.
pub(crate) enum Mode<H> {
    /// Sessions keyed by peer address, created on a peer's first datagram.
    Server {
        sessions: Peers<H>,
        factory: Factory<H>,
    },
    /// A connected socket with one session.
    Client {
        peer: SocketAddr,
        handler: H,
        opened: bool,
    },
    /// An unconnected socket with one handler for every sender.
    Cast { handler: H, opened: bool },
}

impl<H> Mode<H> {
    pub(crate) fn server(factory: Factory<H>) -> Self {
        Mode::Server {
            sessions: Peers::default(),
            factory,
        }
    }

    pub(crate) fn cast(handler: H) -> Self {
        Mode::Cast {
            handler,
            opened: false,
        }
    }

    pub(crate) fn client(peer: SocketAddr, handler: H) -> Self {
        Mode::Client {
            peer,
            handler,
            opened: false,
        }
    }
}

/// The session's serial of a client's or cast socket's one handler.
const SINGLE: u64 = 0;

/// A socket's sessions and what every session view lends them.
pub(crate) struct UdpSessions<H> {
    mode: Mode<H>,
    local: SocketAddr,
    config: Arc<UdpConfig>,
    /// Send queue, timers, handles' state, time.
    pub(crate) io: SessionIo,
}

impl<H: UdpHandler> UdpSessions<H> {
    pub(crate) fn new(
        mode: Mode<H>,
        local: SocketAddr,
        config: Arc<UdpConfig>,
        io: SessionIo,
    ) -> Self {
        UdpSessions {
            mode,
            local,
            config,
            io,
        }
    }

    /// Whether sessions are per peer (a server), which then expire.
    pub(crate) fn is_server(&self) -> bool {
        matches!(self.mode, Mode::Server { .. })
    }

    /// Delivers the datagrams of the last receive (a server opens a session for a new peer,
    /// evicting the least recently seen at `max_sessions`).
    pub(crate) fn deliver(&mut self, now: Instant, recv: &RecvBatch, tally: &mut UdpStats) {
        let UdpSessions {
            io,
            mode,
            config,
            local,
        } = self;
        for i in 0..recv.received.len() {
            let received = recv.received[i];
            let datagram = recv.datagram(i);
            let connected = matches!(mode, Mode::Client { .. });
            let mut session = UdpSession {
                peer: received.from,
                local: *local,
                connected,
                serial: SINGLE,
                io,
                received: &recv.data,
            };
            let handler = match mode {
                Mode::Server { sessions, factory } => {
                    if let Some(peer) = sessions.get_mut(&received.from) {
                        peer.last_seen = now;
                        peer.referenced = true;
                        session.serial = peer.serial;
                        &mut peer.handler
                    } else {
                        if received.truncated {
                            tally.truncated += 1;
                            continue;
                        }
                        if config.max_sessions == 0 {
                            tally.sessions_rejected += 1;
                            continue;
                        }
                        if sessions.len() >= config.max_sessions
                            && let Some((_, mut evicted)) = sessions.evict()
                        {
                            evicted.on_close(&CloseReason::Evicted);
                            tally.sessions_evicted += 1;
                            tally.sessions_closed += 1;
                        }
                        let handler = factory(received.from);
                        let peer = sessions.insert(received.from, handler, now);
                        session.serial = peer.serial;
                        peer.handler.on_open(&mut session);
                        tally.sessions_opened += 1;
                        &mut peer.handler
                    }
                }
                Mode::Client { handler, .. } | Mode::Cast { handler, .. } => handler,
            };
            if received.truncated {
                tally.truncated += 1;
                handler
                    .on_datagram_error(&mut session, &DatagramError::Truncated { max: recv.slot });
                continue;
            }
            tally.datagrams_in += 1;
            tally.bytes_in += datagram.len() as u64;
            handler.on_message(&mut session, datagram);
        }
    }

    /// Ends the server sessions not seen for `session_expiry`.
    pub(crate) fn expire(&mut self, now: Instant, tally: &mut UdpStats) {
        let Some(expiry) = self.config.session_expiry else {
            return;
        };
        if let Mode::Server { sessions, .. } = &mut self.mode {
            sessions.retain(
                |peer| now.saturating_duration_since(peer.last_seen) < expiry,
                |_, mut peer| {
                    peer.handler.on_close(&CloseReason::Expired(expiry));
                    tally.sessions_closed += 1;
                },
            );
        }
    }

    /// Runs `f` for the session of `peer` (with `serial`, when given), if it still exists.
    fn with_session(
        &mut self,
        peer: SocketAddr,
        serial: Option<u64>,
        f: impl FnOnce(&mut H, &mut UdpSession<'_>),
    ) {
        let local = self.local;
        let (handler, serial, connected) = match &mut self.mode {
            Mode::Server { sessions, .. } => match sessions.get_mut(&peer) {
                Some(p) if serial.is_none_or(|s| s == p.serial) => {
                    (&mut p.handler, p.serial, false)
                }
                _ => return,
            },
            Mode::Client { handler, .. } => (handler, SINGLE, true),
            Mode::Cast { handler, .. } => (handler, SINGLE, false),
        };
        let mut session = UdpSession {
            peer,
            local,
            connected,
            serial,
            io: &mut self.io,
            received: &[],
        };
        f(handler, &mut session);
    }

    /// The single handler's peer (client: the server; cast: the socket's own address).
    fn single_peer(&self) -> Option<SocketAddr> {
        match &self.mode {
            Mode::Client { peer, .. } => Some(*peer),
            Mode::Cast { .. } => Some(self.local),
            Mode::Server { .. } => None,
        }
    }

    /// A client's or cast socket's one session opens on the socket's first turn.
    pub(crate) fn open_single(&mut self, tally: &mut UdpStats) {
        let opened = match &mut self.mode {
            Mode::Client { opened, .. } | Mode::Cast { opened, .. } => opened,
            Mode::Server { .. } => return,
        };
        if !std::mem::replace(opened, true) {
            tally.sessions_opened += 1;
            let peer = self.single_peer().unwrap_or(self.local);
            self.with_session(peer, None, |h, s| h.on_open(s));
        }
    }

    /// Applies what handles asked: their datagrams join the queue, their closes end
    /// sessions. Returns whether the socket itself is to stop (a client's or cast socket's
    /// one session was closed).
    pub(crate) fn handle_requests(&mut self, tally: &mut UdpStats) -> bool {
        let Some(requests) = self.io.shared.take() else {
            return false;
        };
        for (to, payload) in requests.datagrams {
            self.io.out.push(to, &payload);
            tally.datagrams_out += 1;
        }
        if requests.wake
            && let Some(peer) = self.single_peer()
        {
            self.with_session(peer, None, |h, s| h.on_wake(s));
        }
        let mut stop = false;
        for peer in requests.closes {
            match &mut self.mode {
                Mode::Server { sessions, .. } => {
                    if let Some(mut p) = sessions.remove(&peer) {
                        p.handler.on_close(&CloseReason::Local);
                        tally.sessions_closed += 1;
                    }
                }
                // A client's or cast socket's one session is the socket.
                _ => stop = true,
            }
        }
        stop
    }

    /// Runs the handlers' timers that are due.
    pub(crate) fn fire_timers(&mut self, now: Instant) {
        while let Some((timer, (peer, serial))) = self.io.timers.pop_due(now) {
            self.with_session(peer, Some(serial), |h, s| h.on_timer(s, timer));
        }
    }

    /// A stop began: every session's `on_stopping` (what they send still leaves).
    pub(crate) fn stopping(&mut self) {
        for peer in self.peers() {
            self.with_session(peer, None, |h, s| h.on_stopping(s));
        }
    }

    /// The socket drains: every session's handler hears `on_drain`.
    pub(crate) fn draining(&mut self) {
        for peer in self.peers() {
            self.with_session(peer, None, |h, s| h.on_drain(s));
        }
    }

    /// Whether a client's or cast socket's handler still has work under way while the socket
    /// drains or stops ([`UdpHandler::lingers`](crate::UdpHandler::lingers)); a server's
    /// sessions never hold its socket.
    pub(crate) fn lingers(&self) -> bool {
        match &self.mode {
            Mode::Client {
                handler, opened, ..
            }
            | Mode::Cast { handler, opened } => *opened && handler.lingers(),
            Mode::Server { .. } => false,
        }
    }

    /// Every session's peer.
    fn peers(&mut self) -> Vec<SocketAddr> {
        match &mut self.mode {
            Mode::Server { sessions, .. } => sessions.iter_mut().map(|(a, _)| *a).collect(),
            _ => self.single_peer().into_iter().collect(),
        }
    }

    /// The end of a turn: a client's or cast socket's handler hears `on_turn_end`.
    pub(crate) fn turn_end(&mut self) {
        if let Some(peer) = self.single_peer() {
            self.with_session(peer, None, |h, s| h.on_turn_end(s));
        }
    }

    /// The socket closed: every session ends with `on_close(Stopped)`; returns how many.
    pub(crate) fn close_all(&mut self) -> u64 {
        let mut closed = 0;
        match &mut self.mode {
            Mode::Server { sessions, .. } => {
                for (_, mut handler) in sessions.drain() {
                    handler.on_close(&CloseReason::Stopped);
                    closed += 1;
                }
            }
            Mode::Client {
                handler, opened, ..
            }
            | Mode::Cast { handler, opened } => {
                if *opened {
                    handler.on_close(&CloseReason::Stopped);
                    closed += 1;
                }
            }
        }
        closed
    }
}
