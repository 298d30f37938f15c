//! TCP session options shared by servers and clients, with their defaults.

use std::time::Duration;

/// TCP keepalive probing (off unless set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped.
    pub probes: u32,
}

/// What a server accepts: its listen backlog and how many sessions it keeps at once. The same
/// settings at every layer over TCP (`backlog` and `max_sessions` on the builders of
/// [`TcpServer`](crate::TcpServer), `ark_ws::WsServer` and `ark_http::HttpServer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcceptLimits {
    /// The listen backlog: connections the kernel completes and queues for `accept`
    /// (default 1024; Linux caps it at `net.core.somaxconn`).
    pub backlog: i32,
    /// Most sessions open at once, TLS handshakes under way included (default none). A
    /// connection accepted while that many are open is reset at once, before any handler
    /// runs (counted in `refused_sessions`): a flood of connections costs the server at most
    /// this many sessions' memory.
    pub max_sessions: Option<usize>,
}

impl Default for AcceptLimits {
    fn default() -> Self {
        AcceptLimits {
            backlog: 1024,
            max_sessions: None,
        }
    }
}

/// Options of every session of a server or client.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// Initial capacity of a session's receive buffer, allocated only when a frame spans two
    /// reads. Default 4 KiB.
    pub initial_recv_buffer: usize,
    /// `TCP_NODELAY`. Default on.
    pub nodelay: bool,
    /// TCP keepalive. Default off.
    pub keepalive: Option<Keepalive>,
    /// `SO_SNDBUF` request (the kernel may double and cap it; see `TcpSession::socket_buffers`).
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` request.
    pub recv_buffer: Option<usize>,
    /// Close a session that received nothing for this long. Default 1 hour; `None` disables.
    pub idle_timeout: Option<Duration>,
    /// Most bytes a session may have queued for sending; a send that would pass it fails with
    /// `SendError::Full`. Default 16 MiB.
    pub send_limit: usize,
    /// Queued bytes at which the session stops reading (backpressure towards the peer).
    /// Default 8 MiB.
    pub high_watermark: usize,
    /// Queued bytes at or under which reading resumes and `on_writable` is called after a
    /// `Full` or a pause. Default 1 MiB.
    pub low_watermark: usize,
    /// How long a graceful close may take in all — writing what is queued, shutting down
    /// writing, waiting for the peer's end of stream — counted from the close. If the queue
    /// is not written by then (a peer that does not read), it is dropped and the connection
    /// reset (`CloseReason::Unflushed`); if only the peer's end of stream is missing, the
    /// session closes anyway. Default 10 s.
    pub close_timeout: Duration,
    /// A frame that has started to arrive must keep arriving: with part of a frame buffered
    /// and nothing received for this long (while reading is not paused by backpressure), the
    /// session closes with `CloseReason::FrameStalled`. Bounds what a peer that sends a few
    /// bytes and stalls (slowloris) can hold. Default 10 s; `None` disables it.
    pub stall_timeout: Option<Duration>,
    /// Queued bytes must keep leaving: with bytes queued and none written for this long (the
    /// peer stopped reading), the session is reset and the queue dropped
    /// (`CloseReason::WriteStalled`). Bounds how long a peer that never reads can hold a
    /// session and its queue. Default 30 s; `None` disables it.
    pub write_stall_timeout: Option<Duration>,
    /// Each session's own rate limits, each way (default none): reads take no more than the
    /// read bucket gives and pause until it refills (a deadline, no busy loop, nothing read
    /// past the budget); bytes over the write bucket stay queued, under the send limit and
    /// watermarks above. Counted on the session's bytes (under TLS, its plaintext). Change
    /// them for one session with `TcpSession::set_rate_limits` or its handle's.
    pub rate_limits: ark_reactor::RateLimits,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            initial_recv_buffer: 4 * 1024,
            nodelay: true,
            keepalive: None,
            send_buffer: None,
            recv_buffer: None,
            idle_timeout: Some(Duration::from_secs(3600)),
            send_limit: 16 * 1024 * 1024,
            high_watermark: 8 * 1024 * 1024,
            low_watermark: 1024 * 1024,
            close_timeout: Duration::from_secs(10),
            stall_timeout: Some(Duration::from_secs(10)),
            write_stall_timeout: Some(Duration::from_secs(30)),
            rate_limits: ark_reactor::RateLimits::default(),
        }
    }
}

impl TcpConfig {
    /// The configuration with its watermarks put in order: low ≤ high ≤ send limit.
    pub(crate) fn normalized(mut self) -> Self {
        self.high_watermark = self.high_watermark.min(self.send_limit);
        self.low_watermark = self.low_watermark.min(self.high_watermark);
        self
    }
}

/// Applies the socket options of `config` to a socket.
pub(crate) fn apply_socket_options(
    socket: &socket2::SockRef<'_>,
    config: &TcpConfig,
) -> std::io::Result<()> {
    socket.set_tcp_nodelay(config.nodelay)?;
    if let Some(k) = config.keepalive {
        let params = socket2::TcpKeepalive::new()
            .with_time(k.idle)
            .with_interval(k.interval)
            .with_retries(k.probes);
        socket.set_tcp_keepalive(&params)?;
    }
    apply_buffer_sizes(socket, config)
}

/// Applies `config`'s socket buffer requests (`SO_SNDBUF`, `SO_RCVBUF`), the options a
/// Unix-domain stream has too.
pub(crate) fn apply_buffer_sizes(
    socket: &socket2::SockRef<'_>,
    config: &TcpConfig,
) -> std::io::Result<()> {
    if let Some(n) = config.send_buffer {
        socket.set_send_buffer_size(n)?;
    }
    if let Some(n) = config.recv_buffer {
        socket.set_recv_buffer_size(n)?;
    }
    Ok(())
}
