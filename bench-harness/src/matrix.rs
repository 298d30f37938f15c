//! Loopback benchmark matrices: arknet's built-in ones and user TOML files.

use serde::{Deserialize, Serialize};

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
        .flat_map(|(flag, value)| [flag.to_string(), value])
        .collect()
    }

    /// The connection variant: `""`, or ` reconnect N` with ` resumption off` when TLS
    /// resumption is off, and ` GET by wrk` for wrk's load.
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

/// A named built-in matrix.
pub fn builtin(name: &str) -> Option<Vec<LoopbackCase>> {
    let case = |protocol: &str, payload, clients, window, (io_model, io_threads): (&str, u32)| {
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
        }
    };
    let mut cases = Vec::new();
    match name {
        "baseline" => {
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
        }
        "dimensions" => {
            for protocol in ["tcp", "udp", "websocket"] {
                for window in [1, 4, 16, 64] {
                    for payload in [64, 1024, 16384] {
                        for io in [("shared", 1), ("shared", 4), ("sharded", 4)] {
                            cases.push(case(protocol, payload, 16, window, io));
                        }
                    }
                }
            }
        }
        "mtu" => {
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
        }
        "tls" => {
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
        }
        "http" => {
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
        }
        "udp-limits" => {
            for payload in [1472, 8192, 16356, 16384, 65507] {
                for window in [1, 16, 64] {
                    cases.push(case("udp", payload, 16, window, ("shared", 1)));
                }
            }
        }
        _ => return None,
    }
    Some(cases)
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
}
