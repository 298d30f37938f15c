//! A TCP relay on its own thread that puts a conditioned link between clients and a server:
//! each accepted connection gets one towards the server, and the bytes read on either side
//! pass through that direction's [`Conditioner`] (shared by all connections, as one link is)
//! before they are written on. A stream cannot lose, reorder or duplicate bytes — TCP repairs
//! that below the application — so this relay takes delay, jitter (order kept) and a rate;
//! the end of a stream travels the link like its bytes.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::driver::thread::{Control, LISTEN, RelayThread, Spare, WAKE, loopback_of, wait};
use crate::proto::conditioner::RelayCounters;
use crate::proto::conditioner::{Conditioner, LinkConfig};
/// Bytes read at once from one side.
const CHUNK: usize = 64 * 1024;
/// Bytes of one direction of one connection in flight or waiting to be written, at most;
/// past it the relay stops reading that side (backpressure, bounded memory).
const IN_FLIGHT_LIMIT: usize = 4 << 20;
/// Connections one relay serves at most; more are refused (and counted).
pub const MAX_CONNECTIONS: usize = 1024;

/// Why a link cannot condition a stream.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a TCP relay cannot {0} bytes of a stream (TCP repairs loss below the application): use delay, jitter and rate"
)]
pub struct StreamLinkError(&'static str);

/// A chunk of one direction of one connection; an empty chunk is the end of the stream.
#[derive(Debug, Clone)]
struct Chunk {
    conn: usize,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// A running TCP relay: [`TcpRelay::start`], connect to [`local_addr`](TcpRelay::local_addr),
/// [`stop`](TcpRelay::stop) for the counters.
#[derive(Debug)]
pub struct TcpRelay {
    thread: RelayThread,
}

/// `config` for a stream: no loss, reordering or duplication; the rate queue never drops
/// (the relay's own backpressure bounds it).
fn for_stream(mut config: LinkConfig) -> Result<LinkConfig, StreamLinkError> {
    if config.loss > 0.0 || config.burst.is_some() {
        return Err(StreamLinkError("lose"));
    }
    if config.reorder > 0.0 {
        return Err(StreamLinkError("reorder"));
    }
    if config.duplicate > 0.0 {
        return Err(StreamLinkError("duplicate"));
    }
    config.queue_limit = Duration::from_secs(24 * 3600);
    config.max_in_flight = usize::MAX;
    Ok(config)
}

impl TcpRelay {
    /// Starts a relay to `server` on the loopback address of its family: `upstream` is the
    /// link from clients to the server, `downstream` back.
    ///
    /// # Errors
    /// A link that loses, reorders or duplicates ([`StreamLinkError`], as
    /// `io::ErrorKind::InvalidInput`), or a socket or the poller could not be made.
    pub fn start(
        server: SocketAddr,
        upstream: LinkConfig,
        downstream: LinkConfig,
    ) -> io::Result<TcpRelay> {
        let invalid = |e: StreamLinkError| io::Error::new(io::ErrorKind::InvalidInput, e);
        let (upstream, downstream) = (
            for_stream(upstream).map_err(invalid)?,
            for_stream(downstream).map_err(invalid)?,
        );
        let mut listener = TcpListener::bind(loopback_of(server))?;
        let addr = listener.local_addr()?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTEN, Interest::READABLE)?;
        let mut relay = StreamRelay {
            poll,
            listener,
            server,
            conns: HashMap::new(),
            next_conn: 0,
            links: [Conditioner::new(upstream), Conditioner::new(downstream)],
            buf: vec![0; CHUNK],
            spare: Spare::new(64),
            extra: RelayCounters::default(),
        };
        let waker = RelayThread::waker(&relay.poll)?;
        let thread = RelayThread::spawn("ark-link-tcp-relay", addr, waker, move |control| {
            relay.run(&control)
        })?;
        Ok(TcpRelay { thread })
    }

    /// Where clients connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.thread.local_addr()
    }

    /// The counters so far (chunks as packets; an end of stream counts as an empty one).
    pub fn counters(&self) -> RelayCounters {
        self.thread.counters()
    }

    /// Stops the relay (closing every connection) and returns its counters.
    pub fn stop(self) -> RelayCounters {
        self.thread.stop()
    }
}

/// One side of a relayed connection: its socket, what waits to be written to it, whether it
/// may have bytes to read, and the bytes of its direction in flight.
#[derive(Debug)]
struct Side {
    stream: TcpStream,
    out: Vec<u8>,
    /// The end of the other side's stream reached this side: shut down writing once `out`
    /// is written.
    finish: bool,
    readable: bool,
    /// Writing is shut down.
    shut: bool,
    /// Bytes read from this side and not yet written to the other.
    in_flight: usize,
    ended: bool,
}

