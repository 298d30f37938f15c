//! Loopback benchmark matrices: arknet's built-in ones and user TOML files.

use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

/// A real-valued case parameter (`link_loss = 0.05`): compared and hashed by its bits, so
/// that cases stay `Eq + Hash`. Parameters are written down, not computed, so the same value
/// written twice has the same bits.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Real(pub f64);

impl Real {
    fn is_zero(&self) -> bool {
        self.0 == 0.0
    }
}

impl PartialEq for Real {
    fn eq(&self, other: &Real) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Real {}

impl Hash for Real {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// `v` in at most six decimals, without trailing zeros: `0.05` → `0.05`, `20.0` → `20`.
pub fn decimal(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// The words a case's link and FEC add to its label: ` loss 5% delay 20±5ms fec adaptive`
/// (each only when not zero or empty; ` seed N` only with a link and a seed other than 1). Shared by [`LoopbackCase::variant`] and the report's case keys.
pub fn link_variant(loss: f64, delay_ms: f64, jitter_ms: f64, seed: u64, fec: &str) -> String {
    let mut variant = String::new();
    if loss != 0.0 {
        variant += &format!(" loss {}%", decimal(loss * 100.0));
    }
    if delay_ms != 0.0 || jitter_ms != 0.0 {
        variant += &format!(" delay {}", decimal(delay_ms));
        if jitter_ms != 0.0 {
            variant += &format!("±{}", decimal(jitter_ms));
        }
        variant += "ms";
    }
    if !variant.is_empty() && seed != DEFAULT_SEED {
        variant += &format!(" seed {seed}");
    }
    if !fec.is_empty() {
        variant += &format!(" fec {fec}");
    }
    variant
}

/// ark-loopback's `--link-seed` default.
const DEFAULT_SEED: u64 = 1;

/// One loopback configuration (a case of a matrix).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LoopbackCase {
    /// tcp, udp, websocket, tcps, wss, http or https.
    pub protocol: String,
    /// Payload bytes.
    pub payload: u32,
    /// Clients.
    pub clients: u32,
    /// Window.
    pub window: u32,
    /// shared, sharded or owned.
    pub io_model: String,
    /// IO threads (`--io-threads`; 1 for owned, whose records say clients + 1).
    pub io_threads: u32,
    /// ipv4 or ipv6 (default ipv4).
    #[serde(default = "ipv4")]
    pub address_family: String,
    /// `--reconnect-every` (tcp, tcps): a new connection per this many round trips; 0 (the
    /// default) keeps one connection per client.
    #[serde(default)]
    pub reconnect_every: u64,
    /// `--tls-resumption` (tcps, wss): TLS session resumption (default on).
    #[serde(default = "on")]
    pub tls_resumption: bool,
    /// Who makes the load: empty (the default) for the program's own clients, or `wrk`
    /// (http: the program serves `GET /static` and `ark-bench wrk` measures it with wrk,
    /// one request in flight per connection).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub load_generator: String,
    /// `--link-loss`: the conditioned link's loss probability per packet, each way (0 and no
    /// delay or jitter: no link).
    #[serde(default, skip_serializing_if = "Real::is_zero")]
    pub link_loss: Real,
    /// `--link-delay-ms`: the link's one-way delay, each way.
    #[serde(default, skip_serializing_if = "Real::is_zero")]
    pub link_delay_ms: Real,
    /// `--link-jitter-ms`: the link's jitter, each way.
    #[serde(default, skip_serializing_if = "Real::is_zero")]
    pub link_jitter_ms: Real,
    /// `--link-seed` (given only with a link; default 1, ark-loopback's).
    #[serde(default = "default_seed", skip_serializing_if = "is_default_seed")]
    pub link_seed: u64,
    /// `--rudp-fec` (rudp): `off`, `fixed:K,M` or `adaptive`; empty (the default) gives no
    /// flag, the program's default. Applies to ark: KCP, which has no FEC, runs only the
    /// cases with `off` or none (see [`LoopbackCase::asks_for_fec`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rudp_fec: String,
    /// `--ws-server` (websocket, wss): `ws` or `http-router` (ark only: the peers have no HTTP
    /// router in front of their WebSocket server); empty gives no flag (`ws`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ws_server: String,
    /// `--ws-deflate on` (websocket, wss): permessage-deflate (ark only: the peers have none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ws_deflate: bool,
}

fn default_seed() -> u64 {
    DEFAULT_SEED
}

fn is_default_seed(seed: &u64) -> bool {
    *seed == DEFAULT_SEED
}

fn on() -> bool {
    true
}

fn ipv4() -> String {
    "ipv4".to_string()
}

impl LoopbackCase {
    /// `ark-loopback` flags for this case.
    pub fn flags(&self, seconds: f64, warmup: f64) -> Vec<String> {
        [
            ("--protocol", self.protocol.clone()),
            ("--payload", self.payload.to_string()),
            ("--clients", self.clients.to_string()),
            ("--window", self.window.to_string()),
            ("--io-model", self.io_model.clone()),
            ("--io-threads", self.io_threads.to_string()),
            ("--address-family", self.address_family.clone()),
            ("--seconds", seconds.to_string()),
            ("--warmup", warmup.to_string()),
        ]
        .into_iter()
        .chain(
            (self.reconnect_every > 0)
                .then(|| ("--reconnect-every", self.reconnect_every.to_string())),
        )
        .chain((!self.tls_resumption).then(|| ("--tls-resumption", "off".to_string())))
        .chain(
            [
                ("--link-loss", decimal(self.link_loss.0)),
                ("--link-delay-ms", decimal(self.link_delay_ms.0)),
                ("--link-jitter-ms", decimal(self.link_jitter_ms.0)),
                ("--link-seed", self.link_seed.to_string()),
            ]
            .into_iter()
            .filter(|_| self.has_link()),
        )
        .chain((!self.rudp_fec.is_empty()).then(|| ("--rudp-fec", self.rudp_fec.clone())))
        .chain((!self.ws_server.is_empty()).then(|| ("--ws-server", self.ws_server.clone())))
        .chain(self.ws_deflate.then(|| ("--ws-deflate", "on".to_string())))
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect()
    }

