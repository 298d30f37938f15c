//! The command line, arknet-compatible.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use serde::Serialize;

/// Transport under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// TCP with a 4-byte big-endian length prefix.
    Tcp,
    /// One UDP datagram per message.
    Udp,
    /// WebSocket binary messages.
    Websocket,
    /// TCP with a 4-byte big-endian length prefix, over TLS (rustls).
    Tcps,
    /// WebSocket binary messages over TLS (rustls).
    Wss,
    /// HTTP/1.1: each message a `POST /echo` with the payload as body, echoed as the answer's
    /// body; keep-alive; the window is the requests pipelined per connection.
    Http,
    /// HTTP/1.1 over TLS (rustls).
    Https,
    /// Reliable UDP (ark-rudp): each message a reliable ordered message on a session; FEC as
    /// `--rudp-fec` says. Runs over `--link-loss`, `--link-reorder` and `--link-duplicate`.
    Rudp,
}

impl Protocol {
    /// Whether the protocol runs over TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Protocol::Tcps | Protocol::Wss | Protocol::Https)
    }

    /// The record's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Websocket => "websocket",
            Protocol::Tcps => "tcps",
            Protocol::Wss => "wss",
            Protocol::Http => "http",
            Protocol::Https => "https",
            Protocol::Rudp => "rudp",
        }
    }
}

/// IO model: one shared loop, or sharded loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoModelArg {
    /// One readiness loop served by `--io-threads` threads.
    Shared,
    /// `--io-threads` independent loops, one thread each.
    Sharded,
    /// Every endpoint (the server and each client) owns one loop on a thread of its own:
    /// clients + 1 loops and threads. `--io-threads` must be 1 (as in arknet).
    Owned,
}

impl IoModelArg {
    /// The record's name of the IO model.
    pub fn name(self) -> &'static str {
        match self {
            IoModelArg::Shared => "shared",
            IoModelArg::Sharded => "sharded",
            IoModelArg::Owned => "owned",
        }
    }
}

/// Loopback address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Family {
    /// 127.0.0.1
    Ipv4,
    /// ::1
    Ipv6,
}

impl Family {
    /// The record's name of the family.
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "ipv4",
            Family::Ipv6 => "ipv6",
        }
    }
}

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    /// On.
    On,
    /// Off.
    Off,
}

/// Which shard of a sharded UDP server receives a client's datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UdpSteering {
    /// Client *i* binds a port that steers its datagrams (a classic-BPF `SO_REUSEPORT`
    /// program keyed on the source port) to the shard on its own thread, as TCP sessions are
    /// placed.
    Port,
    /// The kernel's hash of the client's address picks the shard.
    Hash,
}

impl UdpSteering {
    /// `Port` where ark-udp can steer by port (Linux's IO path), `Hash` elsewhere.
    pub const DEFAULT: UdpSteering = if ark_udp::Steering::PeerPort.is_available() {
        UdpSteering::Port
    } else {
        UdpSteering::Hash
    };
}

/// Which server answers a WebSocket client's upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WsServerKind {
    /// ark-ws's own server (`WsServer`).
    Ws,
    /// An ark-http server whose router upgrades `GET /` to the same WebSocket session
    /// (`ark_ws::upgrade`): HTTP and WebSocket on one port, the cost of the router measured.
    HttpRouter,
}

impl WsServerKind {
    /// The name in the record.
    pub fn name(self) -> &'static str {
        match self {
            WsServerKind::Ws => "ws",
            WsServerKind::HttpRouter => "http-router",
        }
    }
}

/// Which side(s) this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Server and clients in this process.
    Both,
    /// Only the echo server (`--bind`).
    Server,
    /// Only the clients (`--connect`).
    Client,
}

/// `ADDR:PORT` or `HOST:PORT`, resolved now; the first address the resolver gives.
fn address(text: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let mut addrs = text
        .to_socket_addrs()
        .map_err(|e| format!("{text:?} is not an address or host:port that resolves: {e}"))?;
    addrs
        .next()
        .ok_or_else(|| format!("{text:?} resolves to no address"))
}