impl Side {
    fn new(stream: TcpStream) -> Side {
        Side {
            stream,
            out: Vec::new(),
            finish: false,
            readable: true,
            shut: false,
            in_flight: 0,
            ended: false,
        }
    }
}

/// Side 0 faces the client (its bytes go upstream, link 0), side 1 the server.
type Pair = [Side; 2];

struct StreamRelay {
    poll: Poll,
    listener: TcpListener,
    server: SocketAddr,
    conns: HashMap<usize, Pair>,
    next_conn: usize,
    links: [Conditioner<Chunk>; 2],
    buf: Vec<u8>,
    /// Buffers of chunks written on, reused for the next reads (at most 64 kept).
    spare: Spare,
    extra: RelayCounters,
}

impl StreamRelay {
    fn run(&mut self, control: &Control) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        while !control.stopping() {
            let next = self
                .links
                .iter()
                .filter_map(Conditioner::next_release)
                .min();
            wait(&mut self.poll, &mut events, next)?;
            for event in events.iter() {
                match event.token() {
                    LISTEN => self.accept()?,
                    WAKE => {}
                    Token(t) => {
                        if let Some(pair) = self.conns.get_mut(&(t / 2)) {
                            let side = &mut pair[t % 2];
                            side.readable |= event.is_readable() || event.is_read_closed();
                        }
                    }
                }
            }
            self.pump(Instant::now());
            control.publish(RelayCounters {
                upstream: self.links[0].counters(),
                downstream: self.links[1].counters(),
                ..self.extra
            });
        }
        Ok(())
    }

    fn accept(&mut self) -> io::Result<()> {
        loop {
            let (mut client, _) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => continue,
            };
            if self.conns.len() >= MAX_CONNECTIONS {
                self.extra.refused_clients += 1;
                continue;
            }
            let Ok(mut server) = TcpStream::connect(self.server) else {
                self.extra.refused_clients += 1;
                continue;
            };
            let conn = self.next_conn;
            self.next_conn += 1;
            let both = Interest::READABLE | Interest::WRITABLE;
            self.poll
                .registry()
                .register(&mut client, Token(conn * 2), both)?;
            self.poll
                .registry()
                .register(&mut server, Token(conn * 2 + 1), both)?;
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            self.conns
                .insert(conn, [Side::new(client), Side::new(server)]);
        }
    }

    /// One turn: read what may be read, release what is due, write what waits; drop the
    /// connections that ended both ways or failed.
    fn pump(&mut self, now: Instant) {
        let ids: Vec<usize> = self.conns.keys().copied().collect();
        for &conn in &ids {
            for side in 0..2 {
                self.read_side(conn, side, now);
            }
        }
        for direction in 0..2 {
            while let Some(chunk) = self.links[direction].poll(now) {
                if let Some(pair) = self.conns.get_mut(&chunk.conn) {
                    pair[direction].in_flight -= chunk.bytes.len();
                    let to = &mut pair[1 - direction];
                    if chunk.bytes.is_empty() {
                        to.finish = true;
                    } else {
                        to.out.extend_from_slice(&chunk.bytes);
                    }
                }
                self.spare.give(chunk.bytes);
            }
        }
        for conn in ids {
            let Some(pair) = self.conns.get_mut(&conn) else {
                continue;
            };
            let failed = pair.iter_mut().any(|side| flush(side).is_err());
            let done = pair.iter().all(|s| s.ended && s.finish && s.out.is_empty());
            if (failed || done)
                && let Some(mut pair) = self.conns.remove(&conn)
            {
                for side in &mut pair {
                    let _ = self.poll.registry().deregister(&mut side.stream);
                }
            }
        }
    }

    /// Reads `side` of `conn` while it has bytes and room; offers them to its link.
    fn read_side(&mut self, conn: usize, side: usize, now: Instant) {
        loop {
            let Some(pair) = self.conns.get_mut(&conn) else {
                return;
            };
            let this = &mut pair[side];
            if !this.readable || this.ended || this.in_flight >= IN_FLIGHT_LIMIT {
                return;
            }
            let bytes = match this.stream.read(&mut self.buf) {
                Ok(0) => {
                    this.ended = true;
                    Vec::new()
                }
                Ok(n) => {
                    this.in_flight += n;
                    self.spare.copy(&self.buf[..n])
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    this.readable = false;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // A reset: end this side's stream as the link carries it.
                    this.ended = true;
                    Vec::new()
                }
            };
            let end = bytes.is_empty();
            self.links[side].offer(now, Chunk { conn, bytes });
            if end {
                return;
            }
        }
    }
}

/// Writes what waits on `side`; shuts its writing down once the other side's end arrived and
/// everything is written.
fn flush(side: &mut Side) -> io::Result<()> {
    while !side.out.is_empty() {
        match side.stream.write(&side.out) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                side.out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if side.finish && !side.shut {
        side.shut = true;
        let _ = side.stream.shutdown(Shutdown::Write);
    }
    Ok(())
}
