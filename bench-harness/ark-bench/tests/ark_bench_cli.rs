//! `ark-bench` end to end: a tiny matrix, a failed case kept with --keep-going, the report,
//! and compare.

use ark_bench::result_set::ResultSet;
use std::path::PathBuf;

mod common;
use common::{binary, binary_with_peers};

const TINY: &str = r#"
[[case]]
protocol = "tcp"
payload = 64
clients = 2
window = 2
io_model = "shared"
io_threads = 1

[[case]]
protocol = "udp"
payload = 64
clients = 2
window = 1
io_model = "sharded"
io_threads = 2

[[case]]
protocol = "websocket"
payload = 8
clients = 1
window = 1
io_model = "shared"
io_threads = 1
"#;

#[test]
fn a_tiny_matrix_runs_keeps_its_failure_and_reports() {
    let root = std::env::temp_dir().join(format!("ark-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let matrix = root.join("tiny.toml");
    std::fs::write(&matrix, TINY).unwrap();
    let out_dir: PathBuf = root.join("results").join("set-a");
    let run = binary()
        .args([
            "run",
            "--repetitions",
            "2",
            "--seconds",
            "0.1",
            "--warmup",
            "0.05",
            "--keep-going",
            "--matrix",
        ])
        .arg(&matrix)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(stderr.contains("[6/6]"), "progress lines: {stderr}");

    let lines: Vec<serde_json::Value> = ResultSet::open(&out_dir)
        .read_records("tiny.jsonl")
        .unwrap();
    assert_eq!(lines.len(), 6, "3 cases × 2 repetitions");
    assert_eq!(lines.iter().filter(|r| r["ok"] == true).count(), 4);
    let failed: Vec<_> = lines.iter().filter(|r| r["ok"] != true).collect();
    assert_eq!(
        failed.len(),
        2,
        "the impossible payload fails twice and is kept"
    );
    assert!(
        failed[0]["error"].as_str().unwrap().contains("--payload"),
        "{}",
        failed[0]
    );
    assert!(
        lines
            .iter()
            .all(|r| r["command_line"].as_str().unwrap().contains("loopback"))
    );
    assert_eq!(lines[0]["repetition"], 1);
    assert_eq!(lines[5]["repetition"], 2);
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("tiny.metadata.json")).unwrap())
            .unwrap();
    assert_eq!(
        metadata["settings"]["sources_sha256"]
            .as_str()
            .unwrap()
            .len(),
        64
    );

    let report = binary().arg("report").arg(&out_dir).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let text = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(text.contains("### tcp") && text.contains("### udp"));
    assert!(text.contains("### Failed runs") && text.contains("--payload"));

    // Without --keep-going the run stops at the failure.
    let stop = binary()
        .args([
            "run",
            "--repetitions",
            "1",
            "--seconds",
            "0.1",
            "--warmup",
            "0",
            "--matrix",
        ])
        .arg(&matrix)
        .arg("--out")
        .arg(root.join("results").join("set-b"))
        .output()
        .unwrap();
    assert!(!stop.status.success());

    let compare = binary()
        .arg("compare")
        .arg(&out_dir)
        .arg(root.join("results").join("set-b"))
        .output()
        .unwrap();
    assert!(
        compare.status.success(),
        "{}",
        String::from_utf8_lossy(&compare.stderr)
    );
    let table = String::from_utf8_lossy(&compare.stdout);
    assert!(table.contains("| tiny | tcp |"), "{table}");
    let _ = std::fs::remove_dir_all(&root);
}

const PEERS_MATRIX: &str = "[[case]]\nprotocol = \"tcp\"\npayload = 1024\nclients = 16\nwindow = 16\nio_model = \"shared\"\nio_threads = 1\n\n[[case]]\nprotocol = \"udp\"\npayload = 64\nclients = 2\nwindow = 1\nio_model = \"owned\"\nio_threads = 1\n";

