//! `ark-bench pair`: one case with its server and its clients apart — the server in one
//! network namespace and the clients in another (`--server-ns`, `--client-ns`), or the server
//! started by a shell command (`--server-command`, e.g. through ssh on another host), or by
//! the user beforehand (neither). The server gets `--role server --bind ADDR`, the clients
//! `--role client --connect ADDR`; the clients' record is printed, so the runner treats the
//! pair like any other case.

use std::io::Read;
use std::process::{Child, Command, ExitCode, Stdio};

use crate::server_process::{stop, wait_listening};

/// The flags of `ark-bench pair`.
#[derive(clap::Args, Debug)]
pub(crate) struct PairArgs {
    /// The server's namespace.
    #[arg(long, conflicts_with = "server_command")]
    server_ns: Option<String>,
    /// A shell command that starts the server (its flags included) and keeps it in the
    /// foreground; stopped with SIGTERM when the clients are done.
    #[arg(long)]
    server_command: Option<String>,
    /// The clients' namespace (default: run them here).
    #[arg(long)]
    client_ns: Option<String>,
    /// Where the clients connect (and, in a namespace, where the server listens).
    #[arg(long)]
    address: String,
    /// The program and its flags (`--role`, `--bind` and `--connect` are added).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<String>,
}

/// `command... extra...`, inside namespace `ns` if given (`ip netns exec`).
fn in_namespace(ns: Option<&str>, command: &[String], extra: &[&str]) -> Command {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).args(command);
            c
        }
        None => {
            let mut c = Command::new(&command[0]);
            c.args(&command[1..]);
            c
        }
    };
    c.args(extra);
    c
}

/// The server's process, if this pair starts one.
fn server_command(args: &PairArgs) -> Option<Command> {
    if let Some(shell) = &args.server_command {
        let mut c = Command::new("sh");
        c.args(["-c", &format!("exec {shell}")]);
        return Some(c);
    }
    let ns = args.server_ns.as_deref()?;
    Some(in_namespace(
        Some(ns),
        &args.command,
        &["--role", "server", "--bind", &args.address],
    ))
}

/// Starts the server (if this pair starts one) and waits until it listens.
fn start_server(args: &PairArgs) -> Result<Option<Child>, String> {
    let Some(mut command) = server_command(args) else {
        return Ok(None);
    };
    let mut server = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the server: {e}"))?;
    if let Err(e) = wait_listening(&mut server) {
        let _ = server.kill();
        let _ = server.wait();
        return Err(e);
    }
    Ok(Some(server))
}

pub(crate) fn pair(args: &PairArgs) -> ExitCode {
    let server = match start_server(args) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("ark-bench pair: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = in_namespace(
        args.client_ns.as_deref(),
        &args.command,
        &["--role", "client", "--connect", &args.address],
    )
    .output();
    let mut server_record = None;
    if let Some(mut server) = server {
        let _ = stop(&mut server);
        if let Some(mut out) = server.stdout.take() {
            let mut report = String::new();
            let _ = out.read_to_string(&mut report);
            eprint!("server: {report}");
            server_record = ark_testkit::last_record(report.as_bytes())
                .as_object()
                .cloned();
        }
    }
    match client {
        Ok(out) => {
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8_lossy(&out.stdout);
            print!("{}", with_server(&stdout, server_record));
            if out.status.success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("ark-bench pair: cannot start the clients: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The clients' output with the server's record joined to theirs (its last line) as
/// `server`: its peak RSS at start and at the end, its CPU seconds, the sessions it cut.
fn with_server(
    clients: &str,
    server: Option<serde_json::Map<String, serde_json::Value>>,
) -> String {
    let (Some(server), Some((head, last))) = (server, split_last_line(clients)) else {
        return clients.to_string();
    };
    let Ok(serde_json::Value::Object(mut record)) = serde_json::from_str(last) else {
        return clients.to_string();
    };
    let keep = [
        "peak_rss_at_start_bytes",
        "peak_rss_bytes",
        "cpu_seconds",
        "server_sessions_cut",
        "syscalls",
    ];
    let server: serde_json::Map<_, _> = server
        .into_iter()
        .filter(|(k, _)| keep.contains(&k.as_str()))
        .collect();
    record.insert("server".into(), server.into());
    format!("{head}{}\n", serde_json::Value::Object(record))
}

/// `text` without its last non-empty line, and that line.
fn split_last_line(text: &str) -> Option<(&str, &str)> {
    let trimmed = text.trim_end();
    let start = trimmed.rfind('\n').map_or(0, |i| i + 1);
    let last = &trimmed[start..];
    (!last.is_empty()).then(|| (&text[..start], last))
}
