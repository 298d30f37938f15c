//! `--link-*`: the run goes through an ark-link relay (UDP for udp, TCP for the stream
//! protocols) and the record carries its settings and counters.

mod common;
use common::run;

const SHORT: [&str; 6] = ["--seconds", "0.5", "--warmup", "0.1", "--drain", "1"];

#[test]
fn a_delayed_link_slows_every_round_trip_of_udp_and_of_the_stream_protocols() {
    for protocol in ["udp", "tcp", "websocket", "http"] {
        let mut args = vec!["--protocol", protocol, "--clients", "2", "--window", "2"];
        args.extend([
            "--payload",
            "256",
            "--link-delay-ms",
            "5",
            "--link-jitter-ms",
            "1",
        ]);
        args.extend(SHORT);
        let (code, record, stderr) = run(&args);
        assert_eq!(code, Some(0), "{protocol}: {stderr} {record}");
        assert_eq!(record["ok"], true, "{protocol}: {record}");
        // Two delays of 4 ms at least (5 ± 1), each way.
        let p50 = record["rtt_p50_us"].as_f64().unwrap();
        assert!(p50 >= 8_000.0, "{protocol}: p50 {p50} µs");
        let link = &record["link"];
        assert_eq!(link["settings"]["delay_ms"], 5.0, "{protocol}: {link}");
        let relay = if protocol == "udp" { "udp" } else { "tcp" };
        assert_eq!(link["relay"], relay);
        assert!(
            link["upstream"]["delivered"].as_u64().unwrap() > 0,
            "{link}"
        );
        assert!(
            link["downstream"]["delivered"].as_u64().unwrap() > 0,
            "{link}"
        );
    }
}

#[test]
fn a_rate_limited_link_bounds_udp_round_trips() {
    // 10 Mbit/s each way and datagrams of 1,024 B (the relay counts UDP payload bytes): at
    // most 10e6 / 8 / 1024 ≈ 1,221 round trips per second.
    let mut args = vec!["--protocol", "udp", "--clients", "4", "--window", "4"];
    args.extend(["--link-rate-mbit", "10"]);
    args.extend(SHORT);
    let (code, record, stderr) = run(&args);
    assert_eq!(code, Some(0), "{stderr} {record}");
    let rate = record["roundtrips_per_second"].as_f64().unwrap();
    assert!(rate > 100.0 && rate <= 1_300.0, "{rate} {record}");
    assert_eq!(record["link"]["upstream"]["dropped_queue"], 0, "{record}");
}

#[test]
fn what_a_protocol_cannot_run_over_is_refused_with_the_reason() {
    for flag in ["--link-loss", "--link-reorder", "--link-duplicate"] {
        let (code, _, stderr) = run(&["--protocol", "tcp", flag, "0.01"]);
        assert_eq!(code, Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("repairs loss"), "{flag}: {stderr}");
    }
    for flag in ["--link-loss", "--link-duplicate", "--link-reorder"] {
        let (code, _, stderr) = run(&["--protocol", "udp", flag, "0.01"]);
        assert_eq!(code, Some(2), "{flag}: {stderr}");
        assert!(stderr.contains("has no repair"), "{flag}: {stderr}");
    }
    let (code, _, stderr) = run(&["--protocol", "udp", "--link-loss", "1.5"]);
    assert_eq!(code, Some(2), "{stderr}");
}
