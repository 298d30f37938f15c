//! `ark-bench pair`: one case across two network namespaces — the program's server in one
//! (`--role server --bind ADDR`), its clients in the other (`--role client --connect ADDR`);
//! prints the clients' record, so the runner treats it like any other case.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the server may take to listen, and to stop after the clients are done.
const SERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// The flags of `ark-bench pair`.
#[derive(clap::Args, Debug)]
pub(crate) struct PairArgs {
    /// The server's namespace.
    #[arg(long)]
    server_ns: String,
    /// The clients' namespace.
    #[arg(long)]
    client_ns: String,
    /// Where the server listens (an address of the server's namespace) and the clients connect.
    #[arg(long)]
    address: String,
    /// The program and its flags (`--role`, `--bind` and `--connect` are added).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<String>,
}

/// `ip netns exec NS command... extra...`.
fn in_namespace(ns: &str, command: &[String], extra: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(command).args(extra);
    c
}

/// Waits until the server says it listens (a stderr line with " server on "); passes its
/// stderr on to ours meanwhile and after.
fn wait_listening(server: &mut Child) -> Result<(), String> {
    let stderr = server.stderr.take().ok_or("no server stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("server: {line}");
            if line.contains(" server on ") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(SERVER_TIMEOUT)
        .map_err(|_| format!("the server did not listen within {SERVER_TIMEOUT:?}"))
}

/// Asks the server to stop (SIGTERM: it drains and reports), kills it past the timeout.
fn stop(server: &mut Child) {
    // SAFETY: `kill` with a child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = std::time::Instant::now() + SERVER_TIMEOUT;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = server.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = server.kill();
    let _ = server.wait();
}

pub(crate) fn pair(args: &PairArgs) -> ExitCode {
    let mut server = match in_namespace(
        &args.server_ns,
        &args.command,
        &["--role", "server", "--bind", &args.address],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    {
        Ok(server) => server,
        Err(e) => {
            eprintln!("ark-bench pair: cannot start the server: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = wait_listening(&mut server) {
        eprintln!("ark-bench pair: {e}");
        let _ = server.kill();
        let _ = server.wait();
        return ExitCode::FAILURE;
    }
    let client = in_namespace(
        &args.client_ns,
        &args.command,
        &["--role", "client", "--connect", &args.address],
    )
    .output();
    stop(&mut server);
    if let Some(mut out) = server.stdout.take() {
        let mut report = String::new();
        let _ = out.read_to_string(&mut report);
        eprint!("server: {report}");
    }
    match client {
        Ok(out) => {
            eprint!("{}", String::from_utf8_lossy(&out.stderr));
            print!("{}", String::from_utf8_lossy(&out.stdout));
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