    /// Whether the case asks for a conditioned link (loss, delay or jitter).
    pub fn has_link(&self) -> bool {
        !(self.link_loss.is_zero() && self.link_delay_ms.is_zero() && self.link_jitter_ms.is_zero())
    }

    /// Whether the case asks for FEC: a `rudp_fec` other than `off` (empty gives no flag).
    /// Implementations without FEC (KCP) skip these cases, so that they run once per link
    /// setting, beside ark's `off` (ARQ only).
    pub fn asks_for_fec(&self) -> bool {
        !self.rudp_fec.is_empty() && self.rudp_fec != "off"
    }

    /// The connection variant: `""`, or ` reconnect N` with ` resumption off` when TLS
    /// resumption is off, ` GET by wrk` for wrk's load, and the link and FEC (` loss 5% delay
    /// 20±5ms fec adaptive`, [`link_variant`]).
    pub fn variant(&self) -> String {
        let mut variant = String::new();
        if self.reconnect_every > 0 {
            variant += &format!(" reconnect {}", self.reconnect_every);
        }
        if !self.tls_resumption {
            variant += " resumption off";
        }
        if !self.load_generator.is_empty() {
            variant += &format!(" GET by {}", self.load_generator);
        }
        if !self.ws_server.is_empty() {
            variant += &format!(" via {}", self.ws_server);
        }
        if self.ws_deflate {
            variant += " deflate";
        }
        variant += &link_variant(
            self.link_loss.0,
            self.link_delay_ms.0,
            self.link_jitter_ms.0,
            self.link_seed,
            &self.rudp_fec,
        );
        variant
    }

