//! Helpers shared by the ark-tcp tests: an echo server handler, a windowed echo client, waits.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_tcp::{CloseReason, Session, TcpHandler};

/// Echoes every message; records how each session closed.
#[derive(Clone, Default)]
pub struct Echo {
    pub closes: Arc<Mutex<Vec<CloseReason>>>,
    pub messages: Arc<AtomicU64>,
}

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]) {
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

    fn send_next(&mut self, session: &mut Session<'_>) {
        while self.sent < self.total && self.sent - self.echoed < self.window {
            let body = payload(self.sent, (self.size)(self.sent));
            session.send(&body).expect("client queue has room");
            self.sent += 1;
        }
    }
}

impl TcpHandler for Pinger {
    fn on_open(&mut self, session: &mut Session<'_>) {
        self.send_next(session);
    }
    fn on_message(&mut self, session: &mut Session<'_>, message: &[u8]) {
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

/// Waits for `condition`, polling every millisecond, for at most `timeout`.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Process CPU time (user + system) from `getrusage`, in seconds.
pub fn process_cpu_seconds() -> f64 {
    let mut usage = libc::rusage {
        ru_utime: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        ru_stime: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        ru_maxrss: 0,
        ru_ixrss: 0,
        ru_idrss: 0,
        ru_isrss: 0,
        ru_minflt: 0,
        ru_majflt: 0,
        ru_nswap: 0,
        ru_inblock: 0,
        ru_oublock: 0,
        ru_msgsnd: 0,
        ru_msgrcv: 0,
        ru_nsignals: 0,
        ru_nvcsw: 0,
        ru_nivcsw: 0,
    };
    // SAFETY: `usage` is a valid, writable `rusage` for the duration of the call.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage failed");
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
