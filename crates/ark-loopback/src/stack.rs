//! The implementation under test: [`Stack`] starts echo servers and clients on some IO
//! machinery; [`ArkStack`] is ark's. The run itself ([`crate::run`]) is the same for every
//! implementation, so peers measured with it send the same messages, validate them the same
//! way and fill the same record.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ark_frame::LengthPrefix;
use ark_reactor::{IoModel, ReactorConfig, ReactorPool};

use crate::args::{Args, IoModelArg, Protocol, RudpFec, Switch, WsServerKind};
use crate::clients::{self, Core};
use crate::servers::Echo;
use crate::tls::TlsMaterial;

/// Servers and clients of one implementation, on the IO threads `--io-model` and
/// `--io-threads` describe.
pub trait Stack: Sized {
    /// The record's `implementation` field.
    const NAME: &'static str;

    /// Whether the implementation's server applies `--rate-limit` (ark's per-session rate
    /// limits); a run of one that does not is refused.
    const RATE_LIMITS: bool = false;

    /// Whether the implementation compresses WebSocket messages with `--ws-deflate`
    /// (permessage-deflate); a run of one that does not is refused.
    const WS_DEFLATE: bool = false;

    /// The record's `implementation` for this run (a peer that runs another library for
    /// some protocol names it); [`NAME`](Self::NAME) by default.
    fn implementation(&self, args: &Args) -> &'static str {
        let _ = args;
        Self::NAME
    }

    /// Bytes the server's sockets read and wrote so far (the wire's, TLS records excluded
    /// where the implementation counts plaintext), where the implementation counts them.
    fn wire_bytes(&self) -> Option<u64> {
        None
    }

    /// Starts the IO threads for `args`.
    ///
    /// # Errors
    /// The threads or their pollers could not start.
    fn start(args: &Args) -> std::io::Result<Self>;

    /// Starts the echo server of `args.protocol` at `args.server_addr()`; returns its address.
    ///
    /// # Errors
    /// The socket could not be bound.
    fn start_server(&mut self, args: &Args, echo: Echo) -> std::io::Result<SocketAddr>;

    /// Starts one client that runs `core` against `server`; returns, for UDP, its socket's
    /// (send, receive) buffer sizes.
    ///
    /// # Errors
    /// The client could not connect (or complete the WebSocket handshake).
    fn start_client(
        &mut self,
        args: &Args,
        server: SocketAddr,
        core: Core,
    ) -> std::io::Result<Option<ark_udp::SocketBuffers>>;

    /// Socket syscalls (reads, writes, receives, sends) so far, if the implementation counts
    /// them.
    fn syscalls(&self) -> Option<u64>;

    /// The UDP server socket's (send, receive) buffer sizes, if one runs.
    fn udp_server_buffers(&self) -> Option<ark_udp::SocketBuffers>;

    /// Whether UDP traffic uses batched syscalls (`recvmmsg`/`sendmmsg`).
    fn udp_batched(&self, args: &Args) -> bool;

    /// udp and rudp: whether `--udp-offload` (ark-udp's GSO/GRO) applied; `None` for other
    /// protocols and for implementations without the switch.
    fn udp_offload(&self, args: &Args) -> Option<bool> {
        let _ = args;
        None
    }

    /// For reliable UDP runs: what the transport did (its FEC mode, retransmissions, FEC
    /// recoveries, ...), as the record's `rudp` object; `None` where it does not say.
    fn rudp_stats(&self) -> Option<serde_json::Value> {
        None
    }

    /// rudp: the running server's public key (hex) that clients pin; `None` otherwise.
    fn rudp_public_key(&self) -> Option<String> {
        None
    }

    /// Stops the clients, then the server, then the IO threads.
    ///
    /// # Errors
    /// A thread could not be joined.
    fn stop(self) -> std::io::Result<()>;

    /// A server-only run's stop (`--role server`): the server is given `drain` to close its
    /// sessions, and what is still open then is cut. Returns how many were cut, where the
    /// implementation can tell.
    ///
    /// # Errors
    /// A thread could not be joined.
    fn stop_within(self, drain: std::time::Duration) -> std::io::Result<Option<usize>> {
        let _ = drain;
        self.stop().map(|()| None)
    }
}

