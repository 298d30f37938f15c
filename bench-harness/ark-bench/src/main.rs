//! `ark-bench`: runs ark-loopback over a matrix as fresh processes, writes result sets, renders
//! reports and compares sets.
//!
//! ```text
//! ark-bench run --matrix baseline --repetitions 3 --seconds 1 --warmup 0.25 --implementations ark,tokio,raw
//! ark-bench report results/<machine>-<date>
//! ark-bench compare results/<a> results/<b>
//! ```
//!
//! Each case runs `ark-bench loopback <flags>`: the ark-loopback program (the same library
//! code as the `ark-loopback` binary) in a fresh process of this binary; with
//! `--implementations ark,tokio,raw` every case also runs `peer-tokio-loopback <flags>` and
//! `peer-raw-loopback <flags>` (built next to this binary), one after the other within each
//! repetition, the order rotated from one repetition to the next, and the report gives the
//! ratios ark/tokio and ark/raw. For reliable UDP (`--matrix rudp`), `--implementations
//! ark,kcp-fast,kcp-default` adds `peer-kcp-loopback` in KCP's two modes
//! (`PEER_KCP_MODE=fast|default`); KCP has no FEC, so it runs only the cases without FEC.
//! `quinn,quinn-stream` adds `peer-quinn-loopback`, QUIC in its two modes
//! (`PEER_QUINN_MODE=stream-per-message|one-stream`), on every rudp case (FEC is ark's own:
//! quinn runs the same with or without it).

mod pair;
mod report;
mod server_process;
mod wrk;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ark_bench::matrix::{LoopbackCase, builtin, from_toml};
use ark_bench::metadata::{Metadata, repo_root, sha256_file};
use ark_bench::netns;
use ark_bench::result_set::{RecordWriter, ResultSet};
use ark_bench::runner::{Case, Outcome, run_repetition_major, without_repetition};
use ark_loopback::stack::ArkStack;
use ark_testkit::CountingAllocator;
use clap::{Parser, Subcommand};
use sha2::{Digest, Sha256};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[derive(Parser, Debug)]
#[command(
    name = "ark-bench",
    about = "Loopback benchmark matrices, result sets, reports and comparisons"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a matrix: every case in a fresh process, repetition-major.
    Run(RunArgs),
    /// Render DIR/report.md and its charts.
    Report {
        /// The result-set directory.
        dir: PathBuf,
    },
    /// Compare matching cases of two result sets.
    Compare {
        /// Set A (before).
        a: PathBuf,
        /// Set B (after).
        b: PathBuf,
    },
    /// Run one case across two network namespaces (used by `run --topology netns`).
    Pair(pair::PairArgs),
    /// Run one HTTP case's server under wrk (used by `run` for `load_generator = "wrk"`).
    Wrk(wrk::WrkArgs),
    /// Run one ark-loopback case in this process (used by `run`; same flags as ark-loopback).
    Loopback {
        /// ark-loopback flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        flags: Vec<String>,
    },
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// baseline, dimensions, udp-limits, mtu, tls, http, rudp, or a TOML file of `[[case]]`
    /// tables.
    #[arg(long)]
    matrix: String,
    /// Repetitions of every case.
    #[arg(long, default_value_t = 3)]
    repetitions: u32,
    /// Measured seconds per case.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Warm-up seconds per case.
    #[arg(long, default_value_t = 0.25)]
    warmup: f64,
    /// Output directory (default results/<machine>-<date>); one that already holds this
    /// matrix's records is refused.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep running after a failed case (default: stop at the first failure).
    #[arg(long)]
    keep_going: bool,
    /// Seconds before a case process is killed.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Implementations to run for every case, one after the other within each repetition
    /// (the order rotated per repetition): `ark` (`ark-bench loopback`), `tokio`
    /// (`peer-tokio-loopback`), `raw` (`peer-raw-loopback`), `kcp-fast` and `kcp-default`
    /// (`peer-kcp-loopback` with `PEER_KCP_MODE=fast` or `default`), `quinn` and
    /// `quinn-stream` (`peer-quinn-loopback` with `PEER_QUINN_MODE=stream-per-message` or
    /// `one-stream`), the peers built next to ark-bench; `ark-portable`, ark on the portable
    /// IO path (`--ark-portable`); `ark-no-offload`, ark without GSO/GRO (udp and rudp);
    /// `ark-plaintext`, ark's rudp unencrypted (`--rudp-encryption off`).
    /// Each runs the cases it can: tokio and raw all but rudp, KCP the rudp cases without FEC
    /// (`rudp_fec` `off` or not given), quinn every rudp case.
    #[arg(long, value_delimiter = ',', default_value = "ark")]
    implementations: Vec<Implementation>,
    /// The portable build of ark-bench that `ark-portable` runs (default: `portable/release/
    /// ark-bench` beside this binary's target directory, i.e. target/portable/release/ark-bench
    /// for target/release/ark-bench).
    #[arg(long)]
    ark_portable: Option<PathBuf>,
    /// Where the traffic goes: `loopback` (server and clients in one process), or `netns`
    /// (two network namespaces joined by a veth pair, the server in one and the clients in
    /// the other; needs root; removed on exit, failure and Ctrl-C).
    #[arg(long, value_enum, default_value_t = Topology::Loopback)]
    topology: Topology,
    /// Run only the clients of each case, here, against a server at HOST:PORT on another
    /// host (started by the user for one protocol, or per case by `--server-command`).
    #[arg(long, conflicts_with = "topology")]
    connect: Option<String>,
    /// With `--connect`: a shell command that starts each case's server, e.g. `ssh -tt hostA
    /// /opt/ark/target/release/{program} {flags}`. `{program}` becomes `ark-bench loopback`,
    /// `peer-tokio-loopback`, `peer-raw-loopback`, `peer-kcp-loopback` or
    /// `peer-quinn-loopback`; `{env}` the program's environment (`PEER_KCP_MODE=fast` or
    /// `=default` for KCP, `PEER_QUINN_MODE=...` for quinn, else nothing: write `ssh hostA env
    /// {env} .../{program} {flags}` to run KCP or quinn through ssh; a local command
    /// inherits it anyway); `{flags}` the case's flags with
    /// `--role server --bind` the unspecified address and the port of `--connect`.
    #[arg(long, requires = "connect")]
    server_command: Option<String>,
    /// The veth's MTU with `--topology netns`.
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u32).range(68..=65535))]
    mtu: u32,
}

