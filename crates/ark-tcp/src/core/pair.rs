//! A simulated pair of sessions for the core's tests (quinn-proto's `Pair` is the model): two
//! [`SessionCore`]s joined by in-memory byte pipes with a bounded window, and a simulated
//! clock. Whole connections run in microseconds, deterministically, with no socket.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;

use super::{SessionCore, State};
use crate::config::SessionConfig;
use crate::session::{CloseReason, Session, SessionInfo, TcpHandler};

/// What a [`Scripted`] handler saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    Opened,
    Message(Vec<u8>),
    Writable,
    Stopping,
    Timer(ark_reactor::TimerId),
    Closed(CloseReason),
}

pub(super) type Log = Arc<Mutex<Vec<Seen>>>;

/// A test handler: records every callback; echoes if asked; sends a script on open.
#[derive(Default)]
pub(super) struct Scripted {
    pub(super) log: Log,
    pub(super) echo: bool,
    /// Frames sent on open.
    pub(super) greet: Vec<Vec<u8>>,
    /// Raw bytes sent on open after the frames.
    pub(super) greet_raw: Vec<u8>,
    /// Close right after the greeting.
    pub(super) close_after_greeting: bool,
    /// A goodbye frame sent from `on_stopping`.
    pub(super) goodbye: Option<Vec<u8>>,
}

impl TcpHandler for Scripted {
    fn on_open(&mut self, session: &mut Session<'_>) {
        self.log.lock().unwrap().push(Seen::Opened);
        for frame in &self.greet {
            session.send(frame).expect("room for the greeting");
        }
        if !self.greet_raw.is_empty() {
            session
                .send_raw(&self.greet_raw)
                .expect("room for raw bytes");
        }
        if self.close_after_greeting {
            session.close();
        }
    }
    fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]) {
        self.log
            .lock()
            .unwrap()
            .push(Seen::Message(message.to_vec()));
        if self.echo {
            session.send(message).expect("room for the echo");
        }
    }
    fn on_writable(&mut self, _: &mut Session<'_>) {
        self.log.lock().unwrap().push(Seen::Writable);
    }
    fn on_timer(&mut self, _: &mut Session<'_>, timer: ark_reactor::TimerId) {
        self.log.lock().unwrap().push(Seen::Timer(timer));
    }
    fn on_stopping(&mut self, session: &mut Session<'_>) {
        self.log.lock().unwrap().push(Seen::Stopping);
        if let Some(goodbye) = &self.goodbye {
            session.send(goodbye).expect("room for the goodbye");
        }
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.log.lock().unwrap().push(Seen::Closed(reason.clone()));
    }
}

/// One end of the pair: its core and what is in flight towards it.
pub(super) struct Side {
    pub(super) core: SessionCore<LengthPrefix, Scripted>,
    pub(super) log: Log,
    /// Bytes written by the other side and not yet read by this one.
    inbound: Vec<u8>,
    /// The other side shut down writing (seen after `inbound` is read).
    inbound_fin: bool,
    eof_seen: bool,
    /// The other side reset the connection.
    reset_by_peer: bool,
    /// Most bytes `inbound` may hold: the socket buffers and window between the two.
    pub(super) window: usize,
    /// Whether this side's application reads (false: a peer that does not read).
    pub(super) reading: bool,
    wrote_fin: bool,
    reported: bool,
}

