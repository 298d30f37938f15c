//! What the kernel granted a socket, as every ark transport reports it.

/// A socket's send and receive buffer sizes as the kernel reports them (`SO_SNDBUF`,
/// `SO_RCVBUF`): what was asked may have been doubled (Linux) or capped
/// (`net.core.wmem_max` / `rmem_max`). 0 where a size could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SocketBuffers {
    /// `SO_SNDBUF`, bytes.
    pub send: usize,
    /// `SO_RCVBUF`, bytes.
    pub recv: usize,
}
