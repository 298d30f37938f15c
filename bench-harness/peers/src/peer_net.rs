//! Sockets the peer programs (`peer-tokio-loopback`, `peer-raw-loopback`) open the same way
//! as ark-loopback does: UDP sockets with the buffer sizes the flags ask for (through
//! socket2), `SO_REUSEPORT` for a sharded server, nonblocking.
//!
//! ```
//! use ark_peers::peer_net::{buffers, udp_socket, unspecified_like};
//!
//! let server: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
//! let socket = udp_socket(unspecified_like(server), 65_536, 65_536, false).unwrap();
//! let granted = buffers(&socket).unwrap();
//! assert!(granted.send > 0 && granted.recv > 0);
//! ```

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

use ark_loopback::args::Args;

/// A nonblocking UDP socket bound to `bind` with the requested send and receive buffers,
/// `SO_REUSEPORT` if `reuse_port`.
///
/// # Errors
/// The socket could not be made or bound.
pub fn udp_socket(
    bind: SocketAddr,
    send: usize,
    receive: usize,
    reuse_port: bool,
) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_reuse_port(reuse_port)?;
    socket.set_send_buffer_size(send)?;
    socket.set_recv_buffer_size(receive)?;
    socket.set_nonblocking(true)?;
    socket.bind(&bind.into())?;
    Ok(socket.into())
}

/// UDP server socket `shard` of `shards` for `args` (nonblocking, the server's buffers,
/// `SO_REUSEPORT` when sharded); the first gets the port-steering program of
/// `--udp-steering port`, as ark's server does (`ark_udp::steer_by_peer_port`).
///
/// # Errors
/// The socket could not be made, bound or steered.
pub fn udp_server_socket(
    args: &Args,
    bind: SocketAddr,
    shard: usize,
    shards: usize,
) -> io::Result<UdpSocket> {
    let socket = udp_socket(
        bind,
        args.udp_send_buffer,
        args.udp_server_receive_buffer,
        shards > 1,
    )?;
    if shard == 0 && args.udp_port_steering().is_some() {
        ark_udp::steer_by_peer_port(&socket, shards)?;
    }
    Ok(socket)
}

/// UDP client socket `index` for `args` (nonblocking, the clients' buffers), not connected:
/// with `--udp-steering port` bound where ark's client `index` binds
/// (`Args::udp_client_socket`), otherwise to any port.
///
/// # Errors
/// The socket could not be made or bound.
pub fn udp_client_socket(args: &Args, server: SocketAddr, index: usize) -> io::Result<UdpSocket> {
    let Some(socket) = args.udp_client_socket(server, index)? else {
        return udp_socket(
            unspecified_like(server),
            args.udp_send_buffer,
            args.udp_receive_buffer,
            false,
        );
    };
    let options = socket2::SockRef::from(&socket);
    options.set_send_buffer_size(args.udp_send_buffer)?;
    options.set_recv_buffer_size(args.udp_receive_buffer)?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}

/// The send and receive buffer sizes the kernel gave `socket`.
///
/// # Errors
/// The socket options could not be read.
pub fn buffers(socket: &UdpSocket) -> io::Result<ark_udp::SocketBuffers> {
    let socket = socket2::SockRef::from(socket);
    Ok(ark_udp::SocketBuffers {
        send: socket.send_buffer_size()?,
        recv: socket.recv_buffer_size()?,
    })
}

/// The unspecified address of `server`'s family, any port: where a client binds (the kernel
/// picks the source address of the route to the server, loopback or not).
pub fn unspecified_like(server: SocketAddr) -> SocketAddr {
    if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    }
}
