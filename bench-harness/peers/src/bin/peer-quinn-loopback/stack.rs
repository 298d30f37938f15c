//! quinn's servers and clients for `ark_loopback::run::measure`, on the run's tokio runtimes
//! ([`crate::runtime`]).

use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;

use ark_loopback::args::{Args, IoModelArg, Protocol};
use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_loopback::stack::Stack;
use ark_peers::peer_net::{buffers, udp_socket, unspecified_like};
use quinn::{ClientConfig, Endpoint, EndpointConfig, ServerConfig, TokioRuntime};
use tokio::runtime::Handle;

use crate::error::SessionError;
use crate::mode::{CONGESTION_CONTROLLER, Config, Mode, QUINN_VERSION};
use crate::server::{self, Connections};
use crate::stats::Totals;
use crate::tls::{Crypto, SERVER_NAME};
use ark_peers::peer_runtime::{RuntimeKind, Runtimes, run_on, start_task};

/// The QUIC peer's runtimes: quinn needs timers.
const RUNTIMES: RuntimeKind = RuntimeKind {
    name: "quinn-io",
    timers: true,
};

/// quinn's servers and clients in mode `M`.
pub struct QuinnStack<M: Mode> {
    /// `--io-model`.
    model: IoModelArg,
    /// Every connection's settings.
    config: Config,
    /// The run's TLS configs.
    crypto: Crypto,
    /// The tokio runtimes the endpoints run on.
    runtimes: Runtimes,
    /// Clients started so far.
    clients: usize,
    /// The server's connections, for their counters.
    server_connections: Connections,
    /// The clients' connections.
    client_connections: Connections,
    /// The server socket's (send, receive) buffer sizes.
    udp_server_buffers: Option<ark_udp::SocketBuffers>,
    /// The mode, a type.
    mode: PhantomData<M>,
}

/// An endpoint on `socket` (its buffers as the flags ask), serving with `server` if given;
/// made on the runtime this runs on (its driver is spawned there).
fn endpoint(socket: std::net::UdpSocket, server: Option<ServerConfig>) -> io::Result<Endpoint> {
    Endpoint::new(
        EndpointConfig::default(),
        server,
        socket,
        Arc::new(TokioRuntime),
    )
}

impl<M: Mode> QuinnStack<M> {
    /// The runtime of the next client: round-robin, or (owned) a new one.
    fn client_runtime(&mut self) -> io::Result<Handle> {
        match self.model {
            IoModelArg::Owned => self.runtimes.add(),
            _ => {
                let handles = &self.runtimes.handles;
                Ok(handles[self.clients % handles.len()].clone())
            }
        }
    }

    /// The runtimes the server runs on: (sharded) each with an endpoint of its own on a
    /// `SO_REUSEPORT` socket, the kernel spreading the peers by address as ark-udp does;
    /// otherwise one.
    fn server_runtimes(&mut self) -> io::Result<Vec<Handle>> {
        match self.model {
            IoModelArg::Owned => Ok(vec![self.runtimes.add()?]),
            IoModelArg::Sharded => Ok(self.runtimes.handles.clone()),
            IoModelArg::Shared => Ok(vec![self.runtimes.handles[0].clone()]),
        }
    }

    /// The server's QUIC settings.
    fn server_config(&self) -> ServerConfig {
        let mut config = ServerConfig::with_crypto(self.crypto.server.clone());
        config.transport_config(self.config.transport());
        config
    }

    /// A client's QUIC settings.
    fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new(self.crypto.client.clone());
        config.transport_config(self.config.transport());
        config
    }
}

impl<M: Mode> Stack for QuinnStack<M> {
    const NAME: &'static str = M::NAME;

    fn start(args: &Args) -> io::Result<Self> {
        if args.protocol != Protocol::Rudp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "peer-quinn-loopback runs --protocol rudp only (QUIC is reliable UDP)",
            ));
        }
        Ok(QuinnStack {
            model: args.io_model,
            config: Config::of::<M>(args),
            crypto: Crypto::of(args.certs.as_deref())?,
            runtimes: Runtimes::start(args.io_model, args.io_threads as usize, RUNTIMES)?,
            clients: 0,
            server_connections: Connections::default(),
            client_connections: Connections::default(),
            udp_server_buffers: None,
            mode: PhantomData,
        })
    }

    fn start_server(&mut self, args: &Args, echo: Echo) -> io::Result<SocketAddr> {
        let handles = self.server_runtimes()?;
        let reuse_port = handles.len() > 1;
        let mut bind = args.server_addr();
        for handle in &handles {
            let (send, receive) = (args.udp_send_buffer, args.udp_server_receive_buffer);
            let socket = udp_socket(bind, send, receive, reuse_port)?;
            self.udp_server_buffers = Some(buffers(&socket)?);
            bind = socket.local_addr()?;
            let server_config = self.server_config();
            let endpoint = run_on(handle, async move { endpoint(socket, Some(server_config)) })?;
            let connections = self.server_connections.clone();
            handle.spawn(server::accept(
                endpoint,
                echo.clone(),
                self.config,
                connections,
            ));
        }
        Ok(bind)
    }

    fn start_client(
        &mut self,
        args: &Args,
        server: SocketAddr,
        core: Core,
    ) -> io::Result<Option<ark_udp::SocketBuffers>> {
        let handle = self.client_runtime()?;
        let index = self.clients;
        self.clients += 1;
        let (send, receive) = (args.udp_send_buffer, args.udp_receive_buffer);
        let socket = udp_socket(unspecified_like(server), send, receive, false)?;
        let sizes = buffers(&socket)?;
        let (client_config, config) = (self.client_config(), self.config);
        let connections = self.client_connections.clone();
        let setup = async move {
            let endpoint = endpoint(socket, None)?;
            let connect = async {
                let connecting = endpoint.connect_with(client_config, server, SERVER_NAME)?;
                Ok::<_, SessionError>(connecting.await?)
            };
            let connection = connect.await.map_err(io::Error::other)?;
            server::keep(&connections, &connection);
            Ok(crate::client::run(endpoint, connection, core, config))
        };
        let one_by_one = args.clients as usize <= ark_loopback::run::CONNECT_BATCH;
        start_task(&handle, one_by_one, index, setup)?;
        Ok(Some(sizes))
    }

    fn syscalls(&self) -> Option<u64> {
        None
    }

    fn udp_server_buffers(&self) -> Option<ark_udp::SocketBuffers> {
        self.udp_server_buffers
    }

    fn udp_batched(&self, _: &Args) -> bool {
        // quinn-udp's GSO and GRO: a batch of datagrams per syscall each way.
        true
    }

    fn rudp_stats(&self) -> Option<serde_json::Value> {
        let clients = Totals::of(&self.client_connections);
        let mut json = clients.json();
        json["mode"] = self.config.mode.into();
        json["fec"] = serde_json::Value::Null;
        json["quinn_version"] = QUINN_VERSION.into();
        json["congestion_controller"] = CONGESTION_CONTROLLER.into();
        json["server"] = Totals::of(&self.server_connections).json();
        json["quinn"] = self.config.json();
        Some(json)
    }

    fn stop(self) -> io::Result<()> {
        // Shutting a runtime down drops its tasks: clients (their round trips are counted as
        // their `Core` drops), connections, endpoints.
        self.runtimes.stop()
    }
}
