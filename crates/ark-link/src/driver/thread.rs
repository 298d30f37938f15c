//! What both relays share: the thread they run on and its handle (start, counters, stop),
//! the turn of their poll loop, and the reuse of datagram and chunk buffers.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use mio::{Events, Poll, Token, Waker};

use crate::proto::conditioner::RelayCounters;

/// The token of a relay's listening socket.
pub(crate) const LISTEN: Token = Token(usize::MAX - 1);
/// The token of the waker that stops a relay.
pub(crate) const WAKE: Token = Token(usize::MAX);

/// The loopback address (port 0) of `server`'s family.
pub(crate) fn loopback_of(server: SocketAddr) -> SocketAddr {
    if server.is_ipv6() {
        "[::1]:0".parse().expect("valid")
    } else {
        "127.0.0.1:0".parse().expect("valid")
    }
}

/// What the relay thread shares with its handle: the stop flag and the counters it publishes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Control {
    stop: Arc<AtomicBool>,
    counters: Arc<Mutex<RelayCounters>>,
}

impl Control {
    /// Whether the handle asked the relay to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Publishes the counters of this turn.
    pub(crate) fn publish(&self, counters: RelayCounters) {
        *self.counters.lock().unwrap_or_else(PoisonError::into_inner) = counters;
    }

    fn counters(&self) -> RelayCounters {
        *self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One poll of a relay's loop: waits for events until `next_release` (or for ever without
/// one); an interrupted wait is an empty turn.
///
/// # Errors
/// The poller failed.
pub(crate) fn wait(
    poll: &mut Poll,
    events: &mut Events,
    next_release: Option<Instant>,
) -> io::Result<()> {
    let timeout = next_release.map(|at| at.saturating_duration_since(Instant::now()));
    match poll.poll(events, timeout) {
        Err(e) if e.kind() != io::ErrorKind::Interrupted => Err(e),
        _ => Ok(()),
    }
}

/// A relay's thread and what its handle needs: the address clients use, the waker and the
/// control it shares with the thread. Dropping it stops the thread and joins it.
#[derive(Debug)]
pub(crate) struct RelayThread {
    addr: SocketAddr,
    waker: Waker,
    control: Control,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl RelayThread {
    /// The waker (token [`WAKE`]) of a relay's poller, for [`spawn`](Self::spawn).
    ///
    /// # Errors
    /// The waker could not be made.
    pub(crate) fn waker(poll: &Poll) -> io::Result<Waker> {
        Waker::new(poll.registry(), WAKE)
    }

    /// Runs `relay` on a thread called `name`; clients reach it at `addr`; the handle stops
    /// it through `waker` (from [`waker`](Self::waker) of the relay's poller).
    ///
    /// # Errors
    /// The thread could not be made.
    pub(crate) fn spawn(
        name: &str,
        addr: SocketAddr,
        waker: Waker,
        relay: impl FnOnce(Control) -> io::Result<()> + Send + 'static,
    ) -> io::Result<RelayThread> {
        let control = Control::default();
        let shared = control.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || relay(shared))?;
        Ok(RelayThread {
            addr,
            waker,
            control,
            thread: Some(thread),
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub(crate) fn counters(&self) -> RelayCounters {
        self.control.counters()
    }

    /// Stops the thread, joins it and returns the last counters it published.
    pub(crate) fn stop(mut self) -> RelayCounters {
        self.halt();
        self.counters()
    }

    fn halt(&mut self) {
        self.control.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for RelayThread {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Buffers of packets written on, reused for the next reads (no allocation per packet once
/// warm), at most `max` kept.
#[derive(Debug)]
pub(crate) struct Spare {
    buffers: Vec<Vec<u8>>,
    max: usize,
}

impl Spare {
    pub(crate) fn new(max: usize) -> Spare {
        Spare {
            buffers: Vec::new(),
            max,
        }
    }

    /// A buffer holding a copy of `bytes`.
    pub(crate) fn copy(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut buffer = self.buffers.pop().unwrap_or_default();
        buffer.clear();
        buffer.extend_from_slice(bytes);
        buffer
    }

    /// Takes a buffer back for reuse.
    pub(crate) fn give(&mut self, buffer: Vec<u8>) {
        if self.buffers.len() < self.max {
            self.buffers.push(buffer);
        }
    }
}
