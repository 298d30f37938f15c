//! The QUIC peer (`peer-quinn-loopback`) end to end: both modes complete a reliable-UDP run
//! with the largest payload and a window of 8, cleanly and in order, straight and over a lossy,
//! delayed link; it refuses every other protocol and an unknown mode.

use std::process::Command;

use serde_json::Value;

/// The program in `mode` (`PEER_QUINN_MODE`).
fn quinn(mode: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_peer-quinn-loopback"));
    command.env("PEER_QUINN_MODE", mode);
    command
}

/// The modes and the implementation names their records carry.
const MODES: [(&str, &str); 2] = [
    ("stream-per-message", "quinn"),
    ("one-stream", "quinn-stream"),
];

/// One client, 8 messages of the largest payload (65,507 bytes, ark-loopback's limit: just
/// under 64 KiB) in flight, half a second.
const RUN: [&str; 14] = [
    "--protocol",
    "rudp",
    "--payload",
    "65507",
    "--clients",
    "1",
    "--window",
    "8",
    "--seconds",
    "0.5",
    "--warmup",
    "0.1",
    "--rudp-fec",
    "adaptive",
];

/// 1 % loss and 10 ms each way, and a measured phase long enough for Cubic: with a datagram
/// in a hundred lost, a window of eight such messages takes about half a second.
const LOSSY_LINK: [&str; 6] = [
    "--link-loss",
    "0.01",
    "--link-delay-ms",
    "10",
    "--seconds",
    "1.5",
];

/// The version of `package` locked in the workspace's Cargo.lock.
fn locked_version(package: &str) -> String {
    let lock = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");
    let text = std::fs::read_to_string(lock).unwrap();
    let entry = format!("name = \"{package}\"\nversion = \"");
    let at = text.find(&entry).unwrap() + entry.len();
    text[at..].split('"').next().unwrap().to_string()
}

/// Runs `mode` with `flags` and checks a clean, ordered, complete run; returns the record.
fn run_clean(mode: &str, implementation: &str, flags: &[&str]) -> Value {
    let out = quinn(mode).args(flags).output().unwrap();
    let record = ark_testkit::clean_record(&out, mode, implementation);
    assert_eq!(record["protocol"], "rudp");
    let rudp = &record["rudp"];
    assert_eq!(rudp["mode"], mode, "{record}");
    assert!(rudp["fec"].is_null(), "QUIC has no FEC: {record}");
    assert_eq!(rudp["quinn_version"], locked_version("quinn").as_str());
    assert_eq!(rudp["congestion_controller"], "cubic");
    assert_eq!(rudp["connections"], 1, "{record}");
    assert!(rudp["path_mtu"].as_u64().unwrap() >= 1200, "{record}");
    // Every round trip carried the payload both ways, in datagrams of at most the path MTU.
    let delivered = record["messages"].as_u64().unwrap() * 65_507;
    assert!(
        rudp["udp_tx_bytes"].as_u64().unwrap() > delivered,
        "{record}"
    );
    assert!(
        rudp["udp_rx_bytes"].as_u64().unwrap() > delivered,
        "{record}"
    );
    record
}

#[test]
fn both_modes_run_clean_with_64_kib_messages_and_a_window_of_8() {
    for (mode, implementation) in MODES {
        let record = run_clean(mode, implementation, &RUN);
        assert!(record["link"].is_null(), "no relay without --link-*");
    }
}

#[test]
fn both_modes_run_clean_over_a_lossy_delayed_link() {
    // RUN without its `--seconds 0.5`, which LOSSY_LINK sets.
    let seconds = RUN.iter().position(|&f| f == "--seconds").unwrap();
    let (before, after) = RUN.split_at(seconds);
    let flags: Vec<&str> = before
        .iter()
        .chain(&after[2..])
        .chain(&LOSSY_LINK)
        .copied()
        .collect();
    for (mode, implementation) in MODES {
        let record = run_clean(mode, implementation, &flags);
        assert!(record["link"].is_object(), "the run went through the relay");
        let rudp = &record["rudp"];
        // 1 % loss each way over ~1,000 datagrams a message: quinn found some lost.
        let lost = rudp["lost_packets"].as_u64().unwrap()
            + rudp["server"]["lost_packets"].as_u64().unwrap();
        assert!(lost > 0, "{mode}: {record}");
        // 10 ms each way: no round trip is shorter than 20 ms.
        assert!(
            record["rtt_p50_us"].as_f64().unwrap() >= 20_000.0,
            "{record}"
        );
    }
}

#[test]
fn other_protocols_and_modes_are_refused() {
    let out = quinn("stream-per-message")
        .args(["--protocol", "udp", "--seconds", "0.1"])
        .output()
        .unwrap();
    ark_testkit::refused_record(&out, "rudp only");

    let out = quinn("datagrams")
        .args(["--protocol", "rudp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