fn seconds(range: (f64, f64), open_low: bool) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s: &str| {
        let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
        let low_ok = if open_low { v > range.0 } else { v >= range.0 };
        if low_ok && v <= range.1 && v.is_finite() {
            Ok(v)
        } else {
            let low = if open_low { "(" } else { "[" };
            Err(format!("{v} is outside {low}{}, {}]", range.0, range.1))
        }
    }
}

/// `ark-loopback`: echo round trips over loopback; prints one JSON record.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ark-loopback",
    version,
    about = "Loopback echo benchmark for ark (arknet-compatible flags and JSON record)"
)]
pub struct Args {
    /// Transport.
    #[arg(long, value_enum, default_value_t = Protocol::Tcp)]
    pub protocol: Protocol,
    /// Payload bytes per message (16..=65507; rudp up to 16777216: a reliable message of
    /// many datagrams, the bulk case).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(16..=16_777_216))]
    pub payload: u32,
    /// Client connections / sockets (1..=100000; at most 1024 in the owned model, which gives
    /// each a thread). Each needs a file descriptor on each side (`ulimit -n`).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub clients: u32,
    /// Messages in flight per client, closed loop (1..=1024).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub window: u32,
    /// Measured phase in seconds, (0, 3600].
    #[arg(long, default_value_t = 1.0, value_parser = seconds((0.0, 3600.0), true))]
    pub seconds: f64,
    /// Warm-up in seconds, [0, 3600].
    #[arg(long, default_value_t = 0.25, value_parser = seconds((0.0, 3600.0), false))]
    pub warmup: f64,
    /// IO model.
    #[arg(long = "io-model", value_enum, default_value_t = IoModelArg::Shared)]
    pub io_model: IoModelArg,
    /// IO threads (1..=64): shared = threads serving one loop, sharded = loops; owned takes 1
    /// (one per endpoint).
    #[arg(long = "io-threads", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub io_threads: u32,
    /// xorshift iterations per echo on the server (0..=10,000,000).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub work: u64,
    /// Loopback address family.
    #[arg(long = "address-family", value_enum, default_value_t = Family::Ipv4)]
    pub address_family: Family,
    /// Requested SO_RCVBUF of the UDP server.
    #[arg(long = "udp-server-receive-buffer", default_value_t = 4_194_304)]
    pub udp_server_receive_buffer: usize,
    /// Requested SO_RCVBUF of UDP client sockets.
    #[arg(long = "udp-receive-buffer", default_value_t = 4_194_304)]
    pub udp_receive_buffer: usize,
    /// Requested SO_SNDBUF of UDP client sockets (and of the server).
    #[arg(long = "udp-send-buffer", default_value_t = 65_536)]
    pub udp_send_buffer: usize,
    /// Batched UDP syscalls (recvmmsg/sendmmsg) or one per datagram.
    #[arg(long = "udp-batch", value_enum, default_value_t = Switch::On)]
    pub udp_batch: Switch,
    /// udp and rudp: the kernel's datagram offloads where it has them (Linux): GSO trains of
    /// same-size datagrams to one peer, GRO-coalesced receives (rudp; udp's receive slots
    /// are `--payload` + 1 bytes, too small for GRO). `off` sends and receives datagram by
    /// datagram.
    #[arg(long = "udp-offload", value_enum, default_value_t = Switch::On)]
    pub udp_offload: Switch,
    /// UDP on sharded loops, server and clients in this process: which shard receives a
    /// client's datagrams (every implementation does the same). Default `port` on Linux's IO
    /// path, `hash` on the portable one (which cannot steer by port).
    #[arg(long = "udp-steering", value_enum, default_value_t = UdpSteering::DEFAULT)]
    pub udp_steering: UdpSteering,
    /// websocket and wss: the server that answers the upgrade, `ws` (ark-ws's `WsServer`)
    /// or `http-router` (an ark-http router whose `GET /` route upgrades to the same session).
    #[arg(long = "ws-server", value_enum, default_value_t = WsServerKind::Ws)]
    pub ws_server: WsServerKind,
    /// websocket and wss: permessage-deflate (RFC 7692, ark-ws's `WsConfig::deflate` with its
    /// defaults) offered by the clients and accepted by the server, so every message of
    /// 64 bytes or more goes compressed; ark only (the peers have none). The record's
    /// `wire_bytes_per_message` says what it saves.
    #[arg(long = "ws-deflate", value_enum, default_value_t = Switch::Off)]
    pub ws_deflate: Switch,
    /// Seconds to wait for in-flight messages after the measured phase, [0, 3600].
    #[arg(long, default_value_t = 2.0, value_parser = seconds((0.0, 3600.0), false))]
    pub drain: f64,
    /// Run both sides, or only the server or the clients.
    #[arg(long, value_enum, default_value_t = Role::Both)]
    pub role: Role,
    /// Server address for `--role server` (default: the family's loopback, port 0): any
    /// address or `host:port`, e.g. `0.0.0.0:9000` to serve other hosts.
    #[arg(long, value_parser = address)]
    pub bind: Option<SocketAddr>,
    /// Server address for `--role client`: any address or `host:port`.
    #[arg(long, value_parser = address)]
    pub connect: Option<SocketAddr>,
    /// For tcps and wss: a directory with arknet's layout — `server.pem`, `server-key.pem`
    /// and `ca.pem` (the server presents the first two, clients verify against the third).
    /// Without it, a throwaway CA and server certificate are generated in memory for the run.
    #[arg(long, value_name = "DIR")]
    pub certs: Option<PathBuf>,
    /// For tcps and wss: the name clients verify the server's certificate against (and send
    /// by SNI).
    #[arg(long = "server-name", default_value = "localhost")]
    pub server_name: String,
    /// TLS session resumption (tickets / session ids) on both sides.
    #[arg(long = "tls-resumption", value_enum, default_value_t = Switch::On)]
    pub tls_resumption: Switch,
    /// tcp and tcps: the server closes each connection after echoing this many messages and
    /// the client connects again (a handshake per N round trips; 1 measures handshakes per
    /// second); 0 keeps one connection per client.
    #[arg(long = "reconnect-every", default_value_t = 0)]
    pub reconnect_every: u64,
    /// A conditioned link between clients and server (ark-link relay, each way): loss
    /// probability per datagram, [0, 1). For reliable UDP: TCP repairs loss below the
    /// application, and plain udp's closed loop cannot run over it (a lost datagram takes a
    /// window slot for good).
    #[arg(long = "link-loss", default_value_t = 0.0, value_parser = probability)]
    pub link_loss: f64,
    /// Mean length of loss bursts (Gilbert–Elliott) for `--link-loss`; 1 is independent loss.
    #[arg(long = "link-burst", default_value_t = 1.0, value_parser = seconds((1.0, 1000.0), false))]
    pub link_burst: f64,
    /// The link's one-way delay in milliseconds, each way.
    #[arg(long = "link-delay-ms", default_value_t = 0.0, value_parser = seconds((0.0, 60_000.0), false))]
    pub link_delay_ms: f64,
    /// Jitter in milliseconds: each packet's delay ± up to this, order kept.
    #[arg(long = "link-jitter-ms", default_value_t = 0.0, value_parser = seconds((0.0, 60_000.0), false))]
    pub link_jitter_ms: f64,
    /// Probability a datagram is held back (2 ms) to be overtaken (for reliable UDP, as
    /// `--link-loss`).
    #[arg(long = "link-reorder", default_value_t = 0.0, value_parser = probability)]
    pub link_reorder: f64,
    /// Probability a datagram is delivered twice (for reliable UDP, as `--link-loss`).
    #[arg(long = "link-duplicate", default_value_t = 0.0, value_parser = probability)]
    pub link_duplicate: f64,
    /// The link's rate in Mbit/s each way (0: unlimited; udp drops what would queue > 100 ms).
    #[arg(long = "link-rate-mbit", default_value_t = 0.0, value_parser = seconds((0.0, 1_000_000.0), false))]
    pub link_rate_mbit: f64,
    /// The link's seed: the same seed gives the same decisions (the way back uses seed + 1).
    #[arg(long = "link-seed", default_value_t = 1)]
    pub link_seed: u64,
    /// For rudp: forward error correction — `off` (ARQ only), `fixed:K,M` (Reed–Solomon
    /// groups of up to K data and M parity datagrams) or `adaptive` (parity set from the
    /// measured loss). ARQ repairs whatever FEC cannot, in every mode.
    #[arg(long = "rudp-fec", default_value = "adaptive", value_parser = rudp_fec)]
    pub rudp_fec: RudpFec,
    /// For rudp's adaptive FEC: the acceptable probability that a group has more losses
    /// than parity (ark-rudp's `RudpConfig::fec_residual`; default: ark-rudp's), in (0, 1).
    #[arg(long = "rudp-fec-residual", value_parser = probability)]
    pub rudp_fec_residual: Option<f64>,
    /// For rudp's FEC: the longest a group waits for data before its parity leaves, in
    /// milliseconds (ark-rudp's `RudpConfig::fec_max_delay`; default: ark-rudp's).
    #[arg(long = "rudp-fec-delay-ms", value_parser = seconds((0.0, 10_000.0), false))]
    pub rudp_fec_delay_ms: Option<f64>,
    /// ark's per-session rate limit on the server, in bytes a second (bursts: a tenth of a
    /// second, at least 16 KiB; see `ark_reactor::RateLimit::new`); 0: none. tcp, tcps,
    /// websocket, wss and rudp limit each session's reads and writes; udp its writes (echoes
    /// wait: a read limit drops datagrams, which the closed loop cannot survive). The
    /// record's `rate_limit` says what each client moved.
    #[arg(long = "rate-limit", default_value_t = 0)]
    pub rate_limit: u64,
    /// For rudp: encrypted sessions (ark-rudp's default: a Noise NK handshake, AES-128-GCM on
    /// every datagram) or `off`, plaintext with session tokens (a trusted network's opt-in).
    #[arg(long = "rudp-encryption", value_enum, default_value_t = Switch::On)]
    pub rudp_encryption: Switch,
    /// For rudp with `--role client` and encryption: the server's public key, 64 hex digits
    /// (what `--role server` prints on stderr and in its record as `rudp_public_key`).
    #[arg(long = "rudp-server-key", value_parser = rudp_key)]
    pub rudp_server_key: Option<ark_rudp::RudpPublicKey>,
    /// For rudp: each client also streams messages of this many bytes to the server (which
    /// takes them and echoes nothing), two kept queued, beside the measured echoes: the
    /// head-of-line case. 0: none. The record's `rudp_bulk` says what they moved; the
    /// echoes' RTT says what they cost the small messages. Not equal to `--payload`.
    #[arg(long = "rudp-bulk", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=16_777_216))]
    pub rudp_bulk: u32,
    /// For rudp: lanes (ark-rudp's `RudpConfig::lanes`): `on`, the echoes on lane 0 and the
    /// `--rudp-bulk` messages on lane 1 of a lower priority; `off`, one lane for both (one
    /// order: an echo waits for the bulk message queued before it). Both ends must agree.
    #[arg(long = "rudp-lanes", value_enum, default_value_t = Switch::On)]
    pub rudp_lanes: Switch,
}

