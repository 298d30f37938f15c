//! `ark-framebench`: the framing benchmark (ark-frame vs tokio-util vs a naive baseline).
//!
//! ```text
//! ark-framebench run --repetitions 3 --seconds 1      # all cases, fresh processes -> results/<machine>-<date>/
//! ark-framebench report results/<machine>-<date>      # framing.md + framing.svg (+ docs/performance/framing.md)
//! ark-framebench case --decoder ark --body 1024 --block 64 --batch 1   # one case, one JSON record
//! ark-framebench sessions --count 10000              # idle receive-buffer memory, JSON lines
//! ```

mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use ark_bench::metadata::{Metadata, repo_root};
use ark_bench::result_set::{RecordWriter, ResultSet};
use ark_bench::runner::{Case, Outcome, run_repetition_major};
use ark_framebench::framing::{
    DEFAULT_WARMUP_BATCHES, DecoderKind, FramingRecord, Phase, SessionsRecord, StreamShape,
    Workload, idle_memory, measure_kind,
};
use ark_testkit::CountingAllocator;
use clap::{Parser, Subcommand, ValueEnum};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[derive(Parser, Debug)]
#[command(
    name = "ark-framebench",
    about = "Framing throughput, allocations and idle memory: ark-frame vs tokio-util vs naive"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run every case as a fresh process, repetition-major, and write a result set.
    Run(RunArgs),
    /// Run one case in this process and print its JSON record.
    Case(CaseArgs),
    /// Report the receive-buffer memory of many decoder states, as JSON lines.
    Sessions(SessionsArgs),
    /// Render framing.md and framing.svg for a result set.
    Report(ReportArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Matrix {
    /// The seven rows of the seed table plus the capacity table.
    Seed,
    /// The seed cases plus body {64,1024,4096} × block {1,64,65536} × batch {1,16}.
    Full,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Repetitions of every case.
    #[arg(long, default_value_t = 3)]
    repetitions: u32,
    /// Timed phase per case, seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    /// Warm-up batches per case.
    #[arg(long, default_value_t = DEFAULT_WARMUP_BATCHES)]
    warmup_batches: u64,
    /// Which configurations to run.
    #[arg(long, value_enum, default_value_t = Matrix::Seed)]
    matrix: Matrix,
    /// Decoder states for the idle-memory measurement.
    #[arg(long, default_value_t = 10_000)]
    sessions: usize,
    /// Where result sets go.
    #[arg(long, default_value = "results")]
    results_dir: PathBuf,
}

#[derive(clap::Args, Debug)]
struct CaseArgs {
    #[arg(long, value_enum)]
    decoder: DecoderKind,
    /// Body bytes per message.
    #[arg(long)]
    body: usize,
    /// Bytes per delivered block.
    #[arg(long)]
    block: usize,
    /// Messages per batch.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Initial buffer capacity (default: the decoder's own, 4 KiB for ark and naive, 8 KiB
    /// for tokio-util's FramedRead).
    #[arg(long)]
    initial_capacity: Option<usize>,
    /// Timed phase, seconds.
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    #[arg(long, default_value_t = DEFAULT_WARMUP_BATCHES)]
    warmup_batches: u64,
    /// Record label: main, capacity or full.
    #[arg(long, default_value = "main")]
    table: String,
    #[arg(long, default_value_t = 1)]
    repetition: u32,
}

#[derive(clap::Args, Debug)]
struct SessionsArgs {
    /// Decoder states per decoder.
    #[arg(long, default_value_t = 10_000)]
    count: usize,
    /// Body bytes of the message each state receives.
    #[arg(long, default_value_t = 1024)]
    body: usize,
}

#[derive(clap::Args, Debug)]
struct ReportArgs {
    /// The result-set directory.
    dir: PathBuf,
    /// Also write this page pointing at the set.
    #[arg(long, default_value = "docs/performance/framing.md")]
    docs_page: PathBuf,
    /// Do not write the docs page.
    #[arg(long)]
    no_docs_page: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run(&args),
        Command::Case(args) => case(&args),
        Command::Sessions(args) => sessions(&args),
        Command::Report(args) => report::render(
            &args.dir,
            (!args.no_docs_page).then_some(args.docs_page.as_path()),
        ),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ark-framebench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn case(args: &CaseArgs) -> Result<(), String> {
    let shape = StreamShape::new(args.body, args.block, args.batch);
    if shape.block == 0 || shape.batch == 0 {
        return Err("--block and --batch must be at least 1".to_string());
    }
    let capacity = args
        .initial_capacity
        .unwrap_or_else(|| args.decoder.default_initial_capacity());
    let workload = Workload::new(shape);
    let phase = Phase::Timed(Duration::from_secs_f64(args.seconds));
    let m = measure_kind(
        args.decoder,
        capacity,
        &workload,
        args.warmup_batches,
        phase,
    )?;
    let record = FramingRecord::from_measurement(
        &args.table,
        args.decoder,
        shape,
        capacity,
        args.repetition,
        args.warmup_batches,
        &m,
    );
    println!(
        "{}",
        serde_json::to_string(&record).map_err(|e| e.to_string())?
    );
    Ok(())
}

fn sessions(args: &SessionsArgs) -> Result<(), String> {
    for kind in DecoderKind::ALL {
        for record in idle_memory(kind, args.count, args.body, ark_testkit::live_bytes)? {
            println!(
                "{}",
                serde_json::to_string(&record).map_err(|e| e.to_string())?
            );
        }
    }
    Ok(())
}

/// One case of a run: (table, decoder, shape, initial capacity).
type Spec = (&'static str, DecoderKind, StreamShape, usize);

/// The case list of a run.
fn cases(matrix: Matrix) -> Vec<Spec> {
    let mut cases = Vec::new();
    for shape in StreamShape::SEED_ROWS {
        for kind in DecoderKind::ALL {
            cases.push(("main", kind, shape, kind.default_initial_capacity()));
        }
    }
    for shape in StreamShape::CAPACITY_ROWS {
        for capacity in StreamShape::CAPACITIES {
            cases.push(("capacity", DecoderKind::Ark, shape, capacity));
        }
    }
    if let Matrix::Full = matrix {
        for shape in StreamShape::full_matrix() {
            for kind in DecoderKind::ALL {
                cases.push(("full", kind, shape, kind.default_initial_capacity()));
            }
        }
    }
    cases
}

fn run(args: &RunArgs) -> Result<(), String> {
    let binary = std::env::current_exe().map_err(|e| format!("cannot find own binary: {e}"))?;
    let settings = serde_json::json!({
        "repetitions": args.repetitions,
        "seconds": args.seconds,
        "warmup_batches": args.warmup_batches,
        "matrix": format!("{:?}", args.matrix).to_lowercase(),
        "sessions": args.sessions,
        "order": "repetition-major; every case in a fresh process",
    });
    let mut metadata = Metadata::collect("framing", &repo_root(), settings);
    if metadata.git_dirty {
        eprintln!(
            "warning: the source tree differs from {} ({} paths): this set is not evidence",
            metadata.git_commit,
            metadata.git_dirty_paths.len()
        );
    }
    let set = ResultSet::create(
        &args.results_dir,
        &metadata.machine,
        "framing.jsonl",
        &metadata.git_commit,
    )
    .map_err(|e| e.to_string())?;
    let records = set
        .start_records("framing.jsonl")
        .map_err(|e| e.to_string())?;
    let list = cases(args.matrix);
    let runner_cases: Vec<Case> = list
        .iter()
        .map(|spec| runner_case(&binary, args, spec))
        .collect();
    let failures = run_cases(args, &list, &runner_cases, &mut metadata, &records)?;
    // Idle memory, in a fresh process so that nothing else is on the heap.
    idle_memory_records(&binary, args.sessions, &mut metadata, &set)?;
    metadata.finished_utc = Some(ark_bench::metadata::utc_now());
    set.write_metadata(&metadata).map_err(|e| e.to_string())?;
    eprintln!(
        "wrote {} ({} case runs, {failures} failed); render with: ark-framebench report {}",
        set.dir().display(),
        runner_cases.len() * args.repetitions as usize,
        set.dir().display()
    );
    println!("{}", set.dir().display());
    Ok(())
}

/// The runner's case for `spec`: `ark-framebench case` with its flags.
fn runner_case(binary: &Path, args: &RunArgs, &(table, kind, shape, capacity): &Spec) -> Case {
    Case {
        program: binary.to_path_buf(),
        env: Vec::new(),
        label: format!(
            "{table} {} body={} block={} batch={} cap={capacity}",
            kind.name(),
            shape.body,
            shape.block,
            shape.batch
        ),
        args: [
            "case",
            "--table",
            table,
            "--decoder",
            kind.name(),
            "--body",
            &shape.body.to_string(),
            "--block",
            &shape.block.to_string(),
            "--batch",
            &shape.batch.to_string(),
            "--initial-capacity",
            &capacity.to_string(),
            "--seconds",
            &args.seconds.to_string(),
            "--warmup-batches",
            &args.warmup_batches.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
    }
}

/// Runs `runner_cases` (of `list`, in the same order) repetition-major, appending every
/// record to `records` and every command line to `metadata`; returns how many runs gave no
/// record.
fn run_cases(
    args: &RunArgs,
    list: &[Spec],
    runner_cases: &[Case],
    metadata: &mut Metadata,
    records: &RecordWriter,
) -> Result<usize, String> {
    let total = runner_cases.len() * args.repetitions as usize;
    let mut done = 0;
    let mut failures = 0;
    let mut io_error = None;
    run_repetition_major(
        runner_cases,
        args.repetitions,
        // Every case a group of its own: list order.
        &[],
        std::time::Duration::from_secs(600),
        |case, outcome| {
            done += 1;
            metadata.command_lines.push(outcome.command_line.clone());
            let index = runner_cases
                .iter()
                .position(|c| std::ptr::eq(c, case))
                .expect("case from the list");
            let (record, no_record) = record(outcome, &list[index], args.warmup_batches);
            if no_record {
                failures += 1;
            }
            eprintln!(
                "[{done}/{total}] rep {} {}: {}",
                outcome.repetition,
                case.label,
                progress(&record)
            );
            if let Err(e) = records.append(&record) {
                io_error.get_or_insert(e);
            }
            true
        },
    );
    match io_error {
        Some(e) => Err(format!("writing {}: {e}", records.path().display())),
        None => Ok(failures),
    }
}

/// The record of one run of `spec`, and whether the run gave none: then the record is a
/// failed one, saying why the run failed or what it printed.
fn record(
    outcome: &Outcome,
    &(table, kind, shape, capacity): &Spec,
    warmup_batches: u64,
) -> (FramingRecord, bool) {
    let parsed = outcome.result.clone().and_then(|line| {
        serde_json::from_str::<FramingRecord>(&line)
            .map_err(|e| format!("bad record {line:?}: {e}"))
    });
    match parsed {
        Ok(record) => (record, false),
        Err(error) => {
            let record = FramingRecord::failed(
                table,
                kind,
                shape,
                capacity,
                outcome.repetition,
                warmup_batches,
                error,
            );
            (record, true)
        }
    }
}

/// A run's result on the progress line: its rate and allocations, or why it failed.
fn progress(record: &FramingRecord) -> String {
    if record.ok {
        format!(
            "{:.0} msg/s, {:.3} allocs/msg",
            record.msg_per_s, record.allocations_per_message
        )
    } else {
        format!("FAILED: {}", record.error.as_deref().unwrap_or(""))
    }
}

/// Runs `ark-framebench sessions --count <sessions>` (a fresh process, so that nothing else is
/// on the heap) and writes its records to the set's `sessions.jsonl`.
fn idle_memory_records(
    binary: &Path,
    sessions: usize,
    metadata: &mut Metadata,
    set: &ResultSet,
) -> Result<(), String> {
    let sessions_cmd = [
        "sessions".to_string(),
        "--count".to_string(),
        sessions.to_string(),
    ];
    metadata
        .command_lines
        .push(format!("{} {}", binary.display(), sessions_cmd.join(" ")));
    let out = std::process::Command::new(binary)
        .args(&sessions_cmd)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "sessions failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let sessions_writer = set
        .start_records("sessions.jsonl")
        .map_err(|e| e.to_string())?;
    for line in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let record: SessionsRecord = serde_json::from_str(line).map_err(|e| e.to_string())?;
        sessions_writer.append(&record).map_err(|e| e.to_string())?;
    }
    Ok(())
}
