//! The raw peer's servers and clients for `ark_loopback::run::measure`.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ark_loopback::args::{Args, IoModelArg, Protocol, Switch};
use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_loopback::stack::Stack;
use ark_peers::peer_io::RecvBuf;
use ark_peers::peer_net::{buffers, udp_client_socket, udp_server_socket};
use ark_peers::peer_ws::{client_key, client_request};

use crate::listener::Listener;
use crate::poller::Poller;
use crate::stream::{Codec, End, RECV_BUF, StreamConn};
use crate::udp::{UdpClient, UdpServer};

/// How long setup steps (connect, handshake) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The raw peer's pollers and their threads.
pub struct RawStack {
    model: IoModelArg,
    /// Shared: one poller served by every thread; sharded: one per thread; owned: one per
    /// endpoint, the server's first.
    pollers: Vec<Arc<Poller>>,
    threads: Vec<JoinHandle<()>>,
    /// Connections a poller holds at most.
    capacity: usize,
    /// Datagrams per batch (1 with `--udp-batch off`).
    udp_batch: usize,
    next_client: usize,
    udp_server_buffers: Option<ark_udp::SocketBuffers>,
}

impl Stack for RawStack {
    const NAME: &'static str = "raw";

    fn start(args: &Args) -> io::Result<Self> {
        if args.ws_server != ark_loopback::args::WsServerKind::Ws {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "peer-raw-loopback has no --ws-server http-router: it measures ark's HTTP router against its own WebSocket server",
            ));
        }
        if args.protocol == Protocol::Rudp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "--protocol rudp is compared with KCP and QUIC: peer-kcp-loopback, peer-quinn-loopback",
            ));
        }
        if matches!(args.protocol, Protocol::Http | Protocol::Https) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "peer-raw-loopback leaves HTTP out: --protocol {} is compared with hyper (the tokio peer)",
                    args.protocol.name()
                ),
            ));
        }
        if args.protocol.is_tls() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "peer-raw-loopback leaves TLS out: the raw floor measures plain syscalls, and --protocol {} would only add rustls on top (compare with ark and tokio instead)",
                    args.protocol.name()
                ),
            ));
        }
        let threads = args.io_threads as usize;
        let mut endpoints = RawStack {
            model: args.io_model,
            pollers: Vec::new(),
            threads: Vec::new(),
            // Every client and its server session, with room for listeners.
            capacity: 2 * args.clients as usize + 8,
            udp_batch: match args.udp_batch {
                Switch::On => crate::udp::SERVER_BATCH,
                Switch::Off => 1,
            },
            next_client: 0,
            udp_server_buffers: None,
        };
        match args.io_model {
            IoModelArg::Owned => {}
            IoModelArg::Shared => {
                endpoints.start_poller(threads)?;
            }
            IoModelArg::Sharded => {
                for _ in 0..threads {
                    endpoints.start_poller(1)?;
                }
            }
        }
        Ok(endpoints)
    }

    fn start_server(&mut self, args: &Args, echo: Echo) -> io::Result<SocketAddr> {
        let targets = match self.model {
            IoModelArg::Owned => vec![self.start_poller(1)?],
            _ => self.pollers.clone(),
        };
        match args.protocol {
            Protocol::Udp => self.start_udp_server(args, echo, &targets),
            protocol => {
                let listener = TcpListener::bind(args.server_addr())?;
                listener.set_nonblocking(true)?;
                let local = listener.local_addr()?;
                let codec = match protocol {
                    Protocol::Websocket => Codec::WsHandshake,
                    _ => Codec::LengthPrefix,
                };
                let home = targets[0].clone();
                home.add(Box::new(Listener::new(listener, targets, echo, codec)))?;
                Ok(local)
            }
        }
    }

    fn start_client(
        &mut self,
        args: &Args,
        server: SocketAddr,
        core: Core,
    ) -> io::Result<Option<ark_udp::SocketBuffers>> {
        let poller = match self.model {
            IoModelArg::Owned => self.start_poller(1)?,
            _ => self.pollers[self.next_client % self.pollers.len()].clone(),
        };
        let index = self.next_client;
        self.next_client += 1;
        let core = Box::new(core);
        match args.protocol {
            Protocol::Tcp => {
                let stream = connect(server)?;
                let buf = RecvBuf::with_capacity(RECV_BUF);
                let conn = StreamConn::new(stream, buf, Codec::LengthPrefix, End::Client(core));
                poller.add(Box::new(conn))?;
                Ok(None)
            }
            Protocol::Tcps | Protocol::Wss | Protocol::Http | Protocol::Https | Protocol::Rudp => {
                Err(io::ErrorKind::Unsupported.into())
            }
            Protocol::Websocket => {
                let mut stream = connect(server)?;
                let key = client_key();
                stream.write_all(client_request(&server.to_string(), &key).as_bytes())?;
                stream.set_nonblocking(true)?;
                poller.add(Box::new(StreamConn::ws_client(stream, key, core)))?;
                Ok(None)
            }
            Protocol::Udp => {
                let socket = udp_client_socket(args, server, index)?;
                socket.connect(server)?;
                let sizes = buffers(&socket)?;
                let batch = self.udp_batch.min(crate::udp::CLIENT_BATCH);
                let client = UdpClient::new(socket, core, args.payload as usize, batch);
                poller.add(Box::new(client))?;
                Ok(Some(sizes))
            }
        }
    }

    fn syscalls(&self) -> Option<u64> {
        Some(self.pollers.iter().map(|p| p.syscalls()).sum())
    }

    fn udp_server_buffers(&self) -> Option<ark_udp::SocketBuffers> {
        self.udp_server_buffers
    }

    fn udp_batched(&self, args: &Args) -> bool {
        args.udp_batch == Switch::On
    }

    fn stop(self) -> io::Result<()> {
        for poller in &self.pollers {
            poller.stop()?;
        }
        let mut panicked = false;
        for thread in self.threads {
            panicked |= thread.join().is_err();
        }
        // Closing every connection drops the clients' cores (their round trips are counted)
        // and the listeners' references to pollers.
        for poller in &self.pollers {
            poller.close_all();
        }
        if panicked {
            return Err(io::Error::other("a raw peer IO thread panicked"));
        }
        Ok(())
    }
}

