//! The two KCP configurations the peer runs (`PEER_KCP_MODE`) and the settings every KCP
//! object of a run gets.

use ark_loopback::args::Args;
use kcp::{KCP_OVERHEAD, Kcp};

/// KCP's default MTU (kept: a 1024-byte payload fits one segment).
const MTU: usize = 1400;

/// The most payload one KCP message carries in message mode: `send` refuses a message of
/// 128 segments or more (the crate's `KCP_WND_RCV`, as ikcp's `IKCP_WND_RCV`), at this MTU.
pub const MAX_MESSAGE: usize = 127 * (MTU - KCP_OVERHEAD);

/// The smallest send and receive window set (KCP's defaults are 32 and 128 segments).
const MIN_WINDOW: usize = 256;

/// The largest window set.
const MAX_WINDOW: usize = 32_768;

/// The arguments of KCP's `nodelay` call: the protocol parameters the modes differ in.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// `nodelay`: minimum RTO 30 ms instead of 100 ms, and gentler RTO back-off.
    pub nodelay: bool,
    /// `interval`: the update timer, milliseconds.
    pub interval: i32,
    /// `resend`: fast retransmit after this many later segments are acknowledged (0: off).
    pub resend: i32,
    /// `nc`: congestion control off.
    pub nc: bool,
}

/// A KCP configuration, chosen at compile time (`Stack::NAME` is a constant).
pub trait Mode: 'static {
    /// The record's `implementation`.
    const NAME: &'static str;
    /// The `mode` of the record's `rudp` object.
    const MODE: &'static str;
    /// Its protocol parameters.
    const PARAMS: Params;
}

/// `nodelay(1, 10, 2, 1)`: KCP's "fastest" configuration (its README's turbo mode).
pub struct Fast;

impl Mode for Fast {
    const NAME: &'static str = "kcp-fast";
    const MODE: &'static str = "fast";
    const PARAMS: Params = Params {
        nodelay: true,
        interval: 10,
        resend: 2,
        nc: true,
    };
}

/// `nodelay(0, 100, 0, 0)`: KCP's defaults, as `Kcp::new` sets them.
pub struct Default;

impl Mode for Default {
    const NAME: &'static str = "kcp-default";
    const MODE: &'static str = "default";
    const PARAMS: Params = Params {
        nodelay: false,
        interval: 100,
        resend: 0,
        nc: false,
    };
}

/// What every KCP object of a run is set to.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The mode's protocol parameters.
    pub params: Params,
    /// The mode's name (`fast`, `default`).
    pub mode: &'static str,
    /// Send and receive window, segments.
    pub window: u16,
}

impl Config {
    /// The configuration of mode `M` for `args`: windows of twice the segments a client keeps
    /// in flight, at least 256, so KCP's flow control never holds a message the benchmark's
    /// window lets out.
    pub fn of<M: Mode>(args: &Args) -> Config {
        let segments = (args.payload as usize).div_ceil(MTU - KCP_OVERHEAD);
        let window = (2 * args.window as usize * segments).clamp(MIN_WINDOW, MAX_WINDOW);
        Config {
            params: M::PARAMS,
            mode: M::MODE,
            window: window as u16,
        }
    }

    /// Sets `kcp` up: the mode's parameters, the windows, message mode (KCP's `new`), MTU
    /// 1400.
    pub fn apply<W>(&self, kcp: &mut Kcp<W>) {
        let p = self.params;
        kcp.set_nodelay(p.nodelay, p.interval, p.resend, p.nc);
        kcp.set_wndsize(self.window, self.window);
    }

    /// The settings, for the record.
    pub fn json(&self) -> serde_json::Value {
        let p = self.params;
        serde_json::json!({
            "nodelay": p.nodelay,
            "interval_ms": p.interval,
            "resend": p.resend,
            "nc": p.nc,
            "send_window": self.window,
            "receive_window": self.window,
            "mtu": MTU,
            "stream": false,
        })
    }
}
