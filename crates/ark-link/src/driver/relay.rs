//! A UDP relay on its own thread that puts a conditioned link between clients and a server:
//! clients send to the relay's address; each client gets a socket of its own towards the
//! server (so the server sees one peer per client); both directions pass through a
//! [`Conditioner`].

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};

use crate::driver::thread::{Control, LISTEN, RelayThread, Spare, WAKE, loopback_of, wait};
use crate::proto::conditioner::{Conditioner, LinkConfig, RelayCounters};

/// Most clients one relay serves; datagrams from more are dropped (and counted).
pub const MAX_CLIENTS: usize = 4096;

/// Largest datagram relayed.
const MAX_DATAGRAM: usize = 65_535;

/// A datagram in flight and the client it belongs to.
#[derive(Debug, Clone)]
struct Datagram {
    client: usize,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for Datagram {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A running relay: [`UdpRelay::start`], send to [`local_addr`](UdpRelay::local_addr),
/// [`stop`](UdpRelay::stop) for the counters.
///
/// ```
/// use ark_link::{LinkConfig, UdpRelay};
/// use std::net::UdpSocket;
/// use std::time::Duration;
///
/// let server = UdpSocket::bind("127.0.0.1:0")?;
/// let relay = UdpRelay::start(server.local_addr()?, LinkConfig::default(), LinkConfig::default())?;
/// let client = UdpSocket::bind("127.0.0.1:0")?;
/// client.send_to(b"ping", relay.local_addr())?;
/// let mut buf = [0u8; 16];
/// server.set_read_timeout(Some(Duration::from_secs(5)))?;
/// let (n, _) = server.recv_from(&mut buf)?;
/// assert_eq!(&buf[..n], b"ping");
/// assert_eq!(relay.stop().upstream.delivered, 1);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct UdpRelay {
    thread: RelayThread,
}

impl UdpRelay {
    /// Starts a relay to `server` on the loopback address of its family: `upstream` is the
    /// link from clients to the server, `downstream` back.
    ///
    /// # Errors
    /// A socket or the poller could not be made.
    pub fn start(
        server: SocketAddr,
        upstream: LinkConfig,
        downstream: LinkConfig,
    ) -> io::Result<UdpRelay> {
        let loopback = loopback_of(server);
        let mut listen = bind(loopback)?;
        let addr = listen.local_addr()?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listen, LISTEN, Interest::READABLE)?;
        let mut relay = Relay {
            listen,
            server,
            loopback,
            clients: Vec::new(),
            by_addr: HashMap::new(),
            up: Conditioner::new(upstream),
            down: Conditioner::new(downstream),
            spare: Spare::new(4096),
            buf: vec![0; MAX_DATAGRAM],
            extra: RelayCounters::default(),
            poll,
        };
        let waker = RelayThread::waker(&relay.poll)?;
        let thread = RelayThread::spawn("ark-link-relay", addr, waker, move |control| {
            relay.run(&control)
        })?;
        Ok(UdpRelay { thread })
    }

    /// Where clients send.
    pub fn local_addr(&self) -> SocketAddr {
        self.thread.local_addr()
    }

    /// The counters so far (updated at every turn of the relay).
    pub fn counters(&self) -> RelayCounters {
        self.thread.counters()
    }

    /// Stops the relay (datagrams still in flight are dropped, not counted as delivered) and
    /// returns its counters.
    pub fn stop(self) -> RelayCounters {
        self.thread.stop()
    }
}

/// Socket buffers of the relay's sockets: a burst the relay has not read yet must not be
/// dropped by the kernel, outside the link's model.
const SOCKET_BUFFER: usize = 4 << 20;

/// A non-blocking UDP socket bound to `addr` with large buffers.
fn bind(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_recv_buffer_size(SOCKET_BUFFER)?;
    socket.set_send_buffer_size(SOCKET_BUFFER)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// The relay thread's state.
struct Relay {
    poll: Poll,
    listen: UdpSocket,
    server: SocketAddr,
    loopback: SocketAddr,
    /// Per client: its address and its socket towards the server.
    clients: Vec<(SocketAddr, UdpSocket)>,
    by_addr: HashMap<SocketAddr, usize>,
    up: Conditioner<Datagram>,
    down: Conditioner<Datagram>,
    /// Buffers of released datagrams, reused (at most 4096 kept).
    spare: Spare,
    buf: Vec<u8>,
    extra: RelayCounters,
}

impl Relay {
    fn run(&mut self, control: &Control) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        while !control.stopping() {
            let next = [self.up.next_release(), self.down.next_release()]
                .into_iter()
                .flatten()
                .min();
            wait(&mut self.poll, &mut events, next)?;
            for event in events.iter() {
                match event.token() {
                    LISTEN => self.read_clients()?,
                    WAKE => {}
                    Token(client) => self.read_server(client)?,
                }
            }
            self.release(Instant::now());
            control.publish(RelayCounters {
                upstream: self.up.counters(),
                downstream: self.down.counters(),
                ..self.extra
            });
        }
        Ok(())
    }

    fn read_clients(&mut self) -> io::Result<()> {
        loop {
            let (len, from) = match self.listen.recv_from(&mut self.buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP error from an earlier send: nothing to read here.
                Err(_) => continue,
            };
            let Some(client) = self.client(from)? else {
                self.extra.refused_clients += 1;
                continue;
            };
            let bytes = self.spare.copy(&self.buf[..len]);
            self.up.offer(Instant::now(), Datagram { client, bytes });
        }
    }

    fn read_server(&mut self, client: usize) -> io::Result<()> {
        loop {
            let Some((_, socket)) = self.clients.get(client) else {
                return Ok(());
            };
            let len = match socket.recv(&mut self.buf) {
                Ok(len) => len,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => continue,
            };
            let bytes = self.spare.copy(&self.buf[..len]);
            self.down.offer(Instant::now(), Datagram { client, bytes });
        }
    }

    /// The index of the client at `addr`, with a socket towards the server made on first
    /// sight; `None` past [`MAX_CLIENTS`].
    fn client(&mut self, addr: SocketAddr) -> io::Result<Option<usize>> {
        if let Some(&index) = self.by_addr.get(&addr) {
            return Ok(Some(index));
        }
        if self.clients.len() >= MAX_CLIENTS {
            return Ok(None);
        }
        let index = self.clients.len();
        let mut socket = bind(self.loopback)?;
        socket.connect(self.server)?;
        self.poll
            .registry()
            .register(&mut socket, Token(index), Interest::READABLE)?;
        self.clients.push((addr, socket));
        self.by_addr.insert(addr, index);
        Ok(Some(index))
    }

    /// Sends on every datagram due at `now`, both ways.
    fn release(&mut self, now: Instant) {
        while let Some(datagram) = self.up.poll(now) {
            let (_, socket) = &self.clients[datagram.client];
            if socket.send(&datagram.bytes).is_err() {
                self.extra.send_errors += 1;
            }
            self.spare.give(datagram.bytes);
        }
        while let Some(datagram) = self.down.poll(now) {
            let (addr, _) = self.clients[datagram.client];
            if self.listen.send_to(&datagram.bytes, addr).is_err() {
                self.extra.send_errors += 1;
            }
            self.spare.give(datagram.bytes);
        }
    }
}