impl Side {
    fn new(handler: Scripted, config: SessionConfig, now: Instant, id: u64) -> Side {
        let log = handler.log.clone();
        let addr = format!("127.0.0.1:{}", 1000 + id).parse().unwrap();
        let info = SessionInfo {
            id,
            peer: addr,
            local: addr,
            socket_buffers: (0, 0),
        };
        let codec = LengthPrefix::default().max_frame_len(1024 * 1024);
        let core = SessionCore::new(
            handler,
            codec,
            Arc::new(config),
            info,
            now,
            Some(Duration::from_secs(5)),
        );
        Side {
            core,
            log,
            inbound: Vec::new(),
            inbound_fin: false,
            eof_seen: false,
            reset_by_peer: false,
            window: 256 * 1024,
            reading: true,
            wrote_fin: false,
            reported: false,
        }
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    /// Messages this side's handler received, in order.
    pub(super) fn messages(&self) -> Vec<Vec<u8>> {
        self.seen()
            .into_iter()
            .filter_map(|s| match s {
                Seen::Message(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    /// How this side's session ended, if it has.
    pub(super) fn closed(&self) -> Option<CloseReason> {
        self.seen().into_iter().find_map(|s| match s {
            Seen::Closed(reason) => Some(reason),
            _ => None,
        })
    }

    /// Reads what arrived, in chunks of at most 64 KiB as a socket read would.
    fn read(&mut self, now: Instant) -> bool {
        if self.reset_by_peer && !self.core.state_is_closed() {
            self.core.handle_error(CloseReason::Reset);
            return true;
        }
        let mut progress = false;
        while self.reading && self.core.wants_read() && !self.inbound.is_empty() {
            let n = self.inbound.len().min(64 * 1024);
            let chunk: Vec<u8> = self.inbound.drain(..n).collect();
            self.core.handle_read(now, &chunk);
            progress = true;
        }
        if self.reading
            && self.core.wants_read()
            && self.inbound.is_empty()
            && self.inbound_fin
            && !self.eof_seen
        {
            self.eof_seen = true;
            self.core.handle_eof(now);
            progress = true;
        }
        progress
    }
}

/// Two sessions joined by in-memory pipes, and the simulated time.
pub(super) struct Pair {
    pub(super) now: Instant,
    pub(super) client: Side,
    pub(super) server: Side,
}

impl Pair {
    /// A connected pair: both sides open (`on_open` has run on each).
    pub(super) fn new(client: Scripted, server: Scripted, config: SessionConfig) -> Pair {
        Self::with(client, config.clone(), server, config, |_| {})
    }

    /// A pair with a configuration per side; `setup` runs before the sides open (to set
    /// windows or a side that does not read).
    pub(super) fn with(
        client: Scripted,
        client_config: SessionConfig,
        server: Scripted,
        server_config: SessionConfig,
        setup: impl FnOnce(&mut Pair),
    ) -> Pair {
        let now = Instant::now();
        let mut pair = Pair {
            now,
            client: Side::new(client, client_config, now, 1),
            server: Side::new(server, server_config, now, 2),
        };
        setup(&mut pair);
        let (c, s) = (*pair.client.core.info(), *pair.server.core.info());
        pair.server.core.handle_connected(now, s);
        pair.client.core.handle_connected(now, c);
        pair.run();
        pair
    }

    /// Moves bytes and events until nothing changes (bounded).
    pub(super) fn run(&mut self) {
        for _ in 0..100_000 {
            let a = Self::step(self.now, &mut self.client, &mut self.server);
            let b = Self::step(self.now, &mut self.server, &mut self.client);
            if !a && !b {
                return;
            }
        }
        panic!("the pair did not settle");
    }

    /// One side writes to the other, shuts down, reads, reports its close.
    fn step(now: Instant, from: &mut Side, to: &mut Side) -> bool {
        let mut progress = from.read(now);
        let room = to.window.saturating_sub(to.inbound.len());
        let bytes = from.core.transmit();
        let n = bytes.len().min(room);
        if n > 0 {
            to.inbound.extend_from_slice(&bytes[..n]);
            from.core.handle_written(now, n);
            progress = true;
        }
        if from.core.poll_shutdown() {
            from.wrote_fin = true;
            to.inbound_fin = true;
            progress = true;
        }
        if let Some(reason) = from.core.close_reason().cloned()
            && !from.reported
        {
            from.reported = true;
            from.core.report_close(reason.clone());
            if reason.resets() {
                to.reset_by_peer = true;
                to.inbound.clear();
            } else if !from.wrote_fin {
                // Closing the socket sends a FIN.
                from.wrote_fin = true;
                to.inbound_fin = true;
            }
            progress = true;
        }
        progress
    }

    /// Advances the clock by `by`, in steps that stop at every deadline on the way, running
    /// the pair after each.
    pub(super) fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        for _ in 0..10_000 {
            let next = [
                self.client.core.poll_timeout(),
                self.server.core.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .filter(|&t| t <= end)
            .min();
            self.now = next.unwrap_or(end);
            self.client.core.handle_timeout(self.now);
            self.server.core.handle_timeout(self.now);
            self.run();
            if next.is_none() {
                return;
            }
        }
        panic!("deadlines did not settle");
    }
}

impl SessionCore<LengthPrefix, Scripted> {
    fn state_is_closed(&self) -> bool {
        matches!(self.state(), State::Closed(_))
    }
}

impl Pair {
    /// The client's application sends `frame` outside a callback (as a handle would).
    pub(super) fn client_send(&mut self, frame: &[u8]) -> Result<(), crate::session::SendError> {
        self.client.core.with_session(|_, s| s.send(frame))
    }

    /// The server's application sends `frame`.
    pub(super) fn server_send(&mut self, frame: &[u8]) {
        self.server
            .core
            .with_session(|_, s| s.send(frame))
            .expect("room in the server's queue");
    }

    /// The server's application sets a timer.
    pub(super) fn server_timer(&mut self, after: Duration) -> ark_reactor::TimerId {
        self.server.core.with_session(|_, s| s.set_timer(after))
    }

    /// The server's application cancels a timer.
    pub(super) fn server_cancel(&mut self, timer: ark_reactor::TimerId) -> bool {
        self.server.core.with_session(|_, s| s.cancel_timer(timer))
    }

    /// The server's application aborts its session.
    pub(super) fn server_abort(&mut self) {
        self.server.core.with_session(|_, s| s.abort());
    }
}
