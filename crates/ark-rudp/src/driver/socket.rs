//! The thin driver: connections on one ark-udp socket (a server's unconnected socket, or a
//! client's connected one). Datagrams go into the connections; at the end of each turn every
//! connection touched delivers its messages and events to its handler and sends what it has.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

use ark_reactor::{Answerer, TimerId};
use ark_udp::{UdpHandler, UdpSession};

use crate::config::RudpConfig;
use crate::handler::{
    Command, RudpHandler, RudpSession, RudpShared, SessionShared, TimerOwner, Timers,
};
use crate::proto::connection::{CloseReason, Connection, Event, RateGroup, RudpStats};
use crate::proto::endpoint::{Endpoint, EndpointEntry, Io, Replacement, Routed};
use crate::proto::listener::Timestamp;

/// Makes a new session's handler.
pub(crate) type Factory<H> = Box<dyn FnMut(SocketAddr) -> H + Send>;

/// Flushes waiting for the acknowledgement of `bytes_acked` up to a target.
type Flushes = Vec<(u64, Answerer<Result<(), CloseReason>>)>;

/// One connection and its handler.
pub(crate) struct Entry<H> {
    conn: Connection,
    handler: H,
    /// What the session shares with its handles.
    shared: Arc<SessionShared>,
    flushes: Flushes,
    /// The connection's own timer and its deadline.
    timer: Option<(TimerId, Instant)>,
    opened: bool,
    /// The handler heard `on_close`; the connection may still answer a repeated CLOSE.
    ended: bool,
    /// In the driver's `dirty` list (touched this turn).
    dirty: bool,
}

impl<H> EndpointEntry for Entry<H> {
    fn connection(&self) -> &Connection {
        &self.conn
    }

    fn connection_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }

    fn has_ended(&self) -> bool {
        self.ended
    }
}

impl<H> Entry<H> {
    /// A new session's entry.
    fn new(conn: Connection, handler: H, shared: Arc<SessionShared>) -> Self {
        Entry {
            conn,
            handler,
            shared,
            flushes: Vec::new(),
            timer: None,
            opened: false,
            ended: false,
            dirty: false,
        }
    }

    /// The handler and a view of its session (`timers` and `mailbox` are the socket's).
    fn view<'a>(
        &'a mut self,
        peer: SocketAddr,
        (timers, mailbox): (&'a mut Timers, &'a Arc<RudpShared>),
        now: Instant,
    ) -> (&'a mut H, RudpSession<'a>) {
        let session = RudpSession {
            peer,
            conn: &mut self.conn,
            timers,
            mailbox,
            shared: &self.shared,
            now,
        };
        (&mut self.handler, session)
    }
}

/// The server's or the client's side.
pub(crate) enum Role<H> {
    Server {
        factory: Factory<H>,
        /// The group rate limits every session of the server shares.
        group: RateGroup,
    },
    /// A client's one connection, made when the socket opens.
    Client {
        pending: Option<Box<(Connection, H, Arc<SessionShared>)>>,
    },
}

/// The connections of one socket.
pub(crate) struct Driver<H> {
    role: Role<H>,
    config: Arc<RudpConfig>,
    /// The connections, the handshake, limits, replacement and refusals (sans-IO).
    endpoint: Endpoint<Entry<H>>,
    /// Connections touched this turn.
    dirty: Vec<SocketAddr>,
    timers: Timers,
    /// The socket timer set at the earliest deadline.
    armed: Option<(TimerId, Instant)>,
    mailbox: Arc<RudpShared>,
    out: Vec<u8>,
    connected: bool,
}

impl<H: RudpHandler> Driver<H> {
    /// A driver for `endpoint`'s connections (a server's, with its listener, or a client's).
    pub(crate) fn new(
        role: Role<H>,
        endpoint: Endpoint<Entry<H>>,
        (config, mailbox): (Arc<RudpConfig>, Arc<RudpShared>),
    ) -> Self {
        let connected = matches!(role, Role::Client { .. });
        Driver {
            role,
            out: vec![0; (config.mtu + 128).max(crate::proto::packet::HELLO_SIZE)],
            config,
            endpoint,
            dirty: Vec::new(),
            timers: Timers::default(),
            armed: None,
            mailbox,
            connected,
        }
    }