impl Args {
    /// ark-ws's permessage-deflate settings for `--ws-deflate` (`None`: off).
    pub fn ws_deflate(&self) -> Option<ark_ws::DeflateConfig> {
        (self.ws_deflate == Switch::On).then(ark_ws::DeflateConfig::default)
    }
}

fn rudp_key(text: &str) -> Result<ark_rudp::RudpPublicKey, String> {
    ark_rudp::RudpPublicKey::from_hex(text).map_err(|e| format!("not a public key: {e}"))
}

/// The largest `--payload` of every protocol (one IPv4 UDP datagram); rudp takes more.
pub const MAX_DATAGRAM_PAYLOAD: u32 = 65_507;

/// `--rudp-fec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RudpFec {
    /// ARQ only.
    Off,
    /// Fixed groups of up to `k` data and `m` parity datagrams.
    Fixed {
        /// Data datagrams per group.
        k: u8,
        /// Parity datagrams per full group.
        m: u8,
    },
    /// Parity from the measured loss.
    Adaptive,
}

impl RudpFec {
    /// The record's spelling: `off`, `fixed:K,M`, `adaptive`.
    pub fn name(self) -> String {
        match self {
            RudpFec::Off => "off".to_string(),
            RudpFec::Fixed { k, m } => format!("fixed:{k},{m}"),
            RudpFec::Adaptive => "adaptive".to_string(),
        }
    }
}

