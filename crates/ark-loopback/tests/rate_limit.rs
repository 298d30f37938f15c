//! `--rate-limit`: ark's per-session rate limits on the server hold every client under the
//! limit (payload a second, framing on top), and the record says what was set and moved.

mod common;
use common::run;

const SHORT: [&str; 6] = ["--seconds", "1", "--warmup", "0.1", "--drain", "1"];
const LIMIT: f64 = 200_000.0;

#[test]
fn every_limited_protocol_holds_each_client_under_the_limit() {
    for protocol in ["tcp", "websocket", "udp", "rudp"] {
        let mut args = vec!["--protocol", protocol, "--clients", "4", "--window", "4"];
        args.extend(["--payload", "1024", "--rate-limit", "200000"]);
        args.extend(SHORT);
        let (code, record, stderr) = run(&args);
        assert_eq!(code, Some(0), "{protocol}: {stderr} {record}");
        assert_eq!(record["ok"], true, "{protocol}: {record}");
        let limit = &record["rate_limit"];
        assert_eq!(limit["bytes_per_second"], 200_000, "{protocol}: {limit}");
        assert_eq!(limit["reads_limited"], protocol != "udp", "{protocol}");
        // Each client's echoes: the rate and a burst (20,000 B, at least 16 KiB: 16,384)
        // spread over the measured second at most; and not far below the limit either.
        let elapsed = record["elapsed_seconds"].as_f64().unwrap();
        let ceiling = LIMIT + 20_000.0 / elapsed;
        let fastest = limit["client_payload_bytes_per_second_max"]
            .as_f64()
            .unwrap();
        let slowest = limit["client_payload_bytes_per_second_min"]
            .as_f64()
            .unwrap();
        assert!(
            fastest <= ceiling,
            "{protocol}: {fastest} B/s over {ceiling}: {record}"
        );
        assert!(
            slowest >= 0.5 * LIMIT,
            "{protocol}: {slowest} B/s: {record}"
        );
    }
    // Without the flag, the record has no rate_limit and the clients go far faster.
    let (code, record, stderr) = run(&[
        "--protocol",
        "tcp",
        "--clients",
        "4",
        "--window",
        "4",
        "--payload",
        "1024",
        "--seconds",
        "0.5",
        "--warmup",
        "0.1",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(record["rate_limit"].is_null());
    let unlimited = record["roundtrips_per_second"].as_f64().unwrap() * 1024.0 / 4.0;
    assert!(
        unlimited > 4.0 * LIMIT,
        "{unlimited} B/s a client unlimited"
    );
}

#[test]
fn a_rate_limit_where_there_is_none_is_refused_naming_the_flag() {
    let (code, _, stderr) = run(&["--protocol", "http", "--rate-limit", "1000"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--rate-limit"), "{stderr}");
}
