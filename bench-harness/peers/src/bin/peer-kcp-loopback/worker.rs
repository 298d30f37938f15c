//! An IO thread: one mio poller for its servers' and clients' sockets, the poll timeout set by
//! the earliest KCP timer, endpoints handed over by the run's thread through a channel and a
//! waker.

use std::io;
use std::net::UdpSocket as StdUdpSocket;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::client::Client;
use crate::link::{Counters, instant_of, now_ms};
use crate::mode::Config;
use crate::server::Server;

/// The waker's token; endpoint `i` has token `i + 1`.
const WAKER: Token = Token(0);

/// Largest datagram and largest message (`--payload` is at most 65,507 bytes).
const BUFFER: usize = 65_536;

/// What the run's thread hands an IO thread.
pub enum Command {
    /// Serve on this socket.
    Server(StdUdpSocket, Echo),
    /// Run this client on this connected socket, conversation `conv`.
    Client(StdUdpSocket, u32, Box<Core>),
    /// End the thread.
    Stop,
}

/// The buffers of one IO thread, reused by all its endpoints.
pub struct Scratch {
    /// A received datagram.
    pub datagram: Vec<u8>,
    /// A received message.
    pub message: Vec<u8>,
}

/// An endpoint on the thread.
enum Slot {
    Server(Server),
    Client(Box<Client>),
    /// A client KCP gave up on.
    Dead,
}

/// The run's handle of an IO thread.
pub struct WorkerHandle {
    commands: Sender<Command>,
    waker: Arc<Waker>,
    thread: JoinHandle<()>,
}

impl WorkerHandle {
    /// Starts IO thread `index` with KCP set up as `config` says.
    pub fn spawn(index: usize, config: Config, counters: Arc<Counters>) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (commands, inbox) = channel();
        // The endpoints share their sockets through `Rc`: the worker is made on its thread.
        let thread = std::thread::Builder::new()
            .name(format!("kcp-io-{index}"))
            .spawn(move || {
                let worker = Worker {
                    poll,
                    inbox,
                    config,
                    counters,
                    slots: Vec::new(),
                    earliest: u32::MAX,
                };
                worker.run();
            })?;
        Ok(WorkerHandle {
            commands,
            waker,
            thread,
        })
    }

    /// Hands `command` to the thread.
    pub fn send(&self, command: Command) -> io::Result<()> {
        self.commands
            .send(command)
            .map_err(|_| io::Error::other("a KCP IO thread ended"))?;
        self.waker.wake()
    }

    /// Joins the thread (after [`Command::Stop`]) if it ends by `deadline`.
    pub fn join(self, deadline: Instant) -> io::Result<()> {
        while !self.thread.is_finished() {
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "a KCP IO thread did not stop in time",
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        self.thread
            .join()
            .map_err(|_| io::Error::other("a KCP IO thread panicked"))
    }
}

/// The IO thread's state.
struct Worker {
    poll: Poll,
    inbox: Receiver<Command>,
    config: Config,
    counters: Arc<Counters>,
    slots: Vec<Slot>,
    /// KCP time of the earliest timer due (may be early: then the scan finds nothing).
    earliest: u32,
}

impl Worker {
    /// The loop: wait for datagrams or the earliest timer, serve them, until told to stop.
    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut scratch = Scratch {
            datagram: vec![0; BUFFER],
            message: vec![0; BUFFER],
        };
        loop {
            let timeout = self.timeout();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            let now = now_ms();
            for event in &events {
                match event.token() {
                    WAKER => {
                        if !self.take_commands(now) {
                            return;
                        }
                    }
                    Token(token) => self.on_readable(token - 1, now, &mut scratch),
                }
            }
            self.on_timers(now_ms());
        }
    }

    /// How long to wait for the earliest timer.
    fn timeout(&self) -> Option<Duration> {
        (self.earliest != u32::MAX)
            .then(|| instant_of(self.earliest).saturating_duration_since(Instant::now()))
    }

    /// Serves endpoint `index`'s readable socket.
    fn on_readable(&mut self, index: usize, now: u32, scratch: &mut Scratch) {
        let due = match &mut self.slots[index] {
            Slot::Server(server) => server.on_readable(now, scratch),
            Slot::Client(client) => client.on_readable(now, scratch),
            Slot::Dead => u32::MAX,
        };
        self.earliest = self.earliest.min(due);
    }

    /// Runs the timers due at `now` (if any can be) and finds the earliest one next.
    fn on_timers(&mut self, now: u32) {
        if now < self.earliest {
            return;
        }
        let mut earliest = u32::MAX;
        for slot in &mut self.slots {
            let due = match slot {
                Slot::Server(server) => server.on_timer(now),
                Slot::Client(client) => match client.on_timer(now) {
                    Some(due) => due,
                    None => {
                        *slot = Slot::Dead;
                        u32::MAX
                    }
                },
                Slot::Dead => u32::MAX,
            };
            earliest = earliest.min(due);
        }
        self.earliest = earliest;
    }

    /// Takes the endpoints handed over; `false` once told to stop.
    fn take_commands(&mut self, now: u32) -> bool {
        while let Ok(command) = self.inbox.try_recv() {
            let result = match command {
                Command::Stop => return false,
                Command::Server(socket, echo) => self.add_server(socket, echo),
                Command::Client(socket, conv, core) => self.add_client(socket, conv, *core, now),
            };
            if let Err(e) = result {
                eprintln!("error: a KCP endpoint could not start: {e}");
            }
        }
        true
    }

    /// Registers `socket` as the next endpoint's.
    fn register(&self, socket: StdUdpSocket) -> io::Result<UdpSocket> {
        let mut socket = UdpSocket::from_std(socket);
        let token = Token(self.slots.len() + 1);
        self.poll
            .registry()
            .register(&mut socket, token, Interest::READABLE)?;
        Ok(socket)
    }

    fn add_server(&mut self, socket: StdUdpSocket, echo: Echo) -> io::Result<()> {
        let socket = self.register(socket)?;
        let server = Server::new(socket, echo, self.config, self.counters.clone());
        self.slots.push(Slot::Server(server));
        Ok(())
    }

    fn add_client(
        &mut self,
        socket: StdUdpSocket,
        conv: u32,
        core: Core,
        now: u32,
    ) -> io::Result<()> {
        let socket = self.register(socket)?;
        let setup = (&self.config, self.counters.clone());
        let client = Client::start(socket, conv, core, setup, now);
        self.slots.push(Slot::Client(Box::new(client)));
        self.earliest = self.earliest.min(now + 1);
        Ok(())
    }
}
