//! Helpers shared by the ark-reactor tests.
#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ark_reactor::{CloseReason, Context, Handler, Ready, TimerId, Turn};
use mio::net::UdpSocket;

/// A source that registers nothing: for tests about placement and timers, where no socket
/// is needed.
#[derive(Debug, Default)]
pub struct NoSocket;

impl mio::event::Source for NoSocket {
    fn register(&mut self, _: &mio::Registry, _: mio::Token, _: mio::Interest) -> io::Result<()> {
        Ok(())
    }
    fn reregister(&mut self, _: &mio::Registry, _: mio::Token, _: mio::Interest) -> io::Result<()> {
        Ok(())
    }
    fn deregister(&mut self, _: &mio::Registry) -> io::Result<()> {
        Ok(())
    }
}

/// A UDP socket on 127.0.0.1 with an ephemeral port.
pub fn udp() -> (UdpSocket, SocketAddr) {
    let socket = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// Counts what happens to a source.
#[derive(Debug, Default)]
pub struct Tally {
    pub ready: AtomicU64,
    pub timers: AtomicU64,
    pub closed: AtomicU64,
    pub stopped: AtomicU64,
}

/// Work a [`TimerSource`] does on its first readiness.
pub type FirstReady = Box<dyn FnOnce(&mut Context<'_>) + Send>;

/// A handler that records its timer firings (timer ids in order) and runs a closure on its
/// first readiness.
pub struct TimerSource<S> {
    pub socket: S,
    pub fired: Arc<std::sync::Mutex<Vec<TimerId>>>,
    pub tally: Arc<Tally>,
    pub on_first_ready: Option<FirstReady>,
}

impl<S: mio::event::Source + Send + 'static> Handler for TimerSource<S> {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        self.tally.ready.fetch_add(1, Ordering::SeqCst);
        if let Some(f) = self.on_first_ready.take() {
            f(cx);
        }
        Turn::Done
    }
    fn on_timer(&mut self, _: &mut Context<'_>, timer: TimerId) -> Turn {
        self.tally.timers.fetch_add(1, Ordering::SeqCst);
        self.fired.lock().unwrap().push(timer);
        Turn::Done
    }
    fn on_close(&mut self, reason: CloseReason) {
        let counter = match reason {
            CloseReason::Stopped => &self.tally.stopped,
            _ => &self.tally.closed,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}
