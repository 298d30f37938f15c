//! `ark-soak`: an on-demand soak test of ark's TCP, UDP, WebSocket, HTTP and reliable-UDP
//! servers.
//!
//! ```text
//! ark-soak run --minutes 10    # what scripts/soak.sh runs
//! ark-soak server              # started by `run` as its child
//! ```
//!
//! `run` starts `ark-soak server` as a child process (ark's five echo servers with default
//! settings on 127.0.0.1) and drives it for the given minutes from several threads with
//! blocking std sockets: well-behaved clients that check every echo byte for byte and in order
//! (short-lived ones that come and go, and long-lived ones), and bad actors mixed in all along
//! (half-close, stalled frame, flooder, oversized length, stalled WebSocket upgrade, WebSocket
//! ping flood, HTTP heads with mixed or bare line endings or a chunk extension over the cap,
//! a reliable-UDP forger on the path: a client through a relay socket that sees every
//! datagram and sends both ends, from the peer's address, forged packets, seen datagrams
//! changed in one byte and seen datagrams again (replays), and reliable-UDP zero-window peers: raw
//! sockets that handshake, acknowledge everything with a receive window of 0 and ping, which
//! the server must end at its zero-window deadline). Meanwhile it samples the child's VmRSS and open descriptors every second. At
//! the end it stops the clients, waits for the server to drain, closes the child's stdin (the
//! child stops its servers and prints their final stats) and prints one JSON summary line.
//! It fails (exit code 1, reasons on stderr) on any lost or wrong message, any well-behaved
//! client error, a stalled connection the server did not close, a descriptor leak, memory
//! growth, sessions or buffers left in the server, a forged or changed datagram not counted as
//! unauthenticated or a replay not counted as a replay (by the server and by the forger's
//! client, exactly), or a server that died.
//!
//! One more bad actor plays the server, in this process: a hostile HTTP origin called through
//! an `HttpAgent` (`agent.rs`, every client vector of issue 45 §1 round-robin). The run fails
//! if the agent delivers an answer on the wrong request, reads a vector wrong, does not count
//! it, or holds more than 64 KiB of an answer on a connection.

mod agent;
mod bad;
mod good;
mod http;
mod link;
mod monitor;
mod rudp;
mod rudp_zero;
mod run;
mod server;
mod shared;
mod tally;
mod verdict;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command line of `ark-soak`.
#[derive(Parser, Debug)]
#[command(
    name = "ark-soak",
    about = "Soak test of ark's TCP, UDP, WebSocket, HTTP and reliable-UDP servers under well-behaved and hostile clients"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The two modes.
#[derive(Subcommand, Debug)]
enum Command {
    /// Drive an `ark-soak server` child for some minutes and judge it (prints a JSON summary).
    Run(run::RunArgs),
    /// Run the five echo servers until stdin closes (addresses, then final stats, as JSON lines).
    Server,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Run(args) => run::run(&args),
        Command::Server => server::serve(),
    }
}
