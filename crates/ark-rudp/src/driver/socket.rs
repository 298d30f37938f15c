//! The thin driver: connections on one ark-udp socket (a server's unconnected socket, or a
//! client's connected one). Datagrams go into the connections; at the end of each turn every
//! connection touched delivers its messages and events to its handler and sends what it has.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use ark_reactor::TimerId;
use ark_udp::{UdpHandler, UdpSession};

use crate::config::RudpConfig;
use crate::proto::connection::{CloseReason, Connection, Event, RudpStats};
use crate::proto::listener::{Incoming, Listener};
use crate::session::{Command, RudpHandler, RudpSession, RudpShared, TimerOwner, Timers};

/// Makes a new session's handler.
pub(crate) type Factory<H> = Box<dyn FnMut(SocketAddr) -> H + Send>;

/// One connection and its handler.
struct Entry<H> {
    conn: Connection,
    handler: H,
    /// The connection's own timer and its deadline.
    timer: Option<(TimerId, Instant)>,
    opened: bool,
    /// In the driver's `dirty` list (touched this turn).
    dirty: bool,
}

/// The server's or the client's side.
pub(crate) enum Role<H> {
    Server {
        listener: Box<Listener>,
        factory: Factory<H>,
    },
    /// A client's one connection, made when the socket opens.
    Client {
        pending: Option<Box<(Connection, H)>>,
    },
}

/// The connections of one socket.
pub(crate) struct Driver<H> {
    role: Role<H>,
    entries: HashMap<SocketAddr, Entry<H>>,
    /// Connections touched this turn.
    dirty: Vec<SocketAddr>,
    timers: Timers,
    /// The socket timer set at the earliest deadline.
    armed: Option<(TimerId, Instant)>,
    mailbox: Arc<RudpShared>,
    out: Vec<u8>,
    /// Counters of connections already closed.
    closed_stats: RudpStats,
    connected: bool,
    /// `RudpConfig::max_sessions`.
    max_sessions: usize,
}

impl<H: RudpHandler> Driver<H> {
    pub(crate) fn new(role: Role<H>, config: &RudpConfig, mailbox: Arc<RudpShared>) -> Self {
        let connected = matches!(role, Role::Client { .. });
        Driver {
            role,
            entries: HashMap::new(),
            dirty: Vec::new(),
            timers: Timers::default(),
            armed: None,
            mailbox,
            out: vec![0; (config.mtu + 128).max(crate::proto::packet::HELLO_SIZE)],
            closed_stats: RudpStats::default(),
            connected,
            max_sessions: config.max_sessions,
        }
    }

    /// Marks `peer`'s connection to be serviced at the end of the turn (a flag on its entry:
    /// no search of the list per datagram).
    fn touch(&mut self, peer: SocketAddr) {
        if let Some(e) = self.entries.get_mut(&peer) {
            Self::touch_entry(&mut self.dirty, peer, e);
        }
    }

    fn touch_entry(dirty: &mut Vec<SocketAddr>, peer: SocketAddr, e: &mut Entry<H>) {
        if !e.dirty {
            e.dirty = true;
            dirty.push(peer);
        }
    }

    /// A datagram from `peer`, at the turn's time `now` (read once per turn by ark-udp).
    fn on_datagram(
        &mut self,
        udp: &mut UdpSession<'_>,
        (peer, now): (SocketAddr, Instant),
        datagram: &[u8],
    ) {
        let hello = datagram.first().map(|b| b & 0xF0) == Some(crate::proto::packet::KIND_HELLO);
        if hello
            && let Role::Server { listener, .. } = &self.role
            && let Some(entry) = self.entries.get(&peer)
            && listener.is_new_handshake(SystemTime::now(), peer, datagram)
            && !hello_of(datagram, entry.conn.nonce())
        {
            self.end(peer, CloseReason::Replaced);
        }
        if let Some(entry) = self.entries.get_mut(&peer) {
            let _result = entry.conn.handle_datagram(now, datagram);
            #[cfg(feature = "tracing")]
            if let Err(error) = &_result {
                tracing::debug!(%peer, %error, "rudp datagram dropped");
            }
            Self::touch_entry(&mut self.dirty, peer, entry);
            return;
        }
        self.accept(udp, peer, datagram, now);
    }