/// Parses `--rudp-fec`.
fn rudp_fec(s: &str) -> Result<RudpFec, String> {
    match s {
        "off" => return Ok(RudpFec::Off),
        "adaptive" => return Ok(RudpFec::Adaptive),
        _ => {}
    }
    let bad = || format!("`{s}`: expected off, adaptive or fixed:K,M with 1 <= K, M <= 64");
    let (k, m) = s
        .strip_prefix("fixed:")
        .and_then(|km| km.split_once(','))
        .ok_or_else(bad)?;
    let (k, m): (u8, u8) = (k.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if !(1..=64).contains(&k) || !(1..=64).contains(&m) {
        return Err(bad());
    }
    Ok(RudpFec::Fixed { k, m })
}

/// A probability in [0, 1).
fn probability(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside [0, 1)"))
    }
}

impl Args {
    /// The file descriptors this run needs (a socket per client on each side this process
    /// runs, and a margin), raising the soft limit to the hard one where that is short;
    /// `Some` (naming `--clients`) if even that is too few.
    fn descriptors_short(&self) -> Option<String> {
        let sides = if self.role == Role::Both { 2 } else { 1 };
        let needed = u64::from(self.clients) * sides + 256;
        let available = crate::run::raise_descriptor_limit(needed)?;
        (available < needed).then(|| {
            format!(
                "--clients {} needs about {needed} file descriptors in this process; the limit is {available} (ulimit -n)",
                self.clients
            )
        })
    }