/// Where a run's traffic goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Topology {
    /// One process, loopback.
    Loopback,
    /// Two processes on loopback: the server (`--role server`) and the clients (`--role
    /// client`), each with its own threads and its own record of memory and CPU (the
    /// server's joins the clients' record as `server`).
    Processes,
    /// Two network namespaces and a veth pair.
    Netns,
}

/// An implementation the harness can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Implementation {
    /// ark-loopback's code, run as `ark-bench loopback <flags>`.
    Ark,
    /// The same on the portable IO path (what macOS, Windows and the BSDs run): a build of
    /// ark-bench with `--cfg ark_portable`, run as `<that build> loopback <flags>` (see
    /// `--ark-portable`).
    ArkPortable,
    /// ark's udp and rudp with the kernel's datagram offloads off (no GSO trains, no GRO),
    /// `ark-bench loopback --udp-offload off <flags>`: what GSO/GRO bring, in the same run.
    #[value(name = "ark-no-offload")]
    ArkNoOffload,
    /// ark's rudp in plaintext (session tokens, no AEAD), `ark-bench loopback
    /// --rudp-encryption off <flags>`: what encryption costs, in the same run.
    #[value(name = "ark-plaintext")]
    ArkPlaintext,
    /// The tokio peer, `peer-tokio-loopback <flags>`.
    Tokio,
    /// The tokio peer sized for many connections: 4 KiB buffers per connection that grow
    /// when a message needs it (`PEER_TOKIO_BUF=4096 peer-tokio-loopback <flags>`).
    #[value(name = "tokio-4k")]
    Tokio4k,
    /// The tokio peer's WebSocket on tokio-tungstenite (websocket only),
    /// `PEER_TOKIO_WS=tungstenite peer-tokio-loopback <flags>`.
    #[value(name = "tokio-tungstenite")]
    TokioTungstenite,
    /// The tokio peer's WebSocket on fastwebsockets (websocket only),
    /// `PEER_TOKIO_WS=fastwebsockets peer-tokio-loopback <flags>`.
    Fastwebsockets,
    /// The raw-syscall floor, `peer-raw-loopback <flags>`.
    Raw,
    /// KCP's fast mode (rudp), `PEER_KCP_MODE=fast peer-kcp-loopback <flags>`.
    KcpFast,
    /// KCP's default mode (rudp), `PEER_KCP_MODE=default peer-kcp-loopback <flags>`.
    KcpDefault,
    /// QUIC (rudp), a stream per message,
    /// `PEER_QUINN_MODE=stream-per-message peer-quinn-loopback <flags>`.
    Quinn,
    /// QUIC (rudp), one length-prefixed stream per client,
    /// `PEER_QUINN_MODE=one-stream peer-quinn-loopback <flags>`.
    QuinnStream,
}

