//! Helpers shared by the ark-tcp tests: an echo server handler, a windowed echo client, waits.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use ark_tcp::{CloseReason, TcpHandler, TcpSession};

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

/// The payload of message `seq` (`len` bytes, letters only so delimiter codecs can carry it).
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((seq as usize * 7 + i) % 26) as u8)
        .collect()
}

/// What a [`Pinger`] reports when it is done or closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PingResult {
    Done { echoed: u64 },
    Closed(CloseReason),
    Mismatch { seq: u64 },
}

/// Sends `total` messages keeping `window` in flight, checks each echo, reports the end.
pub struct Pinger {
    pub total: u64,
    pub window: u64,
    pub size: fn(u64) -> usize,
    pub sent: u64,
    pub echoed: u64,
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
            total,
            window,
            size,
            sent: 0,
            echoed: 0,
            report,
            close_when_done: true,
            reported: false,
        }
    }

    fn send_next(&mut self, session: &mut TcpSession<'_>) {
        while self.sent < self.total && self.sent - self.echoed < self.window {
            let body = payload(self.sent, (self.size)(self.sent));
            session.send(&body).expect("client queue has room");
            self.sent += 1;
        }
    }
}

impl TcpHandler for Pinger {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        self.send_next(session);
    }
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        let seq = self.echoed;
        if message != payload(seq, (self.size)(seq)).as_slice() {
            let _ = self.report.send(PingResult::Mismatch { seq });
            self.reported = true;
            session.abort();
            return;
        }
        self.echoed += 1;
        if self.echoed == self.total {
            let _ = self.report.send(PingResult::Done {
                echoed: self.echoed,
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
