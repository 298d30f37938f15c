//! Sockets the peer programs (`peer-tokio-loopback`, `peer-raw-loopback`) open the same way
//! as ark-loopback does: UDP sockets with the buffer sizes the flags ask for (through
//! socket2), `SO_REUSEPORT` for a sharded server, nonblocking.
//!
//! ```
//! use bench_harness::peer_net::{buffers, udp_socket, unspecified_like};
//!
//! let server: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
//! let socket = udp_socket(unspecified_like(server), 65_536, 65_536, false).unwrap();
//! let (send, receive) = buffers(&socket).unwrap();
//! assert!(send > 0 && receive > 0);
//! ```

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

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

/// The (send, receive) buffer sizes the kernel gave `socket`.
///
/// # Errors
/// The socket options could not be read.
pub fn buffers(socket: &UdpSocket) -> io::Result<(usize, usize)> {
    let socket = socket2::SockRef::from(socket);
    Ok((socket.send_buffer_size()?, socket.recv_buffer_size()?))
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
