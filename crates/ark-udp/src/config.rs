//! UDP socket options with their defaults.

use std::time::Duration;

use ark_reactor::RateLimits;

/// Options of a UDP server or client socket.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// `SO_SNDBUF` request (Linux doubles it and caps it at `net.core.wmem_max`; the granted
    /// size is readable from the handle).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` request (doubled and capped at `net.core.rmem_max`).
    pub recv_buffer: Option<usize>,
    /// Receive slot size: a longer datagram is detected as truncated and dropped. Default
    /// 65,536 (any UDP datagram).
    pub max_datagram: usize,
    /// Datagrams per `recvmmsg`/`sendmmsg`. Default 32. Memory: about `batch × max_datagram`
    /// per socket (2 MiB by default, slots rounded up to whole pages or cache lines; lower
    /// `max_datagram` for small messages).
    pub batch: usize,
    /// Batched syscalls (`recvmmsg`/`sendmmsg`); off uses one `recvfrom`/`sendto` per
    /// datagram. Default on.
    pub batching: bool,
    /// A session with no datagram for this long is closed. Default 60 s; `None` keeps
    /// sessions until stop.
    pub session_expiry: Option<Duration>,
    /// Most sessions per socket. When the table is full, a new peer's first datagram evicts a
    /// session that has been silent since the eviction hand last passed it (CLOCK:
    /// `CloseReason::Evicted`), so a flood from spoofed addresses cannot lock new peers out;
    /// a session that gets a datagram at least once every `max_sessions` evictions stays.
    /// Default 100,000.
    pub max_sessions: usize,
    /// Most bytes queued for sending per socket before `SendError::Full`. Default 4 MiB. The
    /// bytes its sessions keep waiting for their write allowances (see
    /// [`rate_limits`](Self::rate_limits)) have a budget of the same size, apart.
    pub send_queue_limit: usize,
    /// UDP GSO (Linux 4.18+): datagrams of one size queued one after another to one peer
    /// (and [`UdpSession::send_train`]) leave as one message that the kernel cuts
    /// (`UDP_SEGMENT`), up to 64 datagrams and 65,507 bytes. Default on; used where the
    /// kernel has it (see [`UdpOffload`]), datagram by datagram elsewhere and on the portable
    /// path. A train the kernel refuses (a device without checksum offload, segments over the
    /// path MTU) is sent datagram by datagram and counted in `UdpStats::gso_fallbacks`.
    ///
    /// [`UdpSession::send_train`]: crate::UdpSession::send_train
    pub gso: bool,
    /// UDP GRO (Linux 5.0+): the kernel may hand over several datagrams of one peer as one
    /// buffer, which ark-udp splits by the segment size the kernel reports; handlers still
    /// see one datagram per call. Default on; used only with `batching` and a
    /// `max_datagram` of at least [`GRO_MIN_DATAGRAM`] (a coalesced buffer must never be
    /// cut), see [`UdpOffload`].
    pub gro: bool,
    /// Every session's own rate limits when it opens, each way, in datagram payload bytes
    /// (change one with `UdpSession::set_rate_limits` or `UdpSessionHandle::set_rate_limits`).
    /// A server drops a datagram over its session's read allowance (counted in
    /// `UdpStats::rate_dropped`); a client or cast socket stops reading until its allowance
    /// is back; a send over the write allowance waits (up to `send_queue_limit` bytes per
    /// socket). Default none. See docs/udp.md, "Rate limits".
    pub rate_limits: RateLimits,
}

/// The smallest `max_datagram` with which GRO is turned on: a coalesced buffer holds up to
/// 64 KiB.
pub const GRO_MIN_DATAGRAM: usize = 65_536;

/// The datagram offloads a socket uses, decided when it is bound: what [`UdpConfig`] asked
/// for and the kernel has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpOffload {
    /// Trains of datagrams leave as one message (`UDP_SEGMENT`).
    pub gso: bool,
    /// Received datagrams may come coalesced (`UDP_GRO`) and are split.
    pub gro: bool,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            send_buffer: None,
            recv_buffer: None,
            max_datagram: 65_536,
            batch: 32,
            batching: true,
            session_expiry: Some(Duration::from_secs(60)),
            max_sessions: 100_000,
            send_queue_limit: 4 * 1024 * 1024,
            gso: true,
            gro: true,
            rate_limits: RateLimits::default(),
        }
    }
}