    /// A datagram from an address without a connection: the stateless handshake.
    fn accept(
        &mut self,
        udp: &mut UdpSession<'_>,
        peer: SocketAddr,
        datagram: &[u8],
        now: Instant,
    ) {
        let Role::Server { listener, factory } = &mut self.role else {
            return;
        };
        if self.entries.len() >= self.max_sessions
            && listener.is_new_handshake(SystemTime::now(), peer, datagram)
        {
            // Full: no session, no answer, and the nonce not spent, so the client's next
            // HELLO may get in once a session ends.
            self.closed_stats.refused_sessions += 1;
            #[cfg(feature = "tracing")]
            tracing::info!(%peer, "rudp handshake refused: the session table is full");
            return;
        }
        match listener.handle((now, SystemTime::now()), peer, datagram, &mut self.out) {
            Ok(Incoming::Reply(n)) => {
                let _ = udp.send_to(peer, &self.out[..n]);
            }
            Ok(Incoming::Accept(conn, n)) => {
                let _ = udp.send_to(peer, &self.out[..n]);
                let mut conn = *conn;
                conn.poll_transmit(now, &mut self.out); // the ACCEPT just sent
                let handler = factory(peer);
                self.insert(peer, conn, handler);
            }
            Ok(_) => {}
            Err(_error) => {
                #[cfg(feature = "tracing")]
                tracing::debug!(%peer, error = %_error, "rudp handshake datagram dropped");
            }
        }
    }

    fn insert(&mut self, peer: SocketAddr, conn: Connection, handler: H) {
        let entry = Entry {
            conn,
            handler,
            timer: None,
            opened: false,
            dirty: false,
        };
        self.entries.insert(peer, entry);
        self.touch(peer);
    }

    /// Applies what handles posted.
    fn on_mail(&mut self) {
        for command in self.mailbox.take() {
            match command {
                Command::Send(peer, message, delivery) => {
                    if let Some(e) = self.entries.get_mut(&peer) {
                        let _ = e.conn.send(&message, delivery);
                        self.touch(peer);
                    }
                }
                Command::Close(peer) => {
                    if let Some(e) = self.entries.get_mut(&peer) {
                        e.conn.close();
                        self.touch(peer);
                    }
                }
                Command::Stats(reply) => {
                    let _ = reply.send(self.stats());
                }
            }
        }
    }

    fn stats(&self) -> RudpStats {
        let mut total = self.closed_stats;
        for e in self.entries.values() {
            total.add(&e.conn.stats());
        }
        total
    }

    /// Runs due timers.
    fn on_timers(&mut self, now: Instant) {
        self.armed = None;
        while let Some(timer) = self.timers.deadlines.pop_due(now) {
            let Some((peer, owner)) = self.timers.owners.remove(&timer) else {
                continue;
            };
            let Some(e) = self.entries.get_mut(&peer) else {
                continue;
            };
            match owner {
                TimerOwner::Core => {
                    e.timer = None;
                    e.conn.handle_timeout(now);
                }
                TimerOwner::User => {
                    let mut session = RudpSession {
                        peer,
                        conn: &mut e.conn,
                        timers: &mut self.timers,
                        mailbox: &self.mailbox,
                        now,
                    };
                    e.handler.on_timer(&mut session, timer);
                }
            }
            self.touch(peer);
        }
    }

    /// The end of a turn: each touched connection delivers, reports and sends.
    fn flush(&mut self, udp: &mut UdpSession<'_>) {
        let now = udp.now();
        while let Some(peer) = self.dirty.pop() {
            self.service(udp, peer, now);
        }
        self.arm(udp, now);
    }

    fn service(&mut self, udp: &mut UdpSession<'_>, peer: SocketAddr, now: Instant) {
        let Some(e) = self.entries.get_mut(&peer) else {
            return;
        };
        e.dirty = false;
        let mut session = RudpSession {
            peer,
            conn: &mut e.conn,
            timers: &mut self.timers,
            mailbox: &self.mailbox,
            now,
        };
        let mut closed = None;
        while let Some(event) = session.conn.poll_event() {
            match event {
                Event::Connected if !e.opened => {
                    e.opened = true;
                    e.handler.on_open(&mut session);
                }
                Event::Closed(reason) => closed = Some(reason),
                Event::Connected => {}
            }
        }
        while let Some(message) = session.conn.recv() {
            e.handler.on_message(&mut session, &message);
            session.conn.recycle(message);
        }
        while let Some(n) = e.conn.poll_transmit(now, &mut self.out) {
            let datagram = &self.out[..n];
            let _ = if self.connected {
                udp.send(datagram)
            } else {
                udp.send_to(peer, datagram)
            };
        }
        if let Some(reason) = closed {
            return self.end(peer, reason);
        }
        self.rearm(peer);
    }

