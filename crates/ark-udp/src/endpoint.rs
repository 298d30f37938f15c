//! One UDP socket as an ark-reactor source: batched receive, per-peer sessions, batched send.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_reactor::{Context, Handler, Ready, TimerId, Turn};
use mio::net::UdpSocket;

use crate::config::UdpConfig;
use crate::peers::Peers;
use crate::session::{CloseReason, DatagramError, UdpHandler, UdpSession};
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
    send: SendBatch,
    config: Arc<UdpConfig>,
    counters: Arc<UdpCounters>,
    expiry_timer: Option<TimerId>,
}

impl<H: UdpHandler> Endpoint<H> {
    pub(crate) fn new(
        socket: UdpSocket,
        mode: Mode<H>,
        config: Arc<UdpConfig>,
        counters: Arc<UdpCounters>,
    ) -> Self {
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let slots = if config.batching { config.batch } else { 1 };
        Endpoint {
            recv: RecvBatch::new(slots, config.max_datagram),
            send: SendBatch::default(),
            socket,
            local,
            mode,
            config,
            counters,
            expiry_timer: None,
        }
    }

    /// Delivers the datagrams of the last receive call.
    fn deliver(&mut self, now: Instant, tally: &mut UdpStats) {
        let Endpoint {
            recv,
            send,
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
                out: send,
                send_limit: config.send_queue_limit,
                datagrams_out: &mut tally.datagrams_out,
            };
            let handler = match mode {
                Mode::Server { sessions, factory } => {
                    if let Some(peer) = sessions.get_mut(&received.from) {
                        peer.last_seen = now;
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
                        let mut handler = factory(received.from);
                        handler.on_open(&mut session);
                        tally.sessions_opened += 1;
                        &mut sessions.insert(received.from, handler, now).handler
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

    /// Receives until drained or out of budget; returns whether budget ran out.
    fn receive(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let fd = self.socket.as_raw_fd();
        for _ in 0..cx.budget().operations {
            let result = if self.config.batching {
                self.recv.recv_mmsg(fd)
            } else {
                self.recv.recv_one(fd)
            };
            tally.receives += 1;
            cx.counters().add_receives(1);
            match result {
                Ok(n) => {
                    self.deliver(cx.now(), tally);
                    if self.config.batching && n < self.recv.slots() {
                        return false; // a short batch drained the socket
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // An ICMP error reported on the socket (port unreachable for a connected
                // client, ...): counted; the socket stays usable.
                Err(_) => tally.receive_errors += 1,
            }
        }
        true
    }

    /// Sends what is queued; returns whether the socket would block.
    fn flush(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let fd = self.socket.as_raw_fd();
        while !self.send.is_empty() {
            let result = if self.config.batching {
                self.send.send_mmsg(fd, self.config.batch)
            } else {
                self.send.send_one(fd)
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
                    self.send.skip_one();
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

    fn ensure_started(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) {
        if self.expiry_timer.is_none()
            && let (Mode::Server { .. }, Some(expiry)) = (&self.mode, self.config.session_expiry)
        {
            let period = (expiry / 4).max(Duration::from_millis(10));
            self.expiry_timer = Some(cx.set_timer(period, Some(period)));
        }
        let local = self.local;
        let limit = self.config.send_queue_limit;
        let (peer, handler, opened, connected) = match &mut self.mode {
            Mode::Client {
                peer,
                handler,
                opened,
            } => (*peer, handler, opened, true),
            // A cast socket's "peer" before any datagram is its own address.
            Mode::Cast { handler, opened } => (local, handler, opened, false),
            Mode::Server { .. } => return,
        };
        if !*opened {
            *opened = true;
            tally.sessions_opened += 1;
            let mut session = UdpSession {
                peer,
                local,
                connected,
                out: &mut self.send,
                send_limit: limit,
                datagrams_out: &mut tally.datagrams_out,
            };
            handler.on_open(&mut session);
        }
    }
}

impl<H: UdpHandler> Handler for Endpoint<H> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let mut tally = UdpStats::default();
        self.ensure_started(cx, &mut tally);
        let mut turn = Turn::Done;
        // An empty readiness is a re-run after the budget ran out, or a wake.
        if (ready.is_readable() || ready.is_wake() || ready.is_empty())
            && self.receive(cx, &mut tally)
        {
            turn = Turn::Again;
        }
        let blocked = self.flush(cx, &mut tally);
        if !blocked && !self.send.is_empty() {
            turn = Turn::Again;
        }
        self.counters.add(&tally);
        turn
    }

    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        if Some(timer) == self.expiry_timer {
            let mut tally = UdpStats::default();
            self.expire(cx.now(), &mut tally);
            self.counters.add(&tally);
        }
        Turn::Done
    }

    fn on_close(&mut self, _: ark_reactor::CloseReason) {
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
