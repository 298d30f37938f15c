//! A simulated pair of sessions for the core's tests (quinn-proto's `Pair` is the model): two
//! [`Simulator`]s joined by in-memory byte pipes with bounded windows, on one simulated clock.
//! Whole connections run in microseconds, deterministically, with no socket.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_frame::LengthPrefix;

use super::SessionCore;
use crate::config::TcpConfig;
use crate::error::CloseReason;
use crate::handler::{TcpHandler, TcpSession};
use crate::proto::sim::Simulator;

/// What a [`Scripted`] handler saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    Opened,
    Message(Vec<u8>),
    Writable,
    Draining,
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
    /// A frame sent from `on_idle`.
    pub(super) idle_goodbye: Option<Vec<u8>>,
}

impl TcpHandler for Scripted {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
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
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        self.log
            .lock()
            .unwrap()
            .push(Seen::Message(message.to_vec()));
        if self.echo {
            session.send(message).expect("room for the echo");
        }
    }
    fn on_writable(&mut self, _: &mut TcpSession<'_>) {
        self.log.lock().unwrap().push(Seen::Writable);
    }
    fn on_timer(&mut self, _: &mut TcpSession<'_>, timer: ark_reactor::TimerId) {
        self.log.lock().unwrap().push(Seen::Timer(timer));
    }
    fn on_idle(&mut self, session: &mut TcpSession<'_>) {
        if let Some(goodbye) = &self.idle_goodbye {
            session.send(goodbye).expect("room for the goodbye");
        }
    }
    fn on_drain(&mut self, _: &mut TcpSession<'_>) {
        self.log.lock().unwrap().push(Seen::Draining);
    }
    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        self.log.lock().unwrap().push(Seen::Stopping);
        if let Some(goodbye) = &self.goodbye {
            session.send(goodbye).expect("room for the goodbye");
        }
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.log.lock().unwrap().push(Seen::Closed(reason.clone()));
    }
}

/// One end of the pair: a simulated session and how its peer treats it.
pub(super) struct Side {
    pub(super) sim: Simulator<LengthPrefix, Scripted>,
    pub(super) log: Log,
    /// Most bytes in flight towards this side: the socket buffers and window between the two.
    pub(super) window: usize,
    /// Whether this side reads (false: a peer that does not read).
    pub(super) reading: bool,
    /// The other side's end of stream or reset has been passed on.
    end_passed: bool,
}

impl Side {
    fn new(handler: Scripted, config: TcpConfig, now: Instant) -> Side {
        let log = handler.log.clone();
        let codec = LengthPrefix::default().with_max_frame_len(1024 * 1024);
        Side {
            sim: Simulator::starting_at(handler, codec, config, now),
            log,
            window: 256 * 1024,
            reading: true,
            end_passed: false,
        }
    }

    /// The session core.
    pub(super) fn core(&self) -> &SessionCore<LengthPrefix, Scripted> {
        self.sim.core()
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
}

/// Two simulated sessions joined by in-memory pipes with bounded windows, on one clock.
pub(super) struct Pair {
    pub(super) now: Instant,
    pub(super) client: Side,
    pub(super) server: Side,
}

impl Pair {
    /// A connected pair: both sides open (`on_open` has run on each).
    pub(super) fn new(client: Scripted, server: Scripted, config: TcpConfig) -> Pair {
        Self::with(client, config.clone(), server, config, |_| {})
    }

    /// A pair with a configuration per side; `setup` runs before bytes move (to set windows
    /// or a side that does not read).
    pub(super) fn with(
        client: Scripted,
        client_config: TcpConfig,
        server: Scripted,
        server_config: TcpConfig,
        setup: impl FnOnce(&mut Pair),
    ) -> Pair {
        let now = Instant::now();
        let mut pair = Pair {
            now,
            client: Side::new(client, client_config, now),
            server: Side::new(server, server_config, now),
        };
        setup(&mut pair);
        pair.run();
        pair
    }

    /// Gives each side's session the window of its peer (tests change windows directly).
    fn sync_windows(&mut self) {
        self.client.sim.set_window(self.server.window);
        self.server.sim.set_window(self.client.window);
    }

    /// Moves bytes, ends of stream and resets until nothing changes (bounded).
    pub(super) fn run(&mut self) {
        self.sync_windows();
        for _ in 0..100_000 {
            let a = Self::transfer(&mut self.client, &mut self.server);
            let b = Self::transfer(&mut self.server, &mut self.client);
            if !a && !b {
                return;
            }
        }
        panic!("the pair did not settle");
    }

    /// What `from` wrote reaches `to` if `to` reads, within `to`'s window; then `from`'s end
    /// of stream or reset.
    fn transfer(from: &mut Side, to: &mut Side) -> bool {
        let mut progress = false;
        if to.reading {
            let room = to.window.saturating_sub(to.sim.unconsumed());
            let bytes = from.sim.peer_read_up_to(room);
            if !bytes.is_empty() {
                to.sim.peer_send(&bytes);
                progress = true;
            }
        }
        if !to.end_passed && from.sim.was_reset() {
            to.end_passed = true;
            to.sim.peer_reset();
            progress = true;
        } else if !to.end_passed && from.sim.ended_stream() && from.sim.unread() == 0 {
            to.end_passed = true;
            to.sim.peer_close();
            progress = true;
        }
        progress
    }

    /// Advances the clock by `by`, stopping at every deadline of either side on the way.
    pub(super) fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        for _ in 0..10_000 {
            let next = [
                self.client.sim.next_deadline(),
                self.server.sim.next_deadline(),
            ]
            .into_iter()
            .flatten()
            .filter(|&t| t <= end)
            .min();
            let to = next.unwrap_or(end).max(self.now);
            self.client.sim.advance(to - self.client.sim.now());
            self.server.sim.advance(to - self.server.sim.now());
            self.now = to;
            self.run();
            if next.is_none() {
                return;
            }
        }
        panic!("deadlines did not settle");
    }

    /// The client's application sends `frame` outside a callback (as a handle would).
    pub(super) fn client_send(&mut self, frame: &[u8]) -> Result<(), crate::error::SendError> {
        self.sync_windows();
        let result = self.client.sim.with_session(|_, s| s.send(frame));
        self.run();
        result
    }

    /// The server's application sends `frame`.
    pub(super) fn server_send(&mut self, frame: &[u8]) {
        self.sync_windows();
        self.server
            .sim
            .with_session(|_, s| s.send(frame))
            .expect("room in the server's queue");
    }

    /// The server's application sets a timer.
    pub(super) fn server_timer(&mut self, after: Duration) -> ark_reactor::TimerId {
        self.server.sim.with_session(|_, s| s.set_timer(after))
    }

    /// The server's application cancels a timer.
    pub(super) fn server_cancel(&mut self, timer: ark_reactor::TimerId) -> bool {
        self.server.sim.with_session(|_, s| s.cancel_timer(timer))
    }

    /// The server's application aborts its session.
    pub(super) fn server_abort(&mut self) {
        self.sync_windows();
        self.server.sim.with_session(|_, s| s.abort());
    }

    /// The server's owner drains: `on_drain`, and the session goes on.
    pub(super) fn server_drain(&mut self) {
        self.sync_windows();
        self.server.sim.drain();
        self.run();
    }

    /// The server's owner stops: `on_stopping`, then a graceful close.
    pub(super) fn server_stop(&mut self) {
        self.sync_windows();
        self.server.sim.stop();
        self.run();
    }
}
