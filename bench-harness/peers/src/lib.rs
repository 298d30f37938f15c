//! # ark-peers
//!
//! The programs `ark-bench` compares ark with: the same loopback benchmark, flags and record
//! as ark-loopback, on other stacks. `peer-tokio-loopback` runs on tokio (hyper for HTTP,
//! tokio-tungstenite, tokio-websockets or fastwebsockets for WebSocket, tokio-rustls for TLS),
//! `peer-raw-loopback` on raw syscalls (the floor), `peer-kcp-loopback` on KCP and
//! `peer-quinn-loopback` on QUIC (quinn; both reliable UDP).
//! This crate is the only one in the workspace that depends on those stacks.
//!
//! The library holds what the programs share: [`peer_io`] (receive buffers and
//! length-prefixed frames), [`peer_ws`] (the WebSocket handshake and frames the raw peer and
//! the tokio peer's TLS path speak by hand), [`peer_net`] (sockets and their buffers),
//! [`peer_runtime`] (the tokio runtimes of the tokio and QUIC peers) and [`peer_main`], every
//! peer's `main`.

#![warn(missing_docs, missing_debug_implementations)]

pub mod peer_io;
pub mod peer_net;
pub mod peer_runtime;
pub mod peer_ws;

use ark_bench::runner::without_repetition;

/// The whole `main` of a loopback peer program: ark-loopback's flags under the program's
/// `name` and `about` (with the runner's `--repetition N` dropped; a bad flag exits with 2),
/// then the run with `E`'s endpoints and the counting allocator's totals.
pub fn peer_main<E: ark_loopback::stack::Stack>(
    name: &'static str,
    about: &'static str,
) -> std::process::ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let command = ark_loopback::args::Args::command().name(name).about(about);
    let flags = without_repetition(std::env::args().collect());
    let args = match command
        .try_get_matches_from(flags)
        .and_then(|m| ark_loopback::args::Args::from_arg_matches(&m))
    {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    ark_loopback::run::main_for::<E>(&args, Some(ark_testkit::allocations))
}
