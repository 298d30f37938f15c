//! The peers (`peer-tokio-loopback`, `peer-raw-loopback`) end to end: every protocol and IO
//! model completes cleanly with the same record fields as ark's, and each implementation's
//! clients pass validation against ark's server and ark's clients against theirs (same wire
//! format, same checks).

use std::net::TcpListener;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn tokio() -> Command {
    Command::new(env!("CARGO_BIN_EXE_peer-tokio-loopback"))
}

fn raw() -> Command {
    Command::new(env!("CARGO_BIN_EXE_peer-raw-loopback"))
}

/// A peer: its record's `implementation`, how to start it, whether it counts syscalls and
/// batches UDP.
type Peer = (&'static str, fn() -> Command, bool);

const PEERS: [Peer; 2] = [("tokio", tokio, false), ("raw", raw, true)];

/// ark's side: `ark-bench loopback`, a program of another package (`ark-bench`).
fn ark() -> Command {
    let mut command = Command::new(ark_testkit::workspace_binary("ark-bench", "ark-bench"));
    command.arg("loopback");
    command
}

fn record(out: &Output) -> Value {
    ark_testkit::last_record(&out.stdout)
}

fn assert_clean(out: &Output, implementation: &str, what: &str) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let record = record(out);
    assert!(
        out.status.success(),
        "{what}: exit {:?}: {stderr} {record}",
        out.status
    );
    assert_eq!(record["ok"], true, "{what}: {record}");
    assert_eq!(record["implementation"], implementation, "{what}");
    assert!(record["messages"].as_u64().unwrap() > 0, "{what}: {record}");
    for field in ark_loopback::record::ERROR_COUNTERS {
        assert_eq!(record[field], 0, "{what}: {field} in {record}");
    }
    assert!(record["rtt_p99_us"].as_f64().unwrap() > 0.0, "{what}");
    record
}

const SMOKE: [&str; 10] = [
    "--clients",
    "4",
    "--window",
    "4",
    "--payload",
    "256",
    "--seconds",
    "0.2",
    "--warmup",
    "0.05",
];

#[test]
fn every_protocol_and_io_model_completes_cleanly_with_arks_record_fields() {
    for protocol in ["tcp", "udp", "websocket"] {
        let ark_record = assert_clean(
            &ark()
                .args(SMOKE)
                .args(["--protocol", protocol])
                .output()
                .unwrap(),
            "ark",
            protocol,
        );
        for (name, peer, counts) in PEERS {
            for (model, threads, family) in [
                ("shared", "1", "ipv4"),
                ("shared", "2", "ipv4"),
                ("sharded", "2", "ipv4"),
                ("owned", "1", "ipv4"),
                ("shared", "1", "ipv6"),
            ] {
                let what = format!("{name} {protocol} {model}×{threads} {family}");
                let out = peer()
                    .args(SMOKE)
                    .args(["--protocol", protocol, "--io-model", model])
                    .args(["--io-threads", threads, "--address-family", family])
                    .output()
                    .unwrap();
                let record = assert_clean(&out, name, &what);
                check_fields(
                    &record,
                    &ark_record,
                    (protocol, model, family),
                    counts,
                    &what,
                );
            }
        }
    }
}

/// What every peer record must say, beside being clean.
fn check_fields(
    record: &Value,
    ark_record: &Value,
    (protocol, model, family): (&str, &str, &str),
    counts: bool,
    what: &str,
) {
    assert_eq!(record["protocol"], protocol);
    assert_eq!(record["io_model"], model);
    assert_eq!(record["address_family"], family);
    let fields = |r: &Value| r.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(fields(record), fields(ark_record), "{what}: same fields");
    assert!(record["allocations_per_message"].is_number(), "{what}");
    if model == "owned" {
        // The server and each of the 4 clients on a thread of its own.
        assert_eq!(record["io_threads"], 5, "{what}");
        assert_eq!(record["io_contexts"], 5, "{what}");
    }
    assert_eq!(
        record["syscalls_per_message"].is_number(),
        counts,
        "{what}: counted by raw only"
    );
    if protocol == "udp" {
        assert_eq!(
            record["udp_batch"], counts,
            "{what}: raw batches, tokio cannot"
        );
        assert!(record["udp_server_receive_buffer_bytes"].as_u64().unwrap() > 0);
        assert!(record["udp_client_send_buffer_min_bytes"].as_u64().unwrap() > 0);
    }
}

