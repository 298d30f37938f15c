//! A case's server as a child process (`ark-bench pair` and `ark-bench wrk`): waiting until
//! it listens, and stopping it.

use std::io::{BufRead, BufReader};
use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a server may take to listen, and to stop once asked.
pub(crate) const SERVER_TIMEOUT: Duration = Duration::from_secs(10);

/// Waits until the server says it listens (a stderr line `... server on ADDR`); returns
/// `ADDR`. The server's stderr goes on to ours meanwhile and after.
pub(crate) fn wait_listening(server: &mut Child) -> Result<String, String> {
    let stderr = server.stderr.take().ok_or("no server stderr")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("server: {line}");
            if let Some((_, address)) = line.split_once(" server on ") {
                let _ = tx.send(address.trim().to_string());
            }
        }
    });
    rx.recv_timeout(SERVER_TIMEOUT)
        .map_err(|_| format!("the server did not listen within {SERVER_TIMEOUT:?}"))
}

/// Asks the server to stop (SIGTERM: it drains and reports); its exit status, or `None` when
/// it had to be killed past [`SERVER_TIMEOUT`].
pub(crate) fn stop(server: &mut Child) -> Option<ExitStatus> {
    // SAFETY: `kill` with a child's pid and a valid signal number has no memory effects.
    unsafe { libc::kill(server.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + SERVER_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = server.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = server.kill();
    let _ = server.wait();
    None
}