    /// Checks what clap cannot: the in-flight volume, role addresses. The error names the flag.
    pub fn validate(&self) -> Result<(), String> {
        if self.rudp_bulk > 0 && (self.protocol != Protocol::Rudp || self.rudp_bulk == self.payload)
        {
            return Err(format!(
                "--rudp-bulk {} needs --protocol rudp and a size other than --payload (the server tells bulk messages by their size)",
                self.rudp_bulk
            ));
        }
        if self.payload > MAX_DATAGRAM_PAYLOAD && self.protocol != Protocol::Rudp {
            return Err(format!(
                "--payload {} is over {MAX_DATAGRAM_PAYLOAD}: only --protocol rudp takes larger messages (the bulk case)",
                self.payload
            ));
        }
        let volume = u64::from(self.clients) * u64::from(self.window) * u64::from(self.payload);
        if volume > 256 * 1024 * 1024 {
            return Err(format!(
                "--clients × --window × --payload = {volume} bytes exceeds 268435456 (256 MiB)"
            ));
        }
        if self.io_model == IoModelArg::Owned && self.clients > 1024 {
            return Err(format!(
                "--io-model owned gives every client a thread: --clients {} is more than 1024",
                self.clients
            ));
        }
        if let Some(message) = self.descriptors_short() {
            return Err(message);
        }
        if self.io_model == IoModelArg::Owned && self.io_threads != 1 {
            return Err(format!(
                "--io-model owned gives every endpoint one thread of its own: --io-threads must be 1, not {}",
                self.io_threads
            ));
        }
        if self.role == Role::Client && self.connect.is_none() {
            return Err("--role client needs --connect ADDR".to_string());
        }
        if self.reconnect_every > 0 && !matches!(self.protocol, Protocol::Tcp | Protocol::Tcps) {
            return Err(format!(
                "--reconnect-every is for tcp and tcps, not --protocol {}",
                self.protocol.name()
            ));
        }
        if self.ws_deflate == Switch::On
            && !matches!(self.protocol, Protocol::Websocket | Protocol::Wss)
        {
            return Err(format!(
                "--ws-deflate is for websocket and wss, not --protocol {}",
                self.protocol.name()
            ));
        }
        if self.ws_server != WsServerKind::Ws
            && !matches!(self.protocol, Protocol::Websocket | Protocol::Wss)
        {
            return Err(format!(
                "--ws-server is for websocket and wss, not --protocol {}",
                self.protocol.name()
            ));
        }
        if self.rate_limit > 0 && matches!(self.protocol, Protocol::Http | Protocol::Https) {
            return Err(format!(
                "--rate-limit is for tcp, tcps, websocket, wss, udp and rudp, not --protocol {}",
                self.protocol.name()
            ));
        }
        if self.protocol == Protocol::Rudp
            && self.role == Role::Client
            && self.rudp_encryption == Switch::On
            && self.rudp_server_key.is_none()
        {
            return Err("--protocol rudp --role client needs --rudp-server-key HEX (the server prints it), or --rudp-encryption off on both sides".to_string());
        }
        if let Some(link) = LinkSettings::of(self) {
            link.check(self.protocol)?;
            if self.role == Role::Server {
                return Err("the --link-* relay runs with the clients: give the flags to --role client or both".to_string());
            }
        }
        if self.protocol.is_tls() && self.role != Role::Both && self.certs.is_none() {
            return Err(format!(
                "--protocol {} with --role server or client needs --certs DIR: both sides must share the CA",
                self.protocol.name()
            ));
        }
        Ok(())
    }