    /// A short label: `tcp 1024B 16c w16 shared×1` (` ipv6` appended for IPv6).
    pub fn label(&self) -> String {
        let family = if self.address_family == "ipv4" {
            String::new()
        } else {
            format!(" {}", self.address_family)
        };
        format!(
            "{} {}B {}c w{} {}×{}{family}{}",
            self.protocol,
            self.payload,
            self.clients,
            self.window,
            self.io_model,
            self.io_threads,
            self.variant()
        )
    }

    /// The IO profile label: `shared 1`, `sharded 4`.
    pub fn io_label(&self) -> String {
        format!("{} {}", self.io_model, self.io_threads)
    }

    /// Whether a record (JSON) echoes this case's parameters.
    pub fn matches(&self, record: &serde_json::Value) -> bool {
        record["protocol"] == self.protocol.as_str()
            && record["payload_bytes"] == self.payload
            && record["clients"] == self.clients
            && record["window"] == self.window
            && record["io_model"] == self.io_model.as_str()
            && record["io_threads"] == self.record_io_threads()
            && record["address_family"] == self.address_family.as_str()
            && record["reconnect_every"].as_u64().unwrap_or(0) == self.reconnect_every
            && record["tls_resumption"].as_bool().unwrap_or(true) == self.tls_resumption
            && record["load_generator"].as_str().unwrap_or("") == self.load_generator
            && self.link_matches(record)
            && self.fec_matches(record)
            && (self.ws_server.is_empty()
                || record["ws_server"] == self.ws_server.as_str()
                || record["ok"] != true)
            && (record["ws_deflate"].as_bool().unwrap_or(false) == self.ws_deflate
                || record["ok"] != true)
    }

    /// Whether the case asks for something only ark has (`ws_server` `http-router`,
    /// `ws_deflate`).
    pub fn ark_only(&self) -> bool {
        (!self.ws_server.is_empty() && self.ws_server != "ws") || self.ws_deflate
    }

    /// The record's `link.settings` are this case's (loss, delay, jitter, seed). A record
    /// without a link matches a case without one, or is a failed run (`ok` not true), which
    /// may stop before its link starts.
    fn link_matches(&self, record: &serde_json::Value) -> bool {
        let settings = &record["link"]["settings"];
        if settings.is_null() {
            return !self.has_link() || record["ok"] != true;
        }
        let same = |name: &str, value: Real| settings[name].as_f64() == Some(value.0);
        same("loss", self.link_loss)
            && same("delay_ms", self.link_delay_ms)
            && same("jitter_ms", self.link_jitter_ms)
            && settings["seed"].as_u64().unwrap_or(DEFAULT_SEED) == self.link_seed
    }

    /// The record's `rudp.fec` is the case's `rudp_fec` where the case gives one. A record
    /// without (`null`: an implementation without FEC, KCP or quinn, which ignores
    /// `--rudp-fec`) matches any: which cases such an implementation runs is
    /// `Implementation::runs`'s call (KCP only `off`, quinn beside each of ark's modes).
    fn fec_matches(&self, record: &serde_json::Value) -> bool {
        if self.rudp_fec.is_empty() {
            return true;
        }
        match record["rudp"]["fec"].as_str() {
            Some(fec) => fec == self.rudp_fec,
            None => true,
        }
    }

