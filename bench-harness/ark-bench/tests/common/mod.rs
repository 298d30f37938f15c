//! What the ark-bench tests share: the program under test, with the peers it may run.
#![allow(dead_code)]

use std::process::Command;

/// The `ark-bench` program of this package.
pub fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ark-bench"))
}

/// [`binary`] with the peers that `--implementations tokio,raw` runs built next to it: they are
/// programs of another package (`ark-peers`), which `cargo test -p ark-bench` does not build.
pub fn binary_with_peers() -> Command {
    for peer in ["peer-tokio-loopback", "peer-raw-loopback"] {
        ark_testkit::workspace_binary("ark-peers", peer);
    }
    binary()
}