    /// The server sessions' rate limits from `--rate-limit`: none, both ways, or (udp) the
    /// writes only.
    pub fn rate_limits(&self) -> ark_reactor::RateLimits {
        if self.rate_limit == 0 {
            return ark_reactor::RateLimits::default();
        }
        let limit = ark_reactor::RateLimit::new(self.rate_limit);
        ark_reactor::RateLimits {
            read: (self.protocol != Protocol::Udp).then_some(limit),
            write: Some(limit),
        }
    }

    /// IO threads of the whole run: `--io-threads`, or one per endpoint (clients + 1) in the
    /// owned model.
    pub fn total_io_threads(&self) -> u32 {
        match self.io_model {
            IoModelArg::Owned => self.clients + 1,
            _ => self.io_threads,
        }
    }

    /// Event loops of the whole run: 1 shared, `--io-threads` sharded, clients + 1 owned.
    pub fn io_contexts(&self) -> u32 {
        match self.io_model {
            IoModelArg::Shared => 1,
            IoModelArg::Sharded => self.io_threads,
            IoModelArg::Owned => self.clients + 1,
        }
    }

    /// The number of server shards when clients steer their UDP datagrams by port
    /// (`--udp-steering port`, UDP, sharded with several loops, both roles in this process);
    /// `None` when the kernel's hash places them.
    pub fn udp_port_steering(&self) -> Option<usize> {
        let sharded = self.io_model == IoModelArg::Sharded && self.io_threads > 1;
        let applies = self.protocol == Protocol::Udp && sharded && self.role == Role::Both;
        (applies && self.udp_steering == UdpSteering::Port).then_some(self.io_threads as usize)
    }

