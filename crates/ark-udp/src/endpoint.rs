//! One UDP socket as an ark-reactor source: batched receive, per-peer sessions, batched send.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_reactor::{Context, Handler, Lifecycle, Member, Ready, TimerId, Turn};
use mio::net::UdpSocket;

use crate::config::UdpConfig;
use crate::handle::UdpShared;
use crate::peers::Peers;
use crate::session::{
    CloseReason, DatagramError, SessionIo, SessionTimers, UdpHandler, UdpSession,
};
use crate::stats::{UdpCounters, UdpStats};
use crate::sys::{RecvBatch, SendBatch};

/// Makes the handler of a new peer's session.
pub(crate) type Factory<H> = Arc<dyn Fn(SocketAddr) -> H + Send + Sync>;

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

pub(crate) struct Endpoint<H> {
    socket: UdpSocket,
    local: SocketAddr,
    mode: Mode<H>,
    recv: RecvBatch,
    /// What every session view lends: send queue, timers, handles' state, time.
    io: SessionIo,
    config: Arc<UdpConfig>,
    counters: Arc<UdpCounters>,
    expiry_timer: Option<TimerId>,
    life: Arc<Lifecycle>,
    /// The socket is registered for writability too: a send would block and datagrams wait.
    /// Otherwise only for reads: a UDP socket reports writable each time a datagram it sent
    /// is consumed, and every such event was a turn with nothing to do — one per message on
    /// loopback, and in the shared model with two threads, a second source in the same turn,
    /// which was then handed to a worker (1 client, window 1: 17.7 k msg/s with 1.9 context
    /// switches per message, against 49.8 k on one thread).
    writable_interest: bool,
    /// The last receive round found one datagram at most: start the next with `recvfrom`.
    receive_singly: bool,
    /// Keeps the owner's stop waiting until the socket is closed.
    _member: Member,
}

/// The session's serial of a client's or cast socket's one handler.
const SINGLE: u64 = 0;

impl<H: UdpHandler> Endpoint<H> {
    pub(crate) fn new(
        socket: UdpSocket,
        mode: Mode<H>,
        config: Arc<UdpConfig>,
        counters: Arc<UdpCounters>,
        (shared, life, member): (Arc<UdpShared>, Arc<Lifecycle>, Member),
    ) -> Self {
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let slots = if config.batching { config.batch } else { 1 };
        Endpoint {
            recv: RecvBatch::new(slots, config.max_datagram),
            io: SessionIo {
                out: SendBatch::default(),
                timers: SessionTimers::default(),
                shared,
                send_limit: config.send_queue_limit,
                now: Instant::now(),
                datagrams_out: 0,
            },
            socket,
            local,
            mode,
            config,
            counters,
            expiry_timer: None,
            life,
            writable_interest: false,
            receive_singly: false,
            _member: member,
        }
    }