    /// Marks `peer`'s connection to be serviced at the end of the turn (a flag on its entry:
    /// no search of the list per datagram).
    fn touch(&mut self, peer: SocketAddr) {
        if let Some(e) = self.endpoint.get_mut(&peer) {
            Self::touch_entry(&mut self.dirty, peer, e);
        }
    }

    fn touch_entry(dirty: &mut Vec<SocketAddr>, peer: SocketAddr, e: &mut Entry<H>) {
        if !e.dirty {
            e.dirty = true;
            dirty.push(peer);
        }
    }

    /// A datagram from `peer`, at the turn's time `now` (read once per turn by ark-udp): the
    /// endpoint says whose it is, and whether it ends or replaces a connection first.
    fn on_datagram(
        &mut self,
        udp: &mut UdpSession<'_>,
        (peer, now): (SocketAddr, Instant),
        datagram: &[u8],
    ) {
        let at = Timestamp {
            now,
            wall: SystemTime::now(),
        };
        let listen = match self.endpoint.replacement(at, peer, datagram) {
            Replacement::Refuse => return,
            // A session that ended and lingers (answering or repeating a CLOSE) gives way to
            // a new client on the same address and port (the system reused the port).
            Replacement::GiveWay => {
                self.remove(peer);
                false
            }
            Replacement::Replace => {
                self.end(peer, CloseReason::Replaced);
                false
            }
            Replacement::Listen => true,
            _ => false,
        };
        let Driver {
            role,
            endpoint,
            out,
            config,
            ..
        } = self;
        let routed = match role {
            Role::Server { factory, group } => {
                let mut make = |peer: SocketAddr, mut conn: Connection| -> Entry<H> {
                    if group.is_limited() {
                        conn.set_rate_group(group, now);
                    }
                    Entry::new(conn, factory(peer), SessionShared::new(config))
                };
                let io: Io<'_, Entry<H>> = (&mut out[..], &mut make);
                if listen {
                    endpoint.listen(at, peer, datagram, io)
                } else {
                    endpoint.route(at, peer, datagram, io)
                }
            }
            Role::Client { .. } => match endpoint.get_mut(&peer) {
                Some(e) => Routed::Connection(e.conn.handle_datagram(now, datagram)),
                None => Routed::Dropped,
            },
        };
        self.routed(udp, peer, routed);
    }

    /// What the endpoint made of a datagram from `peer`: an answer to send, a connection to
    /// service at the turn's end, and what is logged (rate-limited).
    fn routed(&mut self, udp: &mut UdpSession<'_>, peer: SocketAddr, routed: Routed) {
        match routed {
            Routed::Connection(_result) => {
                #[cfg(feature = "tracing")]
                if let Err(error) = &_result {
                    ark_reactor::log_limited!(
                        tracing::Level::DEBUG,
                        %peer,
                        %error,
                        "rudp datagram dropped"
                    );
                }
                self.touch(peer);
            }
            Routed::Reply(n) => {
                let _ = udp.send_to(peer, &self.out[..n]);
            }
            Routed::Accepted(n) => {
                let _ = udp.send_to(peer, &self.out[..n]);
                self.touch(peer);
            }
            Routed::Full => {
                #[cfg(feature = "tracing")]
                ark_reactor::log_limited!(
                    tracing::Level::INFO,
                    %peer,
                    "rudp handshake refused: the session table is full"
                );
            }
            Routed::Refused(_refusal) => {
                #[cfg(feature = "tracing")]
                ark_reactor::log_limited!(
                    tracing::Level::DEBUG,
                    %peer,
                    refusal = %_refusal,
                    "rudp handshake refused"
                );
            }
            Routed::Malformed(_error) => {
                #[cfg(feature = "tracing")]
                ark_reactor::log_limited!(
                    tracing::Level::DEBUG,
                    %peer,
                    error = %_error,
                    "rudp handshake datagram dropped"
                );
            }
            _ => {}
        }
    }