    /// The IO threads a record of this case reports: every endpoint's own thread (clients +
    /// 1) in the owned model, `io_threads` otherwise.
    pub fn record_io_threads(&self) -> u32 {
        if self.io_model == "owned" {
            self.clients + 1
        } else {
            self.io_threads
        }
    }
}

/// IO profiles of the baseline matrix (owned: a thread per endpoint).
const BASELINE_IO: [(&str, u32); 6] = [
    ("shared", 1),
    ("shared", 2),
    ("shared", 4),
    ("sharded", 2),
    ("sharded", 4),
    ("owned", 1),
];

/// Loss probabilities of the rudp matrix.
pub const RUDP_LOSS: [f64; 5] = [0.0, 0.01, 0.05, 0.10, 0.20];

/// A built-in matrix's builder.
type Builder = fn() -> Vec<LoopbackCase>;

/// The built-in matrices, by name.
const BUILTIN: [(&str, Builder); 7] = [
    ("baseline", baseline),
    ("dimensions", dimensions),
    ("mtu", mtu),
    ("tls", tls),
    ("http", http),
    ("udp-limits", udp_limits),
    ("rudp", rudp),
];

/// A named built-in matrix.
pub fn builtin(name: &str) -> Option<Vec<LoopbackCase>> {
    BUILTIN
        .iter()
        .find(|(builtin, _)| *builtin == name)
        .map(|(_, cases)| cases())
}

/// A case of a built-in matrix: IPv4, TLS resumption on, the program's own clients, no
/// reconnects, no link, no FEC.
fn case(
    protocol: &str,
    payload: u32,
    clients: u32,
    window: u32,
    (io_model, io_threads): (&str, u32),
) -> LoopbackCase {
    LoopbackCase {
        protocol: protocol.to_string(),
        payload,
        clients,
        window,
        io_model: io_model.to_string(),
        io_threads,
        address_family: ipv4(),
        reconnect_every: 0,
        tls_resumption: true,
        load_generator: String::new(),
        link_loss: Real(0.0),
        link_delay_ms: Real(0.0),
        link_jitter_ms: Real(0.0),
        link_seed: DEFAULT_SEED,
        rudp_fec: String::new(),
        ws_server: String::new(),
        ws_deflate: false,
    }
}

/// The baseline: tcp, udp and websocket, three payloads, one idle and sixteen busy clients,
/// over every IO profile of [`BASELINE_IO`].
fn baseline() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    for protocol in ["tcp", "udp", "websocket"] {
        for payload in [64, 1024, 16384] {
            let busy_window = if protocol == "udp" { 1 } else { 16 };
            for (clients, window) in [(1, 1), (16, busy_window)] {
                for io in BASELINE_IO {
                    cases.push(case(protocol, payload, clients, window, io));
                }
            }
        }
    }
    cases
}

/// Window × payload for sixteen clients of tcp, udp and websocket, over three IO profiles.
fn dimensions() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    for protocol in ["tcp", "udp", "websocket"] {
        for window in [1, 4, 16, 64] {
            for payload in [64, 1024, 16384] {
                for io in [("shared", 1), ("shared", 4), ("sharded", 4)] {
                    cases.push(case(protocol, payload, 16, window, io));
                }
            }
        }
    }
    cases
}

/// UDP datagrams around the no-fragmentation limits of MTU 1500 and 9000, IPv4 and IPv6.
fn mtu() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    // Around each no-fragmentation limit (MTU − 28 for IPv4, − 48 for IPv6) at MTU 1500
    // and 9000, then larger datagrams up to the protocol's maximum.
    for (family, payloads) in [
        ("ipv4", [1472, 1473, 8192, 8972, 8973, 16384, 65507]),
        ("ipv6", [1452, 1453, 8192, 8952, 8953, 16384, 65507]),
    ] {
        for payload in payloads {
            for window in [1, 16] {
                let mut c = case("udp", payload, 16, window, ("shared", 1));
                c.address_family = family.to_string();
                cases.push(c);
            }
        }
    }
    cases
}

/// tcps and wss echo, and TLS handshakes per second with resumption off and on.
fn tls() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    // tcps and wss (ark-tls / tokio-rustls; the raw floor leaves TLS out).
    for protocol in ["tcps", "wss"] {
        for payload in [64, 1024, 16384] {
            for window in [1, 16] {
                for io in [("shared", 1), ("sharded", 2)] {
                    cases.push(case(protocol, payload, 16, window, io));
                }
            }
        }
    }
    // Handshakes per second: a new connection per round trip, resumption off and on.
    for resumption in [false, true] {
        for io in [("shared", 1), ("sharded", 2)] {
            let mut c = case("tcps", 1024, 16, 1, io);
            c.reconnect_every = 1;
            c.tls_resumption = resumption;
            cases.push(c);
        }
    }
    cases
}

