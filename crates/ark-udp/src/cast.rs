//! `UdpCast`: an unconnected socket that sends to and receives from any address.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use ark_reactor::{ReactorConfig, Runtime};

use crate::client::UdpSocketHandle;
use crate::config::UdpConfig;
use crate::handler::UdpHandler;
use crate::proto::sessions::Mode;
use crate::server::{bind_socket, udp_options};

/// Entry point: [`UdpCast::builder`].
#[derive(Debug)]
pub struct UdpCast;

impl UdpCast {
    /// A builder with the defaults of [`UdpConfig`] (no sessions, no expiry), broadcast off and
    /// no multicast group.
    pub fn builder() -> UdpCastBuilder {
        UdpCastBuilder {
            addr: None,
            broadcast: false,
            multicast_v4: Vec::new(),
            config: UdpConfig {
                session_expiry: None,
                ..UdpConfig::default()
            },
            runtime: Runtime::default(),
            reactor_config: ReactorConfig::default(),
        }
    }
}

/// Configures and starts a [`UdpCast`] socket.
#[derive(Debug)]
pub struct UdpCastBuilder {
    addr: Option<io::Result<SocketAddr>>,
    broadcast: bool,
    multicast_v4: Vec<(Ipv4Addr, Ipv4Addr)>,
    config: UdpConfig,
    runtime: Runtime,
    reactor_config: ReactorConfig,
}

impl UdpCastBuilder {
    /// The address to bind, or a name and port; see [`ark_reactor::resolve`].
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.addr = Some(ark_reactor::resolve(addr));
        self
    }

    /// Allows sending to broadcast addresses (`SO_BROADCAST`). Off by default.
    pub fn broadcast(mut self, on: bool) -> Self {
        self.broadcast = on;
        self
    }

    /// Joins an IPv4 multicast `group` on `interface` (`0.0.0.0`: the default one). None by
    /// default.
    pub fn join_multicast_v4(mut self, group: Ipv4Addr, interface: Ipv4Addr) -> Self {
        self.multicast_v4.push((group, interface));
        self
    }

    udp_options!();

    /// Binds and starts; `handler` gets every datagram (`on_message`, with the sender as the
    /// session's peer, so `send` replies to it) and sends anywhere with `send_to`. `on_open`
    /// runs first, with the socket's own address as the peer.
    ///
    /// # Errors
    /// No address, binding, an option or the pool failed.
    pub fn start<H: UdpHandler>(self, handler: H) -> io::Result<UdpCastHandle> {
        let addr = self.addr.unwrap_or_else(|| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UdpCast: no bind address",
            ))
        })?;
        let config = Arc::new(self.config);
        let socket = bind_socket(addr, &config, false)?;
        socket.set_broadcast(self.broadcast)?;
        for (group, interface) in &self.multicast_v4 {
            socket.join_multicast_v4(group, interface)?;
        }
        UdpSocketHandle::start(
            socket,
            Mode::cast(handler),
            config,
            self.runtime,
            self.reactor_config,
            None,
        )
    }
}

/// A running [`UdpCast`] socket.
pub type UdpCastHandle = UdpSocketHandle;