    /// Sets the connection's own timer at its `poll_timeout`.
    fn rearm(&mut self, peer: SocketAddr) {
        let Some(e) = self.entries.get_mut(&peer) else {
            return;
        };
        let want = e.conn.poll_timeout();
        if e.timer.map(|t| t.1) == want {
            return;
        }
        if let Some((timer, _)) = e.timer.take() {
            self.timers.cancel(timer);
        }
        e.timer = want.map(|at| (self.timers.set(at, (peer, TimerOwner::Core)), at));
    }

    /// Keeps the socket's one timer at the earliest deadline.
    fn arm(&mut self, udp: &mut UdpSession<'_>, now: Instant) {
        let want = self.timers.deadlines.earliest();
        if self.armed.map(|a| a.1) == want {
            return;
        }
        if let Some((timer, _)) = self.armed.take() {
            udp.cancel_timer(timer);
        }
        if let Some(at) = want {
            let timer = udp.set_timer(at.saturating_duration_since(now));
            self.armed = Some((timer, at));
        }
    }

    /// Removes a connection: its timers end, its handler hears `reason` (a server's if it was
    /// opened; a client's always, so a failed handshake is heard too).
    fn end(&mut self, peer: SocketAddr, reason: CloseReason) {
        let Some(mut e) = self.entries.remove(&peer) else {
            return;
        };
        self.closed_stats.add(&e.conn.stats());
        let timers: Vec<TimerId> = self
            .timers
            .owners
            .iter()
            .filter(|(_, owner)| owner.0 == peer)
            .map(|(t, _)| *t)
            .collect();
        for timer in timers {
            self.timers.cancel(timer);
        }
        if e.opened || self.connected {
            e.handler.on_close(&reason);
        }
    }

    /// The socket is stopping: every handler's `on_stopping`, then a CLOSE to every peer.
    fn stopping(&mut self, udp: &mut UdpSession<'_>) {
        let now = Instant::now();
        let peers: Vec<SocketAddr> = self.entries.keys().copied().collect();
        for peer in peers {
            if let Some(e) = self.entries.get_mut(&peer) {
                let mut session = RudpSession {
                    peer,
                    conn: &mut e.conn,
                    timers: &mut self.timers,
                    mailbox: &self.mailbox,
                    now,
                };
                if e.opened {
                    e.handler.on_stopping(&mut session);
                }
                // What on_stopping sent leaves before the CLOSE (once: nothing is repeated).
                e.conn.close();
                let _ = e.conn.poll_event();
            }
            self.service(udp, peer, now);
            self.end(peer, CloseReason::Stopped);
        }
    }
}

/// Whether `datagram` is a HELLO with `nonce`.
fn hello_of(datagram: &[u8], nonce: u64) -> bool {
    matches!(crate::proto::packet::parse(datagram), Ok(crate::proto::packet::Packet::Hello { nonce: n, .. }) if n == nonce)
}

impl<H: RudpHandler> UdpHandler for Driver<H> {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        if let Role::Client { pending } = &mut self.role
            && let Some(pair) = pending.take()
        {
            let (conn, handler) = *pair;
            let peer = session.peer_addr();
            self.insert(peer, conn, handler);
        }
    }

    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        let at = (session.peer_addr(), session.now());
        self.on_datagram(session, at, datagram);
    }

    fn on_timer(&mut self, session: &mut UdpSession<'_>, _: TimerId) {
        self.on_timers(session.now());
    }

    fn on_wake(&mut self, _: &mut UdpSession<'_>) {
        self.on_mail();
    }

    fn on_turn_end(&mut self, session: &mut UdpSession<'_>) {
        self.flush(session);
    }

    fn on_stopping(&mut self, session: &mut UdpSession<'_>) {
        self.stopping(session);
    }

    fn on_close(&mut self, _: &ark_udp::CloseReason) {
        let peers: Vec<SocketAddr> = self.entries.keys().copied().collect();
        for peer in peers {
            self.end(peer, CloseReason::Stopped);
        }
    }
}
