//! `ark-framebench report`: the seed's tables, measured, with targets checked.

use std::fmt::Write as _;
use std::path::Path;

use ark_bench::chart::{BarGroup, grouped_bars_svg};
use ark_bench::metadata::Metadata;
use ark_bench::result_set::ResultSet;
use ark_bench::stats::{Summary, percent_change, thousands};
use ark_framebench::framing::{DecoderKind, FramingRecord, SessionsRecord, StreamShape};

/// Summary of one field over the successful repetitions of one case.
fn summarize(
    records: &[FramingRecord],
    table: &str,
    kind: DecoderKind,
    shape: StreamShape,
    capacity: Option<usize>,
    field: fn(&FramingRecord) -> f64,
) -> Option<Summary> {
    let values: Vec<f64> = records
        .iter()
        .filter(|r| {
            r.ok && r.table == table
                && r.decoder == kind
                && r.shape() == shape
                && capacity.is_none_or(|c| r.initial_capacity_bytes == c)
        })
        .map(field)
        .collect();
    Summary::of(&values)
}

fn msg_per_s(r: &FramingRecord) -> f64 {
    r.msg_per_s
}

fn allocs(r: &FramingRecord) -> f64 {
    r.allocations_per_message
}

fn cpu(r: &FramingRecord) -> f64 {
    r.cpu_percent.unwrap_or(f64::NAN)
}

fn rate_cell(s: Option<Summary>) -> String {
    s.map_or("failed".to_string(), |s| {
        format!(
            "{} ({}–{})",
            thousands(s.median),
            thousands(s.min),
            thousands(s.max)
        )
    })
}

fn small_cell(s: Option<Summary>, digits: usize) -> String {
    s.map_or("n/a".to_string(), |s| format!("{:.*}", digits, s.median))
}

