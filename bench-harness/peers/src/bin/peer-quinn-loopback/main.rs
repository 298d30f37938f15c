//! `peer-quinn-loopback`: the loopback echo benchmark on QUIC (quinn, on tokio), the peer
//! ark's reliable UDP (`--protocol rudp`) is compared with beside KCP.
//!
//! ```text
//! peer-quinn-loopback --protocol rudp --payload 65536 --clients 1 --window 8
//! PEER_QUINN_MODE=one-stream peer-quinn-loopback --protocol rudp --link-loss 0.01 ...
//! ```
//!
//! It takes `ark-loopback`'s flags and prints the same JSON record: the run (phases,
//! messages, validation, round-trip timing, the `--link-*` relay, record) is
//! `ark_loopback::run::measure`, shared with ark; only the stack differs. The relay, when
//! asked for, sits between the clients and the server: the clients are handed its address
//! and the server never knows. Only `--protocol rudp` runs (anything else is refused as
//! unsupported); `--rudp-fec` is ignored: QUIC has no FEC (the record's `rudp.fec` is null).
//!
//! * Modes (`PEER_QUINN_MODE`; the record's `implementation` says which):
//!   `stream-per-message` (default, `quinn`) makes every message a bidirectional stream of its
//!   own: the client opens it, writes the payload and finishes; the server reads it to its
//!   end, echoes it on the same stream and finishes. QUIC streams are independent, so the
//!   echoes of a window can come back in any order; the client hands them to `Core` in the
//!   order the messages were sent (a `FuturesOrdered` of round trips), which is what ark's
//!   ordered messages give and what `Core` checks. `one-stream` (`quinn-stream`) gives each
//!   client one bidirectional stream carrying messages behind a 4-byte big-endian length; the
//!   server echoes them in order, every read's echoes in one write.
//! * Tuned as hard as ark is: flow-control windows twice what a client keeps in flight
//!   (`--window` × (`--payload` + 4)), at least quinn's defaults (stream 1.25 MB, send buffer
//!   10 MB), the connection's receive window unlimited (quinn's default); stream credit
//!   (`max_concurrent_bidi_streams`) of four windows, at least quinn's 100, so opening a
//!   stream never waits for credit; quinn's own congestion control (Cubic, its default),
//!   MTU discovery on (from 1200 bytes up to what the path takes), quinn-udp's GSO and GRO
//!   on, as they are by default. Every connection gets the same settings at both ends
//!   ([`mode::Config`]).
//! * TLS ([`tls`]): QUIC always encrypts. A throwaway CA and server certificate are made in
//!   memory per run (`ark_tls::Pki`), or read from `--certs DIR` (arknet's `server.pem`,
//!   `server-key.pem`, `ca.pem`: a server and its clients in two processes, `--role server`
//!   and `--role client`, must share them, or the clients refuse the server); rustls with the workspace's provider, `ring` (TLS 1.3,
//!   as QUIC requires; AES-128-GCM is negotiated first, as for ark's tcps), the clients
//!   verifying the server's certificate.
//! * Runtimes (`ark_peers::peer_runtime`), as the tokio peer's: `--io-model shared
//!   --io-threads 1` (the matrix's) is a current-thread runtime running the server and every
//!   client; `shared N` a multi-thread runtime of N workers; `sharded N` N current-thread
//!   runtimes, clients round-robin over them, each with a server endpoint on a
//!   `SO_REUSEPORT` socket; `owned` a current-thread runtime per endpoint. Sockets are made as
//!   the other peers make them (socket2, the flags' buffer sizes) and handed to quinn.
//! * Server ([`server`]): one endpoint (per shard), a task per connection, in it every
//!   stream the client opens echoed concurrently (`FuturesUnordered`), each message handed
//!   to `Echo::before_echo` first.
//! * Clients ([`client`]): an endpoint and a connection each; `ark_loopback::clients::Core`
//!   fills, checks (content and exact order) and times every message, as for ark. A
//!   connection or stream error ends that client and is counted as a disconnect
//!   ([`error::SessionError`]); nothing on the network path unwraps.
//!
//! The record's `rudp` object says the mode, quinn's version, the congestion controller and
//! the settings (`quinn`), and quinn's own counters summed over the clients' connections
//! (`Connection::stats`, warm-up to drain; the server's side under `server`): UDP datagrams,
//! bytes and IO calls each way, QUIC packets sent and lost, congestion events, the path MTU
//! discovery found. The client side's bytes sent and received over the payload bytes
//! delivered are the wire bytes per delivered byte when no relay counts them.
//! `syscalls_per_message` is not measured (null): quinn counts its IO calls but not those that
//! found nothing.

mod client;
mod error;
mod mode;
mod server;
mod stack;
mod stats;
mod tls;

use std::process::ExitCode;

use ark_testkit::CountingAllocator;
use stack::QuinnStack;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The program's name in its help and errors.
const NAME: &str = "peer-quinn-loopback";

/// Its one-line help.
const ABOUT: &str = "Loopback echo benchmark on QUIC (quinn) for --protocol rudp (ark-loopback's flags and record; PEER_QUINN_MODE=stream-per-message|one-stream)";

/// Runs the mode `PEER_QUINN_MODE` names (exit 2 for an unknown one).
fn main() -> ExitCode {
    match std::env::var("PEER_QUINN_MODE").as_deref() {
        Ok("stream-per-message") | Err(std::env::VarError::NotPresent) => {
            ark_peers::peer_main::<QuinnStack<mode::StreamPerMessage>>(NAME, ABOUT)
        }
        Ok("one-stream") => ark_peers::peer_main::<QuinnStack<mode::OneStream>>(NAME, ABOUT),
        Ok(other) => {
            eprintln!(
                "error: PEER_QUINN_MODE={other:?}: expected stream-per-message or one-stream"
            );
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: PEER_QUINN_MODE: {e}");
            ExitCode::from(2)
        }
    }
}