impl Implementation {
    fn name(self) -> &'static str {
        match self {
            Implementation::Ark => "ark",
            Implementation::ArkPortable => "ark-portable",
            Implementation::ArkNoOffload => "ark-no-offload",
            Implementation::ArkPlaintext => "ark-plaintext",
            Implementation::Tokio => "tokio",
            Implementation::Tokio4k => "tokio-4k",
            Implementation::TokioTungstenite => "tokio-tungstenite",
            Implementation::Fastwebsockets => "fastwebsockets",
            Implementation::Raw => "raw",
            Implementation::KcpFast => "kcp-fast",
            Implementation::KcpDefault => "kcp-default",
            Implementation::Quinn => "quinn",
            Implementation::QuinnStream => "quinn-stream",
        }
    }

    /// The peer program's name (`None`: ark, which is `ark-bench loopback`, on either path).
    fn peer(self) -> Option<&'static str> {
        match self {
            Implementation::Ark
            | Implementation::ArkPortable
            | Implementation::ArkNoOffload
            | Implementation::ArkPlaintext => None,
            Implementation::Tokio
            | Implementation::Tokio4k
            | Implementation::TokioTungstenite
            | Implementation::Fastwebsockets => Some("peer-tokio-loopback"),
            Implementation::Raw => Some("peer-raw-loopback"),
            Implementation::KcpFast | Implementation::KcpDefault => Some("peer-kcp-loopback"),
            Implementation::Quinn | Implementation::QuinnStream => Some("peer-quinn-loopback"),
        }
    }

    /// The environment the program needs: KCP's or quinn's mode, the tokio peer's buffers.
    fn env(self) -> Vec<(String, String)> {
        let (name, value) = match self {
            Implementation::KcpFast => ("PEER_KCP_MODE", "fast"),
            Implementation::KcpDefault => ("PEER_KCP_MODE", "default"),
            Implementation::Quinn => ("PEER_QUINN_MODE", "stream-per-message"),
            Implementation::QuinnStream => ("PEER_QUINN_MODE", "one-stream"),
            Implementation::Tokio4k => ("PEER_TOKIO_BUF", "4096"),
            Implementation::TokioTungstenite => ("PEER_TOKIO_WS", "tungstenite"),
            Implementation::Fastwebsockets => ("PEER_TOKIO_WS", "fastwebsockets"),
            _ => return Vec::new(),
        };
        vec![(name.to_string(), value.to_string())]
    }

    /// Whether this implementation runs `case`. The tokio and raw peers have no reliable UDP;
    /// KCP is reliable UDP only, and has no FEC: it runs the rudp cases without
    /// (`rudp_fec` `off` or not given), once per link setting, beside ark's ARQ. quinn is
    /// reliable UDP only too, and runs every rudp case: FEC is ark's own, and quinn, which
    /// ignores `--rudp-fec`, is measured beside each of ark's FEC modes.
    fn runs(self, case: &LoopbackCase) -> bool {
        let rudp = case.protocol == "rudp";
        match self {
            Implementation::Ark | Implementation::ArkPortable => true,
            Implementation::ArkNoOffload => rudp || case.protocol == "udp",
            Implementation::ArkPlaintext => rudp,
            Implementation::Tokio | Implementation::Tokio4k => !rudp && !case.ark_only(),
            // WebSocket libraries: plain ws only.
            Implementation::TokioTungstenite | Implementation::Fastwebsockets => {
                case.protocol == "websocket" && !case.ark_only()
            }
            // The floor on raw syscalls has no TLS and no HTTP (hyper is the HTTP peer).
            Implementation::Raw => {
                !rudp
                    && !case.ark_only()
                    && !matches!(case.protocol.as_str(), "tcps" | "wss" | "http" | "https")
            }
            Implementation::KcpFast | Implementation::KcpDefault => rudp && !case.asks_for_fec(),
            Implementation::Quinn | Implementation::QuinnStream => rudp,
        }
    }

    /// The program and the arguments before the case's flags; `ark_portable` is the
    /// portable build of ark-bench.
    fn program(
        self,
        ark_bench: &Path,
        ark_portable: &Path,
    ) -> Result<(PathBuf, Vec<String>), String> {
        if self == Implementation::ArkPortable {
            return if ark_portable.is_file() {
                Ok((ark_portable.to_path_buf(), vec!["loopback".to_string()]))
            } else {
                Err(format!(
                    "{} not found: build it with `RUSTFLAGS=\"--cfg ark_portable\" CARGO_TARGET_DIR=target/portable cargo build --release -p ark-bench`, or name it with --ark-portable",
                    ark_portable.display()
                ))
            };
        }
        if self == Implementation::ArkNoOffload {
            let args = ["loopback", "--udp-offload", "off"].map(String::from);
            return Ok((ark_bench.to_path_buf(), args.to_vec()));
        }
        if self == Implementation::ArkPlaintext {
            let args = ["loopback", "--rudp-encryption", "off"].map(String::from);
            return Ok((ark_bench.to_path_buf(), args.to_vec()));
        }
        match self.peer() {
            None => Ok((ark_bench.to_path_buf(), vec!["loopback".to_string()])),
            Some(peer) => {
                let peer = ark_bench.with_file_name(peer);
                if peer.is_file() {
                    Ok((peer, Vec::new()))
                } else {
                    Err(format!(
                        "{} not found: build it with `cargo build --release -p ark-peers`",
                        peer.display()
                    ))
                }
            }
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(&args),
        Command::Report { dir } => report::render(&dir),
        Command::Compare { a, b } => report::compare(&a, &b).map(|table| println!("{table}")),
        Command::Loopback { flags } => return loopback(flags),
        Command::Pair(args) => return pair::pair(&args),
        Command::Wrk(args) => return wrk::wrk(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ark-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn loopback(flags: Vec<String>) -> ExitCode {
    // The runner appends `--repetition N` for the record; ark-loopback has no such flag.
    let args = match ark_loopback::args::Args::try_parse_from(
        std::iter::once("ark-loopback".to_string()).chain(without_repetition(flags)),
    ) {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    ark_loopback::run::main_for::<ArkStack>(&args, Some(ark_testkit::allocations))
}

/// SHA-256 over the sources under `crates/` and `bench-harness/` (sorted paths, then content).
fn sources_sha256(root: &Path) -> String {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, files);
            } else if path
                .extension()
                .is_some_and(|e| e == "rs" || e == "toml" || e == "py")
            {
                files.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root.join("crates"), &mut files);
    walk(&root.join("bench-harness"), &mut files);
    files.sort();
    let mut hash = Sha256::new();
    for file in files {
        hash.update(
            file.strip_prefix(root)
                .unwrap_or(&file)
                .to_string_lossy()
                .as_bytes(),
        );
        hash.update(std::fs::read(&file).unwrap_or_default());
    }
    hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn run(args: &RunArgs) -> Result<(), String> {
    let (name, cases) = matrix(args)?;
    let binary = std::env::current_exe().map_err(|e| e.to_string())?;
    let implementations = distinct(&args.implementations);
    if args.connect.is_some() && implementations.contains(&Implementation::ArkPortable) {
        return Err("--implementations ark-portable runs on loopback or across namespaces, not with --connect (the remote server would be the Linux path's)".into());
    }
    let programs = implementations
        .iter()
        .map(|i| i.program(&binary, &ark_portable_binary(args, &binary)))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(template) = &args.server_command
        && !template.contains("{env}")
        && implementations.iter().any(|i| !i.env().is_empty())
    {
        eprintln!(
            "warning: --server-command has no {{env}}: PEER_KCP_MODE and PEER_QUINN_MODE reach the server only if the command passes its environment on (ssh does not)"
        );
    }
    let root = repo_root();
    // Held to the end of the run: dropping it removes the namespaces.
    let topology = match args.topology {
        Topology::Loopback | Topology::Processes => None,
        Topology::Netns => {
            let topology = netns::Topology::create(args.mtu).map_err(|e| e.to_string())?;
            ark_loopback::signals::install().map_err(|e| e.to_string())?;
            Some(topology)
        }
    };
    let placement = placement(args, topology.as_ref());
    let per_implementation = runs_per_implementation(&cases, &implementations)?;
    let run = RunDescription {
        name: &name,
        cases: cases.len(),
        implementations: &implementations,
        placement: placement.as_ref(),
        per_implementation: &per_implementation,
    };
    let mut metadata = Metadata::collect("loopback", &root, settings(args, run, &root));
    if metadata.git_dirty {
        eprintln!(
            "warning: the source tree differs from {}: this set is not evidence",
            metadata.git_commit
        );
    }
    let set = match &args.out {
        Some(dir) => ResultSet::at(dir, &format!("{name}.jsonl")).map_err(|e| e.to_string())?,
        None => ResultSet::create(
            &root.join("results"),
            &metadata.machine,
            &format!("{name}.jsonl"),
            &metadata.git_commit,
        )
        .map_err(|e| e.to_string())?,
    };
    let records = set
        .start_records(&format!("{name}.jsonl"))
        .map_err(|e| e.to_string())?;
    let plan = plan(
        args,
        &cases,
        &implementations,
        &programs,
        &binary,
        topology.as_ref(),
    )?;
    let tally = run_plan(args, &plan, &mut metadata, &records, placement.as_ref());
    if let Some(certs) = RUN_CERTS.get() {
        let _ = std::fs::remove_dir_all(certs);
    }
    let metadata = finished_metadata(&mut metadata, &binary, &implementations, &programs)?;
    std::fs::write(set.dir().join(format!("{name}.metadata.json")), metadata)
        .map_err(|e| e.to_string())?;
    verdict(args, &set, &name, tally)
}

/// The matrix `--matrix` names (built in, or a TOML file named by its stem) and its cases;
/// runs across namespaces are named for it (`baseline-netns1500`), so that a set can hold a
/// matrix on loopback and over links of several MTUs side by side.
fn matrix(args: &RunArgs) -> Result<(String, Vec<LoopbackCase>), String> {
    let (name, cases): (String, Vec<LoopbackCase>) = match builtin(&args.matrix) {
        Some(cases) => (args.matrix.clone(), cases),
        None => {
            let path = Path::new(&args.matrix);
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--matrix {}: {e}", args.matrix))?;
            let stem = path
                .file_stem()
                .map_or("matrix".into(), |s| s.to_string_lossy().into_owned());
            (stem, from_toml(&text)?)
        }
    };
    let name = match args.topology {
        Topology::Loopback | Topology::Processes => name,
        Topology::Netns => format!("{name}-netns{}", args.mtu),
    };
    Ok((name, cases))
}

/// The portable build of ark-bench: `--ark-portable`, or `portable/release/ark-bench` in the
/// target directory of `binary` (`target/release/ark-bench`).
fn ark_portable_binary(args: &RunArgs, binary: &Path) -> PathBuf {
    args.ark_portable.clone().unwrap_or_else(|| {
        let target = binary
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        target.join("portable/release/ark-bench")
    })
}

/// `implementations` without repeats, in their first order.
fn distinct(implementations: &[Implementation]) -> Vec<Implementation> {
    let mut distinct: Vec<Implementation> = Vec::new();
    for i in implementations {
        if !distinct.contains(i) {
            distinct.push(*i);
        }
    }
    distinct
}

/// How many cases each implementation runs, by name.
///
/// # Errors
/// A case that none of `implementations` runs.
fn runs_per_implementation(
    cases: &[LoopbackCase],
    implementations: &[Implementation],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut per_implementation = serde_json::Map::new();
    for i in implementations {
        let n = cases.iter().filter(|c| i.runs(c)).count();
        per_implementation.insert(i.name().to_string(), n.into());
    }
    let idle: Vec<String> = cases
        .iter()
        .filter(|c| !implementations.iter().any(|i| i.runs(c)))
        .map(LoopbackCase::label)
        .collect();
    if !idle.is_empty() {
        return Err(format!(
            "no implementation of --implementations runs {}",
            idle.join("; ")
        ));
    }
    Ok(per_implementation)
}

/// What a run is, beyond its flags, for its metadata's settings.
#[derive(Debug, Clone, Copy)]
struct RunDescription<'a> {
    /// The matrix's name (with `-netns<MTU>` across namespaces).
    name: &'a str,
    /// The matrix's cases.
    cases: usize,
    /// The implementations, without repeats.
    implementations: &'a [Implementation],
    /// Where the server and the clients are (`None`: one process on loopback).
    placement: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// How many cases each implementation runs.
    per_implementation: &'a serde_json::Map<String, serde_json::Value>,
}

/// The metadata's settings of a run of `run` with `args` from the sources under `root`.
fn settings(args: &RunArgs, run: RunDescription<'_>, root: &Path) -> serde_json::Value {
    serde_json::json!({
        "topology": run.placement.cloned().map_or_else(|| "loopback".into(), serde_json::Value::Object),
        "matrix": run.name,
        "cases": run.cases,
        "repetitions": args.repetitions,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "timeout_seconds": args.timeout,
        "keep_going": args.keep_going,
        "implementations": run.implementations.iter().map(|i| i.name()).collect::<Vec<_>>(),
        "sources_sha256": sources_sha256(root),
        "order": "repetition-major; every case in a fresh process (`ark-bench loopback ...`, `peer-tokio-loopback ...`, `peer-raw-loopback ...`, `PEER_KCP_MODE=fast|default peer-kcp-loopback ...`, `PEER_QUINN_MODE=stream-per-message|one-stream peer-quinn-loopback ...`); within a repetition each case runs every implementation that runs it back to back, in the listed order rotated by (repetition - 1)",
        "implementations_run": "ark every case; tokio and raw every case but rudp; kcp-fast and kcp-default the rudp cases without FEC (rudp_fec off or not given): KCP has none; quinn and quinn-stream every rudp case (they ignore rudp_fec: FEC is ark's own); ark-no-offload (ark with --udp-offload off) the udp and rudp cases; ark-plaintext (ark with --rudp-encryption off) the rudp cases",
        "runs_per_repetition": run.per_implementation,
    })
}

/// A matrix's runs: the runner's cases, each with the matrix case and the implementation it
/// runs (`specs`, in the same order), and the sizes of the groups the runner rotates (the
/// implementations of one matrix case).
#[derive(Debug)]
struct Plan<'a> {
    specs: Vec<(&'a LoopbackCase, Implementation)>,
    cases: Vec<Case>,
    groups: Vec<usize>,
}

/// The runs of `cases` by `implementations` (`programs`: each one's program and the
/// arguments before a case's flags): case-major, a case's implementations back to back (the
/// runner rotates their order from one repetition to the next).
fn plan<'a>(
    args: &RunArgs,
    cases: &'a [LoopbackCase],
    implementations: &[Implementation],
    programs: &[(PathBuf, Vec<String>)],
    binary: &Path,
    topology: Option<&netns::Topology>,
) -> Result<Plan<'a>, String> {
    let mut plan = Plan {
        specs: Vec::new(),
        cases: Vec::new(),
        groups: Vec::new(),
    };
    for c in cases {
        plan.groups.push(0);
        for (implementation, program) in implementations.iter().zip(programs) {
            if !implementation.runs(c) {
                continue;
            }
            *plan.groups.last_mut().expect("pushed") += 1;
            plan.specs.push((c, *implementation));
            // A port of its own for each implementation's run of a case: a server that has
            // not let go of its port (killed on a timeout, its connections closing) does
            // not fail the next implementation's server with "Address already in use".
            let index = plan.cases.len();
            let case = runner_case(args, (index, c), *implementation, program, binary, topology)?;
            plan.cases.push(case);
        }
    }
    Ok(plan)
}