/// A running ark server of any protocol.
enum Server {
    Tcp(ark_tcp::TcpServerHandle),
    Udp(ark_udp::UdpServerHandle),
    Ws(ark_ws::WsServerHandle),
    Http(ark_http::HttpServerHandle),
    Rudp(ark_rudp::RudpServerHandle),
}

/// A running ark client of any protocol.
enum Client {
    Tcp(ark_tcp::TcpClientHandle),
    Udp(ark_udp::UdpClientHandle),
    Ws(ark_ws::WsClientHandle),
    Http(ark_http::HttpClientHandle),
    Rudp(ark_rudp::RudpClientHandle),
}

/// ark's servers and clients on one [`ReactorPool`] (shared, sharded), or each on a pool of
/// its own (owned).
pub struct ArkStack {
    model: IoModelArg,
    /// The certificates of a tcps or wss run.
    tls: Option<TlsMaterial>,
    /// The one pool, or (owned) one per endpoint started so far.
    pools: Vec<Arc<ReactorPool>>,
    server: Option<Server>,
    clients: Vec<Client>,
    /// `--rudp-fec` as the record spells it.
    rudp_fec: String,
    /// The rudp settings of the run.
    rudp_config: ark_rudp::RudpConfig,
}

impl std::fmt::Debug for ArkStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArkStack")
            .field("server", &self.server.is_some())
            .field("clients", &self.clients.len())
            .finish()
    }
}

impl ArkStack {
    /// The pool a new endpoint runs on: the run's one pool, or (owned) a new one-thread pool.
    fn endpoint_pool(&mut self) -> std::io::Result<Arc<ReactorPool>> {
        if self.model == IoModelArg::Owned {
            let model = IoModel::Shared { threads: 1 };
            let pool = Arc::new(ReactorPool::start(model, ReactorConfig::default())?);
            self.pools.push(pool.clone());
            return Ok(pool);
        }
        Ok(self.pools[0].clone())
    }
}

impl Stack for ArkStack {
    const NAME: &'static str = "ark";
    const RATE_LIMITS: bool = true;
    const WS_DEFLATE: bool = true;

    /// The WebSocket server's TCP bytes read and written (plaintext, for wss).
    fn wire_bytes(&self) -> Option<u64> {
        let stats = match self.server.as_ref()? {
            Server::Ws(server) => server.tcp_stats(),
            Server::Http(server) => server.tcp_stats(),
            _ => return None,
        };
        Some(stats.bytes_in + stats.bytes_out)
    }

    fn start(args: &Args) -> std::io::Result<Self> {
        let threads = args.io_threads as usize;
        let model = match args.io_model {
            IoModelArg::Shared => Some(IoModel::Shared { threads }),
            IoModelArg::Sharded => Some(IoModel::Sharded { reactors: threads }),
            IoModelArg::Owned => None,
        };
        let pools = match model {
            Some(model) => vec![Arc::new(ReactorPool::start(
                model,
                ReactorConfig::default(),
            )?)],
            None => Vec::new(),
        };
        Ok(ArkStack {
            tls: TlsMaterial::for_args(args)?,
            model: args.io_model,
            pools,
            server: None,
            clients: Vec::new(),
            rudp_fec: args.rudp_fec.name(),
            rudp_config: rudp_config(args),
        })
    }

