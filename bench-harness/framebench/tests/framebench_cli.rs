//! End-to-end smoke test of `ark-framebench`: a tiny `run` in fresh processes, then `report`.

use std::path::PathBuf;
use std::process::Command;

use ark_bench::result_set::ResultSet;
use ark_framebench::framing::{DecoderKind, FramingRecord, SessionsRecord, StreamShape};

fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ark-framebench"))
}

#[test]
fn run_then_report_writes_a_complete_result_set() {
    let root = std::env::temp_dir().join(format!("ark-framebench-smoke-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let out = Command::new(binary())
        .args([
            "run",
            "--repetitions",
            "1",
            "--seconds",
            "0.003",
            "--warmup-batches",
            "3",
        ])
        .args(["--sessions", "50", "--results-dir"])
        .arg(&root)
        .output()
        .expect("run starts");
    assert!(
        out.status.success(),
        "run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string());
    assert!(
        dir.starts_with(&root),
        "set written under --results-dir: {dir:?}"
    );

    let set = ResultSet::open(&dir);
    let records: Vec<FramingRecord> = set.read_records("framing.jsonl").unwrap();
    // 7 seed rows × 3 decoders + 2 capacity rows × 3 capacities.
    assert_eq!(records.len(), 7 * 3 + 2 * 3);
    for r in &records {
        assert!(r.ok, "case failed: {r:?}");
        assert!(
            r.messages > 0 && r.msg_per_s > 0.0 && r.seconds >= 0.003,
            "{r:?}"
        );
        assert_eq!(r.messages % r.batch as u64, 0);
    }
    for shape in StreamShape::SEED_ROWS {
        for kind in DecoderKind::ALL {
            assert!(
                records
                    .iter()
                    .any(|r| r.table == "main" && r.decoder == kind && r.shape() == shape)
            );
        }
    }
    let ark_allocs: f64 = records
        .iter()
        .filter(|r| r.decoder == DecoderKind::Ark)
        .map(|r| r.allocations_per_message)
        .sum();
    assert_eq!(ark_allocs, 0.0, "ark allocates nothing per message");

    let sessions: Vec<SessionsRecord> = set.read_records("sessions.jsonl").unwrap();
    assert_eq!(sessions.len(), 9);
    let ark_fresh = sessions
        .iter()
        .find(|s| s.decoder == DecoderKind::Ark && s.state == "fresh")
        .unwrap();
    assert_eq!(ark_fresh.bytes, 0);

    let metadata = set.read_metadata().unwrap();
    assert_eq!(metadata.command_lines.len(), 1 + records.len() + 1);
    assert_eq!(metadata.binary_sha256.len(), 64);
    assert!(metadata.finished_utc.is_some());

    let docs = root.join("docs-page.md");
    let out = Command::new(binary())
        .arg("report")
        .arg(&dir)
        .arg("--docs-page")
        .arg(&docs)
        .output()
        .expect("report starts");
    assert!(
        out.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(dir.join("framing.md")).unwrap();
    assert!(page.contains("| 4096 | 1 | 1 |"), "seed rows in the table");
    assert!(page.contains("## Initial capacity"));
    assert!(page.contains("## Idle memory"));
    let svg = std::fs::read_to_string(dir.join("framing.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<rect"));
    assert!(
        std::fs::read_to_string(&docs)
            .unwrap()
            .contains("framing.md")
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_bad_case_exits_non_zero_with_a_reason() {
    let out = Command::new(binary())
        .args([
            "case",
            "--decoder",
            "ark",
            "--body",
            "64",
            "--block",
            "0",
            "--seconds",
            "0.001",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--block"));
}