/// The runner's case for matrix case `c` of `implementation` (the plan's `index`th), whose program
/// and arguments before the case's flags are `program`: the program itself, under its load
/// generator, across `topology` or against the host of `--connect`.
fn runner_case(
    args: &RunArgs,
    (index, c): (usize, &LoopbackCase),
    implementation: Implementation,
    (program, prefix): &(PathBuf, Vec<String>),
    binary: &Path,
    topology: Option<&netns::Topology>,
) -> Result<Case, String> {
    let label = format!("{} {}", implementation.name(), c.label());
    let mut command: Vec<String> = prefix.clone();
    command.extend(c.flags(args.seconds, args.warmup));
    let ipv6 = c.address_family == "ipv6";
    let local = topology.is_none() && args.connect.is_none();
    if let Some(args) = under_load_generator(c, local, program, &command)? {
        return Ok(Case {
            label,
            program: binary.to_path_buf(),
            args,
            env: implementation.env(),
        });
    }
    let (program, command) = match (topology, &args.connect) {
        (Some(topology), _) => across(topology, binary, (index, ipv6), program, command),
        (None, Some(connect)) => {
            let server = args.server_command.as_deref().map(|template| {
                server_command(
                    template,
                    implementation,
                    connect,
                    ipv6,
                    &c.flags(args.seconds, args.warmup),
                )
            });
            to_host(binary, connect, server, program, command)
        }
        (None, None) if args.topology == Topology::Processes => {
            apart(binary, (index, ipv6), program, command)
        }
        (None, None) => (program.clone(), command),
    };
    // The environment goes to `ark-bench pair` too, whose server and clients inherit
    // it (through `ip netns exec` as well); `--server-command` gets it as `{env}`.
    Ok(Case {
        label,
        program,
        args: command,
        env: implementation.env(),
    })
}