    fn start_server(&mut self, args: &Args, echo: Echo) -> std::io::Result<SocketAddr> {
        let addr = args.server_addr();
        let pool = self.endpoint_pool()?;
        let tls = self.tls.as_ref().map(TlsMaterial::server_tls).transpose()?;
        let server = match args.protocol {
            Protocol::Tcp | Protocol::Tcps => {
                let mut builder = ark_tcp::TcpServer::builder()
                    .bind(addr)
                    .framing(LengthPrefix::default())
                    .rate_limits(args.rate_limits())
                    .pool(pool);
                if let Some(tls) = tls {
                    builder = builder.tls(tls);
                }
                Server::Tcp(builder.start(move |_| echo.clone())?)
            }
            Protocol::Rudp => Server::Rudp(
                rudp_server_protection(args)
                    .bind(addr)
                    .config(self.rudp_config.clone())
                    .socket_buffers(
                        Some(args.udp_send_buffer),
                        Some(args.udp_server_receive_buffer),
                    )
                    .batching(args.udp_batch == Switch::On, 32)
                    .gso(args.udp_offload == Switch::On)
                    .rate_limits(args.rate_limits())
                    .pool(pool)
                    .start(move |_| echo.clone())?,
            ),
            Protocol::Udp => Server::Udp(
                ark_udp::UdpServer::builder()
                    .bind(addr)
                    .steering(match args.udp_port_steering() {
                        Some(_) => ark_udp::Steering::PeerPort,
                        None => ark_udp::Steering::Hash,
                    })
                    .socket_buffers(
                        Some(args.udp_send_buffer),
                        Some(args.udp_server_receive_buffer),
                    )
                    .max_datagram(args.payload as usize + 1)
                    .batching(args.udp_batch == Switch::On, 32)
                    .offload(
                        args.udp_offload == Switch::On,
                        args.udp_offload == Switch::On,
                    )
                    .rate_limits(args.rate_limits())
                    .pool(pool)
                    .start(move |_| echo.clone())?,
            ),
            Protocol::Websocket | Protocol::Wss if args.ws_server == WsServerKind::HttpRouter => {
                let mut builder = ark_http::HttpServer::builder().bind(addr).pool(pool);
                if let Some(tls) = tls {
                    builder = builder.tls(tls);
                }
                let config = ark_ws::WsConfig {
                    rate_limits: args.rate_limits(),
                    deflate: args.ws_deflate(),
                    ..ark_ws::WsConfig::default()
                };
                let router = ark_http::Router::new().get("/", move |req, res| {
                    let _ = ark_ws::upgrade(req, res, config.clone(), echo.clone());
                });
                Server::Http(builder.start(router)?)
            }
            Protocol::Websocket | Protocol::Wss => {
                let mut builder = ark_ws::WsServer::builder()
                    .bind(addr)
                    .rate_limits(args.rate_limits())
                    .pool(pool);
                if let Some(tls) = tls {
                    builder = builder.tls(tls);
                }
                if let Some(deflate) = args.ws_deflate() {
                    builder = builder.deflate(deflate);
                }
                Server::Ws(builder.start(move |_| echo.clone())?)
            }
            Protocol::Http | Protocol::Https => {
                let mut builder = ark_http::HttpServer::builder().bind(addr).pool(pool);
                if let Some(tls) = tls {
                    builder = builder.tls(tls);
                }
                Server::Http(builder.start(echo.router())?)
            }
        };
        let local = match &server {
            Server::Tcp(s) => s.local_addr(),
            Server::Udp(s) => s.local_addr(),
            Server::Rudp(s) => s.local_addr(),
            Server::Ws(s) => s.local_addr(),
            Server::Http(s) => s.local_addr(),
        };
        self.server = Some(server);
        Ok(local)
    }

