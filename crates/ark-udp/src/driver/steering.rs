//! How a sharded server's `SO_REUSEPORT` sockets share the datagrams ([`Steering`]), and
//! binding a client socket whose datagrams a given shard receives ([`bind_for_shard`]).

use std::io;
use std::net::{SocketAddr, UdpSocket};

/// Which shard of a sharded [`UdpServer`](crate::UdpServer) receives a peer's datagrams.
/// Either way a peer always reaches the same shard, so its session lives on one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Steering {
    /// The kernel's hash of the peer's address and port picks the shard (the default). Which
    /// one is up to the hash: a client on the same machine lands on another thread's shard
    /// about `(shards - 1) / shards` of the time, and a few peers spread unevenly.
    #[default]
    Hash,
    /// Shard `source port % shards`, the shards counted in the order their sockets were bound
    /// (a classic-BPF program on the `SO_REUSEPORT` group): a peer chooses its shard by its
    /// port, e.g. a client on the same machine binds one whose shard runs on its own thread
    /// ([`bind_for_shard`]). Read after a 20-byte IPv4 or 40-byte IPv6 header; a datagram with
    /// IP options or extension headers still lands on one shard per peer, just not the one
    /// its port names.
    PeerPort,
}

impl Steering {
    /// Whether this build can steer so: [`Steering::Hash`] everywhere,
    /// [`Steering::PeerPort`] on Linux's IO path only ([`ark_reactor::IO_PATH`]); a sharded
    /// server asked for a steering it lacks refuses to start with `Unsupported`.
    pub const fn is_available(self) -> bool {
        match self {
            Steering::Hash => true,
            Steering::PeerPort => cfg!(all(target_os = "linux", not(ark_portable))),
        }
    }

    /// The shard [`Steering::PeerPort`] gives a peer sending from `port` to `shards` shards.
    pub fn shard_of(port: u16, shards: usize) -> usize {
        usize::from(port) % shards.max(1)
    }
}

/// Attaches [`Steering::PeerPort`] to the `SO_REUSEPORT` group of `socket` (bound, one of
/// `shards` sockets): what [`UdpServerBuilder::steering`](crate::UdpServerBuilder::steering)
/// does, for a group of sockets of your own.
///
/// # Errors
/// `socket` is not a bound IP socket, or the kernel refused the program; `Unsupported` on the
/// portable IO path ([`ark_reactor::IO_PATH`]), which has no steering program.
pub fn steer_by_peer_port<'s>(
    socket: impl Into<socket2::SockRef<'s>>,
    shards: usize,
) -> io::Result<()> {
    let sock = socket.into();
    let v6 = sock
        .local_addr()?
        .as_socket()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not an IP socket"))?
        .is_ipv6();
    let shards = u32::try_from(shards.max(1)).unwrap_or(u32::MAX);
    crate::driver::sys::steer_by_source_port(&sock, shards, v6)
}

/// Most ephemeral ports [`bind_for_shard`] tries per shard before it gives up.
const TRIES_PER_SHARD: usize = 64;

/// A UDP socket bound to `local`'s address on an ephemeral port that [`Steering::PeerPort`]
/// maps to `shard` of `shards` — for a client whose datagrams that shard is to receive
/// (hand it to [`UdpClientBuilder::socket`](crate::UdpClientBuilder::socket)). Ports the
/// kernel offers for other shards are held until one fits, so it does not offer them again.
///
/// # Errors
/// `local` has a port other than 0, `shard` is not below `shards`, binding failed, or no port
/// for the shard came within `64 × shards` tries.
pub fn bind_for_shard(local: SocketAddr, shard: usize, shards: usize) -> io::Result<UdpSocket> {
    if local.port() != 0 || shard >= shards {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "bind_for_shard: port {} (must be 0), shard {shard} of {shards}",
                local.port()
            ),
        ));
    }
    let mut offered = Vec::new();
    for _ in 0..TRIES_PER_SHARD * shards {
        let socket = UdpSocket::bind(local)?;
        if Steering::shard_of(socket.local_addr()?.port(), shards) == shard {
            return Ok(socket);
        }
        offered.push(socket);
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        format!(
            "no ephemeral port for shard {shard} of {shards} in {} tries",
            offered.len()
        ),
    ))
}