/// What a run did: the runs done and failed, and the first error writing a record.
#[derive(Debug, Default)]
struct Tally {
    done: usize,
    failures: usize,
    write_error: Option<std::io::Error>,
}

/// Runs `plan`, appending every run's record to `records` and its command line to
/// `metadata`, with progress on stderr; stops at the first failure unless `--keep-going`, and
/// at Ctrl-C.
fn run_plan(
    args: &RunArgs,
    plan: &Plan<'_>,
    metadata: &mut Metadata,
    records: &RecordWriter,
    placement: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Tally {
    let total = plan.cases.len() * args.repetitions as usize;
    let started = Instant::now();
    let mut tally = Tally::default();
    run_repetition_major(
        &plan.cases,
        args.repetitions,
        &plan.groups,
        Duration::from_secs(args.timeout),
        |case, outcome| {
            tally.done += 1;
            let index = plan
                .cases
                .iter()
                .position(|c| std::ptr::eq(c, case))
                .expect("case from the list");
            let (spec, implementation) = plan.specs[index];
            metadata.command_lines.push(outcome.command_line.clone());
            let record = labelled_record(spec, implementation.name(), outcome, placement);
            let ok = record["ok"] == true;
            if let Err(e) = records.append(&record) {
                tally.write_error.get_or_insert(e);
            }
            if !ok {
                tally.failures += 1;
            }
            let elapsed = started.elapsed().as_secs_f64();
            let (done, left) = (tally.done, total - tally.done);
            let left = elapsed / done as f64 * left as f64;
            eprintln!(
                "[{done}/{total}] rep {} {}: {} ({elapsed:.0} s elapsed, ~{left:.0} s left)",
                outcome.repetition,
                case.label,
                progress(ok, &record)
            );
            (ok || args.keep_going) && !ark_loopback::signals::stop_requested()
        },
    );
    tally
}

/// Whether `record` is one of `implementation`'s: ark on the portable path writes `"ark"`
/// with `"io_path": "portable"` (and `"udp_offload": false` without offloads), the tokio
/// peer with small buffers `"tokio"`.
fn names(record: &serde_json::Value, implementation: &str) -> bool {
    match implementation {
        "ark-portable" => record["implementation"] == "ark" && record["io_path"] == "portable",
        "ark-no-offload" => record["implementation"] == "ark" && record["udp_offload"] == false,
        "ark-plaintext" => {
            record["implementation"] == "ark" && record["rudp"]["encrypted"] == false
        }
        "tokio-4k" => record["implementation"] == "tokio",
        _ => record["implementation"] == implementation,
    }
}

/// The record of one run of matrix case `spec` by `implementation`: the program's, or a failed
/// one (when the run failed, printed no JSON, or a record that does not echo its case), with
/// the repetition, the case as the harness asked for it, the command line and `placement`.
fn labelled_record(
    spec: &LoopbackCase,
    implementation: &str,
    outcome: &Outcome,
    placement: Option<&serde_json::Map<String, serde_json::Value>>,
) -> serde_json::Value {
    let mut record = match &outcome.result {
        Ok(line) => match serde_json::from_str::<serde_json::Value>(line) {
            Ok(value) if !spec.matches(&value) || !names(&value, implementation) => failed(
                spec,
                implementation,
                format!("record does not echo its parameters: {line}"),
            ),
            Ok(mut value) => {
                value["implementation"] = implementation.into();
                value
            }
            Err(e) => failed(
                spec,
                implementation,
                format!("unparsable record ({e}): {line}"),
            ),
        },
        Err(e) => failed(spec, implementation, e.clone()),
    };
    if let Some(object) = record.as_object_mut() {
        object.insert("repetition".into(), outcome.repetition.into());
        // The case as the harness asked for it: a run that failed early says less
        // of itself (no link, no rudp), and the report places it by this.
        if let Ok(case) = serde_json::to_value(spec) {
            object.insert("case".into(), case);
        }
        object.insert("command_line".into(), outcome.command_line.clone().into());
        for (field, value) in placement.into_iter().flatten() {
            object.insert(format!("placement_{field}"), value.clone());
        }
    }
    record
}

/// A run's result on the progress line: its rate and p99, or why it failed.
fn progress(ok: bool, record: &serde_json::Value) -> String {
    if ok {
        format!(
            "{:.0} msg/s, p99 {} µs",
            record["roundtrips_per_second"].as_f64().unwrap_or(0.0),
            record["rtt_p99_us"]
        )
    } else {
        format!("FAILED: {}", record["error"])
    }
}

/// `metadata` finished, with the hashes of ark-bench (`binary`) and every implementation's
/// program, as the pretty JSON of `<matrix>.metadata.json`.
fn finished_metadata(
    metadata: &mut Metadata,
    binary: &Path,
    implementations: &[Implementation],
    programs: &[(PathBuf, Vec<String>)],
) -> Result<String, String> {
    metadata.finished_utc = Some(ark_bench::metadata::utc_now());
    metadata.settings["binary_sha256"] = sha256_file(binary).unwrap_or_default().into();
    for (implementation, (program, _)) in implementations.iter().zip(programs) {
        // kcp-fast and kcp-default (quinn and quinn-stream): one program, its hash under both
        // names.
        metadata.settings[format!("{}_program_sha256", implementation.name())] =
            sha256_file(program).unwrap_or_default().into();
    }
    Ok(serde_json::to_string_pretty(&metadata).map_err(|e| e.to_string())? + "\n")
}

/// The end of a run written to `set`: its summary on stderr, the set's directory on stdout,
/// and an error for a record not written, Ctrl-C, or a failed case without `--keep-going`.
fn verdict(args: &RunArgs, set: &ResultSet, name: &str, tally: Tally) -> Result<(), String> {
    let Tally {
        done,
        failures,
        write_error,
    } = tally;
    if let Some(e) = write_error {
        return Err(format!("writing records: {e}"));
    }
    eprintln!(
        "wrote {}/{name}.jsonl ({done} runs, {failures} failed)",
        set.dir().display()
    );
    println!("{}", set.dir().display());
    if ark_loopback::signals::stop_requested() {
        return Err(format!(
            "interrupted after {done} runs (records so far kept)"
        ));
    }
    if failures > 0 && !args.keep_going {
        return Err(format!(
            "stopped at a failed case ({failures} failed); --keep-going runs on"
        ));
    }
    Ok(())
}

/// `ark-bench`'s arguments that run case `c` (`command` of `program`) under its load
/// generator, or `None` for the program's own clients.
///
/// # Errors
/// An unknown load generator, or wrk with the traffic not on this host's loopback (`local`).
fn under_load_generator(
    c: &LoopbackCase,
    local: bool,
    program: &Path,
    command: &[String],
) -> Result<Option<Vec<String>>, String> {
    match c.load_generator.as_str() {
        "" => Ok(None),
        "wrk" if local => {
            let mut args = vec!["wrk".to_string(), "--".to_string()];
            args.push(program.display().to_string());
            args.extend(command.iter().cloned());
            Ok(Some(args))
        }
        "wrk" => Err(format!(
            "{}: wrk cases run on this host's loopback only",
            c.label()
        )),
        other => Err(format!(
            "{}: unknown load_generator `{other}` (empty for the program's own clients, or wrk)",
            c.label()
        )),
    }
}

/// The case `command` of `program` as an `ark-bench pair` run across `topology`: the server
/// in one namespace, listening on a port of its own for run `index` (on the IPv6 address if
/// `ipv6`), the clients in the other.
fn across(
    topology: &netns::Topology,
    ark_bench: &Path,
    (index, ipv6): (usize, bool),
    program: &Path,
    command: Vec<String>,
) -> (PathBuf, Vec<String>) {
    let port = 20_000 + (index % 40_000);
    let address = std::net::SocketAddr::new(topology.server_ip(ipv6), port as u16);
    let mut args: Vec<String> = [
        "pair",
        "--server-ns",
        topology.namespace(netns::Side::Server),
        "--client-ns",
        topology.namespace(netns::Side::Client),
        "--address",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(address.to_string());
    args.push("--".to_string());
    args.push(program.display().to_string());
    args.extend(command);
    (ark_bench.to_path_buf(), args)
}

/// The case `command` of `program` as an `ark-bench pair` run on loopback: the server a
/// process of its own on port 20000 + `index` (below the ephemeral range the clients' ports
/// come from), the clients another.
fn apart(
    ark_bench: &Path,
    (index, ipv6): (usize, bool),
    program: &Path,
    command: Vec<String>,
) -> (PathBuf, Vec<String>) {
    let port = 20_000 + (index % 10_000) as u16;
    let address = if ipv6 {
        std::net::SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))
    } else {
        std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port))
    };
    let mut command = command;
    if command
        .windows(2)
        .any(|w| w[0] == "--protocol" && matches!(w[1].as_str(), "tcps" | "wss" | "https"))
    {
        // Server and clients must share the CA: one throwaway set for the whole run.
        command.push("--certs".into());
        command.push(run_certs().display().to_string());
    }
    let mut server = vec![program.display().to_string()];
    server.extend(command.iter().cloned());
    server.extend(["--role", "server", "--bind"].map(String::from));
    server.push(address.to_string());
    let server = server
        .iter()
        .map(|word| format!("'{}'", word.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ");
    to_host(
        ark_bench,
        &address.to_string(),
        Some(server),
        program,
        command,
    )
}

/// The directory of [`run_certs`], once written (removed when the run ends).
static RUN_CERTS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// A throwaway CA and server certificate (`localhost`) in a directory of this run, written
/// once, for TLS cases whose server and clients are two processes.
fn run_certs() -> &'static Path {
    RUN_CERTS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ark-bench-certs-{}", std::process::id()));
        let written = ark_tls::Pki::generate(&["localhost"])
            .map_err(|e| e.to_string())
            .and_then(|pki| pki.write_dir(&dir).map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!(
                "warning: no certificates for the TLS cases in {}: {e}",
                dir.display()
            );
        }
        dir
    })
}

