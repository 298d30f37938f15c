//! Helpers shared by the ark-tcp tests: an echo server handler, a windowed echo client, waits.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use ark_tcp::{CloseReason, TcpHandler, TcpSession};
use ark_testkit::Window;

/// Echoes every message; records how each session closed.
#[derive(Clone, Default)]
pub struct Echo {
    pub closes: Arc<Mutex<Vec<CloseReason>>>,
    pub messages: Arc<AtomicU64>,
}

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        self.messages.fetch_add(1, Ordering::Relaxed);
        session.send(message).expect("echo queue has room");
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.closes.lock().unwrap().push(reason.clone());
    }
}

impl Echo {
    /// The closes of its sessions once there are at least `count` (within 20 s; a panic
    /// otherwise, naming what was seen).
    pub fn closes_when(&self, count: usize) -> Vec<CloseReason> {
        let seen = ark_testkit::wait_until(std::time::Duration::from_secs(20), || {
            self.closes.lock().unwrap().len() >= count
        });
        let closes = self.closes.lock().unwrap().clone();
        assert!(seen, "{count} closes within 20 s, saw {closes:?}");
        closes
    }
}

pub use ark_testkit::payload;

/// What a [`Pinger`] reports when it is done or closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingResult {
    Done { echoed: u64 },
    Closed(CloseReason),
    Mismatch { seq: u64 },
}

/// Sends `total` messages keeping `window` in flight, checks each echo, reports the end.
pub struct Pinger {
    pub messages: Window,
    pub size: fn(u64) -> usize,
    pub report: mpsc::Sender<PingResult>,
    pub close_when_done: bool,
    pub reported: bool,
}

impl Pinger {
    pub fn new(
        total: u64,
        window: u64,
        size: fn(u64) -> usize,
        report: mpsc::Sender<PingResult>,
    ) -> Self {
        Pinger {
            messages: Window::new(total, window),
            size,
            report,
            close_when_done: true,
            reported: false,
        }
    }

    fn send_next(&mut self, session: &mut TcpSession<'_>) {
        while let Some(seq) = self.messages.next_to_send() {
            session
                .send(&payload(seq, (self.size)(seq)))
                .expect("client queue has room");
        }
    }
}

impl TcpHandler for Pinger {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        self.send_next(session);
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        let seq = self.messages.answered();
        if message != payload(seq, (self.size)(seq)).as_slice() {
            let _ = self.report.send(PingResult::Mismatch { seq });
            self.reported = true;
            session.abort();
            return;
        }
        if self.messages.is_done() {
            let _ = self.report.send(PingResult::Done {
                echoed: self.messages.answers,
            });
            self.reported = true;
            if self.close_when_done {
                session.close();
            }
            return;
        }
        self.send_next(session);
    }
    fn on_close(&mut self, reason: &CloseReason) {
        if !self.reported {
            let _ = self.report.send(PingResult::Closed(reason.clone()));
        }
    }
}