    fn insert(
        &mut self,
        peer: SocketAddr,
        conn: Connection,
        handler: H,
        shared: Arc<SessionShared>,
    ) {
        self.endpoint
            .insert(peer, Entry::new(conn, handler, shared));
        self.touch(peer);
    }

    /// Removes an entry: its counters go to the socket's sum, its address's count down.
    fn remove(&mut self, peer: SocketAddr) -> Option<Entry<H>> {
        let e = self.endpoint.remove(&peer)?;
        self.endpoint.add_closed(&e.shared.refusals());
        if let Some((timer, _)) = e.timer {
            self.timers.cancel(timer);
        }
        Some(e)
    }

    /// Applies what handles posted.
    fn on_mail(&mut self, now: Instant) {
        for command in self.mailbox.take() {
            match command {
                Command::Send(peer, message, delivery) => {
                    if let Some(e) = self.endpoint.get_mut(&peer) {
                        // The bytes move from the mailbox's count to the buffer's: published
                        // in that order, the handles' sum never dips below what is held.
                        e.conn.send_admitted(&message, delivery);
                        e.shared.buffered.store(e.conn.buffered(), Ordering::SeqCst);
                        e.shared.posted.fetch_sub(message.len(), Ordering::SeqCst);
                        self.touch(peer);
                    }
                }
                Command::Close(peer) => {
                    if let Some(e) = self.endpoint.get_mut(&peer) {
                        e.conn.close(now);
                        self.touch(peer);
                    }
                }
                Command::Flush(peer, answerer) => self.flush_request(peer, answerer),
                Command::Stats(reply) => {
                    let _ = reply.send(self.stats());
                }
                Command::RateLimits(peer, limits) => {
                    if let Some(e) = self.endpoint.get_mut(&peer) {
                        e.conn.set_rate_limits(limits, now);
                        self.touch(peer);
                    }
                }
            }
        }
    }

    /// A handle waits for everything its session accepted so far to be acknowledged.
    fn flush_request(&mut self, peer: SocketAddr, answerer: Answerer<Result<(), CloseReason>>) {
        let Some(e) = self.endpoint.get_mut(&peer).filter(|e| !e.ended) else {
            return; // the session is gone: the answer is dropped unanswered
        };
        let target = e.conn.stats().bytes_accepted;
        e.flushes.push((target, answerer));
        self.touch(peer);
    }

    fn stats(&self) -> RudpStats {
        let mut total = RudpStats::default();
        for e in self.endpoint.entries() {
            let own = e.conn.stats();
            total.add(&if e.ended { own.counters_only() } else { own });
            total.add(&e.shared.refusals());
        }
        total.add(self.endpoint.closed_stats());
        total
    }