/// HTTP: GET under wrk, and POST /echo over http and https, pipelined or not.
fn http() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    // GET /static (64 B) by wrk, 16 keep-alive connections, one request in flight each.
    for io in [("shared", 1), ("sharded", 2)] {
        let mut c = case("http", 64, 16, 1, io);
        c.load_generator = "wrk".to_string();
        cases.push(c);
    }
    // POST /echo (ark-http / hyper), keep-alive; window = pipelined requests.
    for protocol in ["http", "https"] {
        for payload in [1024, 16384] {
            for (clients, window) in [(1, 1), (16, 1), (16, 16)] {
                for io in [("shared", 1), ("sharded", 2)] {
                    cases.push(case(protocol, payload, clients, window, io));
                }
            }
        }
    }
    cases
}

/// Large UDP datagrams up to the protocol's maximum, at three windows.
fn udp_limits() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    for payload in [1472, 8192, 16356, 16384, 65507] {
        for window in [1, 16, 64] {
            cases.push(case("udp", payload, 16, window, ("shared", 1)));
        }
    }
    cases
}

/// Reliable UDP over a conditioned link (loss × delay × window × FEC), and plain UDP of the
/// same shape.
fn rudp() -> Vec<LoopbackCase> {
    let mut cases = Vec::new();
    // Reliable UDP over a conditioned link: ARQ only, fixed FEC and adaptive FEC
    // (ark; KCP runs the `off` cases), per loss, link delay and window.
    for (delay, jitter) in [(0.0, 0.0), (20.0, 5.0)] {
        for window in [1, 16] {
            for loss in RUDP_LOSS {
                for fec in ["off", "fixed:8,2", "adaptive"] {
                    let mut c = case("rudp", 1024, 16, window, ("shared", 1));
                    c.link_loss = Real(loss);
                    c.link_delay_ms = Real(delay);
                    c.link_jitter_ms = Real(jitter);
                    c.rudp_fec = fec.to_string();
                    cases.push(c);
                }
            }
        }
    }
    // Plain UDP of the same shape, no link: what reliability costs on a clean link.
    for window in [1, 16] {
        cases.push(case("udp", 1024, 16, window, ("shared", 1)));
    }
    cases
}

/// A matrix file: `[[case]]` tables with the fields of [`LoopbackCase`].
#[derive(Debug, Deserialize)]
struct MatrixFile {
    case: Vec<LoopbackCase>,
}

