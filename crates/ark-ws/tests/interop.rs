//! Interop with an independent client: Python's `websockets` library drives the echo server
//! (installed by `scripts/setup-test-deps.sh`, which `.ci/run` calls).

mod util;

use std::process::Command;
use std::time::Duration;

#[test]
fn python_websockets_client_talks_to_the_server() {
    let (server, echo) = util::echo_server(16 * 1024 * 1024);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop_client.py");
    let output = Command::new("python3")
        .arg(script)
        .arg(format!("ws://{}/", server.local_addr()))
        .output()
        .expect("python3 runs (scripts/setup-test-deps.sh installs websockets)");
    util::python_ok(&output);
    util::closed_by_python(&echo, Duration::from_secs(10));
    server.stop().wait().unwrap();
}

#[test]
fn a_server_stop_gives_a_python_websockets_client_close_code_1001() {
    let (server, _) = util::echo_server(1024 * 1024);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop_client.py");
    let client = Command::new("python3")
        .arg(script)
        .arg(format!("ws://{}/", server.local_addr()))
        .arg("wait-close")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/setup-test-deps.sh installs websockets)");
    assert!(ark_testkit::wait_until(Duration::from_secs(20), || {
        server.tcp_stats().sessions_open == 1
    }));
    // Wait for the upgrade too: the session is open once the echo server counts bytes out.
    assert!(ark_testkit::wait_until(Duration::from_secs(20), || {
        server.sessions().len() == 1
    }));
    server.stop().wait().unwrap();
    let output = client.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("closed 1001"), "{stdout}");
}
