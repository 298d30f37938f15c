//! tokio's servers and clients for `ark_loopback::run::measure`.

use std::io;
use std::net::SocketAddr;

use crate::{http, tcp, tls, udp, ws};
use ark_loopback::args::{Args, IoModelArg, Protocol};
use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_loopback::stack::Stack;
use ark_loopback::tls::TlsMaterial;
use ark_peers::peer_net::{buffers, udp_client_socket, udp_server_socket};
use ark_peers::peer_runtime::{RuntimeKind, Runtimes, run_on, start_task};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::runtime::Handle;
use tokio_rustls::rustls::pki_types::ServerName;

/// The tokio peer's runtimes: IO only (no timers, as a plain tokio echo server needs none).
const RUNTIMES: RuntimeKind = RuntimeKind {
    name: "tokio-io",
    timers: false,
};

/// tokio's servers and clients.
pub struct TokioStack {
    model: IoModelArg,
    /// Where the run's tasks go: one handle per runtime (owned: none, each endpoint starts
    /// its own).
    runtimes: Runtimes,
    next_client: usize,
    udp_server_buffers: Option<ark_udp::SocketBuffers>,
    /// The certificates of a tcps or wss run.
    tls: Option<TlsMaterial>,
}

/// A TCP connection to `server`, Nagle off.
async fn connect_tcp(server: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(server).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// A TLS client of `material`: its connector, the server name it checks, and that name as a
/// string (HTTP's `Host`).
fn tls_client(
    material: Option<&TlsMaterial>,
) -> io::Result<(tokio_rustls::TlsConnector, ServerName<'static>, String)> {
    let material = material.ok_or_else(|| io::Error::other("no TLS material"))?;
    let config = material.client_tls()?.rustls_config().clone();
    let connector = tokio_rustls::TlsConnector::from(config);
    let host = material.server_name.clone();
    let name = ServerName::try_from(host.clone())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok((connector, name, host))
}

/// The UDP socket of client `index`, connected to `server` on `handle`, and its buffers'
/// sizes.
fn udp_client(
    args: &Args,
    handle: &Handle,
    server: SocketAddr,
    index: usize,
) -> io::Result<(UdpSocket, ark_udp::SocketBuffers)> {
    let socket = udp_client_socket(args, server, index)?;
    let sizes = buffers(&socket)?;
    let socket = run_on(handle, async move {
        let socket = UdpSocket::from_std(socket)?;
        socket.connect(server).await?;
        Ok(socket)
    })?;
    Ok((socket, sizes))
}

impl Stack for TokioStack {
    const NAME: &'static str = "tokio";

    /// websocket with a library (`PEER_TOKIO_WS`): the library's name (`tokio-tungstenite`,
    /// `tokio-websockets`, `fastwebsockets`), so its records are told from the hand-written
    /// peer's; `tokio` otherwise.
    fn implementation(&self, args: &Args) -> &'static str {
        match (args.protocol, crate::ws::Variant::from_env()) {
            (ark_loopback::args::Protocol::Websocket, crate::ws::Variant::Library(library)) => {
                library.implementation()
            }
            _ => Self::NAME,
        }
    }

    fn start(args: &Args) -> io::Result<Self> {
        if args.ws_server != ark_loopback::args::WsServerKind::Ws {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "peer-tokio-loopback has no --ws-server http-router: it measures ark's HTTP router against its own WebSocket server",
            ));
        }
        if args.protocol == Protocol::Rudp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "--protocol rudp is compared with KCP and QUIC: peer-kcp-loopback, peer-quinn-loopback",
            ));
        }
        if args.protocol == Protocol::Websocket {
            ws::Variant::named()?;
        }
        if args.reconnect_every > 0 && args.protocol != Protocol::Tcps {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "peer-tokio-loopback runs --reconnect-every with --protocol tcps only",
            ));
        }
        Ok(TokioStack {
            model: args.io_model,
            runtimes: Runtimes::start(args.io_model, args.io_threads as usize, RUNTIMES)?,
            next_client: 0,
            udp_server_buffers: None,
            tls: TlsMaterial::for_args(args)?,
        })
    }

    fn start_server(&mut self, args: &Args, echo: Echo) -> io::Result<SocketAddr> {
        let addr = args.server_addr();
        let handles = match self.model {
            IoModelArg::Owned => vec![self.runtimes.add()?],
            _ => self.runtimes.handles.clone(),
        };
        match args.protocol {
            Protocol::Udp => {
                // Sharded: one SO_REUSEPORT socket per runtime, the kernel spreads the peers
                // (as ark-udp does); otherwise one socket.
                let sockets = if self.model == IoModelArg::Sharded {
                    handles.len()
                } else {
                    1
                };
                let mut bind = addr;
                for (shard, handle) in handles[..sockets].iter().enumerate() {
                    let socket = udp_server_socket(args, bind, shard, sockets)?;
                    self.udp_server_buffers = Some(buffers(&socket)?);
                    bind = socket.local_addr()?;
                    let socket = run_on(handle, async move { UdpSocket::from_std(socket) })?;
                    handle.spawn(udp::echo(socket, echo.clone()));
                }
                Ok(bind)
            }
            protocol => {
                let home = &handles[0];
                let listener = run_on(home, async move { TcpListener::bind(addr).await })?;
                let local = listener.local_addr()?;
                let kind = match (&self.tls, protocol) {
                    (None, Protocol::Http) => Kind::Http(None),
                    (Some(material), Protocol::Https) => {
                        let config = material.server_tls()?.rustls_config().clone();
                        Kind::Http(Some(tokio_rustls::TlsAcceptor::from(config)))
                    }
                    (Some(material), protocol) => {
                        let config = material.server_tls()?.rustls_config().clone();
                        let inner = match protocol {
                            Protocol::Wss => tls::Inner::WebSocket,
                            _ => tls::Inner::Frames,
                        };
                        Kind::Tls(tokio_rustls::TlsAcceptor::from(config), inner)
                    }
                    (None, Protocol::Websocket) => Kind::WebSocket,
                    (None, _) => Kind::Frames,
                };
                home.spawn(accept(listener, handles.clone(), echo, kind));
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
        let handle = match self.model {
            IoModelArg::Owned => self.runtimes.add()?,
            _ => {
                let handles = &self.runtimes.handles;
                handles[self.next_client % handles.len()].clone()
            }
        };
        let handle = &handle;
        let index = self.next_client;
        self.next_client += 1;
        let payload = args.payload as usize;
        let one_by_one = args.clients as usize <= ark_loopback::run::CONNECT_BATCH;
        match args.protocol {
            Protocol::Rudp => unreachable!("refused by start"),
            Protocol::Tcp => {
                let setup = async move { Ok(tcp::client(connect_tcp(server).await?, core)) };
                start_task(handle, one_by_one, index, setup)?;
            }
            Protocol::Websocket => {
                let variant = ws::Variant::from_env();
                let setup = ws::connect(server, core, payload, variant);
                start_task(handle, one_by_one, index, setup)?;
            }
            Protocol::Http => {
                let stream = run_on(handle, connect_tcp(server))?;
                handle.spawn(http::client(stream, server.to_string(), core));
            }
            Protocol::Https => {
                let (connector, name, host) = tls_client(self.tls.as_ref())?;
                let tls = run_on(handle, async move {
                    let stream = connect_tcp(server).await?;
                    connector.connect(name, stream).await
                })?;
                handle.spawn(http::client(tls, host, core));
            }
            Protocol::Tcps | Protocol::Wss => {
                let (connector, name, _) = tls_client(self.tls.as_ref())?;
                let inner = match args.protocol {
                    Protocol::Wss => tls::Inner::WebSocket,
                    _ => tls::Inner::Frames,
                };
                let target = tls::Target {
                    server,
                    connector,
                    name,
                    inner,
                };
                start_task(handle, one_by_one, index, tls::connect(target, core))?;
            }
            Protocol::Udp => {
                let (socket, sizes) = udp_client(args, handle, server, index)?;
                handle.spawn(udp::client(socket, core, payload));
                return Ok(Some(sizes));
            }
        }
        Ok(None)
    }

    fn syscalls(&self) -> Option<u64> {
        None
    }

    fn udp_server_buffers(&self) -> Option<ark_udp::SocketBuffers> {
        self.udp_server_buffers
    }

    fn udp_batched(&self, _: &Args) -> bool {
        false
    }

    fn stop(self) -> io::Result<()> {
        // Shutting a runtime down drops its tasks: clients, sessions, listeners.
        self.runtimes.stop()
    }
}

/// What a server connection speaks.
#[derive(Clone)]
enum Kind {
    /// Length-prefixed frames.
    Frames,
    /// WebSocket.
    WebSocket,
    /// TLS, then what is inside.
    Tls(tokio_rustls::TlsAcceptor, tls::Inner),
    /// HTTP/1.1 (hyper), over TLS or not.
    Http(Option<tokio_rustls::TlsAcceptor>),
}

/// Accepts connections and serves each on the next runtime, round-robin.
async fn accept(listener: TcpListener, handles: Vec<Handle>, echo: Echo, kind: Kind) {
    let mut next = 0usize;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors or an aborted handshake: let the others run, then retry.
                tokio::task::yield_now().await;
                continue;
            }
        };
        let echo = echo.clone();
        let handle = &handles[next % handles.len()];
        next += 1;
        let kind = kind.clone();
        if handles.len() == 1 {
            tokio::spawn(session(stream, echo, kind));
        } else {
            // A tokio socket belongs to the runtime that registered it: move it over.
            let Ok(stream) = stream.into_std() else {
                continue;
            };
            handle.spawn(async move {
                if let Ok(stream) = TcpStream::from_std(stream) {
                    session(stream, echo, kind).await;
                }
            });
        }
    }
}

/// One server connection: echo every frame (TCP) or binary message (WebSocket), over TLS or
/// not.
async fn session(stream: TcpStream, echo: Echo, kind: Kind) {
    if stream.set_nodelay(true).is_err() {
        return;
    }
    match kind {
        Kind::WebSocket => ws::session(stream, echo, ws::Variant::from_env()).await,
        Kind::Frames => tcp::session(stream, echo).await,
        Kind::Tls(acceptor, inner) => tls::session(stream, acceptor, echo, inner).await,
        Kind::Http(None) => http::session(stream, echo).await,
        Kind::Http(Some(acceptor)) => {
            if let Ok(tls) = acceptor.accept(stream).await {
                http::session(tls, echo).await;
            }
        }
    }
}
