//! Helpers shared by the ark-udp tests.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use ark_testkit::Window;
use ark_udp::{CloseReason, DatagramError, UdpHandler, UdpSession};

/// Echoes every datagram; counts opens, closes and datagram errors.
#[derive(Clone, Default)]
pub struct Echo {
    pub opened: Arc<AtomicU64>,
    pub closes: Arc<Mutex<Vec<CloseReason>>>,
    pub errors: Arc<Mutex<Vec<DatagramError>>>,
    pub messages: Arc<AtomicU64>,
}

impl UdpHandler for Echo {
    fn on_open(&mut self, _: &mut UdpSession<'_>) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        self.messages.fetch_add(1, Ordering::SeqCst);
        session.send(datagram).expect("echo fits");
    }
    fn on_datagram_error(&mut self, _: &mut UdpSession<'_>, error: &DatagramError) {
        self.errors.lock().unwrap().push(error.clone());
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.closes.lock().unwrap().push(reason.clone());
    }
}

/// Sends `messages.total` numbered datagrams of `size` bytes keeping `messages.window` in
/// flight; reports the number echoed once all came back.
pub struct Pinger {
    pub messages: Window,
    pub size: usize,
    pub done: mpsc::Sender<u64>,
}

impl Pinger {
    pub fn new(total: u64, window: u64, size: usize, done: mpsc::Sender<u64>) -> Self {
        Pinger {
            messages: Window::new(total, window),
            size,
            done,
        }
    }

    fn pump(&mut self, session: &mut UdpSession<'_>) {
        while let Some(seq) = self.messages.next_to_send() {
            let mut datagram = vec![0u8; self.size];
            if self.size >= 8 {
                datagram[..8].copy_from_slice(&seq.to_be_bytes());
            }
            session.send(&datagram).unwrap();
        }
    }
}

impl UdpHandler for Pinger {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        self.pump(session);
    }
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        assert_eq!(datagram.len(), self.size);
        self.messages.answered();
        if self.messages.is_done() {
            let _ = self.done.send(self.messages.answers);
        }
        self.pump(session);
    }
}