fn mib(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// Renders `framing.md` and `framing.svg` in `dir`, and `docs_page` if given.
pub(crate) fn render(dir: &Path, docs_page: Option<&Path>) -> Result<(), String> {
    let set = ResultSet::open(dir);
    let metadata = set
        .read_metadata()
        .map_err(|e| format!("{}: metadata.json: {e}", dir.display()))?;
    let records: Vec<FramingRecord> = set
        .read_records("framing.jsonl")
        .map_err(|e| e.to_string())?;
    let sessions: Vec<SessionsRecord> = set
        .read_records("sessions.jsonl")
        .map_err(|e| e.to_string())?;
    if records.is_empty() {
        return Err(format!("{}: no records in framing.jsonl", dir.display()));
    }

    let groups: Vec<BarGroup> = StreamShape::SEED_ROWS
        .iter()
        .map(|&shape| BarGroup {
            label: format!("{}/{}/{}", shape.body, shape.block, shape.batch),
            values: DecoderKind::ALL
                .iter()
                .map(|&k| summarize(&records, "main", k, shape, None, msg_per_s))
                .collect(),
        })
        .collect();
    grouped_bars_svg(
        &dir.join("framing.svg"),
        &format!(
            "Framing throughput by body/block/batch: median, whiskers min–max ({})",
            metadata.machine
        ),
        "messages per second (log scale)",
        &DecoderKind::ALL.map(DecoderKind::name),
        &groups,
    )?;

    let name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let body = tables(&metadata, &records, &sessions);
    let page = format!(
        "# Framing benchmark: {name}\n\n![Framing throughput](framing.svg)\n\n{body}\n## Raw records\n\n\
         - [framing.jsonl](framing.jsonl): one record per case and repetition (failed cases included)\n\
         - [sessions.jsonl](sessions.jsonl): idle-memory records\n\
         - [metadata.json](metadata.json): machine, toolchain, commit, binary hash, command lines\n"
    );
    std::fs::write(dir.join("framing.md"), page).map_err(|e| e.to_string())?;

    if let Some(docs_page) = docs_page {
        let link = relative_link(docs_page, dir);
        let docs = format!(
            "# Framing performance\n\nThe latest framing result set is [`{name}`]({link}/framing.md) \
             (raw records and metadata beside it). Reproduce with:\n\n```sh\n\
             cargo run --release -p ark-framebench -- run --repetitions 3 --seconds 1\n\
             cargo run --release -p ark-framebench -- report results/<machine>-<date>\n```\n\n\
             ![Framing throughput]({link}/framing.svg)\n\n{body}"
        );
        if let Some(parent) = docs_page.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(docs_page, docs).map_err(|e| e.to_string())?;
    }
    eprintln!("wrote {}/framing.md and framing.svg", dir.display());
    Ok(())
}

/// A link from the directory of `page` to `target`, both relative to the working directory.
fn relative_link(page: &Path, target: &Path) -> String {
    if target.is_absolute() {
        return target.display().to_string();
    }
    let depth = page.parent().map_or(0, |p| p.components().count());
    let mut link = "../".repeat(depth);
    link.push_str(&target.display().to_string());
    link.trim_end_matches('/').to_string()
}

fn tables(metadata: &Metadata, records: &[FramingRecord], sessions: &[SessionsRecord]) -> String {
    let mut out = String::new();
    let failed: Vec<&FramingRecord> = records.iter().filter(|r| !r.ok).collect();
    environment(&mut out, metadata, records, failed.len());
    results(&mut out, records);
    capacities(&mut out, records);
    if records.iter().any(|r| r.table == "full") {
        let _ = writeln!(out, "\n## Full matrix\n");
        comparison_table(&mut out, records, "full", &StreamShape::full_matrix());
    }

    if !sessions.is_empty() {
        idle_memory(&mut out, sessions);
    }
    if !failed.is_empty() {
        failures(&mut out, &failed);
    }
    out
}

/// The environment section: machine, run, settings, how many records and how they were made.
fn environment(out: &mut String, metadata: &Metadata, records: &[FramingRecord], failed: usize) {
    let reps = records.iter().map(|r| r.repetition).max().unwrap_or(0);
    let _ = writeln!(out, "## Environment\n");
    out.push_str(&metadata.environment_rows());
    let _ = writeln!(
        out,
        "| Run | {} → {} UTC |",
        metadata.started_utc,
        metadata.finished_utc.as_deref().unwrap_or("?")
    );
    let _ = writeln!(out, "| Settings | {} |", metadata.settings);
    let _ = writeln!(
        out,
        "| Cases | {} records, {} repetitions, {} failed |\n",
        records.len(),
        reps,
        failed
    );
    let _ = writeln!(
        out,
        "Single-threaded; each case is a fresh process; cases run repetition-major. Every message is \
         validated inside the timing (length, every body byte, running checksum). Throughput cells are \
         median (min–max) msg/s over repetitions; allocations are allocator calls per message in the timed \
         phase, counted by a global allocator. Initial capacity: naive 4 KiB, tokio-util 8 KiB \
         (`FramedRead`'s default), ark 4 KiB.\n"
    );
}

/// The results section: the throughput of the seed's rows and the targets table.
fn results(out: &mut String, records: &[FramingRecord]) {
    let _ = writeln!(out, "## Results\n");
    let target_lines = comparison_table(out, records, "main", &StreamShape::SEED_ROWS);

    let _ = writeln!(out, "\n### Targets\n");
    let _ = writeln!(
        out,
        "| Config (body/block/batch) | ark / tokio-util | ≥ 1.3× | ark / naive | ≥ 1.0× | 0 allocs/msg (ark, every repetition) |"
    );
    let _ = writeln!(out, "| --- | ---: | --- | ---: | --- | --- |");
    for line in target_lines {
        let _ = writeln!(out, "{line}");
    }
}

/// The initial-capacity table (ark alone).
fn capacities(out: &mut String, records: &[FramingRecord]) {
    let _ = writeln!(out, "\n## Initial capacity (ark)\n");
    let _ = writeln!(
        out,
        "| Body / B | Block / B | Batch | Initial capacity / KiB | Throughput / msg/s | allocs/msg | CPU / % |"
    );
    let _ = writeln!(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for shape in StreamShape::CAPACITY_ROWS {
        for capacity in StreamShape::CAPACITIES {
            let get = |f| {
                summarize(
                    records,
                    "capacity",
                    DecoderKind::Ark,
                    shape,
                    Some(capacity),
                    f,
                )
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                shape.body,
                shape.block,
                shape.batch,
                capacity / 1024,
                rate_cell(get(msg_per_s)),
                small_cell(get(allocs), 3),
                small_cell(get(cpu), 1)
            );
        }
    }
}

/// The idle-memory section: the receive buffers of many decoder states, and its target.
fn idle_memory(out: &mut String, sessions: &[SessionsRecord]) {
    let count = sessions[0].sessions;
    let _ = writeln!(
        out,
        "\n## Idle memory: receive buffers of {} sessions\n",
        thousands(count as f64)
    );
    let _ = writeln!(
        out,
        "Heap bytes held by {} decoder states, measured by the counting allocator (the states' own \
         structs excluded), with {}-byte messages. The seed's arknet figure: 5,000 MiB → 39.1 MiB.\n",
        thousands(count as f64),
        sessions[0].body_bytes
    );
    let _ = writeln!(
        out,
        "| Decoder | Initial capacity / B | Fresh / MiB | After one whole message / MiB | Holding a partial message / MiB |"
    );
    let _ = writeln!(out, "| --- | ---: | ---: | ---: | ---: |");
    for kind in DecoderKind::ALL {
        let get = |state: &str| {
            sessions
                .iter()
                .find(|s| s.decoder == kind && s.state == state)
        };
        let cell = |state: &str| get(state).map_or("n/a".to_string(), |s| mib(s.bytes));
        let capacity = get("fresh").map_or(0, |s| s.initial_capacity_bytes);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            kind.name(),
            thousands(capacity as f64),
            cell("fresh"),
            cell("after_whole_message"),
            cell("partial_message")
        );
    }
    let ark_idle: i64 = sessions
        .iter()
        .filter(|s| s.decoder == DecoderKind::Ark && s.state != "partial_message")
        .map(|s| s.bytes)
        .sum();
    let _ = writeln!(
        out,
        "\nTarget, 10,000 idle ark sessions hold 0 bytes fresh and after whole messages: **{}** ({ark_idle} bytes).",
        if ark_idle == 0 { "met" } else { "missed" }
    );
}

/// The failed cases, one line each.
fn failures(out: &mut String, failed: &[&FramingRecord]) {
    let _ = writeln!(out, "\n## Failed cases\n");
    for r in failed {
        let _ = writeln!(
            out,
            "- {} {} {}/{}/{} cap {} rep {}: {}",
            r.table,
            r.decoder.name(),
            r.body_bytes,
            r.block_bytes,
            r.batch,
            r.initial_capacity_bytes,
            r.repetition,
            r.error.as_deref().unwrap_or("")
        );
    }
}

/// The throughput comparison table for `shapes` of `table`, written to `out`; returns one
/// line of the targets table per shape.
fn comparison_table(
    out: &mut String,
    records: &[FramingRecord],
    table: &str,
    shapes: &[StreamShape],
) -> Vec<String> {
    let _ = writeln!(
        out,
        "| Body / B | Block / B | Batch | naive / msg/s | tokio-util / msg/s | ark / msg/s | ark vs naive | ark vs tokio-util | allocs/msg naive | allocs/msg tokio-util | allocs/msg ark | CPU % ark |"
    );
    let _ = writeln!(
        out,
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    );
    let mut target_lines = Vec::new();
    for &shape in shapes {
        let rate = |k| summarize(records, table, k, shape, None, msg_per_s);
        let alloc = |k| summarize(records, table, k, shape, None, allocs);
        let (naive, tokio, ark) = (
            rate(DecoderKind::Naive),
            rate(DecoderKind::TokioUtil),
            rate(DecoderKind::Ark),
        );
        let vs = |other: Option<Summary>| match (ark, other) {
            (Some(a), Some(o)) => percent_change(a.median, o.median),
            _ => "n/a".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            shape.body,
            shape.block,
            shape.batch,
            rate_cell(naive),
            rate_cell(tokio),
            rate_cell(ark),
            vs(naive),
            vs(tokio),
            small_cell(alloc(DecoderKind::Naive), 2),
            small_cell(alloc(DecoderKind::TokioUtil), 2),
            small_cell(alloc(DecoderKind::Ark), 3),
            small_cell(
                summarize(records, table, DecoderKind::Ark, shape, None, cpu),
                1
            ),
        );
        let label = format!("{}/{}/{}", shape.body, shape.block, shape.batch);
        if let (Some(a), Some(t), Some(n)) = (ark, tokio, naive) {
            let ratio_t = a.median / t.median;
            let ratio_n = a.median / n.median;
            target_lines.push(format!(
                "| {label} | {ratio_t:.2}× | {} | {ratio_n:.2}× | {} | {} |",
                if ratio_t >= 1.3 { "met" } else { "**missed**" },
                if ratio_n >= 1.0 { "met" } else { "**missed**" },
                match alloc(DecoderKind::Ark) {
                    Some(s) if s.max == 0.0 => "met (0)".to_string(),
                    Some(s) => format!("**missed** ({:.4})", s.max),
                    None => "n/a".to_string(),
                }
            ));
        } else {
            target_lines.push(format!(
                "| {label} | n/a | failed case | n/a | failed case | n/a |"
            ));
        }
    }

    target_lines
}
