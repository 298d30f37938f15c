//! The driver of one UDP socket: an ark-reactor source that receives in batches, hands the
//! datagrams to its sans-IO sessions (`proto/sessions.rs`), and sends what they queued in batches.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_reactor::{Context, Handler, Lifecycle, Member, Phase, Ready, TimerId, Turn};
use mio::net::UdpSocket;

use crate::config::{UdpConfig, UdpOffload};
use crate::driver::sys::{self, RecvScratch, SendScratch};
use crate::handle::UdpShared;
use crate::handler::{SessionIo, SessionTimers, UdpHandler};
use crate::proto::batch::{MAX_TRAIN_SEGMENTS, RecvBatch, SendBatch};
use crate::proto::rate::ReadGate;
use crate::proto::sessions::{Mode, UdpSessions};
use crate::stats::{UdpCounters, UdpStats};

pub(crate) struct UdpDriver<H> {
    socket: UdpSocket,
    recv: RecvBatch,
    /// The receive syscalls' scratch space (message headers on Linux).
    recv_io: RecvScratch,
    /// The send syscalls' scratch space, for the sessions' send queue (`sessions.io.out`).
    send_io: SendScratch,
    /// The sessions, their handlers and what they queued.
    sessions: UdpSessions<H>,
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
    /// The first datagram of the receive batch not yet delivered (a paused client's wait
    /// there); at or past its count when all were.
    undelivered: usize,
    /// The phase whose news the sessions have had (`on_drain`, `on_stopping`).
    told: Phase,
    /// The socket is closing (`Context::close` was called).
    closing: bool,
    /// Keeps the owner's stop waiting until the socket is closed.
    _member: Member,
}

impl<H: UdpHandler> UdpDriver<H> {
    pub(crate) fn new(
        socket: UdpSocket,
        mode: Mode<H>,
        (config, offload): (Arc<UdpConfig>, UdpOffload),
        counters: Arc<UdpCounters>,
        (shared, life, member): (Arc<UdpShared>, Arc<Lifecycle>, Member),
    ) -> Self {
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let slots = if config.batching && sys::BATCHED {
            config.batch
        } else {
            1
        };
        let mut out = SendBatch::default();
        if offload.gso {
            out.set_max_segments(MAX_TRAIN_SEGMENTS);
        }
        let mut recv = RecvBatch::new(slots, config.max_datagram);
        recv.set_gro(offload.gro);
        let io = SessionIo {
            out,
            timers: SessionTimers::default(),
            shared,
            send_limit: config.send_queue_limit,
            now: Instant::now(),
            datagrams_out: 0,
            held_bytes: 0,
            rate_delayed: 0,
            scratch: Vec::new(),
        };
        UdpDriver {
            recv_io: RecvScratch::new(recv.slots()),
            send_io: SendScratch::new(),
            recv,
            sessions: UdpSessions::new(mode, local, config.clone(), io),
            socket,
            config,
            counters,
            expiry_timer: None,
            life,
            writable_interest: false,
            receive_singly: false,
            undelivered: 0,
            told: Phase::Running,
            closing: false,
            _member: member,
        }
    }

