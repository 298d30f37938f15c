//! `--rudp-bulk` and `--rudp-lanes`: bulk messages stream beside the measured echoes, on a
//! lane of their own or on the echoes' lane, and the record says what they moved. (What
//! they cost the echoes is a benchmark's figure: the RTT percentiles of the record; the
//! head-of-line behaviour itself is tested on ark-rudp's sans-IO core, tests/lanes.rs.)

mod common;
use common::run;

const SHORT: [&str; 6] = ["--seconds", "0.5", "--warmup", "0.1", "--drain", "1"];

#[test]
fn bulk_messages_move_beside_the_echoes_on_either_lane_setting() {
    for lanes in ["on", "off"] {
        let mut args = vec!["--protocol", "rudp", "--payload", "64", "--clients", "2"];
        args.extend(["--rudp-bulk", "65536", "--rudp-lanes", lanes]);
        args.extend(["--link-delay-ms", "1"]);
        args.extend(SHORT);
        let (code, record, stderr) = run(&args);
        assert_eq!(code, Some(0), "lanes {lanes}: {stderr} {record}");
        assert_eq!(record["ok"], true, "lanes {lanes}: {record}");
        let bulk = &record["rudp_bulk"];
        assert_eq!(bulk["message_bytes"], 65536, "{bulk}");
        assert_eq!(bulk["lanes"], lanes == "on", "{bulk}");
        let bytes = bulk["bytes"].as_u64().unwrap();
        assert!(
            bytes > 0 && bytes % 65536 == 0,
            "whole bulk messages: {bulk}"
        );
        assert!(record["messages"].as_u64().unwrap() > 0, "{record}");
    }
    let (_, record, _) = run(&[&["--protocol", "rudp"][..], &SHORT[..]].concat());
    assert!(
        record["rudp_bulk"].is_null(),
        "none without --rudp-bulk: {record}"
    );
}

#[test]
fn a_bulk_stream_the_run_cannot_tell_apart_is_refused_with_the_reason() {
    for args in [
        &["--protocol", "tcp", "--rudp-bulk", "4096"][..],
        &[
            "--protocol",
            "rudp",
            "--payload",
            "4096",
            "--rudp-bulk",
            "4096",
        ],
    ] {
        let (code, _, stderr) = run(args);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(stderr.contains("--rudp-bulk"), "{args:?}: {stderr}");
    }
}