/// Reads a TOML matrix file.
///
/// # Errors
/// The file cannot be read or parsed.
pub fn from_toml(text: &str) -> Result<Vec<LoopbackCase>, String> {
    toml::from_str::<MatrixFile>(text)
        .map(|m| m.case)
        .map_err(|e| format!("matrix file: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_sizes() {
        assert_eq!(builtin("baseline").unwrap().len(), 3 * 3 * 2 * 6);
        assert_eq!(builtin("dimensions").unwrap().len(), 3 * 4 * 3 * 3);
        assert_eq!(builtin("udp-limits").unwrap().len(), 15);
        assert_eq!(builtin("http").unwrap().len(), 2 + 2 * 2 * 3 * 2);
        let tls = builtin("tls").unwrap();
        assert_eq!(tls.len(), 2 * 3 * 2 * 2 + 4);
        let handshakes = tls.last().unwrap().flags(1.0, 0.0).join(" ");
        assert!(handshakes.ends_with("--reconnect-every 1"), "{handshakes}");
        assert!(
            tls[tls.len() - 3]
                .flags(1.0, 0.0)
                .join(" ")
                .ends_with("--tls-resumption off")
        );
        let mtu = builtin("mtu").unwrap();
        assert_eq!(mtu.len(), 2 * 7 * 2);
        assert!(
            mtu.iter()
                .any(|c| c.address_family == "ipv6" && c.payload == 1453)
        );
        assert!(mtu[0].flags(1.0, 0.0).contains(&"ipv4".to_string()));
        assert!(builtin("nope").is_none());
        let rudp = builtin("rudp").unwrap();
        assert_eq!(
            rudp.len(),
            5 * 2 * 2 * 3 + 2,
            "and plain udp, windows 1 and 16"
        );
        assert_eq!(
            rudp.iter().collect::<std::collections::HashSet<_>>().len(),
            62,
            "every rudp case differs"
        );
        let arq = rudp
            .iter()
            .filter(|c| c.protocol == "rudp" && !c.asks_for_fec());
        assert_eq!(arq.count(), 20, "KCP runs beside these");
        let udp_busy = builtin("baseline")
            .unwrap()
            .into_iter()
            .filter(|c| c.protocol == "udp" && c.clients == 16)
            .all(|c| c.window == 1);
        assert!(udp_busy, "UDP's busy profile uses window 1");
    }

    #[test]
    fn toml_matrix() {
        let cases = from_toml(
            "[[case]]\nprotocol = \"tcp\"\npayload = 64\nclients = 1\nwindow = 1\nio_model = \"shared\"\nio_threads = 1\n",
        )
        .unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].flags(0.1, 0.0)[1], "tcp");
        assert!(from_toml("[[case]]\nprotocol = 1").is_err());
    }

    #[test]
    fn an_owned_case_matches_records_with_a_thread_per_endpoint() {
        let owned = builtin("baseline")
            .unwrap()
            .into_iter()
            .find(|c| c.io_model == "owned" && c.clients == 16)
            .unwrap();
        let record = |threads: u32| {
            serde_json::json!({"protocol": owned.protocol, "payload_bytes": owned.payload,
                "clients": 16, "window": owned.window, "io_model": "owned", "io_threads": threads,
                "address_family": "ipv4"})
        };
        assert!(owned.matches(&record(17)));
        assert!(!owned.matches(&record(1)));
    }

    fn rudp_case() -> LoopbackCase {
        builtin("rudp")
            .unwrap()
            .into_iter()
            .find(|c| {
                c.link_loss == Real(0.05)
                    && c.link_delay_ms == Real(20.0)
                    && c.window == 16
                    && c.rudp_fec == "adaptive"
            })
            .unwrap()
    }

    #[test]
    fn a_rudp_case_gives_its_link_and_fec_in_flags_and_label() {
        let c = rudp_case();
        let flags = c.flags(1.0, 0.25).join(" ");
        assert!(
            flags.ends_with(
                "--link-loss 0.05 --link-delay-ms 20 --link-jitter-ms 5 --link-seed 1 --rudp-fec adaptive"
            ),
            "{flags}"
        );
        assert!(flags.starts_with("--protocol rudp --payload 1024 --clients 16 --window 16"));
        assert_eq!(
            c.label(),
            "rudp 1024B 16c w16 shared×1 loss 5% delay 20±5ms fec adaptive"
        );
        assert!(c.asks_for_fec());
        // Without a link: no link flags, only the FEC.
        let plain = builtin("rudp")
            .unwrap()
            .into_iter()
            .find(|c| !c.has_link() && c.rudp_fec == "off")
            .unwrap();
        let flags = plain.flags(1.0, 0.0);
        assert!(!flags.iter().any(|f| f.starts_with("--link")), "{flags:?}");
        assert_eq!(flags[flags.len() - 2..], ["--rudp-fec", "off"]);
        assert_eq!(plain.variant(), " fec off");
        assert!(!plain.asks_for_fec());
        // Other cases keep their flags and labels.
        let tcp = &builtin("baseline").unwrap()[0];
        assert_eq!(tcp.variant(), "");
        assert!(!tcp.flags(1.0, 0.0).iter().any(|f| f.starts_with("--link")));
        assert_eq!(link_variant(0.1, 0.0, 0.0, 7, ""), " loss 10% seed 7");
        assert_eq!(
            link_variant(0.0, 20.0, 0.0, 7, "off"),
            " delay 20ms seed 7 fec off"
        );
        assert_eq!(link_variant(0.0, 0.0, 0.0, 7, ""), "");
    }

    #[test]
    fn a_rudp_case_matches_records_of_its_link_and_fec() {
        let c = rudp_case();
        let record = |loss: f64, fec: serde_json::Value, ok: bool| {
            serde_json::json!({"protocol": "rudp", "payload_bytes": 1024, "clients": 16,
                "window": 16, "io_model": "shared", "io_threads": 1, "address_family": "ipv4",
                "link": {"settings": {"loss": loss, "burst": 1.0, "delay_ms": 20.0,
                    "jitter_ms": 5.0, "reorder": 0.0, "duplicate": 0.0, "rate_mbit": 0.0,
                    "seed": 1}},
                "rudp": {"fec": fec}, "ok": ok})
        };
        assert!(c.matches(&record(0.05, "adaptive".into(), true)));
        assert!(!c.matches(&record(0.01, "adaptive".into(), true)));
        assert!(!c.matches(&record(0.05, "off".into(), true)));
        // KCP and quinn report no FEC (they ignore --rudp-fec): any case of the link.
        assert!(c.matches(&record(0.05, serde_json::Value::Null, true)));
        let mut off = c.clone();
        off.rudp_fec = "off".to_string();
        assert!(off.matches(&record(0.05, serde_json::Value::Null, true)));
        // A run that failed before its link and transport started says neither.
        let mut failed = record(0.05, serde_json::Value::Null, false);
        failed["link"] = serde_json::Value::Null;
        failed["rudp"] = serde_json::Value::Null;
        assert!(c.matches(&failed));
        failed["ok"] = true.into();
        assert!(
            !c.matches(&failed),
            "a successful run over a link reports it"
        );
        // ark always says its FEC: another mode's record is not this case's.
        assert!(!c.matches(&record(0.05, "fixed:8,2".into(), true)));
        // A case without a link matches records without one only.
        let mut plain = off.clone();
        plain.link_loss = Real(0.0);
        plain.link_delay_ms = Real(0.0);
        plain.link_jitter_ms = Real(0.0);
        assert!(!plain.matches(&record(0.05, "off".into(), true)));
        assert!(plain.matches(&failed));
    }

    #[test]
    fn link_and_fec_fields_are_optional_in_files_and_round_trip() {
        let cases = from_toml(
            "[[case]]\nprotocol = \"rudp\"\npayload = 1024\nclients = 16\nwindow = 16\nio_model = \"shared\"\nio_threads = 1\nlink_loss = 0.1\nlink_delay_ms = 20\nrudp_fec = \"fixed:8,2\"\n",
        )
        .unwrap();
        let c = &cases[0];
        assert_eq!(
            (c.link_loss, c.link_delay_ms, c.link_seed),
            (Real(0.1), Real(20.0), 1)
        );
        assert!(
            c.flags(1.0, 0.0)
                .join(" ")
                .contains("--link-delay-ms 20 --link-jitter-ms 0")
        );
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["link_loss"], 0.1);
        assert!(json.get("link_jitter_ms").is_none() && json.get("link_seed").is_none());
        assert_eq!(&serde_json::from_value::<LoopbackCase>(json).unwrap(), c);
        let tcp = serde_json::to_value(&builtin("baseline").unwrap()[0]).unwrap();
        assert!(tcp.get("link_loss").is_none() && tcp.get("rudp_fec").is_none());
    }
}
