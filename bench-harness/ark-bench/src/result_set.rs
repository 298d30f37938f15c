//! A result set on disk: `results/<machine>-<date>/` with JSON-lines records and
//! `metadata.json`.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::metadata::{Metadata, utc_date_compact};

/// The directory of one result set.
#[derive(Debug, Clone)]
pub struct ResultSet {
    dir: PathBuf,
}

impl ResultSet {
    /// `root/<machine>-<YYYYMMDD>`, created if needed, for records in `records` (a file
    /// name such as `baseline.jsonl`) run from `commit`: several matrices of one day and one
    /// commit share the set, but a set that already holds `records`, or records of another
    /// commit, is never added to — the next such `<machine>-<YYYYMMDD>-2`, `-3`, ... is used
    /// instead.
    pub fn create(
        root: &Path,
        machine: &str,
        records: &str,
        commit: &str,
    ) -> std::io::Result<ResultSet> {
        let base = format!("{machine}-{}", utc_date_compact());
        let dir = (1..)
            .map(|n| match n {
                1 => root.join(&base),
                n => root.join(format!("{base}-{n}")),
            })
            .find(|dir| !dir.join(records).exists() && only_from(dir, commit))
            .expect("an unbounded range finds a free name");
        std::fs::create_dir_all(&dir)?;
        Ok(ResultSet { dir })
    }

    /// The set at `dir` (created if needed) for new records in `records`. A set that already
    /// holds `records` is refused: starting the records would truncate the evidence there.
    pub fn at(dir: &Path, records: &str) -> std::io::Result<ResultSet> {
        let existing = dir.join(records);
        if existing.exists() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists: a result set is never overwritten; choose a new directory",
                    existing.display()
                ),
            ));
        }
        std::fs::create_dir_all(dir)?;
        Ok(ResultSet::open(dir))
    }

    /// An existing result set.
    pub fn open(dir: &Path) -> ResultSet {
        ResultSet {
            dir: dir.to_path_buf(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts (or restarts) a JSON-lines file in the set, empty.
    pub fn start_records(&self, name: &str) -> std::io::Result<RecordWriter> {
        let path = self.dir.join(name);
        File::create(&path)?;
        Ok(RecordWriter { path })
    }

    /// Writes `metadata.json`.
    pub fn write_metadata(&self, metadata: &Metadata) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(metadata).map_err(std::io::Error::other)?;
        std::fs::write(self.dir.join("metadata.json"), json + "\n")
    }

    /// Reads `metadata.json`.
    pub fn read_metadata(&self) -> std::io::Result<Metadata> {
        let text = std::fs::read_to_string(self.dir.join("metadata.json"))?;
        serde_json::from_str(&text).map_err(std::io::Error::other)
    }

    /// Reads every record of a JSON-lines file in the set (an absent file reads as empty).
    pub fn read_records<T: DeserializeOwned>(&self, name: &str) -> std::io::Result<Vec<T>> {
        let path = self.dir.join(name);
        if !path.exists() {
            return Ok(Vec::new());
        }
        let mut records = Vec::new();
        for (n, line) in BufReader::new(File::open(&path)?).lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let record = serde_json::from_str(&line)
                .map_err(|e| std::io::Error::other(format!("{}:{}: {e}", path.display(), n + 1)))?;
            records.push(record);
        }
        Ok(records)
    }
}

/// Whether every run in `dir` (each `*.metadata.json`) was made from `commit`; an absent or
/// empty directory holds none.
fn only_from(dir: &Path, commit: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return true;
    };
    entries.flatten().all(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with("metadata.json") {
            return true;
        }
        let recorded = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|v| v["git_commit"].as_str().map(str::to_string));
        recorded.as_deref() == Some(commit)
    })
}

/// Appends records to one JSON-lines file, flushing each line (a run stopped midway keeps
/// every record written so far).
#[derive(Debug)]
pub struct RecordWriter {
    path: PathBuf,
}

impl RecordWriter {
    /// Appends one record as a line.
    pub fn append<T: Serialize>(&self, record: &T) -> std::io::Result<()> {
        let mut line = serde_json::to_string(record).map_err(std::io::Error::other)?;
        line.push('\n');
        OpenOptions::new()
            .append(true)
            .open(&self.path)?
            .write_all(line.as_bytes())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_of_a_matrix_gets_a_new_set_and_other_matrices_share_the_first() {
        let root = std::env::temp_dir().join(format!("result-set-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let first = ResultSet::create(&root, "m", "baseline.jsonl", "c1").unwrap();
        first.start_records("baseline.jsonl").unwrap();
        let other = ResultSet::create(&root, "m", "udp-limits.jsonl", "c1").unwrap();
        assert_eq!(
            other.dir(),
            first.dir(),
            "another matrix joins the day's set"
        );
        let second = ResultSet::create(&root, "m", "baseline.jsonl", "c1").unwrap();
        assert_eq!(
            second.dir().file_name().unwrap().to_string_lossy(),
            format!("{}-2", first.dir().file_name().unwrap().to_string_lossy())
        );
        second.start_records("baseline.jsonl").unwrap();
        let third = ResultSet::create(&root, "m", "baseline.jsonl", "c1").unwrap();
        assert!(third.dir().to_string_lossy().ends_with("-3"));
        let _ = std::fs::remove_dir_all(&root);
    }

    /// Regression: a second matrix of the day went into the day's first set although that
    /// set's records came from another commit.
    #[test]
    fn a_matrix_joins_only_a_set_of_its_own_commit() {
        let root = std::env::temp_dir().join(format!("result-set-commit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let first = ResultSet::create(&root, "m", "baseline.jsonl", "c1").unwrap();
        first.start_records("baseline.jsonl").unwrap();
        let meta = r#"{"git_commit": "c1"}"#;
        std::fs::write(first.dir().join("baseline.metadata.json"), meta).unwrap();
        let same = ResultSet::create(&root, "m", "rudp.jsonl", "c1").unwrap();
        assert_eq!(same.dir(), first.dir());
        let other = ResultSet::create(&root, "m", "rudp.jsonl", "c2").unwrap();
        assert!(other.dir().to_string_lossy().ends_with("-2"), "{other:?}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_named_set_that_holds_the_records_is_refused() {
        let root = std::env::temp_dir().join(format!("result-set-at-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dir = root.join("named");
        let set = ResultSet::at(&dir, "baseline.jsonl").unwrap();
        let records = set.start_records("baseline.jsonl").unwrap();
        records.append(&serde_json::json!({"case": 1})).unwrap();
        let refused = ResultSet::at(&dir, "baseline.jsonl").unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::AlreadyExists);
        let kept: Vec<serde_json::Value> = set.read_records("baseline.jsonl").unwrap();
        assert_eq!(
            kept.len(),
            1,
            "the refused run left the records as they were"
        );
        assert!(
            ResultSet::at(&dir, "udp-limits.jsonl").is_ok(),
            "another matrix may join"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