    /// Receives until drained or out of budget; returns whether budget ran out. A socket
    /// whose last round found one datagram at most (a request/response peer) is read with
    /// `recvfrom` until `EAGAIN`, and with `recvmmsg` once a second datagram shows that they
    /// queue up: for one datagram, `recvmmsg` costs more in the kernel than two `recvfrom`
    /// (it copies in and checks a message header for the datagram and again for the empty
    /// slot after it). With GRO on, every read is a `recvmmsg`: only it reads the segment
    /// size of a coalesced buffer.
    ///
    /// A client's or cast socket's session with a read limit reads no more slots than its
    /// allowance covers, delivers no datagram before the allowance covers it (the rest of a
    /// read waits in the receive batch: a GRO slot may hold many) and reads nothing while
    /// anything waits. Reading so pauses before `EAGAIN`, after which no readiness event may
    /// come (on Windows mio reports one only after a `WouldBlock`): the sessions' timer wakes
    /// the socket when the allowance is back, and that turn reads (`on_timer`).
    fn receive(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let mut got = 0;
        let mut budget_out = true;
        for _ in 0..cx.budget().operations {
            // What the last read left undelivered (a paused client's) goes first.
            if !self.deliver_rest(cx, tally) {
                budget_out = false;
                break;
            }
            self.release_received(cx, tally);
            let max = match self.sessions.read_gate(cx.now(), self.recv.slots()) {
                ReadGate::Open(max) => max,
                ReadGate::Paused { until, new } => {
                    self.pause_reading(until, new, tally);
                    budget_out = false;
                    break;
                }
            };
            self.sessions.io.timers.read_resume = None;
            let batched = self.config.batching
                && (self.recv.gro() || (max > 1 && (!self.receive_singly || got >= 2)));
            let result = if batched {
                self.recv_io.recv_batch(&mut self.recv, &self.socket, max)
            } else {
                self.recv_io.recv_one(&mut self.recv, &self.socket)
            };
            tally.receives += 1;
            cx.counters().add_receives(1);
            match result {
                Ok(n) => {
                    got += n;
                    self.undelivered = 0;
                    if !self.deliver_rest(cx, tally) {
                        budget_out = false;
                        break;
                    }
                    if batched && n < max.min(self.recv.slots()) {
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
        tally.coalesced_receives += std::mem::take(&mut self.recv.coalesced);
        budget_out
    }

    /// Delivers what the last read left undelivered; `false` when a client's or cast
    /// socket's read allowance stopped it (reading pauses until the allowance is back).
    fn deliver_rest(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let received = self.recv.received.len();
        if self.undelivered >= received {
            return true;
        }
        let now = cx.now();
        self.undelivered = self
            .sessions
            .deliver(now, &self.recv, self.undelivered, tally);
        if self.undelivered >= received {
            return true;
        }
        match self.sessions.read_gate(now, self.recv.slots()) {
            ReadGate::Paused { until, new } => self.pause_reading(until, new, tally),
            // Not at the instant delivery stopped; go on at the timer's turn.
            ReadGate::Open(_) => self.pause_reading(now, false, tally),
        }
        false
    }

    /// A client's or cast socket's reading pauses until `until` (`new`: it was reading).
    fn pause_reading(&mut self, until: Instant, new: bool, tally: &mut UdpStats) {
        self.sessions.io.timers.read_resume = Some(until);
        tally.read_pauses += u64::from(new);
    }

    /// Before the receive batch is reused: the echoes queued by their place in it are sent
    /// (after the counters of what was received are published, as at the end of a turn), and
    /// what the socket does not take is copied into the queue.
    fn release_received(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) {
        if self.sessions.io.out.refers_to_received() {
            self.publish_and_flush(cx, std::mem::take(tally));
        }
    }

    /// Publishes `tally` (what was received, with the datagrams queued since), sends what is
    /// queued, then publishes the sends. Returns whether the socket would block.
    fn publish_and_flush(&mut self, cx: &mut Context<'_>, mut tally: UdpStats) -> bool {
        let io = &mut self.sessions.io;
        tally.datagrams_out += std::mem::take(&mut io.datagrams_out);
        tally.rate_delayed += std::mem::take(&mut io.rate_delayed);
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
        self.sessions.io.out.settle(&self.recv.data);
        blocked
    }

    /// Sends until the queue is empty or the socket would block; returns whether it would.
    fn send_queued(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) -> bool {
        let out = &mut self.sessions.io.out;
        let received = &self.recv.data;
        while !out.is_empty() {
            // One datagram goes out with `sendto`: `sendmmsg` of one costs more in the
            // kernel (the message header copied in and its iovec imported). A train needs
            // `sendmmsg` (its segment size rides in a control message).
            let result = if self.config.batching && (out.queued() > 1 || out.next_is_train()) {
                self.send_io
                    .send_batch(out, &self.socket, self.config.batch, received)
            } else {
                self.send_io.send_one(out, &self.socket, received)
            };
            tally.sends += 1;
            cx.counters().add_sends(1);
            match result {
                Ok(n) => tally.datagrams_sent += n as u64,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    Self::take_train_counts(out, tally);
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The first datagram of the batch failed for good (refused, unreachable):
                // drop it and go on.
                Err(_) => {
                    tally.send_errors += 1;
                    out.skip_one();
                }
            }
        }
        Self::take_train_counts(out, tally);
        false
    }

    /// Moves the send queue's GSO counts into `tally`.
    fn take_train_counts(out: &mut SendBatch, tally: &mut UdpStats) {
        tally.trains_sent += std::mem::take(&mut out.trains_sent);
        tally.gso_fallbacks += std::mem::take(&mut out.gso_fallbacks);
    }

    /// The socket's first turns: the expiry timer of a server's sessions, and a client's or
    /// cast socket's one session opens.
    fn ensure_started(&mut self, cx: &mut Context<'_>, tally: &mut UdpStats) {
        if self.expiry_timer.is_none()
            && self.sessions.is_server()
            && let Some(expiry) = self.config.session_expiry
        {
            let period = (expiry / 4).max(Duration::from_millis(10));
            self.expiry_timer = Some(cx.set_timer(period, Some(period)));
        }
        self.sessions.open_single(tally);
    }

    /// The end of every turn: publish what was received, send, publish the sends, keep the
    /// timer. Receive-side counters are published before the replies leave, so a peer that
    /// got a reply finds its datagram (and its session) counted in `stats()`.
    fn finish_turn(&mut self, cx: &mut Context<'_>, tally: UdpStats, mut turn: Turn) -> Turn {
        if self.wind_down(cx) {
            turn = Turn::Done;
        } else {
            self.sessions.turn_end();
            // The turn's end may have finished what a lingering handler had under way.
            self.wind_down(cx);
        }
        let blocked = self.publish_and_flush(cx, tally);
        let io = &mut self.sessions.io;
        if !blocked && !io.out.is_empty() {
            turn = Turn::Again;
        }
        io.shared.set_queued(io.out.bytes(), io.held_bytes);
        io.timers.slot.arm(io.timers.earliest(), cx);
        self.want_writable(cx, blocked);
        turn
    }
}

impl<H: UdpHandler> UdpDriver<H> {
    /// A drain or stop under way: the sessions hear of each phase once (`on_drain`,
    /// `on_stopping`); the socket closes once no session lingers. Whether it closed.
    fn wind_down(&mut self, cx: &mut Context<'_>) -> bool {
        let phase = self.life.phase();
        if self.closing || phase == Phase::Running {
            return self.closing;
        }
        if self.told < phase {
            self.told = phase;
            match phase {
                Phase::Draining => self.sessions.draining(),
                _ => self.sessions.stopping(),
            }
        }
        if self.sessions.lingers() {
            return false;
        }
        // What waits for write allowances leaves with the last flush.
        self.sessions.release_all();
        self.closing = true;
        cx.close();
        true
    }

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

impl<H: UdpHandler> Handler for UdpDriver<H> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }

    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        let mut tally = UdpStats::default();
        self.sessions.io.now = cx.now();
        self.ensure_started(cx, &mut tally);
        if self.sessions.handle_requests(&mut tally) {
            self.life.begin_stop();
        }
        if self.wind_down(cx) {
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
        let now = cx.now();
        self.sessions.io.now = now;
        let mut turn = Turn::Done;
        if Some(timer) == self.expiry_timer {
            self.sessions.expire(now, &mut tally);
        } else if self.sessions.io.timers.slot.fired(timer) {
            self.sessions.fire_timers(now);
            self.sessions.release_due(now);
            // A paused read goes on here: no readiness event may come for the datagrams
            // left in the socket.
            let timers = &mut self.sessions.io.timers;
            if !self.closing && timers.read_resume.is_some_and(|at| at <= now) {
                timers.read_resume = None;
                if self.receive(cx, &mut tally) {
                    turn = Turn::Again;
                }
            }
        }
        self.finish_turn(cx, tally, turn)
    }

    fn on_close(&mut self, _: ark_reactor::CloseReason) {
        self.sessions.io.shared.set_closed();
        let closed = self.sessions.close_all();
        self.counters.add(&UdpStats {
            sessions_closed: closed,
            ..UdpStats::default()
        });
    }
}
