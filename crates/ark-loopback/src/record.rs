//! The JSON record: arknet's schema-1 fields, plus ark's additions.

use serde::Serialize;

/// Kernel UDP counter deltas over the run.
#[derive(Debug, Clone, Serialize)]
pub struct UdpKernel {
    /// `Udp: InDatagrams` delta.
    pub in_datagrams: u64,
    /// `Udp: InErrors` delta.
    pub in_errors: u64,
    /// `Udp: RcvbufErrors` delta.
    pub rcvbuf_errors: u64,
    /// `Udp: SndbufErrors` delta.
    pub sndbuf_errors: u64,
    /// `Ip: ReasmReqds` delta.
    pub reasm_reqds: u64,
    /// `Ip: ReasmFails` delta.
    pub reasm_fails: u64,
    /// `Ip: FragCreates` delta.
    pub frag_creates: u64,
}

/// What `--rate-limit` set on the server's sessions and what the clients moved under it.
#[derive(Debug, Clone, Serialize)]
pub struct RateLimitRecord {
    /// Each session's limit, bytes on the wire a second each way.
    pub bytes_per_second: u64,
    /// The buckets' size: what a session may move at once.
    pub burst_bytes: u64,
    /// Whether reads are limited too (not for udp: writes only).
    pub reads_limited: bool,
    /// Payload bytes a second the fastest client's echoes carried (headers, framing and
    /// acknowledgements are on the wire too, so it stays under the limit).
    pub client_payload_bytes_per_second_max: Option<f64>,
    /// The slowest client's.
    pub client_payload_bytes_per_second_min: Option<f64>,
}

/// What `--rudp-bulk` streams moved beside the echoes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RudpBulkRecord {
    /// Each bulk message's size.
    pub message_bytes: u32,
    /// `--rudp-lanes`: the bulk messages on a lane of their own (else on the echoes' lane).
    pub lanes: bool,
    /// Bulk bytes the server took in the measured phase, all clients.
    pub bytes: u64,
    /// The same a second, in MiB.
    pub mib_per_second: f64,
}

/// The record's fields that count something gone wrong with the echoes (a clean run has 0 in
/// each): what a test or a harness checks to call a run clean.
pub const ERROR_COUNTERS: [&str; 6] = [
    "content_errors",
    "order_errors",
    "unexpected_messages",
    "disconnect_errors",
    "unfinished_messages",
    "warmup_errors",
];

/// One run. Field names and meanings follow arknet's loopback record (schema 1) where they
/// exist; `docs/loopback.md` explains each.
#[derive(Debug, Clone, Default, Serialize)]
#[allow(missing_docs)]
pub struct Record {
    pub schema_version: u32,
    pub implementation: &'static str,
    pub version: &'static str,
    pub git_commit: Option<String>,
    pub protocol: &'static str,
    pub address_family: &'static str,
    pub payload_bytes: u32,
    pub clients: u32,
    pub window: u32,
    pub io_model: &'static str,
    /// `ark_reactor::IO_PATH`: `linux` (mio and Linux's fast paths) or `portable`.
    pub io_path: &'static str,
    pub handler_work: u64,
    pub io_contexts: u32,
    pub io_threads: u32,
    pub server_and_clients_share_io_threads: bool,
    pub requested_seconds: f64,
    pub warmup_seconds: f64,
    pub elapsed_seconds: f64,
    pub messages_sent: u64,
    pub messages: u64,
    pub payload_roundtrip_bytes: u64,
    pub roundtrips_per_second: f64,
    pub payload_mib_per_second: f64,
    pub rtt_samples: u64,
    pub rtt_p50_us: Option<f64>,
    pub rtt_p95_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    pub rtt_p999_us: Option<f64>,
    pub rtt_max_us: Option<f64>,
    pub client_messages_min: Option<u64>,
    pub client_messages_max: Option<u64>,
    pub client_send_rejections: u64,
    pub server_send_rejections: u64,
    pub content_errors: u64,
    pub order_errors: u64,
    pub unexpected_messages: u64,
    pub disconnect_errors: u64,
    pub udp_lost_messages: Option<u64>,
    pub udp_loss_rate: Option<f64>,
    pub unfinished_messages: u64,
    pub drain_timeouts: u64,
    pub warmup_ok: bool,
    pub warmup_errors: u64,
    pub udp_batch: Option<bool>,
    /// ark's udp and rudp: `--udp-offload` (GSO/GRO where the kernel has them); null for
    /// other protocols and the peers. What rudp's server socket got is in `rudp.udp_offload`.
    pub udp_offload: Option<bool>,
    /// UDP on several sharded loops: `port` (clients steered to their own thread's shard)
    /// or `hash` (the kernel's placement); null otherwise.
    pub udp_steering: Option<&'static str>,
    pub udp_send_buffer_requested_bytes: Option<usize>,
    pub udp_receive_buffer_requested_bytes: Option<usize>,
    pub udp_server_send_buffer_bytes: Option<usize>,
    pub udp_server_receive_buffer_bytes: Option<usize>,
    pub udp_client_send_buffer_min_bytes: Option<usize>,
    pub udp_client_send_buffer_max_bytes: Option<usize>,
    pub udp_client_receive_buffer_min_bytes: Option<usize>,
    pub udp_client_receive_buffer_max_bytes: Option<usize>,
    pub udp_kernel: Option<UdpKernel>,
    pub tls_version: Option<String>,
    pub tls_cipher_suite: Option<String>,
    pub tls_certificates: Option<&'static str>,
    pub tls_resumption: Option<bool>,
    pub reconnect_every: u64,
    /// websocket and wss: `ws` (ark-ws's server) or `http-router` (the upgrade answered by
    /// an ark-http route); null otherwise.
    pub ws_server: Option<&'static str>,
    /// websocket and wss: `--ws-deflate` (permessage-deflate asked); null otherwise.
    pub ws_deflate: Option<bool>,
    /// Bytes the server's sockets read and wrote in the measured window per message each
    /// way (frame heads, masks and control frames included; wss: the plaintext's), where the
    /// implementation counts them; null otherwise.
    pub wire_bytes_per_message: Option<f64>,
    /// ark's `tracing` in this build: null (the feature off), `"no subscriber"`, or the level
    /// of the `ARK_LOG` subscriber.
    pub tracing: Option<String>,
    pub connections: Option<u64>,
    pub connections_per_second: Option<f64>,
    pub tls_resumed_connections: Option<u64>,
    pub allocations_per_message: Option<f64>,
    pub syscalls_per_message: Option<f64>,
    pub cpu_seconds: f64,
    pub cpu_elapsed_seconds: f64,
    pub cpu_percent: f64,
    pub peak_rss_bytes: u64,
    /// `--rate-limit`: the server sessions' limit and what each client moved (none without).
    pub rate_limit: Option<RateLimitRecord>,
    /// The `--link-*` relay's settings and counters (none without a link).
    pub link: Option<crate::link::LinkRecord>,
    /// rudp: what the reliable-UDP transport did (`Stack::rudp_stats`).
    pub rudp: Option<serde_json::Value>,
    /// rudp `--rudp-bulk`: what the bulk streams moved (none without).
    pub rudp_bulk: Option<RudpBulkRecord>,
    pub interrupted: bool,
    pub ok: bool,
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_error_counter_is_a_field_of_the_record() {
        let record = serde_json::to_value(super::Record::default()).expect("serializes");
        for field in super::ERROR_COUNTERS {
            assert_eq!(record[field], 0, "{field} in {record}");
        }
    }
}