    /// Runs due timers.
    fn on_timers(&mut self, now: Instant) {
        self.armed = None;
        while let Some(timer) = self.timers.deadlines.pop_due(now) {
            let Some((peer, owner)) = self.timers.owners.remove(&timer) else {
                continue;
            };
            let Some(e) = self.endpoint.get_mut(&peer) else {
                continue;
            };
            match owner {
                TimerOwner::Core => {
                    e.timer = None;
                    e.conn.handle_timeout(now);
                }
                TimerOwner::User if !e.ended => {
                    let (handler, mut session) =
                        e.view(peer, (&mut self.timers, &self.mailbox), now);
                    handler.on_timer(&mut session, timer);
                }
                TimerOwner::User => {}
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
        let Some(e) = self.endpoint.get_mut(&peer) else {
            return;
        };
        e.dirty = false;
        let closed = self.deliver(peer, now);
        let Some(e) = self.endpoint.get_mut(&peer) else {
            return;
        };
        transmit(
            udp,
            (peer, self.connected),
            &mut e.conn,
            (now, &mut self.out),
        );
        publish(e);
        if let Some(reason) = closed {
            self.ended(peer, reason);
        }
        if self
            .endpoint
            .get(&peer)
            .is_some_and(|e| e.conn.is_finished())
        {
            self.remove(peer);
            return;
        }
        self.rearm(peer);
    }

    /// `peer`'s events and messages to its handler; the reason if it closed.
    fn deliver(&mut self, peer: SocketAddr, now: Instant) -> Option<CloseReason> {
        let e = self.endpoint.get_mut(&peer)?;
        let (opened, ended) = (&mut e.opened, e.ended);
        let (handler, mut session) = {
            let session = RudpSession {
                peer,
                conn: &mut e.conn,
                timers: &mut self.timers,
                mailbox: &self.mailbox,
                shared: &e.shared,
                now,
            };
            (&mut e.handler, session)
        };
        let mut closed = None;
        while let Some(event) = session.conn.poll_event() {
            match event {
                Event::Connected if !*opened && !ended => {
                    *opened = true;
                    handler.on_open(&mut session);
                }
                Event::Closed(reason) => closed = Some(reason),
                Event::Connected => {}
            }
        }
        while let Some(message) = session.conn.recv() {
            if !ended {
                handler.on_message(&mut session, &message);
            }
            session.conn.recycle(message);
        }
        closed
    }

    /// Sets the connection's own timer at its `poll_timeout`.
    fn rearm(&mut self, peer: SocketAddr) {
        let Some(e) = self.endpoint.get_mut(&peer) else {
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

    /// The connection ended with `reason`: its handler hears it once (a server's if it was
    /// opened; a client's always, so a failed handshake is heard too), its user timers end,
    /// its handles are refused from now on and its flushes answered. The entry stays while
    /// the connection still answers the peer's CLOSE.
    fn ended(&mut self, peer: SocketAddr, reason: CloseReason) {
        let connected = self.connected;
        let Some(e) = self.endpoint.get_mut(&peer) else {
            return;
        };
        if std::mem::replace(&mut e.ended, true) {
            return;
        }
        e.shared.closed.store(true, Ordering::SeqCst);
        for (_, answerer) in e.flushes.drain(..) {
            answerer.give(Err(reason.clone()));
        }
        if e.opened || connected {
            e.handler.on_close(&reason);
        }
        let timers: Vec<TimerId> = self
            .timers
            .owners
            .iter()
            .filter(|(_, owner)| owner.0 == peer && owner.1 == TimerOwner::User)
            .map(|(t, _)| *t)
            .collect();
        for timer in timers {
            self.timers.cancel(timer);
        }
    }

    /// Ends a connection now (replaced, or the socket closing) and removes it.
    fn end(&mut self, peer: SocketAddr, reason: CloseReason) {
        self.ended(peer, reason);
        self.remove(peer);
    }

    /// A graceful stop begins: every handler's `on_stopping`, then every connection delivers
    /// what it was given and closes (see `Connection::stop`); no new sessions. The socket
    /// closes once all have ended.
    fn begin_stop(&mut self, now: Instant) {
        self.tell_all(now, |handler, session| handler.on_stopping(session));
        for e in self.endpoint.entries_mut().filter(|e| !e.ended) {
            e.conn.stop(now);
            e.shared.closed.store(true, Ordering::SeqCst);
        }
    }

    /// The socket drains: no new sessions; every open session's handler hears `on_drain`
    /// and the session goes on until its peer or its handler closes it.
    fn draining(&mut self, now: Instant) {
        self.tell_all(now, |handler, session| handler.on_drain(session));
    }

    /// A drain or stop begins: no new sessions; `tell` runs for every open session's handler,
    /// and every session is serviced at the turn's end.
    fn tell_all(&mut self, now: Instant, tell: impl Fn(&mut H, &mut RudpSession<'_>)) {
        self.endpoint.close_to_new();
        let peers = self.endpoint.peers();
        for peer in peers {
            if let Some(e) = self
                .endpoint
                .get_mut(&peer)
                .filter(|e| e.opened && !e.ended)
            {
                let (handler, mut session) = e.view(peer, (&mut self.timers, &self.mailbox), now);
                tell(handler, &mut session);
            }
            self.touch(peer);
        }
    }

    /// The socket's sessions end now (it closes: the stop's deadline, or nothing left to
    /// deliver): `Stopped`, or `Cut` with what was still unacknowledged.
    fn end_all(&mut self) {
        let peers = self.endpoint.peers();
        for peer in peers {
            let reason = self
                .endpoint
                .get(&peer)
                .map(|e| cut_reason(e, &self.config));
            if let Some(reason) = reason {
                self.end(peer, reason);
            }
        }
    }
}

/// Every datagram `conn` has due, each written and sealed once, in place in the socket's
/// send queue (`udp.send_with`). Where the queue refuses one (full), it is made in `scratch`
/// and dropped, as a datagram the network lost (ARQ repeats what mattered), as before.
fn transmit(
    udp: &mut UdpSession<'_>,
    (peer, connected): (SocketAddr, bool),
    conn: &mut Connection,
    (now, scratch): (Instant, &mut [u8]),
) {
    let to = (!connected).then_some(peer);
    let max = scratch.len();
    loop {
        let mut made = false;
        let queued = udp.send_with(to, max, |buf| {
            let n = conn.poll_transmit(now, buf);
            made = n.is_some();
            n.unwrap_or(0)
        });
        match queued {
            Ok(_) if made => {}
            Ok(_) => return,
            Err(_) => {
                if conn.poll_transmit(now, scratch).is_none() {
                    return;
                }
            }
        }
    }
}

/// Publishes what a session's handles check on their own threads, and answers the flushes
/// whose messages were all acknowledged.
fn publish<H>(e: &mut Entry<H>) {
    e.shared.buffered.store(e.conn.buffered(), Ordering::SeqCst);
    if e.conn.is_closed() {
        e.shared.closed.store(true, Ordering::SeqCst);
    }
    if e.flushes.is_empty() {
        return;
    }
    let acked = e.conn.stats().bytes_acked;
    let (done, waiting): (Flushes, Flushes) = std::mem::take(&mut e.flushes)
        .into_iter()
        .partition(|(target, _)| *target <= acked);
    e.flushes = waiting;
    for (_, answerer) in done {
        answerer.give(Ok(()));
    }
}

/// What a session still open when its socket closes ends with: `Stopped`, or `Cut` around it
/// with the bytes still unacknowledged.
fn cut_reason<H>(e: &Entry<H>, config: &RudpConfig) -> CloseReason {
    match e.conn.buffered() {
        0 => CloseReason::Stopped,
        bytes => CloseReason::Cut {
            cause: Box::new(CloseReason::Stopped),
            bytes,
            timeout: config.close_timeout,
        },
    }
}

impl<H: RudpHandler> UdpHandler for Driver<H> {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        if let Role::Client { pending } = &mut self.role
            && let Some(pair) = pending.take()
        {
            let (conn, handler, shared) = *pair;
            let peer = session.peer_addr();
            self.insert(peer, conn, handler, shared);
        }
    }

    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        let at = (session.peer_addr(), session.now());
        self.on_datagram(session, at, datagram);
    }

    fn on_timer(&mut self, session: &mut UdpSession<'_>, _: TimerId) {
        self.on_timers(session.now());
    }

    fn on_wake(&mut self, session: &mut UdpSession<'_>) {
        self.on_mail(session.now());
    }

    fn on_turn_end(&mut self, session: &mut UdpSession<'_>) {
        self.flush(session);
    }

    /// A stop: every session delivers what it was given and closes (`begin_stop`); the
    /// socket lingers until they are done.
    fn on_stopping(&mut self, session: &mut UdpSession<'_>) {
        // What handles sent before the stop is part of what the stop delivers (the stop may
        // come in a timer's turn, before the mailbox's wake).
        self.on_mail(session.now());
        self.begin_stop(session.now());
    }

    fn on_drain(&mut self, session: &mut UdpSession<'_>) {
        self.on_mail(session.now());
        self.draining(session.now());
    }

    /// While the socket drains or stops: until every session has ended and finished its
    /// CLOSE exchange.
    fn lingers(&self) -> bool {
        !self.endpoint.is_empty()
    }

    fn on_close(&mut self, _: &ark_udp::CloseReason) {
        self.end_all();
    }
}
