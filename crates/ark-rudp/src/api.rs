//! [`RudpServer`] and [`RudpClient`]: builders and handles over ark-udp sockets.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_reactor::{Answer, RateLimitError, RateLimits, SocketBuffers, Stopping};
use ark_udp::{
    UdpCast, UdpCastBuilder, UdpClient as UdpClientSocket, UdpClientBuilder, UdpSocketHandle,
};

use crate::config::RudpConfig;
use crate::driver::socket::{Driver, Role};
use crate::handler::{RudpHandler, RudpSessionHandle, RudpShared, SessionShared};
use crate::proto::connection::{
    CloseReason, Connection, Delivery, RateGroup, RudpStats, SendError,
};
use crate::proto::cookie::random_u64;
use crate::proto::endpoint::Endpoint;
use crate::proto::listener::Listener;
use crate::proto::protection::{
    ClientProtection, MAX_CONNECT_TOKEN, RudpPublicKey, RudpServerKey, ServerProtection,
};

/// What a graceful stop gives the sessions' CLOSEs after `RudpConfig::close_timeout` (5 of
/// them at most 500 ms apart) before the socket is closed at once.
const CLOSE_PHASE: Duration = Duration::from_millis(3_000);

/// Socket settings both builders share.
macro_rules! rudp_options {
    () => {
        /// The connections' settings (default [`RudpConfig::default`]).
        pub fn config(mut self, config: RudpConfig) -> Self {
            self.config = config;
            self
        }

        /// Each session's own rate limits, each way (default none): writes paced (what the
        /// limit does not cover waits in the send buffer, under the usual `Full`), reads
        /// limited through the window the peer is given. Sets [`RudpConfig::rate_limits`],
        /// before or after [`config`](Self::config); a session changes its own with
        /// `RudpSession::set_rate_limits` or its handle's. See docs/rudp.md, "Rate limits".
        pub fn rate_limits(mut self, limits: RateLimits) -> Self {
            self.rate_limits = Some(limits);
            self
        }

        ark_reactor::runtime_options!(via udp);

        /// `SO_SNDBUF` / `SO_RCVBUF` requests.
        pub fn socket_buffers(mut self, send: Option<usize>, recv: Option<usize>) -> Self {
            self.udp = self.udp.socket_buffers(send, recv);
            self
        }

        /// UDP GSO where the kernel has it (ark-udp's `UdpConfig::gso`, default on); GRO is
        /// [`RudpConfig::gro`].
        pub fn gso(mut self, on: bool) -> Self {
            self.udp = self.udp.offload(on, true);
            self
        }

        /// Batched `recvmmsg`/`sendmmsg` with up to `batch` datagrams per call (on by
        /// default).
        pub fn batching(mut self, on: bool, batch: usize) -> Self {
            self.udp = self.udp.batching(on, batch);
            self
        }
    };
}

/// Entry point of the server side: [`RudpServer::builder`].
#[derive(Debug)]
pub struct RudpServer;

impl RudpServer {
    /// A builder with the default [`RudpConfig`].
    pub fn builder() -> RudpServerBuilder {
        RudpServerBuilder {
            udp: UdpCast::builder(),
            config: RudpConfig::default(),
            rate_limits: None,
            group: RateLimits::default(),
            protection: None,
            check: None,
        }
    }
}

/// Configures and starts a [`RudpServer`].
pub struct RudpServerBuilder {
    udp: UdpCastBuilder,
    config: RudpConfig,
    rate_limits: Option<RateLimits>,
    group: RateLimits,
    /// `None`: encrypted with a key pair made at start.
    protection: Option<ServerProtection>,
    check: Option<crate::proto::protection::TokenCheck>,
}

impl std::fmt::Debug for RudpServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RudpServerBuilder")
            .field("udp", &self.udp)
            .field("config", &self.config)
            .field("protection", &self.protection)
            .field("check_tokens", &self.check.is_some())
            .finish_non_exhaustive()
    }
}

impl RudpServerBuilder {
    rudp_options!();

    /// The address to bind (port 0 picks one).
    pub fn bind(mut self, addr: impl std::net::ToSocketAddrs) -> Self {
        self.udp = self.udp.bind(addr);
        self
    }

    /// Rate limits of all the server's sessions together, each way (default none): one
    /// bucket per direction that every session spends from, on top of its own limits.
    /// [`RudpServerHandle::set_group_rate_limits`] changes a direction set here.
    pub fn group_rate_limits(mut self, limits: RateLimits) -> Self {
        self.group = limits;
        self
    }