    /// The socket UDP client `index` is to use: with port steering, one bound to a port
    /// whose shard is the one on the client's thread (clients are placed round-robin, as the
    /// server's sockets are); `None` to bind an ephemeral port as usual.
    ///
    /// # Errors
    /// No such port could be bound.
    pub fn udp_client_socket(
        &self,
        server: SocketAddr,
        index: usize,
    ) -> std::io::Result<Option<std::net::UdpSocket>> {
        let Some(shards) = self.udp_port_steering() else {
            return Ok(None);
        };
        let any: SocketAddr = match server {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        ark_udp::bind_for_shard(any, index % shards, shards).map(Some)
    }

    /// The server's bind address.
    pub fn server_addr(&self) -> SocketAddr {
        self.bind.unwrap_or_else(|| match self.address_family {
            Family::Ipv4 => "127.0.0.1:0".parse().expect("valid"),
            Family::Ipv6 => "[::1]:0".parse().expect("valid"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::address;

    #[test]
    fn addresses_and_host_names_resolve_and_anything_else_is_refused() {
        assert_eq!(
            address("198.18.0.1:9000").unwrap(),
            "198.18.0.1:9000".parse().unwrap()
        );
        assert_eq!(
            address("[fd00::1]:9000").unwrap(),
            "[fd00::1]:9000".parse().unwrap()
        );
        assert!(address("localhost:9000").unwrap().ip().is_loopback());
        assert!(address("no-port").unwrap_err().contains("no-port"));
    }
}

/// The link flags, as the record gives them back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkSettings {
    /// `--link-loss`: loss probability per packet, each way.
    pub loss: f64,
    /// `--link-burst`: mean burst length of the loss (1: independent).
    pub burst: f64,
    /// `--link-delay-ms`, each way.
    pub delay_ms: f64,
    /// `--link-jitter-ms`, each way.
    pub jitter_ms: f64,
    /// `--link-reorder`: probability a packet is held back to be overtaken.
    pub reorder: f64,
    /// `--link-duplicate`: probability a packet is delivered twice.
    pub duplicate: f64,
    /// `--link-rate-mbit`, each way (0: unlimited).
    pub rate_mbit: f64,
    /// `--link-seed` (the way back uses seed + 1).
    pub seed: u64,
}

impl LinkSettings {
    /// The settings of `args`, or `None` when no link flag asks for anything.
    pub fn of(args: &Args) -> Option<LinkSettings> {
        let settings = LinkSettings {
            loss: args.link_loss,
            burst: args.link_burst,
            delay_ms: args.link_delay_ms,
            jitter_ms: args.link_jitter_ms,
            reorder: args.link_reorder,
            duplicate: args.link_duplicate,
            rate_mbit: args.link_rate_mbit,
            seed: args.link_seed,
        };
        let idle = settings.loss == 0.0
            && settings.delay_ms == 0.0
            && settings.jitter_ms == 0.0
            && settings.reorder == 0.0
            && settings.duplicate == 0.0
            && settings.rate_mbit == 0.0;
        (!idle).then_some(settings)
    }

    /// Why these settings cannot apply to `protocol`, if they cannot.
    pub fn check(&self, protocol: Protocol) -> Result<(), String> {
        let disorders = self.loss > 0.0 || self.reorder > 0.0 || self.duplicate > 0.0;
        match protocol {
            Protocol::Rudp => Ok(()),
            _ if !disorders => Ok(()),
            Protocol::Udp => Err(
                "--protocol udp has no repair: a lost datagram takes a window slot for good, and a duplicate or reordered echo is counted an error, so its closed loop cannot run over --link-loss, --link-duplicate or --link-reorder (they are for --protocol rudp); udp takes --link-delay-ms, --link-jitter-ms and --link-rate-mbit"
                    .to_string(),
            ),
            _ => Err(format!(
                "--protocol {} runs over TCP, which repairs loss, reordering and duplication below the application: the link takes --link-delay-ms, --link-jitter-ms and --link-rate-mbit",
                protocol.name()
            )),
        }
    }
}
