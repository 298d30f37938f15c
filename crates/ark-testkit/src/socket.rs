//! What a server builder's settings did to its sockets: options read back from the kernel
//! (Linux) and the accept limits as connections see them.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Checks a server's `max_sessions(max)` from outside, with plain TCP connections to `addr`
/// (each is a session from its connect at every layer over ark-tcp; a WebSocket or HTTP
/// server waits for its handshake or request meanwhile). `open` reads the server's
/// `sessions_open` gauge. `max` connections stay open; the next is reset (or closed) at
/// once; after one of the first closes, a new one is kept. `Err` says which step failed.
pub fn check_max_sessions(
    addr: SocketAddr,
    max: usize,
    open: impl Fn() -> u64,
) -> Result<(), String> {
    let connect = || TcpStream::connect(addr).map_err(|e| format!("connect to {addr}: {e}"));
    let mut kept = (0..max).map(|_| connect()).collect::<Result<Vec<_>, _>>()?;
    if !crate::wait_until(Duration::from_secs(10), || open() == max as u64) {
        return Err(format!("{} sessions open, not {max}", open()));
    }
    let refused = connect()?;
    if !ended_within(&refused, Duration::from_secs(5)) {
        return Err(format!("connection {} beyond {max} was kept", max + 1));
    }
    if open() != max as u64 {
        return Err(format!(
            "{} sessions open after the refusal, not {max}",
            open()
        ));
    }
    kept.remove(0);
    if !crate::wait_until(Duration::from_secs(10), || open() == max as u64 - 1) {
        return Err(format!("{} sessions open after one closed", open()));
    }
    let again = connect()?;
    if ended_within(&again, Duration::from_millis(300)) {
        return Err("a connection made after one closed was refused".into());
    }
    if !crate::wait_until(Duration::from_secs(10), || open() == max as u64) {
        return Err(format!("{} sessions open at the end, not {max}", open()));
    }
    Ok(())
}

/// Whether the server ended `stream` (end of stream or a reset) within `wait`.
fn ended_within(mut stream: &TcpStream, wait: Duration) -> bool {
    if stream.set_read_timeout(Some(wait)).is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
    }
}

/// The listen backlog the kernel holds for this host's TCP listener on `addr` (the `Send-Q`
/// that `ss -ltn` shows for a listening socket). Linux only; needs `ss` from iproute2,
/// which scripts/setup-test-deps.sh installs: `Err` says so if it is missing.
#[cfg(target_os = "linux")]
pub fn listen_backlog_of(addr: SocketAddr) -> Result<u32, String> {
    let filter = format!("sport = :{}", addr.port());
    let out = std::process::Command::new("ss")
        .args(["-ltnH", &filter])
        .output()
        .map_err(|e| {
            format!("running `ss` (iproute2; scripts/setup-test-deps.sh installs it): {e}")
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 4 && f[3].parse::<SocketAddr>().ok() == Some(addr))
        .and_then(|f| f[2].parse().ok())
        .ok_or_else(|| format!("no listener on {addr} in `ss -ltnH '{filter}'`: {text}"))
}

/// The socket options the kernel reports for one of this process's TCP sockets, as
/// [`socket_options_of`] reads them.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptionsSeen {
    /// `TCP_NODELAY`.
    pub nodelay: bool,
    /// `SO_KEEPALIVE`, and if on `TCP_KEEPIDLE` and `TCP_KEEPINTVL` (seconds) and
    /// `TCP_KEEPCNT`.
    pub keepalive: Option<(u32, u32, u32)>,
    /// `SO_SNDBUF` (Linux reports twice what was asked).
    pub send_buffer: usize,
    /// `SO_RCVBUF` (likewise).
    pub recv_buffer: usize,
}

/// The options of this process's TCP socket whose local address is `local` and whose peer is
/// `peer` — the server's side of a connection a test made, say — found among the process's
/// open descriptors; `None` if there is none. Linux only: a test of what a builder setting
/// did to the sockets a server accepted.
#[cfg(target_os = "linux")]
pub fn socket_options_of(
    local: std::net::SocketAddr,
    peer: std::net::SocketAddr,
) -> Option<SocketOptionsSeen> {
    let fds = std::fs::read_dir("/proc/self/fd").ok()?;
    fds.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|fd| {
            std::fs::read_link(format!("/proc/self/fd/{fd}"))
                .is_ok_and(|link| link.to_string_lossy().starts_with("socket:"))
        })
        .find(|&fd| {
            address_of(fd, libc::getsockname) == Some(local)
                && address_of(fd, libc::getpeername) == Some(peer)
        })
        .map(|fd| SocketOptionsSeen {
            nodelay: option(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY) != 0,
            keepalive: (option(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE) != 0).then(|| {
                (
                    option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) as u32,
                    option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) as u32,
                    option(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT) as u32,
                )
            }),
            send_buffer: option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF) as usize,
            recv_buffer: option(fd, libc::SOL_SOCKET, libc::SO_RCVBUF) as usize,
        })
}

/// `fd`'s local (`getsockname`) or peer (`getpeername`) address, if it is an IPv4 socket.
#[cfg(target_os = "linux")]
fn address_of(
    fd: i32,
    get: unsafe extern "C" fn(i32, *mut libc::sockaddr, *mut libc::socklen_t) -> i32,
) -> Option<std::net::SocketAddr> {
    // SAFETY: a zeroed sockaddr_in is a valid value; `get` writes at most `len` bytes into it
    // and `fd` is only read (a descriptor closed meanwhile gives EBADF, not UB).
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: as above; the pointers are to live locals of the right sizes.
    let rc = unsafe { get(fd, (&raw mut addr).cast(), &raw mut len) };
    (rc == 0 && i32::from(addr.sin_family) == libc::AF_INET).then(|| {
        let ip = std::net::Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
        std::net::SocketAddr::from((ip, u16::from_be(addr.sin_port)))
    })
}

/// An integer socket option of `fd` (0 if it cannot be read).
#[cfg(target_os = "linux")]
fn option(fd: i32, level: i32, name: i32) -> i32 {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live locals; getsockopt writes at most `len` bytes.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&raw mut value).cast(), &raw mut len) };
    if rc == 0 { value } else { 0 }
}