    /// Encrypts every session with this key pair (its public half is what clients pin:
    /// [`RudpServerKey::public`]). Without it (and without [`plaintext`](Self::plaintext)) a
    /// key pair is made at start, and [`RudpServerHandle::public_key`] gives its public half:
    /// enough for a test or a server whose clients learn the key from it; a deployed server
    /// keeps its key ([`RudpServerKey::secret`], [`RudpServerKey::from_secret`]).
    pub fn key(mut self, key: RudpServerKey) -> Self {
        self.protection = Some(ServerProtection::Encrypted {
            key: Arc::new(key),
            check: None,
        });
        self
    }

    /// Checks each client's connect token (sent encrypted in its first handshake message;
    /// see [`RudpClientBuilder::connect_token`]): `false` refuses the handshake (counted in
    /// `RudpStats::refused_handshakes`, no answer). The session's handler reads the token
    /// with [`RudpSession::connect_token`](crate::RudpSession::connect_token). Encrypted
    /// servers only.
    pub fn check_tokens<F>(mut self, check: F) -> Self
    where
        F: Fn(SocketAddr, &[u8]) -> bool + Send + Sync + 'static,
    {
        self.check = Some(Arc::new(check));
        self
    }

    /// Sessions in plaintext with session tokens, for a trusted network only: an off-path
    /// attacker is kept out, an on-path one reads, forges and ends sessions. Clients must
    /// ask for plaintext too ([`RudpClientBuilder::plaintext`]).
    pub fn plaintext(mut self) -> Self {
        self.protection = Some(ServerProtection::Plaintext);
        self
    }

    /// Binds and starts; `factory` makes the handler of each session whose handshake
    /// completes (no state exists for a peer before that).
    ///
    /// # Errors
    /// Binding or starting the pool failed.
    pub fn start<H, F>(self, factory: F) -> io::Result<RudpServerHandle>
    where
        H: RudpHandler,
        F: FnMut(SocketAddr) -> H + Send + 'static,
    {
        let mut config = self.config;
        if let Some(limits) = self.rate_limits {
            config.rate_limits = limits;
        }
        let group = RateGroup::new(config.clamp_limits(self.group), Instant::now());
        let config = Arc::new(config);
        let mut protection = self.protection.unwrap_or_else(ServerProtection::generated);
        match (&mut protection, self.check) {
            (ServerProtection::Encrypted { check, .. }, Some(c)) => *check = Some(c),
            (ServerProtection::Plaintext, Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "RudpServer: check_tokens needs an encrypted server (the tokens travel encrypted to its key), not plaintext",
                ));
            }
            _ => {}
        }
        let public_key = protection.public_key();
        let mailbox = Arc::new(RudpShared::default());
        let role = Role::Server {
            factory: Box::new(factory),
            group: group.clone(),
        };
        let endpoint = Endpoint::server(config.clone(), Listener::new(config.clone(), protection));
        let driver = Driver::new(role, endpoint, (config.clone(), mailbox.clone()));
        let socket = self.udp.max_datagram(config.receive_slot()).start(driver)?;
        let _ = mailbox.mailbox.attach(socket.waker());
        Ok(RudpServerHandle {
            socket,
            mailbox,
            group,
            config,
            public_key,
        })
    }
}

/// A running server.
#[derive(Debug)]
pub struct RudpServerHandle {
    socket: UdpSocketHandle,
    mailbox: Arc<RudpShared>,
    /// The group limits its sessions share.
    group: RateGroup,
    config: Arc<RudpConfig>,
    public_key: Option<RudpPublicKey>,
}

impl RudpServerHandle {
    /// The public key clients pin ([`RudpClientBuilder::server_key`]); `None` for a
    /// plaintext server.
    pub fn public_key(&self) -> Option<RudpPublicKey> {
        self.public_key
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr()
    }

