//! Runs benchmark cases as fresh processes, repetition-major: every case of round 1, then
//! every case of round 2, ... so that drift over time touches all cases alike.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// One case: a label for progress output and the arguments for the benchmark binary.
#[derive(Debug, Clone)]
pub struct Case {
    /// Human-readable case name.
    pub label: String,
    /// Arguments passed to the binary (the runner appends `--repetition N`).
    pub args: Vec<String>,
}

/// What one case process produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Repetition number, from 1.
    pub repetition: u32,
    /// The exact command line that ran.
    pub command_line: String,
    /// The last non-empty stdout line on success, or why the process failed.
    pub result: Result<String, String>,
    /// Wall time of the whole process.
    pub elapsed: Duration,
}

/// Runs `cases` × `repetitions` fresh processes of `binary`, repetition-major, calling
/// `on_outcome` after each with its case.
pub fn run_repetition_major(
    binary: &Path,
    cases: &[Case],
    repetitions: u32,
    mut on_outcome: impl FnMut(&Case, &Outcome),
) {
    for repetition in 1..=repetitions {
        for case in cases {
            let mut args = case.args.clone();
            args.push("--repetition".to_string());
            args.push(repetition.to_string());
            let command_line = std::iter::once(binary.display().to_string())
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            let started = std::time::Instant::now();
            let result = match Command::new(binary).args(&args).output() {
                Err(e) => Err(format!("could not start: {e}")),
                Ok(out) => {
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
                    match (out.status.success(), last) {
                        (true, Some(line)) => Ok(line.to_string()),
                        (true, None) => Err("exited 0 but printed no record".to_string()),
                        (false, _) => Err(format!(
                            "{}: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr).trim()
                        )),
                    }
                }
            };
            let outcome = Outcome {
                repetition,
                command_line,
                result,
                elapsed: started.elapsed(),
            };
            on_outcome(case, &outcome);
        }
    }
}