/// Where the server and the clients of a run are, for the metadata and every record (`None`:
/// both in one process on loopback).
fn placement(
    args: &RunArgs,
    topology: Option<&netns::Topology>,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "unknown".to_string(), |h| h.trim().to_string());
    let value = match (topology, &args.connect) {
        (Some(topology), _) => {
            let mut value = topology.describe();
            value["host"] = host.into();
            value
        }
        (None, Some(connect)) => serde_json::json!({
            "topology": "hosts",
            "client_host": host,
            "server_address": connect,
            "server_started_by": args.server_command.clone().unwrap_or_else(|| "the user".into()),
        }),
        (None, None) if args.topology == Topology::Processes => serde_json::json!({
            "topology": "processes",
            "host": host,
            "server": "a process of its own (--role server) on loopback",
        }),
        (None, None) => return None,
    };
    value.as_object().cloned()
}

/// `template` with `{program}`, `{env}` and `{flags}` filled for one case of
/// `implementation`: its server listens on the unspecified address of the case's family and
/// `connect`'s port; `{env}` is the program's environment as `NAME=value` words (KCP's or
/// quinn's mode), empty for the others.
fn server_command(
    template: &str,
    implementation: Implementation,
    connect: &str,
    ipv6: bool,
    flags: &[String],
) -> String {
    let program = implementation.peer().unwrap_or("ark-bench loopback");
    let env: Vec<String> = implementation
        .env()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let port = connect.rsplit(':').next().unwrap_or("0");
    let bind = if ipv6 {
        format!("[::]:{port}")
    } else {
        format!("0.0.0.0:{port}")
    };
    let flags = format!("{} --role server --bind {bind}", flags.join(" "));
    template
        .replace("{program}", program)
        .replace("{env}", &env.join(" "))
        .replace("{flags}", &flags)
}

