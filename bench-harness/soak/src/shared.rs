//! What every client thread shares: the servers' addresses, the run's end, the tallies, and a
//! small random generator.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::tally::Tally;

/// Largest message a well-behaved client sends (16 KiB).
pub const MAX_MESSAGE: u64 = 16 * 1024;

/// The five servers' addresses, as the server child printed them.
#[derive(Debug, Clone, Copy)]
pub struct Addrs {
    /// The TCP echo server (4-byte length prefix).
    pub tcp: SocketAddr,
    /// The UDP echo server.
    pub udp: SocketAddr,
    /// The WebSocket echo server.
    pub ws: SocketAddr,
    /// The HTTP echo server (`POST /echo` answers with the body).
    pub http: SocketAddr,
    /// The reliable-UDP echo server.
    pub rudp: SocketAddr,
    /// The reliable-UDP server's public key (its sessions are encrypted, as by default).
    pub rudp_key: ark_rudp::RudpPublicKey,
}

impl Addrs {
    /// Reads the addresses from the server's first JSON line.
    pub fn from_json(line: &serde_json::Value) -> Result<Addrs, String> {
        let addr = |name: &str| -> Result<SocketAddr, String> {
            let text = line[name]
                .as_str()
                .ok_or(format!("no {name} address in {line}"))?;
            let addr: SocketAddr = text.parse().map_err(|e| format!("{name} address: {e}"))?;
            if !addr.ip().is_loopback() {
                return Err(format!(
                    "{name} address {addr} is not on the loopback interface"
                ));
            }
            Ok(addr)
        };
        Ok(Addrs {
            tcp: addr("tcp")?,
            udp: addr("udp")?,
            ws: addr("ws")?,
            http: addr("http")?,
            rudp: addr("rudp")?,
            rudp_key: line["rudp_key"]
                .as_str()
                .ok_or(format!("no rudp_key in {line}"))
                .and_then(|k| {
                    ark_rudp::RudpPublicKey::from_hex(k).map_err(|e| format!("rudp_key: {e}"))
                })?,
        })
    }
}

/// The state shared by the client threads of a run.
#[derive(Debug)]
pub struct Ctx {
    /// Where the servers listen.
    pub addrs: Addrs,
    /// What the clients saw.
    pub tally: Tally,
    /// The seed every thread's generator derives from.
    pub seed: u64,
    deadline: Instant,
    stop: AtomicBool,
}

impl Ctx {
    /// A run against `addrs` that ends after `length`.
    pub fn new(addrs: Addrs, length: Duration, seed: u64) -> Ctx {
        Ctx {
            addrs,
            tally: Tally::default(),
            seed,
            deadline: Instant::now() + length,
            stop: AtomicBool::new(false),
        }
    }

    /// Whether clients should keep starting new work.
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }

    /// Ends the run early (or confirms its end).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// When the run is planned to end.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// xorshift64* seeded through splitmix64: fast, reproducible from a seed, plenty for payloads,
/// sizes and pauses.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for stream `stream` of `seed` (each thread has its own stream).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// A duration of `lo_ms..=hi_ms` milliseconds.
    pub fn millis(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(self.range(lo_ms, hi_ms))
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `len` random lowercase letters (valid UTF-8, for WebSocket text messages).
    pub fn letters(&mut self, len: usize) -> Vec<u8> {
        self.bytes(len).into_iter().map(|b| b'a' + b % 26).collect()
    }

    /// The size of a well-behaved client's message: 1 byte to 16 KiB.
    pub fn message_size(&mut self) -> usize {
        self.range(1, MAX_MESSAGE) as usize
    }
}

/// Sleeps `pause`, in steps, returning early once the run ends.
pub fn pause(ctx: &Ctx, pause: Duration) {
    let until = Instant::now() + pause;
    while ctx.running() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// Whether an IO error is a read or write timeout.
pub fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}