    /// The granted `SO_SNDBUF` and `SO_RCVBUF` sizes.
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.socket.socket_buffers()
    }

    /// The datagram offloads the UDP socket uses (GSO trains out, GRO-coalesced receives in).
    pub fn offload(&self) -> ark_udp::UdpOffload {
        self.socket.offload()
    }

    /// The UDP socket's counters: datagrams and syscalls each way, GSO trains sent and
    /// GRO-coalesced receives.
    pub fn udp_stats(&self) -> ark_udp::UdpStats {
        self.socket.stats()
    }

    /// Every session's counters summed (closed sessions included), read on the socket's
    /// thread; `None` if it is stopped. `send_rate` and `receive_rate` are the live
    /// sessions' total, `send_queue_delay` the longest.
    pub fn stats(&self) -> Option<RudpStats> {
        self.mailbox.stats()
    }

    /// New limits of the server's group (all its sessions together), from now, set on the
    /// caller's thread: the tokens left are kept, up to the new burst (raised to at least the
    /// largest datagram). A direction that is `None` is lifted (its bucket stays and never
    /// runs out). Sessions waiting for the group's tokens at the change wake when they
    /// expected to (at most a datagram's time at the old rate), then go at the new one.
    ///
    /// # Errors
    /// [`RateLimitError::NoGroupLimit`] when `limits` limits a direction the server was built
    /// without a group limit for ([`RudpServerBuilder::group_rate_limits`]); nothing is
    /// changed then.
    pub fn set_group_rate_limits(&self, limits: RateLimits) -> Result<(), RateLimitError> {
        let limits = self.config.clamp_limits(limits);
        self.group.set_limits(limits, Instant::now())
    }

    /// Begins a graceful stop and returns at once: no new sessions; every session's
    /// `on_stopping`; each session then delivers what it was given (repeating it until the
    /// peer acknowledged all of it, for at most `RudpConfig::close_timeout`), sends its
    /// CLOSE until answered, and its handler gets `on_close(Stopped)` (or
    /// `CloseReason::Cut` with the bytes the deadline cut). Then the socket closes. Wait with
    /// [`Stopping::wait`] (it gives the whole stop `close_timeout` + 3 s; the socket stays
    /// open as long as its sessions have something to deliver or a CLOSE to exchange);
    /// [`Stopping::wait_timeout`] closes what is left at its own deadline.
    pub fn stop(self) -> Stopping {
        self.socket
            .stop_allowing(self.config.close_timeout + CLOSE_PHASE)
    }

    /// Begins a drain and returns at once: no new sessions (a HELLO gets no answer); every
    /// open session's handler gets [`on_drain`](crate::RudpHandler::on_drain), and the
    /// session goes on — messages both ways — until its peer or the handler closes it.
    /// Sessions still open when `drain` has passed are stopped as [`stop`](Self::stop) does
    /// (delivering what they accepted). [`Stopping::report`] says whether the drain's
    /// deadline cut any off (`undrained`: the socket, 1, with the sessions still on it).
    pub fn drain(self, drain: Duration) -> Stopping {
        self.socket
            .drain(drain, self.config.close_timeout + CLOSE_PHASE)
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> std::io::Result<()> {
        self.stop().wait_timeout(timeout)
    }
}

/// Entry point of the client side: [`RudpClient::builder`].
#[derive(Debug)]
pub struct RudpClient;

impl RudpClient {
    /// A builder with the default [`RudpConfig`].
    pub fn builder() -> RudpClientBuilder {
        RudpClientBuilder {
            udp: UdpClientSocket::builder(),
            config: RudpConfig::default(),
            rate_limits: None,
            server_key: None,
            token: Vec::new(),
            plaintext: false,
        }
    }
}

/// Configures and starts a [`RudpClient`].
#[derive(Debug)]
pub struct RudpClientBuilder {
    udp: UdpClientBuilder,
    config: RudpConfig,
    rate_limits: Option<RateLimits>,
    server_key: Option<RudpPublicKey>,
    token: Vec<u8>,
    plaintext: bool,
}

impl RudpClientBuilder {
    rudp_options!();

    /// The server's public key, pinned: the session is encrypted, and the handshake finishes
    /// only with the server holding its secret (a server that cannot prove it gets no
    /// session: `on_close(CloseReason::HandshakeTimeout)`). Sessions are encrypted by
    /// default, so a client needs this or [`plaintext`](Self::plaintext).
    pub fn server_key(mut self, key: RudpPublicKey) -> Self {
        self.server_key = Some(key);
        self
    }

    /// A connect token for the server's check ([`RudpServerBuilder::check_tokens`]): sent in
    /// the first handshake message, encrypted to the server's key (at most 1,024 bytes).
    pub fn connect_token(mut self, token: impl Into<Vec<u8>>) -> Self {
        self.token = token.into();
        self
    }

    /// Plaintext with session tokens, for a trusted network only (see
    /// [`RudpServerBuilder::plaintext`]); the server must be plaintext too.
    pub fn plaintext(mut self) -> Self {
        self.plaintext = true;
        self
    }

    /// How the session is protected, from what the builder was told.
    fn protection(&mut self) -> io::Result<ClientProtection> {
        let invalid = |message: String| io::Error::new(io::ErrorKind::InvalidInput, message);
        match (self.server_key, self.plaintext) {
            (Some(_), true) => Err(invalid(
                "RudpClient: server_key and plaintext contradict each other: choose one".into(),
            )),
            (None, true) if !self.token.is_empty() => Err(invalid(
                "RudpClient: a connect token travels encrypted: it needs server_key, not plaintext".into(),
            )),
            (None, true) => Ok(ClientProtection::Plaintext),
            (Some(_), false) if self.token.len() > MAX_CONNECT_TOKEN => Err(invalid(format!(
                "RudpClient: a connect token of {} bytes is over the limit of {MAX_CONNECT_TOKEN}",
                self.token.len()
            ))),
            (Some(server_key), false) => Ok(ClientProtection::Encrypted {
                server_key,
                token: std::mem::take(&mut self.token),
            }),
            (None, false) => Err(invalid(
                "RudpClient: sessions are encrypted by default: give the server's public key (server_key), or opt in to plaintext for a trusted network (plaintext)".into(),
            )),
        }
    }

