//! `ark-bench run --topology netns`: one case per protocol for every implementation across two
//! network namespaces, and nothing left behind — after a run, and after Ctrl-C. Skips (with a
//! message) where namespaces cannot be created (not root, no iproute2).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ark_bench::netns::namespaces;
use ark_bench::result_set::ResultSet;

mod common;
use common::{binary, binary_with_peers};

const MATRIX: &str = r#"
[[case]]
protocol = "tcp"
payload = 1024
clients = 4
window = 4
io_model = "shared"
io_threads = 1

[[case]]
protocol = "udp"
payload = 1024
clients = 4
window = 1
io_model = "sharded"
io_threads = 2

[[case]]
protocol = "websocket"
payload = 1024
clients = 4
window = 4
io_model = "shared"
io_threads = 1
"#;

/// Whether this machine lets us make a namespace; says why not otherwise. `test` keeps the
/// probes of tests running at once apart (one name would make all but one skip).
fn namespaces_available(test: &str) -> bool {
    let probe = format!("ark-probe-{}-{test}", std::process::id());
    let made = Command::new("ip").args(["netns", "add", &probe]).output();
    match made {
        Ok(out) if out.status.success() => {
            let _ = Command::new("ip").args(["netns", "del", &probe]).output();
            true
        }
        Ok(out) => {
            eprintln!(
                "skipped: cannot create network namespaces here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("skipped: no `ip` command (iproute2): {e}");
            false
        }
    }
}

fn matrix_file(dir: &std::path::Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("netns.toml");
    std::fs::write(&path, MATRIX).unwrap();
    path
}

#[test]
fn every_protocol_and_implementation_runs_across_two_namespaces_and_leaves_nothing() {
    if !namespaces_available("all") {
        return;
    }
    let root = std::env::temp_dir().join(format!("ark-netns-{}", std::process::id()));
    let out_dir = root.join("set");
    let run = binary_with_peers()
        .args([
            "run",
            "--topology",
            "netns",
            "--mtu",
            "9000",
            "--repetitions",
            "1",
        ])
        .args([
            "--seconds",
            "0.2",
            "--warmup",
            "0.05",
            "--implementations",
            "ark,tokio,raw",
        ])
        .arg("--matrix")
        .arg(matrix_file(&root))
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Only this run's namespaces: the other tests here make and remove their own meanwhile.
    let own = format!("ark-{}-", run.id());
    let run = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let records: Vec<serde_json::Value> = ResultSet::open(&out_dir)
        .read_records("netns-netns9000.jsonl")
        .unwrap();
    assert_eq!(records.len(), 9, "3 protocols × ark, tokio, raw");
    for r in &records {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["server_and_clients_share_io_threads"], false, "{r}");
        let command = r["command_line"].as_str().unwrap();
        assert!(
            command.contains(" pair ") && command.contains("198.18.0.1:"),
            "{command}"
        );
    }
    let metadata: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("netns-netns9000.metadata.json")).unwrap(),
    )
    .unwrap();
    let topology = &metadata["settings"]["topology"];
    assert_eq!(topology["topology"], "netns");
    assert_eq!(topology["mtu"], 9000);
    assert!(namespaces(&own).is_empty(), "the namespaces are removed");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn ctrl_c_stops_the_run_and_removes_the_namespaces() {
    if !namespaces_available("int") {
        return;
    }
    let root = std::env::temp_dir().join(format!("ark-netns-int-{}", std::process::id()));
    let mut run = binary()
        .args(["run", "--topology", "netns", "--repetitions", "3"])
        .args(["--seconds", "1", "--warmup", "0.05"])
        .arg("--matrix")
        .arg(matrix_file(&root))
        .arg("--out")
        .arg(root.join("set"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let own = format!("ark-{}-", run.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    while namespaces(&own).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(namespaces(&own).len(), 2, "the run made its namespaces");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: `kill` with a child's pid and SIGINT has no memory effects.
    unsafe { libc::kill(run.id() as libc::pid_t, libc::SIGINT) };
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline + Duration::from_secs(20),
            "the run did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success(), "an interrupted run exits non-zero");
    assert!(namespaces(&own).is_empty(), "the namespaces are removed");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn fragmentation_starts_one_byte_past_the_links_limit_in_both_families() {
    if !namespaces_available("mtu") {
        return;
    }
    let root = std::env::temp_dir().join(format!("ark-netns-mtu-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let mut matrix = String::new();
    for (family, payload) in [
        ("ipv4", 1472),
        ("ipv4", 1473),
        ("ipv6", 1452),
        ("ipv6", 1453),
    ] {
        matrix.push_str(&format!(
            "[[case]]\nprotocol = \"udp\"\npayload = {payload}\nclients = 2\nwindow = 1\nio_model = \"shared\"\nio_threads = 1\naddress_family = \"{family}\"\n\n"
        ));
    }
    let path = root.join("edge.toml");
    std::fs::write(&path, matrix).unwrap();
    let out_dir = root.join("set");
    let run = binary()
        .args([
            "run",
            "--topology",
            "netns",
            "--mtu",
            "1500",
            "--repetitions",
            "1",
        ])
        .args(["--seconds", "0.2", "--warmup", "0.05", "--matrix"])
        .arg(&path)
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
        .read_records("edge-netns1500.jsonl")
        .unwrap();
    // read_records gives no records for a missing file: the count keeps that an error.
    assert_eq!(records.len(), 4, "4 cases, 1 repetition");
    for r in &records {
        assert_eq!(r["ok"], true, "{r}");
        let fragments = r["udp_kernel"]["frag_creates"].as_u64().unwrap();
        let limit = if r["address_family"] == "ipv6" {
            1452
        } else {
            1472
        };
        if r["payload_bytes"] == limit {
            assert_eq!(fragments, 0, "{r}");
        } else {
            assert!(fragments > 0, "one byte more is fragmented: {r}");
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
