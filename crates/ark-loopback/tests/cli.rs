//! The binary end to end: every protocol, both IO models, both families; bad flags; --help;
//! a server and a client in two processes.

use std::net::TcpListener;
use std::process::Stdio;

use serde_json::Value;

mod common;
use common::{binary, run};

fn assert_clean(record: &Value, what: &str) {
    assert_eq!(record["ok"], true, "{what}: {record}");
    assert!(record["messages"].as_u64().unwrap() > 0, "{what}: {record}");
    for field in ark_loopback::record::ERROR_COUNTERS {
        assert_eq!(record[field], 0, "{what}: {field} in {record}");
    }
    assert_eq!(record["schema_version"], 1);
    assert_eq!(record["implementation"], "ark");
    assert!(record["rtt_p99_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn every_protocol_io_model_and_family_completes_cleanly() {
    for protocol in ["tcp", "udp", "websocket", "rudp"] {
        for (model, threads) in [("shared", "1"), ("shared", "2"), ("sharded", "2")] {
            for family in ["ipv4", "ipv6"] {
                let what = format!("{protocol} {model}×{threads} {family}");
                let (code, record, stderr) = run(&[
                    "--protocol",
                    protocol,
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
                    "--drain",
                    "2",
                    "--io-model",
                    model,
                    "--io-threads",
                    threads,
                    "--address-family",
                    family,
                ]);
                assert_eq!(code, Some(0), "{what}: {stderr}");
                assert_clean(&record, &what);
                assert_eq!(record["protocol"], protocol);
                assert_eq!(record["address_family"], family);
                assert_eq!(record["io_path"], ark_reactor::IO_PATH);
            }
        }
    }
}

#[test]
fn websocket_and_wss_served_through_the_http_router_complete_cleanly() {
    for protocol in ["websocket", "wss"] {
        let (code, record, stderr) = run(&[
            "--protocol",
            protocol,
            "--ws-server",
            "http-router",
            "--clients",
            "4",
            "--window",
            "4",
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
        ]);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_clean(&record, protocol);
        assert_eq!(record["ws_server"], "http-router");
    }
    let (code, _, stderr) = run(&["--protocol", "tcp", "--ws-server", "http-router"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--ws-server"), "{stderr}");
}

#[test]
fn busy_connections_are_served_fairly() {
    // 16 KiB echoes with window 16 keep every socket full, over two reactors: each connection
    // must get its share (before ark-tcp read within its budget per turn, a few connections
    // made ~100× the round trips of the others).
    for protocol in ["tcp", "websocket"] {
        let (code, record, stderr) = run(&[
            "--protocol",
            protocol,
            "--payload",
            "16384",
            "--clients",
            "16",
            "--window",
            "16",
            "--io-model",
            "sharded",
            "--io-threads",
            "2",
            "--seconds",
            "0.5",
            "--warmup",
            "0.1",
        ]);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        let min = record["client_messages_min"].as_u64().unwrap();
        let max = record["client_messages_max"].as_u64().unwrap();
        assert!(
            min > 0 && min * 4 >= max,
            "{protocol}: round trips per client from {min} to {max}"
        );
    }
}

#[test]
fn udp_clients_on_sharded_loops_are_steered_to_their_own_shard_and_served_fairly() {
    // With the kernel's hash, 16 clients spread unevenly over 4 shards and the least served
    // client made a fraction of the most served one's round trips, in every implementation.
    let (code, record, stderr) = run(&[
        "--protocol",
        "udp",
        "--clients",
        "16",
        "--io-model",
        "sharded",
        "--io-threads",
        "4",
        "--seconds",
        "0.5",
        "--warmup",
        "0.1",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    if record["io_path"] == "portable" {
        // No steering program on the portable path: the kernel's hash places the clients, so
        // the spread is not asserted; asking for port steering is refused by name.
        assert_eq!(record["udp_steering"], "hash");
        let (code, refused, stderr) = run(&[
            "--protocol",
            "udp",
            "--io-model",
            "sharded",
            "--io-threads",
            "2",
            "--udp-steering",
            "port",
            "--seconds",
            "0.1",
        ]);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(refused["ok"], false);
        let error = refused["error"].as_str().unwrap_or_default();
        assert!(error.contains("Steering::PeerPort"), "{refused}");
        return;
    }
    assert_eq!(record["udp_steering"], "port");
    let min = record["client_messages_min"].as_u64().unwrap();
    let max = record["client_messages_max"].as_u64().unwrap();
    assert!(
        min > 0 && min * 4 >= max,
        "round trips per client from {min} to {max}"
    );
}

#[test]
fn udp_records_buffers_and_kernel_counters() {
    let (code, record, stderr) = run(&[
        "--protocol",
        "udp",
        "--clients",
        "2",
        "--seconds",
        "0.1",
        "--udp-batch",
        "off",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(record["udp_batch"], false);
    assert!(record["udp_server_receive_buffer_bytes"].as_u64().unwrap() > 0);
    assert!(record["udp_client_send_buffer_min_bytes"].as_u64().unwrap() > 0);
    // The kernel's counters are Linux's (`/proc/net/snmp`): absent on the portable path.
    if record["io_path"] == "portable" {
        assert!(record["udp_kernel"].is_null(), "{record}");
    } else {
        assert_eq!(record["io_path"], "linux");
        assert!(record["udp_kernel"].is_object(), "{record}");
    }
    assert_eq!(record["udp_lost_messages"], 0);
}

/// `--ws-deflate on`: every message compressed both ways (the pattern payload compresses
/// well), with the wire's bytes per message in the record beside the run without.
#[test]
fn websocket_with_deflate_completes_and_records_its_bytes_on_the_wire() {
    let mut wire = Vec::new();
    for (protocol, server, deflate) in [
        ("websocket", "ws", "off"),
        ("websocket", "ws", "on"),
        ("websocket", "http-router", "on"),
        ("wss", "ws", "on"),
    ] {
        let (code, record, stderr) = run(&[
            "--protocol",
            protocol,
            "--ws-server",
            server,
            "--ws-deflate",
            deflate,
            "--payload",
            "1024",
            "--clients",
            "2",
            "--window",
            "2",
            "--seconds",
            "0.3",
            "--warmup",
            "0.05",
        ]);
        let what = format!("{protocol} via {server}, deflate {deflate}");
        assert_eq!(code, Some(0), "{what}: {stderr}");
        assert_clean(&record, &what);
        assert_eq!(record["ws_deflate"], deflate == "on", "{what}");
        wire.push(record["wire_bytes_per_message"].as_f64().unwrap());
    }
    assert!(wire[0] >= 1024.0, "plain: {wire:?}");
    assert!(wire[1..].iter().all(|w| *w < 512.0), "compressed: {wire:?}");
    let (code, _, stderr) = run(&["--protocol", "tcp", "--ws-deflate", "on"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("--ws-deflate"), "{stderr}");
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (vec!["--payload", "8"], "--payload"),
        (vec!["--clients", "0"], "--clients"),
        (vec!["--window", "5000"], "--window"),
        (vec!["--seconds", "0"], "--seconds"),
        (vec!["--protocol", "sctp"], "--protocol"),
        (
            vec!["--clients", "1024", "--window", "1024", "--payload", "1024"],
            "--window",
        ),
        (vec!["--role", "client"], "--connect"),
        (
            vec!["--role", "client", "--connect", "no-port"],
            "--connect",
        ),
        (
            vec![
                "--protocol",
                "rudp",
                "--role",
                "client",
                "--connect",
                "127.0.0.1:9",
            ],
            "--rudp-server-key",
        ),
        (vec!["--rudp-server-key", "abc"], "--rudp-server-key"),
    ] {
        let out = binary().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
    let help = binary().arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--protocol",
        "--payload",
        "--clients",
        "--window",
        "--io-model",
        "--udp-batch",
        "--role",
    ] {
        assert!(text.contains(flag), "--help mentions {flag}");
    }
}

#[test]
fn server_and_client_in_two_processes() {
    for protocol in ["tcp", "udp", "websocket"] {
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        // The server listens on every address (any address is accepted); the client's
        // traffic goes to loopback only.
        let (bind, addr) = (format!("0.0.0.0:{port}"), format!("127.0.0.1:{port}"));
        let common = [
            "--protocol",
            protocol,
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
            "--drain",
            "1",
        ];
        let server = binary()
            .args(common)
            .args(["--role", "server", "--bind", &bind])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (code, record, stderr) = {
            let mut args = common.to_vec();
            args.extend(["--role", "client", "--connect", &addr, "--clients", "2"]);
            run(&args)
        };
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_clean(&record, protocol);
        assert_eq!(record["server_and_clients_share_io_threads"], false);
        let server_out = server.wait_with_output().unwrap();
        assert!(server_out.status.success());
        assert!(String::from_utf8_lossy(&server_out.stdout).contains("\"role\":\"server\""));
    }
}

/// Starts the binary with `args`, waits until its stderr shows `ready` (a line containing it),
/// sends it `signal` a moment later, and returns its exit code and last stdout line as JSON.
fn run_signalled(args: &[&str], signal: i32, ready: &str) -> (Option<i32>, Value) {
    use std::io::BufRead;
    let mut child = binary()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ark-loopback starts");
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines();
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.contains(ready))),
        "the program said {ready:?}"
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: kill(2) with the pid of a child this test owns and has not waited for yet.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(sent, 0, "the signal was delivered");
    let out = child.wait_with_output().unwrap();
    (out.status.code(), ark_testkit::last_record(&out.stdout))
}

#[test]
fn sigint_and_sigterm_stop_gracefully_with_a_record_of_what_was_measured() {
    let run = [
        "--protocol",
        "tcp",
        "--clients",
        "2",
        "--window",
        "4",
        "--seconds",
        "60",
        "--warmup",
        "0.1",
    ];
    for (name, signal) in [("SIGINT", libc::SIGINT), ("SIGTERM", libc::SIGTERM)] {
        let (code, record) = run_signalled(&run, signal, "measuring");
        assert_eq!(
            code,
            Some(1),
            "{name}: not ok, but not killed either: {record}"
        );
        assert_eq!(record["interrupted"], true, "{name}: {record}");
        assert!(record["messages"].as_u64().unwrap() > 0, "{name}: {record}");
        assert!(
            record["elapsed_seconds"].as_f64().unwrap() < 30.0,
            "{name}: {record}"
        );
        assert_eq!(record["content_errors"], 0, "{name}: {record}");
        assert_eq!(
            record["unfinished_messages"], 0,
            "{name}: drained: {record}"
        );
    }
    let server = ["--role", "server", "--protocol", "tcp", "--seconds", "60"];
    let (code, record) = run_signalled(&server, libc::SIGTERM, "loopback server on");
    assert_eq!(code, Some(0), "{record}");
    assert_eq!(record["role"], "server");
    assert_eq!(record["interrupted"], true, "{record}");
}

#[test]
fn tcps_and_wss_with_the_issue_flags_complete_and_name_their_tls() {
    for protocol in ["tcps", "wss"] {
        // Exactly the acceptance command: no flags beyond these.
        let args = [
            "--protocol",
            protocol,
            "--payload",
            "1024",
            "--clients",
            "16",
            "--window",
            "16",
        ];
        let (code, record, stderr) = run(&args);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_clean(&record, protocol);
        assert_eq!(record["protocol"], protocol);
        assert_eq!(record["tls_certificates"], "generated");
        let version = record["tls_version"].as_str().unwrap_or_default();
        assert!(version.starts_with("TLSv1."), "{record}");
        let suite = record["tls_cipher_suite"].as_str().unwrap_or_default();
        assert!(suite.starts_with("TLS"), "{record}");
    }
}

#[test]
fn tls_server_and_client_in_two_processes_share_certs_from_a_directory() {
    let dir = std::env::temp_dir().join(format!("ark-loopback-certs-{}", std::process::id()));
    ark_tls::Pki::generate(&["localhost"])
        .unwrap()
        .write_dir(&dir)
        .unwrap();
    let certs = dir.to_str().unwrap().to_string();
    for protocol in ["tcps", "wss"] {
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let addr = format!("127.0.0.1:{port}");
        let common = [
            "--protocol",
            protocol,
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
            "--drain",
            "1",
            "--certs",
            &certs,
        ];
        let server = binary()
            .args(common)
            .args(["--role", "server", "--bind", &addr])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let mut args = common.to_vec();
        args.extend(["--role", "client", "--connect", &addr, "--clients", "2"]);
        let (code, record, stderr) = run(&args);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_clean(&record, protocol);
        assert_eq!(record["tls_certificates"], "dir");
        assert!(server.wait_with_output().unwrap().status.success());
    }
    // Without the shared CA the client cannot verify the server: refused up front.
    let (code, _, stderr) = run(&[
        "--protocol",
        "tcps",
        "--role",
        "client",
        "--connect",
        "127.0.0.1:1",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--certs"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn http_and_https_with_the_issue_flags_complete() {
    for protocol in ["http", "https"] {
        let args = [
            "--protocol",
            protocol,
            "--payload",
            "1024",
            "--clients",
            "16",
            "--window",
            "16",
        ];
        let (code, record, stderr) = run(&args);
        assert_eq!(code, Some(0), "{protocol}: {stderr}");
        assert_clean(&record, protocol);
        assert_eq!(record["protocol"], protocol);
    }
}

/// Regression: `--role server` with a client that never reads nor closes ended the transport's
/// close timeout (10 s TCP, 30 s WebSocket) after the drain, not at it. Now the server gives
/// its sessions the drain, cuts the rest and says how many.
#[test]
fn a_server_told_when_to_end_ends_then_and_counts_the_sessions_it_cut() {
    for protocol in ["tcp", "websocket"] {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let started = std::time::Instant::now();
        let mut server = binary()
            .args(["--protocol", protocol, "--role", "server", "--bind", &addr])
            .args(["--warmup", "0", "--seconds", "0.5", "--drain", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Connect once the server says it listens (an earlier connect could reach nobody, or
        // whatever else holds the port then).
        let mut stderr = std::io::BufReader::new(server.stderr.take().unwrap());
        let mut said = String::new();
        std::io::BufRead::read_line(&mut stderr, &mut said).unwrap();
        assert!(said.contains("loopback server on"), "{protocol}: {said}");
        // A peer that connects (and for WebSocket upgrades) and then never reads or closes.
        let mut silent = std::net::TcpStream::connect(&addr).expect("the server listens");
        if protocol == "websocket" {
            use std::io::Write;
            let upgrade = format!(
                "GET / HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
            );
            silent.write_all(upgrade.as_bytes()).unwrap();
        }
        let out = server.wait_with_output().unwrap();
        let took = started.elapsed();
        drop(silent);
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
        let record = ark_testkit::last_record(&out.stdout);
        assert!(out.status.success(), "{protocol}: {record}");
        // 0.5 s measured + 1 s drain + 5 s, then at most the 1 s drain and a second to close.
        assert!(
            took < std::time::Duration::from_secs(9),
            "{protocol}: ended after {took:?}"
        );
        assert!(
            record["server_sessions_cut"].as_u64().unwrap_or(0) >= 1,
            "{protocol}: {record}; stderr: {said}{rest}"
        );
    }
}

/// The record's peak RSS is the run's own, not that of the process that spawned it: a parent
/// holding 400 MB (Linux keeps `ru_maxrss` across `execve`; `VmHWM` starts afresh).
#[cfg(target_os = "linux")]
#[test]
fn the_peak_rss_is_the_runs_own_not_its_parents() {
    let held: Vec<u8> = vec![1; 400 * 1024 * 1024];
    // Touched, so it is resident when the child is spawned.
    let sum: u64 = held.iter().step_by(4096).map(|&b| u64::from(b)).sum();
    assert!(sum > 0);
    let (code, record, stderr) = run(&[
        "--protocol",
        "tcp",
        "--clients",
        "2",
        "--seconds",
        "0.1",
        "--warmup",
        "0",
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    let peak = record["peak_rss_bytes"].as_u64().unwrap();
    assert!(peak > 0, "{record}");
    assert!(
        peak < 200 * 1024 * 1024,
        "peak_rss_bytes {peak} with a parent holding 400 MB"
    );
    drop(held);
}