    fn start_client(
        &mut self,
        args: &Args,
        server: SocketAddr,
        core: Core,
    ) -> std::io::Result<Option<ark_udp::SocketBuffers>> {
        let pool = self.endpoint_pool()?;
        let tls = match &self.tls {
            Some(material) => Some((material.client_tls()?, material.server_name.clone())),
            None => None,
        };
        let (client, buffers) = match args.protocol {
            Protocol::Tcp | Protocol::Tcps => (tcp_client(args, pool, tls, server, core)?, None),
            Protocol::Rudp => {
                let key = match &self.server {
                    Some(Server::Rudp(s)) => s.public_key(),
                    _ => args.rudp_server_key,
                };
                let builder = match key {
                    Some(key) if args.rudp_encryption == Switch::On => {
                        ark_rudp::RudpClient::builder().server_key(key)
                    }
                    _ => ark_rudp::RudpClient::builder().plaintext(),
                };
                let client = builder
                    .config(self.rudp_config.clone())
                    .socket_buffers(Some(args.udp_send_buffer), Some(args.udp_receive_buffer))
                    .batching(args.udp_batch == Switch::On, 32)
                    .gso(args.udp_offload == Switch::On)
                    .pool(pool)
                    .connect(server, clients::RudpClient(core, rudp_bulk(args)))?;
                let buffers = client.socket_buffers();
                (Client::Rudp(client), Some(buffers))
            }
            Protocol::Udp => {
                let mut builder = ark_udp::UdpClient::builder()
                    .socket_buffers(Some(args.udp_send_buffer), Some(args.udp_receive_buffer))
                    .max_datagram(args.payload as usize + 1)
                    .batching(args.udp_batch == Switch::On, 8)
                    .offload(
                        args.udp_offload == Switch::On,
                        args.udp_offload == Switch::On,
                    )
                    .pool(pool);
                // Placed by the pool round-robin, as client `index` of the peers is.
                if let Some(socket) = args.udp_client_socket(server, self.clients.len())? {
                    builder = builder.socket(socket);
                }
                let client = builder.connect(server, clients::UdpClient(core))?;
                let buffers = client.socket_buffers();
                (Client::Udp(client), Some(buffers))
            }
            Protocol::Websocket | Protocol::Wss => {
                let client = ws_client(pool, (tls, args.ws_deflate()), server, core)?;
                (client, None)
            }
            Protocol::Http | Protocol::Https => {
                let mut builder = ark_http::HttpClient::builder()
                    .pool(pool)
                    .connect_timeout(Duration::from_secs(10));
                if let Some((tls, name)) = tls {
                    builder = builder.tls(tls, name);
                }
                let client = builder.connect(server, clients::HttpClient(core))?;
                (Client::Http(client), None)
            }
        };
        self.clients.push(client);
        Ok(buffers)
    }

    fn syscalls(&self) -> Option<u64> {
        let stats = self.pools.iter().map(|p| p.stats());
        Some(
            stats
                .map(|s| s.reads + s.writes + s.receives + s.sends)
                .sum(),
        )
    }

    fn udp_server_buffers(&self) -> Option<ark_udp::SocketBuffers> {
        match &self.server {
            Some(Server::Udp(s)) => Some(s.socket_buffers()),
            Some(Server::Rudp(s)) => Some(s.socket_buffers()),
            _ => None,
        }
    }

    fn rudp_public_key(&self) -> Option<String> {
        match &self.server {
            Some(Server::Rudp(server)) => server.public_key().map(|k| k.to_string()),
            _ => None,
        }
    }

    fn rudp_stats(&self) -> Option<serde_json::Value> {
        let Some(Server::Rudp(server)) = &self.server else {
            return None;
        };
        let mut server_side = server.stats()?;
        let mut client_side = ark_rudp::RudpStats::default();
        for client in &self.clients {
            if let Client::Rudp(c) = client {
                client_side.add(&c.stats()?);
            }
        }
        let json = |s: &ark_rudp::RudpStats| {
            serde_json::json!({
                "data_sent": s.data_sent,
                "retransmissions": s.retransmissions,
                "parity_sent": s.parity_sent,
                "fec_recoveries": s.fec_recovered,
                "acks_sent": s.acks_sent,
                "duplicates": s.duplicates,
                "malformed": s.malformed,
                "unauthenticated": s.unauthenticated,
                "replays": s.replays,
                "refused_handshakes": s.refused_handshakes,
            })
        };
        let per_side = (json(&server_side), json(&client_side));
        server_side.add(&client_side);
        let mut total = json(&server_side);
        total["encrypted"] = serde_json::json!(server.public_key().is_some());
        let (offload, udp) = (server.offload(), server.udp_stats());
        total["udp_offload"] = serde_json::json!({"gso": offload.gso, "gro": offload.gro});
        total["udp_server"] = serde_json::json!({
            "datagrams_in": udp.datagrams_in,
            "datagrams_sent": udp.datagrams_sent,
            "receives": udp.receives,
            "sends": udp.sends,
            "trains_sent": udp.trains_sent,
            "gso_fallbacks": udp.gso_fallbacks,
            "coalesced_receives": udp.coalesced_receives,
        });
        total["fec"] = self.rudp_fec.clone().into();
        total["fec_residual"] = self.rudp_config.fec_residual.into();
        total["fec_max_delay_ms"] = (self.rudp_config.fec_max_delay.as_secs_f64() * 1000.0).into();
        total["server"] = per_side.0;
        total["clients"] = per_side.1;
        Some(total)
    }