#[test]
fn three_implementations_rotate_and_the_report_names_the_strongest_peer() {
    let root = std::env::temp_dir().join(format!("ark-bench-peers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let matrix = root.join("pair.toml");
    std::fs::write(&matrix, PEERS_MATRIX).unwrap();
    let out_dir = root.join("results").join("set");
    let run = binary_with_peers()
        .args(["run", "--repetitions", "2", "--seconds", "0.1"])
        .args(["--warmup", "0.05", "--implementations", "ark,tokio,raw"])
        .arg("--matrix")
        .arg(&matrix)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let records: Vec<serde_json::Value> = ResultSet::open(&out_dir)
        .read_records("pair.jsonl")
        .unwrap();
    let order: Vec<(&str, &str, u64)> = records
        .iter()
        .map(|r| {
            let implementation = r["implementation"].as_str().unwrap();
            (
                implementation,
                r["protocol"].as_str().unwrap(),
                r["repetition"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("ark", "tcp", 1),
        ("tokio", "tcp", 1),
        ("raw", "tcp", 1),
        ("ark", "udp", 1),
        ("tokio", "udp", 1),
        ("raw", "udp", 1),
        ("tokio", "tcp", 2),
        ("raw", "tcp", 2),
        ("ark", "tcp", 2),
        ("tokio", "udp", 2),
        ("raw", "udp", 2),
        ("ark", "udp", 2),
    ];
    assert_eq!(
        order, expected,
        "a case's implementations back to back, rotated per repetition"
    );
    assert!(records.iter().all(|r| r["ok"] == true), "{records:?}");
    // The owned case: the server and both clients on threads of their own.
    assert!(
        records
            .iter()
            .filter(|r| r["protocol"] == "udp")
            .all(|r| r["io_threads"] == 3)
    );
    assert!(
        records[2]["command_line"]
            .as_str()
            .unwrap()
            .contains("peer-raw-loopback")
    );
    let metadata = std::fs::read_to_string(out_dir.join("pair.metadata.json")).unwrap();
    assert!(metadata.contains("tokio_program_sha256") && metadata.contains("raw_program_sha256"));

    let report = binary().arg("report").arg(&out_dir).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let text = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        text.contains("### ark against the strongest peer: 1024 B, 16 clients"),
        "{text}"
    );
    // The headline row: shared 1 with the three medians, the strongest peer, its ratio and
    // the target verdict.
    let row = text
        .lines()
        .find(|l| l.starts_with("| tcp | 16 | shared 1 |"))
        .unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = row.split(" | ").collect();
    assert_eq!(cells[3].split(" / ").count(), 3, "{row}");
    assert!(["tokio", "raw"].contains(&cells[4]), "{row}");
    let ratio: f64 = cells[5].split(' ').next().unwrap().parse().unwrap();
    assert!(ratio > 0.0, "{row}");
    assert!(row.contains("≥ 1.15× tokio") && (row.contains("met") || row.contains("short")));
    assert!(
        text.contains("ark/tokio msg/s") && text.contains("ark/raw msg/s"),
        "{text}"
    );
    assert!(text.contains("owned 3"), "{text}");
    let chart = std::fs::read_to_string(out_dir.join("pair-tcp-throughput-by-io.svg")).unwrap();
    assert!(chart.contains("ark") && chart.contains("tokio") && chart.contains("raw"));

    let compare = binary()
        .arg("compare")
        .arg(&out_dir)
        .arg(&out_dir)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&compare.stdout);
    assert!(table.contains("| pair raw | tcp |"), "{table}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_run_against_another_host_starts_each_server_by_the_command_template() {
    // "Another host" is this one: the template starts the servers here, the traffic stays on
    // loopback. On two hosts the template would be `ssh -tt hostA .../{program} {flags}`.
    let root = std::env::temp_dir().join(format!("ark-bench-hosts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let matrix = root.join("hosts.toml");
    std::fs::write(&matrix, TINY.replace("payload = 8", "payload = 64")).unwrap();
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_ark-bench"))
        .parent()
        .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let connect = format!("127.0.0.1:{port}");
    let out_dir = root.join("set");
    let run = binary_with_peers()
        .args([
            "run",
            "--repetitions",
            "1",
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
        ])
        .args(["--implementations", "ark,tokio,raw", "--connect", &connect])
        .arg("--server-command")
        .arg(format!("{}/{{program}} {{flags}}", dir.display()))
        .arg("--matrix")
        .arg(&matrix)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let records: Vec<serde_json::Value> = ResultSet::open(&out_dir)
        .read_records("hosts.jsonl")
        .unwrap();
    assert_eq!(records.len(), 9, "3 cases × 3 implementations");
    for r in &records {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["server_and_clients_share_io_threads"], false, "{r}");
        assert_eq!(r["placement_topology"], "hosts", "{r}");
        assert_eq!(r["placement_server_address"], connect.as_str(), "{r}");
        assert!(
            r["placement_client_host"]
                .as_str()
                .is_some_and(|h| !h.is_empty())
        );
    }
    let metadata = std::fs::read_to_string(out_dir.join("hosts.metadata.json")).unwrap();
    assert!(metadata.contains("server_started_by") && metadata.contains("{program}"));
    let _ = std::fs::remove_dir_all(&root);
}

const WRK_MATRIX: &str = r#"
[[case]]
protocol = "http"
payload = 64
clients = 16
window = 1
io_model = "shared"
io_threads = 1
load_generator = "wrk"
"#;

#[test]
fn wrk_measures_the_http_servers_of_ark_and_hyper_and_the_report_holds_them_to_the_target() {
    // wrk comes from scripts/setup-test-deps.sh (Debian's package).
    let root = std::env::temp_dir().join(format!("ark-bench-wrk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let matrix = root.join("get.toml");
    std::fs::write(&matrix, WRK_MATRIX).unwrap();
    let out_dir = root.join("set");
    let run = binary_with_peers()
        .args([
            "run",
            "--repetitions",
            "1",
            "--seconds",
            "1",
            "--warmup",
            "0",
        ])
        .args(["--implementations", "ark,tokio", "--matrix"])
        .arg(&matrix)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let records: Vec<serde_json::Value> =
        ResultSet::open(&out_dir).read_records("get.jsonl").unwrap();
    assert_eq!(records.len(), 2, "{records:?}");
    for (r, implementation) in records.iter().zip(["ark", "tokio"]) {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["implementation"], implementation, "{r}");
        assert_eq!(r["load_generator"], "wrk", "{r}");
        assert!(r["wrk_version"].as_str().unwrap().contains("wrk"), "{r}");
        assert!(r["roundtrips"].as_u64().unwrap() > 100, "{r}");
        let p50 = r["rtt_p50_us"].as_u64().unwrap();
        let p99 = r["rtt_p99_us"].as_u64().unwrap();
        assert!(0 < p50 && p50 <= p99, "{r}");
        // Both servers answered the same page: status line, a few headers, 64 B.
        let size = r["bytes_per_response"].as_f64().unwrap();
        assert!((100.0..200.0).contains(&size), "{r}");
        assert_eq!(r["server"]["role"], "server", "{r}");
        assert!(
            r["command_line"].as_str().unwrap().contains(" wrk -- "),
            "{r}"
        );
    }
    let report = binary().arg("report").arg(&out_dir).output().unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let text = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let row = text
        .lines()
        .find(|l| l.starts_with("| http GET by wrk | 1 | shared 1 |"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("≥ 1.3× tokio"), "{row}");
    let _ = std::fs::remove_dir_all(&root);
}