/// The case `command` of `program` as an `ark-bench pair` run: the clients here against
/// `connect`, the server started by `server` (a shell command) or already running.
fn to_host(
    ark_bench: &Path,
    connect: &str,
    server: Option<String>,
    program: &Path,
    command: Vec<String>,
) -> (PathBuf, Vec<String>) {
    let mut args = vec![
        "pair".to_string(),
        "--address".to_string(),
        connect.to_string(),
    ];
    if let Some(server) = server {
        args.extend(["--server-command".to_string(), server]);
    }
    args.push("--".to_string());
    args.push(program.display().to_string());
    args.extend(command);
    (ark_bench.to_path_buf(), args)
}

/// A record for a case whose process failed or printed no usable record.
fn failed(case: &LoopbackCase, implementation: &str, error: String) -> serde_json::Value {
    serde_json::json!({
        "schema_version": 1,
        "implementation": implementation,
        "protocol": case.protocol,
        "payload_bytes": case.payload,
        "clients": case.clients,
        "window": case.window,
        "io_model": case.io_model,
        "io_threads": case.record_io_threads(),
        "address_family": case.address_family,
        "ok": false,
        "error": error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kcp_runs_the_rudp_cases_without_fec_and_tokio_and_raw_the_others() {
        let rudp = builtin("rudp").unwrap();
        let runs = |i: Implementation| rudp.iter().filter(|c| i.runs(c)).count();
        assert_eq!(runs(Implementation::Ark), 62);
        // Once per link setting (5 losses × 2 delays) and window.
        assert_eq!(runs(Implementation::KcpFast), 20);
        assert_eq!(runs(Implementation::KcpDefault), 20);
        assert!(
            rudp.iter()
                .filter(|c| Implementation::KcpFast.runs(c))
                .all(|c| c.rudp_fec == "off")
        );
        // Only the two plain udp cases.
        assert_eq!(runs(Implementation::Tokio) + runs(Implementation::Raw), 4);
        let mut given_none = rudp[0].clone();
        given_none.rudp_fec = String::new();
        assert!(Implementation::KcpDefault.runs(&given_none));
        let tcp = &builtin("baseline").unwrap()[0];
        assert!(Implementation::Tokio.runs(tcp) && !Implementation::KcpFast.runs(tcp));
    }

    #[test]
    fn ark_without_offloads_runs_the_datagram_cases_and_names_its_records() {
        let rudp = builtin("rudp").unwrap();
        let runs = |i: Implementation| rudp.iter().filter(|c| i.runs(c)).count();
        assert_eq!(
            runs(Implementation::ArkNoOffload),
            runs(Implementation::Ark)
        );
        let tcp = &builtin("baseline").unwrap()[0];
        assert!(!Implementation::ArkNoOffload.runs(tcp));
        let binary = Path::new("/w/target/release/ark-bench");
        let (program, args) = Implementation::ArkNoOffload
            .program(binary, binary)
            .unwrap();
        assert_eq!(program, binary);
        assert_eq!(args, ["loopback", "--udp-offload", "off"]);
        let off = serde_json::json!({"implementation": "ark", "udp_offload": false});
        let on = serde_json::json!({"implementation": "ark", "udp_offload": true});
        assert!(names(&off, "ark-no-offload") && !names(&on, "ark-no-offload"));
        assert!(names(&on, "ark"));
    }

    #[test]
    fn ark_in_plaintext_runs_the_rudp_cases_and_names_its_records() {
        let rudp = builtin("rudp").unwrap();
        let plain = rudp
            .iter()
            .filter(|c| Implementation::ArkPlaintext.runs(c))
            .count();
        assert_eq!(plain, rudp.iter().filter(|c| c.protocol == "rudp").count());
        let binary = Path::new("/w/target/release/ark-bench");
        let (_, args) = Implementation::ArkPlaintext
            .program(binary, binary)
            .unwrap();
        assert_eq!(args, ["loopback", "--rudp-encryption", "off"]);
        let plaintext = serde_json::json!({"implementation": "ark", "rudp": {"encrypted": false}});
        let sealed = serde_json::json!({"implementation": "ark", "rudp": {"encrypted": true}});
        assert!(names(&plaintext, "ark-plaintext") && !names(&sealed, "ark-plaintext"));
    }

    #[test]
    fn quinn_runs_every_rudp_case_fec_or_not_and_nothing_else() {
        let rudp = builtin("rudp").unwrap();
        let rudp_cases = rudp.iter().filter(|c| c.protocol == "rudp").count();
        for quinn in [Implementation::Quinn, Implementation::QuinnStream] {
            let runs: Vec<_> = rudp.iter().filter(|c| quinn.runs(c)).collect();
            assert_eq!(runs.len(), rudp_cases);
            assert!(runs.iter().any(|c| c.asks_for_fec()), "FEC cases too");
            assert!(runs.iter().all(|c| c.protocol == "rudp"));
        }
        assert_eq!(rudp_cases, 60);
        let tcp = &builtin("baseline").unwrap()[0];
        assert!(!Implementation::Quinn.runs(tcp) && !Implementation::QuinnStream.runs(tcp));
    }

    #[test]
    fn quinn_modes_go_to_the_environment_the_program_and_the_server_template() {
        assert_eq!(
            Implementation::Quinn.env(),
            [(
                "PEER_QUINN_MODE".to_string(),
                "stream-per-message".to_string()
            )]
        );
        assert_eq!(
            Implementation::QuinnStream.env(),
            [("PEER_QUINN_MODE".to_string(), "one-stream".to_string())]
        );
        assert_eq!(Implementation::Quinn.name(), "quinn");
        assert_eq!(Implementation::QuinnStream.name(), "quinn-stream");
        for quinn in [Implementation::Quinn, Implementation::QuinnStream] {
            assert_eq!(quinn.peer(), Some("peer-quinn-loopback"));
        }
        let cli = Cli::try_parse_from([
            "ark-bench",
            "run",
            "--matrix",
            "rudp",
            "--implementations",
            "ark,quinn,quinn-stream",
        ]);
        assert!(cli.is_ok(), "both names parse");
        let flags = ["--protocol".to_string(), "rudp".to_string()];
        let template = "ssh -tt a env {env} /opt/{program} {flags}";
        assert_eq!(
            server_command(template, Implementation::QuinnStream, "h:9", false, &flags),
            "ssh -tt a env PEER_QUINN_MODE=one-stream /opt/peer-quinn-loopback --protocol rudp --role server --bind 0.0.0.0:9"
        );
    }

    #[test]
    fn kcp_modes_go_to_the_environment_and_the_server_template() {
        assert_eq!(
            Implementation::KcpFast.env(),
            [("PEER_KCP_MODE".to_string(), "fast".to_string())]
        );
        assert!(Implementation::Ark.env().is_empty());
        let flags = ["--protocol".to_string(), "rudp".to_string()];
        let template = "ssh -tt a env {env} /opt/{program} {flags}";
        assert_eq!(
            server_command(template, Implementation::KcpDefault, "h:9", false, &flags),
            "ssh -tt a env PEER_KCP_MODE=default /opt/peer-kcp-loopback --protocol rudp --role server --bind 0.0.0.0:9"
        );
        assert_eq!(
            server_command(template, Implementation::Ark, "h:9", false, &flags),
            "ssh -tt a env  /opt/ark-bench loopback --protocol rudp --role server --bind 0.0.0.0:9"
        );
    }

    #[test]
    fn ark_portable_records_are_ark_on_the_portable_path_relabelled() {
        let portable = serde_json::json!({"implementation": "ark", "io_path": "portable"});
        let linux = serde_json::json!({"implementation": "ark", "io_path": "linux"});
        assert!(names(&portable, "ark-portable") && names(&portable, "ark"));
        assert!(!names(&linux, "ark-portable") && names(&linux, "ark"));
        assert!(!names(&linux, "tokio"));
        let missing = Path::new("/nonexistent/ark-bench");
        let refused = Implementation::ArkPortable.program(missing, missing);
        assert!(refused.unwrap_err().contains("--cfg ark_portable"));
        let binary = Path::new("/w/target/release/ark-bench");
        let cli = Cli::try_parse_from(["ark-bench", "run", "--matrix", "baseline"]).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run");
        };
        assert_eq!(
            ark_portable_binary(&args, binary),
            Path::new("/w/target/portable/release/ark-bench")
        );
    }

    #[test]
    fn the_http_router_ws_cases_are_arks_alone_and_pass_their_flag() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../matrices/ws-upgrade.toml"
        ))
        .unwrap();
        let cases = from_toml(&text).unwrap();
        let router: Vec<_> = cases
            .iter()
            .filter(|c| c.ws_server == "http-router")
            .collect();
        assert_eq!(router.len(), 4);
        for case in &router {
            assert!(Implementation::Ark.runs(case) && !Implementation::Tokio.runs(case));
            let flags = case.flags(1.0, 0.25).join(" ");
            assert!(flags.ends_with("--ws-server http-router"), "{flags}");
            assert!(case.variant().contains("via http-router"));
        }
    }
}