    fn udp_batched(&self, args: &Args) -> bool {
        args.udp_batch == Switch::On
    }

    fn udp_offload(&self, args: &Args) -> Option<bool> {
        matches!(args.protocol, Protocol::Udp | Protocol::Rudp)
            .then_some(args.udp_offload == Switch::On)
    }

    fn stop(mut self) -> std::io::Result<()> {
        self.stop_clients()?;
        self.stop_server(None).map(|_| ())
    }

    fn stop_within(mut self, drain: std::time::Duration) -> std::io::Result<Option<usize>> {
        self.stop_clients()?;
        self.stop_server(Some(drain)).map(Some)
    }
}

impl ArkStack {
    /// Stops the clients: every client's stop begins at once; then each is waited for.
    fn stop_clients(&mut self) -> std::io::Result<()> {
        let mut stopping = Vec::new();
        for client in std::mem::take(&mut self.clients) {
            match client {
                Client::Tcp(c) => stopping.push(c.stop()),
                Client::Udp(c) => stopping.push(c.stop()),
                Client::Ws(c) => stopping.push(c.stop()),
                Client::Http(c) => stopping.push(c.stop()),
                Client::Rudp(c) => stopping.push(c.stop()),
            }
        }
        for stop in stopping {
            stop.wait()?;
        }
        Ok(())
    }

    /// Stops the server (within `drain` if given: what is open then is cut, and counted),
    /// then the IO threads.
    fn stop_server(self, drain: Option<std::time::Duration>) -> std::io::Result<usize> {
        let wait = |s: ark_reactor::Stopping| match drain {
            Some(d) => s.report_timeout(d).map(|r| r.forced),
            None => s.wait().map(|()| 0),
        };
        let cut = match self.server {
            Some(Server::Tcp(s)) => wait(s.stop())?,
            Some(Server::Udp(s)) => wait(s.stop())?,
            Some(Server::Ws(s)) => wait(s.stop())?,
            Some(Server::Http(s)) => wait(s.stop())?,
            Some(Server::Rudp(s)) => wait(s.stop())?,
            None => 0,
        };
        for pool in self.pools {
            ark_reactor::release_pool(pool, true)?;
        }
        Ok(cut)
    }
}

/// The reliable-UDP settings of a run: `--rudp-fec` on both ends, and room for the run's
/// messages (as the quinn peer sizes its windows): a message up to `--payload`, and a send
/// buffer and receive window for `--window` whole messages in flight (twice over in the
/// window, which holds fragments past the delivery point), where the defaults are smaller.
/// The rest the defaults; small-message runs keep them all.
/// A reliable-UDP server builder, encrypted (a key pair made for the run) or plaintext as
/// `--rudp-encryption` says.
fn rudp_server_protection(args: &Args) -> ark_rudp::RudpServerBuilder {
    match args.rudp_encryption {
        Switch::On => ark_rudp::RudpServer::builder(),
        Switch::Off => ark_rudp::RudpServer::builder().plaintext(),
    }
}

