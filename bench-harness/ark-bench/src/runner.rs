//! Runs benchmark cases as fresh processes, repetition-major: every case of round 1, then
//! every case of round 2, ... so that drift over time touches all cases alike.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `flags` without the `--repetition N` the runner appends: for programs whose records the
/// harness labels itself (the loopback benchmarks).
pub fn without_repetition(mut flags: Vec<String>) -> Vec<String> {
    if let Some(i) = flags.iter().position(|f| f == "--repetition") {
        flags.drain(i..(i + 2).min(flags.len()));
    }
    flags
}

/// One case: a label for progress output, the program, its arguments and environment.
#[derive(Debug, Clone)]
pub struct Case {
    /// Human-readable case name.
    pub label: String,
    /// The benchmark program.
    pub program: PathBuf,
    /// Arguments passed to the binary (the runner appends `--repetition N`).
    pub args: Vec<String>,
    /// Variables set for the process (and so for what it starts), on top of the runner's
    /// environment; the command line names them first (`NAME=value program ...`).
    pub env: Vec<(String, String)>,
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

/// Runs `binary` with `args`, killing it after `timeout`; returns exit success, stdout and
/// stderr, or why it could not finish.
pub fn run_with_timeout(
    binary: &Path,
    args: &[String],
    timeout: Duration,
) -> Result<(bool, String, String), String> {
    run_with_env(binary, args, &[], timeout)
}

/// [`run_with_timeout`] with `env` set for the process.
pub fn run_with_env(
    binary: &Path,
    args: &[String],
    env: &[(String, String)],
    timeout: Duration,
) -> Result<(bool, String, String), String> {
    use std::io::Read;
    use std::process::Stdio;
    let mut command = Command::new(binary);
    command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A process group of its own, killed whole on timeout: an `ark-bench pair` case's server
    // is its child, and killing the pair alone left that server listening on the case's port
    // (the next implementation's server then failed with "Address already in use").
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => {
                kill_group(&mut child);
                break None;
            }
        }
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status {
        Some(status) => Ok((status.success(), out, err)),
        None => Err(format!("timed out after {timeout:?}")),
    }
}

/// How long a killed case's process group may take to be gone.
const GROUP_EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Kills `child` and everything in its process group (it leads one: see `run_with_env`),
/// and waits (up to [`GROUP_EXIT_TIMEOUT`]) until no process of the group is left: a server
/// with 10,000 connections takes a while to exit, and the next case must not start beside
/// it (nor find its port taken).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    let group = child.id() as libc::pid_t;
    #[cfg(unix)]
    // SAFETY: `kill` with the negated pid of a group leader this process started and a valid
    // signal number has no memory effects.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
    #[cfg(unix)]
    {
        let deadline = std::time::Instant::now() + GROUP_EXIT_TIMEOUT;
        // SAFETY: signal 0 only asks whether the group still has a process.
        while unsafe { libc::kill(-group, 0) } == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The order cases run in within `repetition` (from 1): list order, except that each run of
/// `group` consecutive cases (the implementations of one configuration) is rotated by
/// `repetition - 1`, so that no implementation always runs first (on a VM the first run of
/// a pair was measurably favoured). `group` 1 keeps list order.
pub fn order(cases: usize, group: usize, repetition: u32) -> Vec<usize> {
    let group = group.max(1);
    let sizes: Vec<usize> = (0..cases)
        .step_by(group)
        .map(|start| group.min(cases - start))
        .collect();
    order_groups(&sizes, repetition)
}

/// [`order`] with groups of their own sizes: `sizes` are the lengths of the consecutive
/// groups (a configuration run by only some implementations has a smaller group).
pub fn order_groups(sizes: &[usize], repetition: u32) -> Vec<usize> {
    let shift = (repetition.max(1) - 1) as usize;
    let mut order = Vec::new();
    for &size in sizes.iter().filter(|s| **s > 0) {
        let start = order.len();
        order.extend((0..size).map(|i| start + (i + shift) % size));
    }
    order
}

/// Runs `cases` × `repetitions` fresh processes, repetition-major (every case of round 1 in
/// [`order_groups`] of `groups`, the sizes of the consecutive groups, then round 2, ...),
/// calling `on_outcome` after each with its case; `on_outcome` returns `false` to stop the
/// run. Cases past the groups' sum (all of them for `&[]`) are groups of one: list order.
pub fn run_repetition_major(
    cases: &[Case],
    repetitions: u32,
    groups: &[usize],
    timeout: Duration,
    mut on_outcome: impl FnMut(&Case, &Outcome) -> bool,
) {
    let grouped: usize = groups.iter().sum();
    let mut sizes = groups.to_vec();
    sizes.extend(std::iter::repeat_n(1, cases.len().saturating_sub(grouped)));
    for repetition in 1..=repetitions {
        for case in order_groups(&sizes, repetition)
            .into_iter()
            .filter(|i| *i < cases.len())
            .map(|i| &cases[i])
        {
            let mut args = case.args.clone();
            args.push("--repetition".to_string());
            args.push(repetition.to_string());
            let binary = &case.program;
            let command_line = case
                .env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .chain(std::iter::once(binary.display().to_string()))
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ");
            let started = std::time::Instant::now();
            let result = match run_with_env(binary, &args, &case.env, timeout) {
                Err(e) => Err(e),
                Ok((success, stdout, stderr)) => {
                    let last = stdout.lines().rev().find(|l| !l.trim().is_empty());
                    match (success, last) {
                        (true, Some(line)) => Ok(line.to_string()),
                        (true, None) => Err("exited 0 but printed no record".to_string()),
                        // A failed run may still print its record (with ok: false): keep it.
                        (false, Some(line)) if line.trim_start().starts_with('{') => {
                            Ok(line.to_string())
                        }
                        (false, _) => Err(format!("failed: {}", stderr.trim())),
                    }
                }
            };
            let outcome = Outcome {
                repetition,
                command_line,
                result,
                elapsed: started.elapsed(),
            };
            if !on_outcome(case, &outcome) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_rotate_by_repetition_and_a_group_of_one_keeps_list_order() {
        assert_eq!(order(6, 3, 1), [0, 1, 2, 3, 4, 5]);
        assert_eq!(order(6, 3, 2), [1, 2, 0, 4, 5, 3]);
        assert_eq!(order(6, 3, 3), [2, 0, 1, 5, 3, 4]);
        assert_eq!(order(6, 3, 4), order(6, 3, 1));
        assert_eq!(order(4, 1, 2), [0, 1, 2, 3]);
        // A short last group rotates within itself.
        assert_eq!(order(5, 2, 2), [1, 0, 3, 2, 4]);
    }

    #[test]
    fn groups_of_their_own_sizes_rotate_within_themselves() {
        // A configuration of three implementations, then two run by one only.
        assert_eq!(order_groups(&[3, 1, 1], 1), [0, 1, 2, 3, 4]);
        assert_eq!(order_groups(&[3, 1, 1], 2), [1, 2, 0, 3, 4]);
        assert_eq!(order_groups(&[2, 0, 3], 2), [1, 0, 3, 4, 2]);
    }
}