    /// Connects to `server` and starts the handshake; `handler.on_open` runs once it
    /// finishes, or `on_close(CloseReason::HandshakeTimeout)` if it does not within
    /// `RudpConfig::handshake_timeout`.
    ///
    /// # Errors
    /// Neither [`server_key`](Self::server_key) nor [`plaintext`](Self::plaintext) was
    /// given (or both, or a token too long or in plaintext); the address does not resolve;
    /// binding or starting the pool failed.
    pub fn connect<H: RudpHandler>(
        mut self,
        server: impl std::net::ToSocketAddrs,
        handler: H,
    ) -> io::Result<RudpClientHandle> {
        let protection = self.protection()?;
        let server = ark_reactor::resolve(server)?;
        let mut config = self.config;
        if let Some(limits) = self.rate_limits {
            config.rate_limits = limits;
        }
        let config = Arc::new(config);
        let mailbox = Arc::new(RudpShared::default());
        let conn = Connection::client(config.clone(), Instant::now(), random_u64(), protection);
        let shared = SessionShared::new(&config);
        let role = Role::Client {
            pending: Some(Box::new((conn, handler, shared.clone()))),
        };
        let endpoint = Endpoint::client(config.clone());
        let driver = Driver::new(role, endpoint, (config.clone(), mailbox.clone()));
        let socket = self
            .udp
            .max_datagram(config.receive_slot())
            .connect(server, driver)?;
        let _ = mailbox.mailbox.attach(socket.waker());
        Ok(RudpClientHandle {
            session: RudpSessionHandle {
                peer: server,
                mailbox: mailbox.clone(),
                shared,
            },
            socket,
            mailbox,
            close_timeout: config.close_timeout,
        })
    }
}

/// A running client.
#[derive(Debug)]
pub struct RudpClientHandle {
    socket: UdpSocketHandle,
    session: RudpSessionHandle,
    mailbox: Arc<RudpShared>,
    close_timeout: Duration,
}

impl RudpClientHandle {
    /// The local address.
    pub fn local_addr(&self) -> SocketAddr {
        self.socket.local_addr()
    }

    /// The granted `SO_SNDBUF` and `SO_RCVBUF` sizes.
    pub fn socket_buffers(&self) -> SocketBuffers {
        self.socket.socket_buffers()
    }

    /// The datagram offloads the UDP socket uses (GSO trains out, GRO-coalesced receives in).
    pub fn offload(&self) -> ark_udp::UdpOffload {
        self.socket.offload()
    }

    /// The UDP socket's counters: datagrams and syscalls each way, GSO trains sent and
    /// GRO-coalesced receives.
    pub fn udp_stats(&self) -> ark_udp::UdpStats {
        self.socket.stats()
    }

    /// Sends a message from any thread (see [`RudpSessionHandle::send`]).
    ///
    /// # Errors
    /// As [`RudpSessionHandle::send`]: `TooLarge`, `Full` or `Closed`, counted.
    pub fn send(&self, message: &[u8], delivery: Delivery) -> Result<(), SendError> {
        self.session.send(message, delivery)
    }

    /// An answer once everything sent so far was acknowledged (see
    /// [`RudpSessionHandle::flush`]).
    pub fn flush(&self) -> Answer<Result<(), CloseReason>> {
        self.session.flush()
    }

    /// A handle to the session.
    pub fn session(&self) -> RudpSessionHandle {
        self.session.clone()
    }

    /// New rate limits of the session's own (see [`RudpSessionHandle::set_rate_limits`]).
    pub fn set_rate_limits(&self, limits: RateLimits) {
        self.session.set_rate_limits(limits);
    }

    /// The session's counters (after it closed: its last ones); `None` if stopped.
    pub fn stats(&self) -> Option<RudpStats> {
        self.mailbox.stats()
    }

    /// Begins a graceful stop (`on_stopping`; what was sent is delivered, repeated until
    /// acknowledged for at most `RudpConfig::close_timeout`; a CLOSE to the server until
    /// answered; `on_close(Stopped)`, or `CloseReason::Cut`): see [`RudpServerHandle::stop`].
    pub fn stop(self) -> Stopping {
        self.socket.stop_allowing(self.close_timeout + CLOSE_PHASE)
    }

    /// Stops within `timeout` (see [`stop`](Self::stop)) and waits for the end.
    ///
    /// # Errors
    /// Stopping an own pool failed.
    pub fn stop_timeout(self, timeout: std::time::Duration) -> std::io::Result<()> {
        self.stop().wait_timeout(timeout)
    }
}