fn rudp_config(args: &Args) -> ark_rudp::RudpConfig {
    let mut config = ark_rudp::RudpConfig::default();
    let payload = args.payload as usize;
    let window = args.window as usize;
    let fragments = payload.div_ceil(config.mtu).max(1);
    config.max_message = config.max_message.max(payload);
    config.send_buffer = config.send_buffer.max(window * payload);
    let want = (2 * window * fragments).min(usize::from(u16::MAX));
    config.receive_window = config.receive_window.max(want as u16);
    config.fec = match args.rudp_fec {
        RudpFec::Off => ark_rudp::Fec::Off,
        RudpFec::Fixed { k, m } => ark_rudp::Fec::Fixed { k, m },
        RudpFec::Adaptive => ark_rudp::Fec::Adaptive,
    };
    if let Some(residual) = args.rudp_fec_residual {
        config.fec_residual = residual;
    }
    if let Some(ms) = args.rudp_fec_delay_ms {
        config.fec_max_delay = Duration::from_secs_f64(ms / 1000.0);
    }
    config.gro = args.udp_offload == Switch::On;
    if args.rudp_lanes == Switch::On {
        config.lanes = vec![
            ark_rudp::Lane::ordered(),
            ark_rudp::Lane::ordered().priority(1),
        ];
    }
    let bulk = args.rudp_bulk as usize;
    if bulk > 0 {
        // Two bulk messages queued beside the echoes, each whole within the window.
        config.max_message = config.max_message.max(bulk);
        config.send_buffer += 2 * bulk;
        let fragments = bulk.div_ceil(config.mtu);
        let want = (usize::from(config.receive_window) + 2 * fragments).min(usize::from(u16::MAX));
        config.receive_window = want as u16;
    }
    config
}

/// A client's `--rudp-bulk` stream: its message and the lane `--rudp-lanes` puts it on.
fn rudp_bulk(args: &Args) -> Option<clients::RudpBulk> {
    (args.rudp_bulk > 0).then(|| clients::RudpBulk {
        message: vec![0xB5; args.rudp_bulk as usize].into(),
        // Without lanes the session has one (lane 0, ordered): the echoes' own.
        lane: u8::from(args.rudp_lanes == Switch::On),
    })
}

/// A client's TLS settings: its configuration and the server name it checks.
type ClientTlsSettings = Option<(ark_tls::ClientTls, String)>;

/// An ark-tcp client (tcp, tcps) for `core`; with `--reconnect-every`, it reconnects at once
/// when the server closes.
fn tcp_client(
    args: &Args,
    pool: Arc<ReactorPool>,
    tls: ClientTlsSettings,
    server: SocketAddr,
    core: Core,
) -> std::io::Result<Client> {
    let mut builder = ark_tcp::TcpClient::builder()
        .pool(pool)
        .connect_timeout(Duration::from_secs(10));
    if args.reconnect_every > 0 {
        // The server closes after N echoes; connect again at once.
        builder = builder.reconnect(Some(ark_tcp::Reconnect::new(
            Duration::ZERO,
            Duration::ZERO,
        )));
    }
    if let Some((tls, name)) = tls {
        builder = builder.tls(tls, name);
    }
    Ok(Client::Tcp(
        builder.connect(server, clients::TcpClient(core))?,
    ))
}

/// An ark-ws client (websocket, wss) for `core`, with permessage-deflate if given.
fn ws_client(
    pool: Arc<ReactorPool>,
    (tls, deflate): (ClientTlsSettings, Option<ark_ws::DeflateConfig>),
    server: SocketAddr,
    core: Core,
) -> std::io::Result<Client> {
    let mut builder = ark_ws::WsClient::builder()
        .pool(pool)
        .connect_timeout(Duration::from_secs(10));
    if let Some(deflate) = deflate {
        builder = builder.deflate(deflate);
    }
    let scheme = if let Some((tls, name)) = tls {
        builder = builder.tls(tls).tls_server_name(name);
        "wss"
    } else {
        "ws"
    };
    let url = format!("{scheme}://{server}/");
    Ok(Client::Ws(builder.connect(&url, clients::WsClient(core))?))
}