impl RawStack {
    /// A new poller served by `threads` threads of its own.
    fn start_poller(&mut self, threads: usize) -> io::Result<Arc<Poller>> {
        let poller = Poller::new(self.capacity, threads)?;
        let name = format!("raw-io-{}", self.pollers.len());
        self.threads.extend(poller.spawn(threads, &name)?);
        self.pollers.push(poller.clone());
        Ok(poller)
    }

    /// The UDP server: one socket, or (sharded) one `SO_REUSEPORT` socket per poller.
    fn start_udp_server(
        &mut self,
        args: &Args,
        echo: Echo,
        targets: &[Arc<Poller>],
    ) -> io::Result<SocketAddr> {
        let sockets = if self.model == IoModelArg::Sharded {
            targets.len()
        } else {
            1
        };
        let mut bind = args.server_addr();
        for (shard, poller) in targets[..sockets].iter().enumerate() {
            let socket = udp_server_socket(args, bind, shard, sockets)?;
            self.udp_server_buffers = Some(buffers(&socket)?);
            bind = socket.local_addr()?;
            // One byte over the payload: a longer datagram is seen as cut.
            let max_datagram = args.payload as usize + 1;
            let server = UdpServer::new(socket, max_datagram, self.udp_batch, echo.clone());
            poller.add(Box::new(server))?;
        }
        Ok(bind)
    }
}

/// A connected TCP stream with `TCP_NODELAY`, still blocking (bounded by the setup timeout).
fn connect(server: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&server, SETUP_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(SETUP_TIMEOUT))?;
    stream.set_write_timeout(Some(SETUP_TIMEOUT))?;
    Ok(stream)
}