#[test]
fn bad_flags_exit_2_and_the_runner_flag_is_accepted() {
    for (name, peer, _) in PEERS {
        let out = peer().args(["--payload", "8"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--payload"));
        let out = peer()
            .args(["--io-model", "owned", "--io-threads", "2"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: owned takes one thread");
        let help = peer().arg("--help").output().unwrap();
        let binary = format!("peer-{name}-loopback");
        assert!(String::from_utf8_lossy(&help.stdout).contains(&binary));
        // `ark-bench run` appends `--repetition N`.
        let out = peer()
            .args(["--seconds", "0.1", "--warmup", "0", "--repetition", "3"])
            .output()
            .unwrap();
        assert_clean(&out, name, "--repetition");
    }
}

fn free_port() -> u16 {
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().port()
}

/// `server` serves every protocol while `client` runs against it; both must be clean.
fn cross(server: fn() -> Command, client: fn() -> Command, client_name: &str) {
    // Made once before the servers' clock starts: a program of another package (ark-bench) is
    // built on first use.
    let _ = (server(), client());
    let common = ["--seconds", "0.2", "--warmup", "0.05", "--drain", "1"];
    let servers: Vec<(&str, String, std::process::Child)> = ["tcp", "udp", "websocket"]
        .into_iter()
        .map(|protocol| {
            let addr = format!("127.0.0.1:{}", free_port());
            let child = server()
                .args(common)
                .args(["--protocol", protocol, "--role", "server", "--bind", &addr])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (protocol, addr, child)
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Every client first (the servers stop by themselves some seconds after starting), then
    // every server's report.
    for (protocol, addr, _) in &servers {
        let out = client()
            .args(common)
            .args([
                "--protocol",
                protocol,
                "--role",
                "client",
                "--connect",
                addr,
            ])
            .args(["--clients", "2", "--window", "2"])
            .output()
            .unwrap();
        let record = assert_clean(
            &out,
            client_name,
            &format!("{client_name} client {protocol}"),
        );
        assert_eq!(record["server_and_clients_share_io_threads"], false);
    }
    for (protocol, _, server) in servers {
        let served = server.wait_with_output().unwrap();
        assert!(
            served.status.success(),
            "{protocol} server: {}",
            String::from_utf8_lossy(&served.stderr)
        );
        assert!(String::from_utf8_lossy(&served.stdout).contains("\"role\":\"server\""));
    }
}

#[test]
fn ark_clients_against_the_tokio_server() {
    cross(tokio, ark, "ark");
}

#[test]
fn tokio_clients_against_the_ark_server() {
    cross(ark, tokio, "tokio");
}

#[test]
fn ark_clients_against_the_raw_server() {
    cross(raw, ark, "ark");
}

#[test]
fn raw_clients_against_the_ark_server() {
    cross(ark, raw, "raw");
}

/// The tokio peer's WebSocket libraries (`PEER_TOKIO_WS`), beside its hand-written default.
const WS_LIBRARIES: [&str; 3] = ["tungstenite", "tokio-websockets", "fastwebsockets"];

/// The record's `implementation` for a websocket run of the tokio peer on `library`.
fn named(library: &str) -> &'static str {
    match library {
        "tungstenite" => "tokio-tungstenite",
        "tokio-websockets" => "tokio-websockets",
        _ => "fastwebsockets",
    }
}

/// The tokio peer on WebSocket library `library`.
fn tokio_on(library: &str) -> Command {
    let mut command = tokio();
    command.env("PEER_TOKIO_WS", library);
    command
}

#[test]
fn tokio_websocket_libraries_run_clean_and_cross_with_ark() {
    // A name it does not know is refused, not measured as the default.
    let out = tokio_on("fastwebsocket")
        .args(SMOKE)
        .args(["--protocol", "websocket"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let error = record(&out)["error"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains("PEER_TOKIO_WS=fastwebsocket:"), "{error}");
    for library in WS_LIBRARIES {
        for (model, threads) in [("shared", "1"), ("sharded", "2")] {
            let out = tokio_on(library)
                .args(SMOKE)
                .args(["--protocol", "websocket", "--io-model", model])
                .args(["--io-threads", threads])
                .output()
                .unwrap();
            // The record names the library the run used.
            assert_clean(
                &out,
                named(library),
                &format!("{library} {model}×{threads}"),
            );
        }
    }
    // ark's clients against each library's server, each library's clients against ark's:
    // every server first (each runs some seconds), then every client, then the servers' ends.
    let _ = ark();
    let common = [
        "--protocol",
        "websocket",
        "--seconds",
        "0.2",
        "--warmup",
        "0.05",
        "--drain",
        "1",
    ];
    let mut servers = Vec::new();
    for library in WS_LIBRARIES {
        for library_serves in [true, false] {
            let addr = format!("127.0.0.1:{}", free_port());
            let mut server = if library_serves {
                tokio_on(library)
            } else {
                ark()
            };
            let serving = server
                .args(common)
                .args(["--role", "server", "--bind", &addr])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            servers.push((serving, addr, library, library_serves));
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    for (_, addr, library, library_serves) in &servers {
        let (mut client, name) = if *library_serves {
            (ark(), "ark")
        } else {
            (tokio_on(library), named(library))
        };
        let out = client
            .args(common)
            .args(["--role", "client", "--connect", addr])
            .args(["--clients", "2", "--window", "2", "--payload", "65507"])
            .output()
            .unwrap();
        let what = format!("{name} client, {library} serving: {library_serves}");
        assert_clean(&out, name, &what);
    }
    for (serving, addr, library, library_serves) in servers {
        let out = serving.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "the server at {addr} ({library} serving: {library_serves}) ended with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn tokio_tls_runs_clean_handshakes_resume_and_crosses_with_ark() {
    for protocol in ["tcps", "wss"] {
        let out = tokio()
            .args(SMOKE)
            .args(["--protocol", protocol])
            .output()
            .unwrap();
        let record = assert_clean(&out, "tokio", protocol);
        assert!(
            record["tls_version"]
                .as_str()
                .unwrap_or_default()
                .starts_with("TLSv1.")
        );
        assert_eq!(record["tls_certificates"], "generated");
    }
    let out = tokio()
        .args([
            "--protocol",
            "tcps",
            "--reconnect-every",
            "1",
            "--clients",
            "2",
        ])
        .args(["--seconds", "0.3", "--warmup", "0.05"])
        .output()
        .unwrap();
    let record = assert_clean(&out, "tokio", "tcps handshakes");
    assert!(record["connections"].as_u64().unwrap() > 0, "{record}");
    assert_eq!(
        record["tls_resumed_connections"], record["connections"],
        "{record}"
    );

    // Each side's clients against the other's tcps and wss servers, sharing a CA.
    let dir = std::env::temp_dir().join(format!("peers-cli-certs-{}", std::process::id()));
    ark_tls::Pki::generate(&["localhost"])
        .unwrap()
        .write_dir(&dir)
        .unwrap();
    let certs = dir.to_string_lossy().into_owned();
    type Side = (fn() -> Command, fn() -> Command, &'static str);
    let sides: [Side; 2] = [(tokio, ark, "ark"), (ark, tokio, "tokio")];
    let common = |protocol| {
        [
            "--protocol",
            protocol,
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
        ]
    };
    // Every server first (each runs some seconds), then every client, then the servers' ends.
    let mut servers = Vec::new();
    for (server, client, client_name) in sides {
        for protocol in ["tcps", "wss"] {
            let addr = format!("127.0.0.1:{}", free_port());
            let serving = server()
                .args(common(protocol))
                .args([
                    "--drain", "1", "--role", "server", "--bind", &addr, "--certs", &certs,
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            servers.push((serving, addr, protocol, client, client_name));
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    for (_, addr, protocol, client, client_name) in &servers {
        let out = client()
            .args(common(protocol))
            .args(["--role", "client", "--connect", addr, "--certs", &certs])
            .args(["--clients", "2", "--window", "2"])
            .output()
            .unwrap();
        assert_clean(
            &out,
            client_name,
            &format!("{client_name} client {protocol}"),
        );
    }
    for (serving, addr, protocol, _, client_name) in servers {
        let out = serving.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "the server for the {client_name} client ({protocol}, {addr}) ended with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_raw_floor_refuses_tls_with_a_clear_error() {
    for protocol in ["tcps", "wss"] {
        let out = raw()
            .args(SMOKE)
            .args(["--protocol", protocol])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let record = record(&out);
        assert_eq!(record["ok"], false);
        let error = record["error"].as_str().unwrap_or_default();
        assert!(error.contains("leaves TLS out"), "{record}");
    }
}

#[test]
fn tokio_http_runs_clean_and_crosses_with_ark() {
    for protocol in ["http", "https"] {
        let out = tokio()
            .args(SMOKE)
            .args(["--protocol", protocol])
            .output()
            .unwrap();
        assert_clean(&out, "tokio", protocol);
        let out = raw()
            .args(SMOKE)
            .args(["--protocol", protocol])
            .output()
            .unwrap();
        assert!(!out.status.success(), "the raw floor leaves HTTP out");
        assert!(
            record(&out)["error"]
                .as_str()
                .unwrap_or_default()
                .contains("leaves HTTP out")
        );
    }
    // ark's clients against hyper, the peer's clients against ark's server.
    let common = ["--protocol", "http", "--seconds", "0.2", "--warmup", "0.05"];
    let mut servers = Vec::new();
    for (server, client, name) in [
        (tokio as fn() -> Command, ark as fn() -> Command, "ark"),
        (ark, tokio, "tokio"),
    ] {
        let addr = format!("127.0.0.1:{}", free_port());
        let serving = server()
            .args(common)
            .args(["--drain", "1", "--role", "server", "--bind", &addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        servers.push((serving, addr, client, name));
    }
    std::thread::sleep(std::time::Duration::from_millis(400));
    for (_, addr, client, name) in &servers {
        let out = client()
            .args(common)
            .args([
                "--role",
                "client",
                "--connect",
                addr,
                "--clients",
                "2",
                "--window",
                "4",
            ])
            .output()
            .unwrap();
        assert_clean(&out, name, &format!("{name} http client"));
    }
    for (serving, ..) in servers {
        assert!(serving.wait_with_output().unwrap().status.success());
    }
}
