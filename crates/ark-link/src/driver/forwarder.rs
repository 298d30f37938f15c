//! A one-socket UDP forwarder between one client and a server, for attack tests: both ends
//! see the forwarder's address as their peer's, so whatever else is sent from that socket
//! (a forgery) carries the peer's own address, the way an off-path attacker who spoofs
//! source addresses would send it.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::driver::thread::loopback_of;

/// Which way a datagram goes through a [`UdpForwarder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Towards {
    /// From the client to the server.
    Server,
    /// From the server back to the client.
    Client,
}

/// What a [`UdpForwarder`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwarderCounters {
    /// Datagrams forwarded to the server.
    pub to_server: u64,
    /// Datagrams forwarded to the client.
    pub to_client: u64,
    /// Datagrams the filter dropped.
    pub filtered: u64,
    /// Datagrams sent with [`UdpForwarder::inject`].
    pub injected: u64,
}

/// A forwarder on a thread of its own between the one client that writes to it and `server`,
/// with a filter that may drop datagrams either way; from any thread,
/// [`inject`](UdpForwarder::inject) sends from its socket (a forgery with the peer's
/// address). The client is whoever last sent from an address other than the server's. Ends
/// at [`stop`](UdpForwarder::stop), on drop, or at the time limit given to
/// [`start`](UdpForwarder::start).
///
/// ```
/// use ark_link::{Towards, UdpForwarder};
/// use std::net::UdpSocket;
/// use std::time::Duration;
///
/// let server = UdpSocket::bind("127.0.0.1:0")?;
/// server.set_read_timeout(Some(Duration::from_secs(5)))?;
/// let forwarder = UdpForwarder::start(server.local_addr()?, Duration::from_secs(30), |_, d| d != b"drop")?;
/// let client = UdpSocket::bind("127.0.0.1:0")?;
/// client.send_to(b"drop", forwarder.local_addr())?;
/// client.send_to(b"ping", forwarder.local_addr())?;
/// let mut buf = [0u8; 16];
/// let (n, from) = server.recv_from(&mut buf)?;
/// assert_eq!((&buf[..n], from), (&b"ping"[..], forwarder.local_addr()));
/// forwarder.inject(Towards::Server, b"forged")?;
/// let (n, from) = server.recv_from(&mut buf)?;
/// assert_eq!((&buf[..n], from), (&b"forged"[..], forwarder.local_addr()));
/// let counters = forwarder.stop();
/// assert_eq!((counters.to_server, counters.filtered, counters.injected), (1, 1, 1));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UdpForwarder {
    shared: Arc<Shared>,
    server: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

/// What the forwarder's thread and its owner share.
#[derive(Debug)]
struct Shared {
    socket: UdpSocket,
    client: Mutex<Option<SocketAddr>>,
    stop: AtomicBool,
    to_server: AtomicU64,
    to_client: AtomicU64,
    filtered: AtomicU64,
    injected: AtomicU64,
}

/// How long the thread waits for a datagram before it looks at the stop flag again.
const POLL_EVERY: Duration = Duration::from_millis(2);

impl UdpForwarder {
    /// Starts a forwarder to `server` on the loopback address of its family; `keep` says,
    /// for each datagram and the way it goes, whether to forward it. It ends after `limit`
    /// at the latest.
    ///
    /// # Errors
    /// The socket could not be made or its thread could not start.
    pub fn start<F>(server: SocketAddr, limit: Duration, keep: F) -> io::Result<UdpForwarder>
    where
        F: FnMut(Towards, &[u8]) -> bool + Send + 'static,
    {
        let socket = UdpSocket::bind(loopback_of(server))?;
        socket.set_read_timeout(Some(POLL_EVERY))?;
        let shared = Arc::new(Shared {
            socket,
            client: Mutex::new(None),
            stop: AtomicBool::new(false),
            to_server: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
            filtered: AtomicU64::new(0),
            injected: AtomicU64::new(0),
        });
        let running = shared.clone();
        let thread = thread::Builder::new()
            .name("ark-link-forwarder".into())
            .spawn(move || running.run(server, Instant::now() + limit, keep))?;
        Ok(UdpForwarder {
            shared,
            server,
            thread: Some(thread),
        })
    }

    /// Where the client sends (and where both ends see their peer).
    ///
    /// # Panics
    /// Never in practice: the socket is bound, so its address is known.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared
            .socket
            .local_addr()
            .expect("a bound socket has an address")
    }

    /// The client's address, once it has sent.
    pub fn client(&self) -> Option<SocketAddr> {
        *self
            .shared
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `datagram` from the forwarder's socket to the server or the client. Returns
    /// `Ok(false)` (and sends nothing) towards a client that has not sent yet.
    ///
    /// # Errors
    /// The send failed.
    pub fn inject(&self, towards: Towards, datagram: &[u8]) -> io::Result<bool> {
        let to = match towards {
            Towards::Server => self.server,
            Towards::Client => match self.client() {
                Some(client) => client,
                None => return Ok(false),
            },
        };
        self.shared.socket.send_to(datagram, to)?;
        self.shared.injected.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// What the forwarder did so far.
    pub fn counters(&self) -> ForwarderCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ForwarderCounters {
            to_server: get(&self.shared.to_server),
            to_client: get(&self.shared.to_client),
            filtered: get(&self.shared.filtered),
            injected: get(&self.shared.injected),
        }
    }

    /// Stops forwarding (within a few milliseconds) and returns the counters.
    pub fn stop(mut self) -> ForwarderCounters {
        self.end();
        self.counters()
    }

    fn end(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for UdpForwarder {
    fn drop(&mut self) {
        self.end();
    }
}

impl Shared {
    /// The forwarder's loop, until the stop flag or `deadline`.
    fn run<F>(&self, server: SocketAddr, deadline: Instant, mut keep: F)
    where
        F: FnMut(Towards, &[u8]) -> bool,
    {
        let mut buf = vec![0u8; 65_536];
        while !self.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            let Ok((n, from)) = self.socket.recv_from(&mut buf) else {
                continue;
            };
            let (towards, to, count) = if from == server {
                let client = *self.client.lock().unwrap_or_else(PoisonError::into_inner);
                (Towards::Client, client, &self.to_client)
            } else {
                *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(from);
                (Towards::Server, Some(server), &self.to_server)
            };
            let Some(to) = to else { continue };
            if !keep(towards, &buf[..n]) {
                self.filtered.fetch_add(1, Ordering::Relaxed);
            } else if self.socket.send_to(&buf[..n], to).is_ok() {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