    /// Delivers the datagrams of the last receive call.
    fn deliver(&mut self, now: Instant, tally: &mut UdpStats) {
        let Endpoint {
            recv,
            io,
            mode,
            config,
            local,
            ..
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

    /// Receives until drained or out of budget; returns whether budget ran out. A socket
    /// whose last round found one datagram at most (a request/response peer) is read with
    /// `recvfrom` until `EAGAIN`, and with `recvmmsg` once a second datagram shows that they
    /// queue up: for one datagram, `recvmmsg` costs more in the kernel than two `recvfrom`
    /// (it copies in and checks a message header for the datagram and again for the empty
    /// slot after it).
    fn receive(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let fd = self.socket.as_raw_fd();
        let mut got = 0;
        let mut budget_out = true;
        for round in 0..cx.budget().operations {
            if round > 0 {
                self.release_received(cx, tally);
            }
            let batched = self.config.batching && (!self.receive_singly || got >= 2);
            let result = if batched {
                self.recv.recv_mmsg(fd)
            } else {
                self.recv.recv_one(fd)
            };
            tally.receives += 1;
            cx.counters().add_receives(1);
            match result {
                Ok(n) => {
                    got += n;
                    self.deliver(cx.now(), tally);
                    if batched && n < self.recv.slots() {
                        budget_out = false; // a short batch drained the socket
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    budget_out = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error reported on the socket (port unreachable for a connected
                // client, ...): counted; the socket stays usable.
                Err(_) => tally.receive_errors += 1,
            }
        }
        self.receive_singly = got <= 1;
        budget_out
    }

    /// Before the receive batch is reused: the echoes queued by their place in it are sent
    /// (after the counters of what was received are published, as at the end of a turn), and
    /// what the socket does not take is copied into the queue.
    fn release_received(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) {
        if self.io.out.refers_to_received() {
            self.publish_and_flush(cx, std::mem::take(tally));
        }
    }

    /// Publishes `tally` (what was received, with the datagrams queued since), sends what is
    /// queued, then publishes the sends. Returns whether the socket would block.
    fn publish_and_flush(&mut self, cx: &mut Context<'_>, mut tally: UdpStats) -> bool {
        tally.datagrams_out += std::mem::take(&mut self.io.datagrams_out);
        self.counters.add(&tally);
        let mut sent = UdpStats::default();
        let blocked = self.flush(cx, &mut sent);
        self.counters.add(&sent);
        blocked
    }

    /// Sends what is queued; returns whether the socket would block. What is left of the
    /// echoes queued by their place in the receive batch is then copied into the queue.
    fn flush(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let blocked = self.send_queued(cx, tally);
        self.io.out.settle(&self.recv.data);
        blocked
    }

    /// Sends until the queue is empty or the socket would block; returns whether it would.
    fn send_queued(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let fd = self.socket.as_raw_fd();
        let out = &mut self.io.out;
        let received = &self.recv.data;
        while !out.is_empty() {
            // One datagram goes out with `sendto`: `sendmmsg` of one costs more in the
            // kernel (the message header copied in and its iovec imported).
            let result = if self.config.batching && out.queued() > 1 {
                out.send_mmsg(fd, self.config.batch, received)
            } else {
                out.send_one(fd, received)
            };
            tally.sends += 1;
            cx.counters().add_sends(1);
            match result {
                Ok(n) => tally.datagrams_sent += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The first datagram of the batch failed for good (refused, unreachable):
                // drop it and go on.
                Err(_) => {
                    tally.send_errors += 1;
                    out.skip_one();
                }
            }
        }
        false
    }

    fn expire(&mut self, now: Instant, tally: &mut UdpStats) {
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

    fn ensure_started(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) {
        if self.expiry_timer.is_none()
            && let (Mode::Server { .. }, Some(expiry)) = (&self.mode, self.config.session_expiry)
        {
            let period = (expiry / 4).max(Duration::from_millis(10));
            self.expiry_timer = Some(cx.set_timer(period, Some(period)));
        }
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

    /// Applies what handles asked: their datagrams join the queue, their closes end sessions.
    fn handle_requests(&mut self, tally: &mut UdpStats) {
        let Some(requests) = self.io.shared.take() else {
            return;
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
        for peer in requests.closes {
            match &mut self.mode {
                Mode::Server { sessions, .. } => {
                    if let Some(mut p) = sessions.remove(&peer) {
                        p.handler.on_close(&CloseReason::Local);
                        tally.sessions_closed += 1;
                    }
                }
                // A client's or cast socket's one session is the socket.
                _ => {
                    self.life.begin_stop();
                }
            }
        }
    }

    /// Runs the handlers' timers that are due.
    fn fire_session_timers(&mut self, now: Instant) {
        while let Some((timer, (peer, serial))) = self.io.timers.pop_due(now) {
            self.with_session(peer, Some(serial), |h, s| h.on_timer(s, timer));
        }
    }

    /// A stop began: every session's `on_stopping`, then the socket closes (after the turn's
    /// sends) with `on_close(Stopped)` for each.
    fn stop(&mut self, cx: &mut Context<'_>) {
        let peers: Vec<SocketAddr> = match &mut self.mode {
            Mode::Server { sessions, .. } => sessions.iter_mut().map(|(a, _)| *a).collect(),
            _ => self.single_peer().into_iter().collect(),
        };
        for peer in peers {
            self.with_session(peer, None, |h, s| h.on_stopping(s));
        }
        cx.close();
    }

    /// The end of every turn: publish what was received, send, publish the sends, keep the
    /// timer. Receive-side counters are published before the replies leave, so a peer that
    /// got a reply finds its datagram (and its session) counted in `stats()`.
    fn finish_turn(&mut self, cx: &mut Context<'_>, tally: UdpStats, mut turn: Turn) -> Turn {
        if let Some(peer) = self.single_peer()
            && !self.life.is_stopping()
        {
            self.with_session(peer, None, |h, s| h.on_turn_end(s));
        }
        let blocked = self.publish_and_flush(cx, tally);
        if !blocked && !self.io.out.is_empty() {
            turn = Turn::Again;
        }
        self.want_writable(cx, blocked);
        self.io.shared.set_queued(self.io.out.bytes());
        self.io.timers.slot.arm(self.io.timers.earliest(), cx);
        turn
    }
}

impl<H: UdpHandler> Endpoint<H> {
    /// Registers for writability while a send would block, and only then (see
    /// `writable_interest`). Adding it re-checks the socket, so room that came between the
    /// refused send and now is still reported.
    fn want_writable(&mut self, cx: &mut Context<'_>, blocked: bool) {
        if blocked == self.writable_interest {
            return;
        }
        let interest = if blocked {
            mio::Interest::READABLE | mio::Interest::WRITABLE
        } else {
            mio::Interest::READABLE
        };
        if cx
            .registry()
            .reregister(&mut self.socket, cx.token(), interest)
            .is_ok()
        {
            self.writable_interest = blocked;
        }
    }
}

impl<H: UdpHandler> Handler for Endpoint<H> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let mut tally = UdpStats::default();
        self.io.now = cx.now();
        self.ensure_started(cx, &mut tally);
        self.handle_requests(&mut tally);
        if self.life.is_stopping() {
            self.stop(cx);
            return self.finish_turn(cx, tally, Turn::Done);
        }
        let mut turn = Turn::Done;
        // An empty readiness is a re-run after the budget ran out.
        if (ready.is_readable() || ready.is_wake() || ready.is_empty())
            && self.receive(cx, &mut tally)
        {
            turn = Turn::Again;
        }
        self.finish_turn(cx, tally, turn)
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        let mut tally = UdpStats::default();
        self.io.now = cx.now();
        if Some(timer) == self.expiry_timer {
            self.expire(cx.now(), &mut tally);
        } else if self.io.timers.slot.fired(timer) {
            self.fire_session_timers(cx.now());
        }
        self.finish_turn(cx, tally, Turn::Done)
    }

    fn on_close(&mut self, _: ark_reactor::CloseReason) {
        self.io.shared.set_closed();
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
        self.counters.add(&UdpStats {
            sessions_closed: closed,
            ..UdpStats::default()
        });
    }
}
