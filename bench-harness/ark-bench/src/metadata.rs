//! Machine and build metadata for a result set: what ran, where, from which tree.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The repository root: the directory above `bench-harness/` (where `results/` lives).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// Everything a reader needs to judge and reproduce a result set. Written as `metadata.json`
/// beside the records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    /// Which benchmark produced the set (`framing`, `loopback`, ...).
    pub benchmark: String,
    /// Short machine name used in the result-set directory (`xeon-2c`).
    pub machine: String,
    /// CPU model string from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Logical CPUs available to the process.
    pub logical_cpus: usize,
    /// Physical memory in bytes.
    pub memory_bytes: u64,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Operating system (`PRETTY_NAME` of `/etc/os-release`).
    pub os: String,
    /// `rustc -V` of the toolchain in force for the repository.
    pub rustc: String,
    /// Cargo profile the benchmark binary was built with.
    pub build_profile: String,
    /// `git rev-parse HEAD` of the repository.
    pub git_commit: String,
    /// Whether tracked or untracked source files differed from the commit (paths under
    /// `results/` are not source and are ignored).
    pub git_dirty: bool,
    /// The differing paths, as `git status --porcelain` lists them.
    pub git_dirty_paths: Vec<String>,
    /// Path of the benchmark binary.
    pub binary_path: String,
    /// SHA-256 of the benchmark binary.
    pub binary_sha256: String,
    /// When the run started, UTC, RFC 3339.
    pub started_utc: String,
    /// When the run finished, UTC, RFC 3339.
    pub finished_utc: Option<String>,
    /// The command line that started the run, then one line per case process.
    pub command_lines: Vec<String>,
    /// Benchmark-specific settings (warm-up, durations, ...).
    pub settings: serde_json::Value,
}

impl Metadata {
    /// Collects the metadata of this machine, the repository at `repo` and the running binary.
    pub fn collect(benchmark: &str, repo: &Path, settings: serde_json::Value) -> Metadata {
        let cpu_model = cpu_model();
        let logical_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let binary = std::env::current_exe().ok();
        let (git_dirty, git_dirty_paths) = git_dirty(repo);
        Metadata {
            benchmark: benchmark.to_string(),
            machine: machine_name(&cpu_model, logical_cpus),
            cpu_model,
            logical_cpus,
            memory_bytes: memory_bytes(),
            kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(unknown),
            os: os_name(),
            rustc: command_output(repo, "rustc", &["-V"]).unwrap_or_else(unknown),
            build_profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_string(),
            git_commit: command_output(repo, "git", &["rev-parse", "HEAD"]).unwrap_or_else(unknown),
            git_dirty,
            git_dirty_paths,
            binary_path: binary
                .as_ref()
                .map_or_else(unknown, |p| p.display().to_string()),
            binary_sha256: binary
                .as_deref()
                .and_then(|p| sha256_file(p).ok())
                .unwrap_or_else(unknown),
            started_utc: utc_now(),
            finished_utc: None,
            command_lines: vec![std::env::args().collect::<Vec<_>>().join(" ")],
            settings,
        }
    }
}

impl Metadata {
    /// The Markdown table rows (header included) that identify the machine, toolchain, source
    /// and binary of a result set; reports append their own rows after them.
    pub fn environment_rows(&self) -> String {
        format!(
            "| Item | Value |\n| --- | --- |\n\
             | Machine | {} ({}), {} logical CPUs, {:.1} GiB |\n\
             | OS / kernel | {} / {} |\n\
             | Toolchain | {}, {} profile |\n\
             | Source | commit {}{} |\n\
             | Binary | SHA-256 {} |\n",
            self.machine,
            self.cpu_model,
            self.logical_cpus,
            self.memory_bytes as f64 / (1u64 << 30) as f64,
            self.os,
            self.kernel,
            self.rustc,
            self.build_profile,
            self.git_commit,
            if self.git_dirty {
                " **with uncommitted changes**"
            } else {
                ", clean tree"
            },
            self.binary_sha256,
        )
    }
}

fn unknown() -> String {
    "unknown".to_string()
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(unknown)
}

fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

/// A short machine name from the CPU model and logical CPU count: `Intel(R) Xeon(R)
/// Processor` with 2 CPUs is `xeon-2c`, `AMD EPYC 7763 64-Core Processor` with 2 is `epyc-2c`.
pub fn machine_name(cpu_model: &str, logical_cpus: usize) -> String {
    const NOISE: [&str; 8] = [
        "intel",
        "amd",
        "cpu",
        "processor",
        "apple",
        "genuine",
        "qemu",
        "virtual",
    ];
    let family = cpu_model
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .find(|w| {
            !w.is_empty()
                && !NOISE.contains(&w.as_str())
                && !matches!(w.as_str(), "r" | "tm")
                && w.chars().any(|c| c.is_ascii_alphabetic())
        })
        .unwrap_or_else(|| "cpu".to_string());
    format!("{family}-{logical_cpus}c")
}

fn command_output(dir: &Path, program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether the source tree differs from HEAD, ignoring `results/`.
fn git_dirty(repo: &Path) -> (bool, Vec<String>) {
    match command_output(
        repo,
        "git",
        &["status", "--porcelain", "--", ".", ":(exclude)results"],
    ) {
        Some(status) => {
            let paths: Vec<String> = status.lines().map(|l| l.to_string()).collect();
            (!paths.is_empty(), paths)
        }
        // Not a git checkout: nothing proves the tree clean.
        None => (true, vec!["<not a git checkout>".to_string()]),
    }
}

/// SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The current UTC time as RFC 3339 (`2026-11-29T21:00:41Z`).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Today's UTC date as `YYYYMMDD`, for result-set directory names.
pub fn utc_date_compact() -> String {
    utc_now()[..10].replace('-', "")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_names() {
        assert_eq!(machine_name("Intel(R) Xeon(R) Processor", 2), "xeon-2c");
        assert_eq!(
            machine_name("AMD EPYC 7763 64-Core Processor", 2),
            "epyc-2c"
        );
        assert_eq!(machine_name("Apple M4 Pro", 14), "m4-14c");
        assert_eq!(machine_name("", 4), "cpu-4c");
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(utc_date_compact().len(), 8);
    }
}
