//! The KCP peer (`peer-kcp-loopback`) end to end: both modes complete a reliable-UDP run over a
//! lossy, delayed link cleanly, and it refuses every other protocol.

use std::process::Command;

fn kcp(mode: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_peer-kcp-loopback"));
    command.env("PEER_KCP_MODE", mode);
    command
}

const LOSSY_RUN: [&str; 16] = [
    "--protocol",
    "rudp",
    "--payload",
    "1024",
    "--clients",
    "4",
    "--window",
    "4",
    "--seconds",
    "0.5",
    "--warmup",
    "0.1",
    "--link-loss",
    "0.05",
    "--link-delay-ms",
    "5",
];

#[test]
fn both_modes_run_clean_over_a_lossy_link() {
    for (mode, implementation) in [("fast", "kcp-fast"), ("default", "kcp-default")] {
        let out = kcp(mode).args(LOSSY_RUN).output().unwrap();
        let record = ark_testkit::clean_record(&out, mode, implementation);
        assert_eq!(record["protocol"], "rudp");
        let rudp = &record["rudp"];
        assert_eq!(rudp["mode"], mode, "{record}");
        assert!(rudp["fec"].is_null(), "KCP has no FEC: {record}");
        // 5 % loss each way over the whole run: some data segment was sent again.
        assert!(rudp["retransmissions"].as_u64().unwrap() > 0, "{record}");
        assert!(record["link"].is_object(), "the run went through the relay");
    }
}

#[test]
fn other_protocols_and_modes_are_refused() {
    let out = kcp("fast")
        .args(["--protocol", "udp", "--seconds", "0.1"])
        .output()
        .unwrap();
    ark_testkit::refused_record(&out, "rudp only");

    // 1 MiB is 750 segments at KCP's MTU: message mode refuses 128 or more, so the peer says so
    // before it starts instead of failing every send.
    let out = kcp("fast")
        .args([
            "--protocol",
            "rudp",
            "--payload",
            "1048576",
            "--seconds",
            "0.1",
        ])
        .output()
        .unwrap();
    ark_testkit::refused_record(&out, "KCP's largest message");

    let out = kcp("turbo").args(["--protocol", "rudp"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}
