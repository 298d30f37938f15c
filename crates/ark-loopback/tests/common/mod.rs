//! What the binary's tests share.

use std::process::Command;

use serde_json::Value;

/// The `ark-loopback` binary under test.
pub fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ark-loopback"))
}

/// Runs the binary with `args`: its exit code, its record (the last stdout line; `Null` if
/// none parses) and its stderr.
pub fn run(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = binary().args(args).output().expect("ark-loopback starts");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let record = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (
        out.status.code(),
        record,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}
