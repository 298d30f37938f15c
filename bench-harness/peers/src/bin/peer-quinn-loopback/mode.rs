//! The two ways the peer carries messages on QUIC (`PEER_QUINN_MODE`) and the transport
//! settings every connection of a run gets, sized from the flags.

use std::sync::Arc;

use ark_loopback::args::Args;
use ark_peers::peer_io::PREFIX;
use quinn::congestion::CubicConfig;
use quinn::{TransportConfig, VarInt};

/// quinn's version, as locked in the workspace's Cargo.lock (the peer's test checks the two
/// agree).
pub const QUINN_VERSION: &str = "0.11.12";

/// The congestion controller set (quinn's default).
pub const CONGESTION_CONTROLLER: &str = "cubic";

/// quinn's default stream receive window (1.25 MB: 100 ms at 100 Mbit/s), the least set.
const DEFAULT_STREAM_WINDOW: u64 = 1_250_000;

/// quinn's default connection send buffer (eight stream windows), the least set.
const DEFAULT_SEND_WINDOW: u64 = 8 * DEFAULT_STREAM_WINDOW;

/// quinn's default limit of concurrently open streams of each direction, the least set.
const DEFAULT_STREAMS: u64 = 100;

/// How messages map onto QUIC streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carriage {
    /// Each message a bidirectional stream of its own: written and finished by the client,
    /// read to its end and echoed on the same stream by the server.
    StreamPerMessage,
    /// One bidirectional stream per client, messages behind a 4-byte big-endian length.
    OneStream,
}

/// A mode, chosen at compile time (`Stack::NAME` is a constant).
pub trait Mode: 'static {
    /// The record's `implementation`.
    const NAME: &'static str;
    /// The `mode` of the record's `rudp` object.
    const MODE: &'static str;
    /// How it carries messages.
    const CARRIAGE: Carriage;
}

/// A stream per message (the default, `quinn`).
#[derive(Debug)]
pub struct StreamPerMessage;

impl Mode for StreamPerMessage {
    const NAME: &'static str = "quinn";
    const MODE: &'static str = "stream-per-message";
    const CARRIAGE: Carriage = Carriage::StreamPerMessage;
}

/// One length-prefixed stream per client (`quinn-stream`).
#[derive(Debug)]
pub struct OneStream;

impl Mode for OneStream {
    const NAME: &'static str = "quinn-stream";
    const MODE: &'static str = "one-stream";
    const CARRIAGE: Carriage = Carriage::OneStream;
}

/// What every connection of a run is set to, both ends.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How messages are carried.
    pub carriage: Carriage,
    /// The mode's name, for the record.
    pub mode: &'static str,
    /// `--payload`: every message's length (a longer one ends its stream).
    pub payload: usize,
    /// Bytes a stream may receive ahead of the reader.
    pub stream_window: u64,
    /// Bytes a connection may keep unacknowledged in its send buffer.
    pub send_window: u64,
    /// Bidirectional streams the peer may have open at once.
    pub streams: u64,
}

impl Config {
    /// The settings of mode `M` for `args`: flow-control windows twice what a client keeps
    /// in flight (at least quinn's defaults), so flow control never holds back a message the
    /// benchmark's window lets out; stream credit for four windows of streams (a stream's
    /// credit comes back only once both its directions are done, a round trip after the
    /// echo), at least quinn's default 100.
    pub fn of<M: Mode>(args: &Args) -> Config {
        let payload = args.payload as usize;
        let in_flight = u64::from(args.window) * (payload + PREFIX) as u64;
        let max = VarInt::MAX.into_inner();
        Config {
            carriage: M::CARRIAGE,
            mode: M::MODE,
            payload,
            stream_window: (2 * in_flight).clamp(DEFAULT_STREAM_WINDOW, max),
            send_window: (2 * in_flight).max(DEFAULT_SEND_WINDOW),
            streams: (4 * u64::from(args.window)).max(DEFAULT_STREAMS),
        }
    }

    /// The transport settings: the windows and stream credit above, the connection's
    /// receive window unlimited (quinn's default), Cubic, and everything else quinn's
    /// defaults: MTU discovery on, segmentation offload (GSO) on.
    pub fn transport(&self) -> Arc<TransportConfig> {
        let mut transport = TransportConfig::default();
        let varint = |v: u64| VarInt::from_u64(v).unwrap_or(VarInt::MAX);
        transport
            .stream_receive_window(varint(self.stream_window))
            .receive_window(VarInt::MAX)
            .send_window(self.send_window)
            .max_concurrent_bidi_streams(varint(self.streams))
            .congestion_controller_factory(Arc::new(CubicConfig::default()))
            .enable_segmentation_offload(true);
        Arc::new(transport)
    }

    /// The settings, for the record.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "stream_receive_window": self.stream_window,
            "receive_window": "unlimited",
            "send_window": self.send_window,
            "max_concurrent_bidi_streams": self.streams,
            "congestion_controller": CONGESTION_CONTROLLER,
            "mtu_discovery": true,
            "segmentation_offload": true,
            "alpn": "ark-echo",
        })
    }
}
