//! `ark-bench report` and `ark-bench compare`.

mod many;
mod rudp;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ark_bench::chart::{BarGroup, grouped_bars_svg};
use ark_bench::matrix::link_variant;
use ark_bench::metadata::Metadata;
use ark_bench::result_set::ResultSet;
use ark_bench::stats::{Summary, percent_change, thousands};
use serde_json::Value;

/// Case key: protocol, payload, clients, window, io model, io threads, address family.
type Key = (String, u64, u64, u64, String, u64, String);

fn key(r: &Value) -> Key {
    // A connection variant (a new connection per N round trips, TLS resumption off) is a
    // protocol of its own in the tables: `tcps reconnect 1 resumption off`.
    let mut protocol = r["protocol"].as_str().unwrap_or("?").to_string();
    if let Some(n) = r["reconnect_every"].as_u64().filter(|n| *n > 0) {
        protocol += &format!(" reconnect {n}");
    }
    if r["tls_resumption"] == false {
        protocol += " resumption off";
    }
    if let Some(generator) = r["load_generator"].as_str() {
        protocol += &format!(" GET by {generator}");
    }
    // WebSocket served through ark-http's router: `websocket via http-router`.
    if let Some(server) = r["ws_server"].as_str().filter(|s| *s != "ws") {
        protocol += &format!(" via {server}");
    }
    // permessage-deflate: `websocket deflate`.
    if r["ws_deflate"] == true {
        protocol += " deflate";
    }
    // A conditioned link and reliable UDP's FEC: `rudp loss 5% delay 20±5ms fec adaptive`.
    let link = rudp::link_of(r);
    protocol += &link_variant(
        link.loss,
        link.delay_ms,
        link.jitter_ms,
        link.seed,
        rudp::fec_of(r).unwrap_or(""),
    );
    (
        protocol,
        r["payload_bytes"].as_u64().unwrap_or(0),
        r["clients"].as_u64().unwrap_or(0),
        r["window"].as_u64().unwrap_or(0),
        r["io_model"].as_str().unwrap_or("?").to_string(),
        r["io_threads"].as_u64().unwrap_or(0),
        r["address_family"].as_str().unwrap_or("ipv4").to_string(),
    )
}

fn label(k: &Key) -> String {
    let family = if k.6 == "ipv4" { "" } else { ", IPv6" };
    format!(
        "{} B, {} clients, window {}, {} {}{family}",
        k.1, k.2, k.3, k.4, k.5
    )
}

/// Loopback matrices of a set: name → records.
fn load(dir: &Path) -> Result<BTreeMap<String, Vec<Value>>, String> {
    let set = ResultSet::open(dir);
    let mut matrices = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut records: Vec<Value> = set
            .read_records(&format!("{name}.jsonl"))
            .map_err(|e| e.to_string())?;
        records.iter_mut().for_each(derive_server_memory);
        if records
            .first()
            .is_some_and(|r| r.get("schema_version").is_some())
        {
            matrices.insert(name, records);
        }
    }
    if matrices.is_empty() {
        return Err(format!(
            "{}: no loopback records (*.jsonl with schema_version)",
            dir.display()
        ));
    }
    Ok(matrices)
}

/// For a record whose server ran apart (`server`: its peak RSS at start and at the end), the
/// memory the server grew by per client connection, as `server_rss_per_connection_bytes`
/// (derived for the report; the record on disk is not changed).
fn derive_server_memory(record: &mut Value) {
    let server = &record["server"];
    let (Some(peak), Some(start), Some(clients)) = (
        server["peak_rss_bytes"].as_f64(),
        server["peak_rss_at_start_bytes"].as_f64(),
        record["clients"].as_f64().filter(|c| *c > 0.0),
    ) else {
        return;
    };
    record["server_rss_per_connection_bytes"] = ((peak - start).max(0.0) / clients).into();
}

/// A record's number `name`; a dotted name reaches into objects
/// (`link.wire_bytes_per_delivered_byte`).
fn value(r: &Value, name: &str) -> Option<f64> {
    name.split('.').fold(r, |v, part| &v[part]).as_f64()
}

/// The summary of `name` over the ok runs of `records`.
fn field(records: &[&Value], name: &str) -> Option<Summary> {
    field_by(records, |r| value(r, name))
}

/// The summary of what `of` reads from the ok runs of `records`.
fn field_by(records: &[&Value], of: impl Fn(&Value) -> Option<f64>) -> Option<Summary> {
    let values: Vec<f64> = records
        .iter()
        .filter(|r| r["ok"] == true)
        .filter_map(|r| of(r))
        .collect();
    Summary::of(&values)
}

fn cell(s: Option<Summary>, digits: usize) -> String {
    match s {
        Some(s) if digits == 0 => format!(
            "{} ({}–{})",
            thousands(s.median),
            thousands(s.min),
            thousands(s.max)
        ),
        Some(s) => format!("{:.*}", digits, s.median),
        None => "failed".to_string(),
    }
}

/// The record's implementation (`ark` for records that predate the field).
fn implementation(r: &Value) -> &str {
    r["implementation"].as_str().unwrap_or("ark")
}

/// The runs of one case, by implementation.
type Runs<'a> = BTreeMap<String, Vec<&'a Value>>;

/// Records grouped by case, then implementation.
fn group(records: &[Value]) -> BTreeMap<Key, Runs<'_>> {
    let mut cases: BTreeMap<Key, Runs<'_>> = BTreeMap::new();
    for r in records {
        cases
            .entry(key(r))
            .or_default()
            .entry(implementation(r).to_string())
            .or_default()
            .push(r);
    }
    cases
}

fn runs<'a, 'b>(case: Option<&'b Runs<'a>>, implementation: &str) -> &'b [&'a Value] {
    case.and_then(|c| c.get(implementation))
        .map_or(&[], Vec::as_slice)
}

/// `name` of `a` over `name` of `b`, repetition by repetition (runs paired by their
/// `repetition`, both ok), summarised: the median of per-repetition ratios, with min–max.
fn ratio(a: &[&Value], b: &[&Value], name: &str) -> Option<Summary> {
    ratio_by(a, b, |r| value(r, name))
}

/// What `of` reads from `a` over what it reads from `b`, as [`ratio`] does for a field.
fn ratio_by(a: &[&Value], b: &[&Value], of: impl Fn(&Value) -> Option<f64>) -> Option<Summary> {
    let ratios: Vec<f64> = a
        .iter()
        .filter(|r| r["ok"] == true)
        .filter_map(|ra| {
            let rb = b
                .iter()
                .find(|rb| rb["ok"] == true && rb["repetition"] == ra["repetition"])?;
            let (x, y) = (of(ra)?, of(rb)?);
            (y > 0.0).then(|| x / y)
        })
        .collect();
    Summary::of(&ratios)
}

/// "met" when the ratio `r`'s median is at least (`at_least`) or at most `bound`, else
/// "short (median)"; "no data" without a ratio.
fn verdict(r: Option<Summary>, bound: f64, at_least: bool) -> String {
    match r {
        None => "no data".to_string(),
        Some(r) if r.median == bound || (r.median > bound) == at_least => "met".to_string(),
        Some(r) => format!("short ({:.2})", r.median),
    }
}

fn ratio_cell(s: Option<Summary>) -> String {
    s.map_or("–".to_string(), |s| {
        format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max)
    })
}

/// Several implementations' medians side by side: `a / b / c`.
fn joined(values: &[Option<Summary>], digits: usize) -> String {
    values
        .iter()
        .map(|s| match s {
            None => "–".to_string(),
            Some(s) if digits == 0 => thousands(s.median),
            Some(s) => format!("{:.*}", digits, s.median),
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// Each column's runs that ended ok over its runs, side by side: `3/3 / 2/3`.
fn ok_runs<'a, 'b>(columns: impl Iterator<Item = &'b [&'a Value]>) -> String
where
    'a: 'b,
{
    columns
        .map(|runs| {
            let good = runs.iter().filter(|r| r["ok"] == true).count();
            format!("{good}/{}", runs.len())
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The implementations of `records` in report order: ark, tokio, raw, then any other by name.
fn ordered(records: &[Value]) -> Vec<String> {
    let rank = |n: &str| match n {
        "ark" => 0,
        "tokio" => 1,
        "raw" => 2,
        _ => 3,
    };
    let mut names: Vec<String> = records
        .iter()
        .map(|r| implementation(r).to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    names.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    names
}

/// The IO profile (model, threads) with the highest median msg/s for `implementation` among
/// the 16-client cases of `protocol` with `payload` bytes and `window`.
fn best_io(
    cases: &BTreeMap<Key, Runs<'_>>,
    (protocol, payload): (&str, u64),
    window: u64,
    implementation: &str,
) -> Option<Key> {
    cases
        .iter()
        .filter(|(k, _)| k.0 == protocol && k.1 == payload && k.2 == 16 && k.3 == window)
        .filter_map(|(k, c)| {
            field(runs(Some(c), implementation), "roundtrips_per_second")
                .map(|s| (k.clone(), s.median))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(k, _)| k)
}

/// ark's design targets at 1024 B, 16 clients, shared 1 (docs/design, and for tcps issue 17):
/// ark/tokio msg/s at
/// least the first, and for UDP ark/raw at least the second; p99 no worse than tokio's.
fn design_target(protocol: &str, window: u64) -> Option<(f64, Option<f64>)> {
    match (protocol, window) {
        ("tcp", 16) => Some((1.15, None)),
        ("udp", 1) => Some((1.1, Some(0.9))),
        ("websocket", 16) => Some((1.3, None)),
        // Issue 17's target for TLS.
        ("tcps", 16) => Some((1.1, None)),
        // Issue 18's targets: the POST 1 KiB echo, and wrk's small GET.
        ("http", 16) => Some((1.2, None)),
        ("http GET by wrk", 1) => Some((1.3, None)),
        _ => None,
    }
}

/// Whether ark's runs against each peer's meet the design target of the case.
fn target_cell(
    target: Option<(f64, Option<f64>)>,
    ratio_of: impl Fn(&str, &str) -> Option<Summary>,
) -> String {
    let Some((vs_tokio, vs_raw)) = target else {
        return "–".to_string();
    };
    let (speed, p99) = (
        ratio_of("tokio", "roundtrips_per_second"),
        ratio_of("tokio", "rtt_p99_us"),
    );
    let (Some(speed), Some(p99)) = (speed, p99) else {
        return "no data".to_string();
    };
    let mut wanted = format!("≥ {vs_tokio}× tokio, p99 ≤ tokio");
    let mut short = Vec::new();
    if speed.median < vs_tokio {
        short.push(format!("msg/s {:.2}", speed.median));
    }
    if p99.median > 1.0 {
        short.push(format!("p99 {:.2}", p99.median));
    }
    if let Some(vs_raw) = vs_raw {
        wanted.push_str(&format!(", ≥ {vs_raw}× raw"));
        match ratio_of("raw", "roundtrips_per_second") {
            Some(r) if r.median < vs_raw => short.push(format!("raw {:.2}", r.median)),
            Some(_) => {}
            None => short.push("no raw data".to_string()),
        }
    }
    if short.is_empty() {
        format!("{wanted}: met")
    } else {
        format!("{wanted}: short ({})", short.join(", "))
    }
}

/// The headline: ark against every peer at 1024 B and 16 clients, for shared 1 and for each
/// implementation's best IO profile; the strongest peer of each row (highest median msg/s)
/// is named, and the shared-1 rows are held to the design targets.
fn headline(cases: &BTreeMap<Key, Runs<'_>>, names: &[String], out: &mut String) {
    // wrk's GET asks for a small static page: its rows have the page's size.
    let busy: BTreeSet<(String, u64, u64)> = cases
        .keys()
        .filter(|k| k.2 == 16 && (k.1 == 1024 || k.0.ends_with(" GET by wrk")))
        .map(|k| (k.0.clone(), k.1, k.3))
        .collect();
    let peers = &names[1..];
    if busy.is_empty() || peers.is_empty() {
        return;
    }
    let all = names.join(" / ");
    let _ = writeln!(
        out,
        "### ark against the strongest peer: 1024 B, 16 clients

HTTP's `GET by wrk` rows: 16 connections of wrk asking for the static page of the row's size, one request in flight on each. Ratios are medians of per-repetition ratios (min–max); msg/s above 1 and p99 below 1 favour ark. The strongest peer is the one with the highest median msg/s in the row. \"best\" is each implementation's IO profile with the highest median msg/s.\n"
    );
    let mut columns = vec![
        "Protocol".to_string(),
        "Window".to_string(),
        format!("IO profile ({all})"),
        format!("msg/s {all}"),
        "strongest peer".to_string(),
        "ark/strongest msg/s".to_string(),
    ];
    columns.extend(peers.iter().map(|p| format!("ark/{p} msg/s")));
    columns.push(format!("p99 / µs {all}"));
    columns.push("ark/strongest p99".to_string());
    columns.push("Target".to_string());
    table_header(out, &columns.iter().map(String::as_str).collect::<Vec<_>>());
    for (protocol, payload, window) in &busy {
        let rows = headline_profiles(cases, names, (protocol, *payload), *window);
        for (row, (io, keys)) in rows.iter().enumerate() {
            let row = HeadlineRow {
                protocol,
                window: *window,
                io,
                keys,
                shared1: row == 0,
            };
            let cells = headline_cells(cases, names, row);
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(out);
}

/// The IO profiles of the headline's rows for `protocol` with `payload` bytes and `window`:
/// shared 1 for every implementation, then, unless shared 1 is the best of all, each
/// implementation's best; each named, with every implementation's case key.
fn headline_profiles(
    cases: &BTreeMap<Key, Runs<'_>>,
    names: &[String],
    (protocol, payload): (&str, u64),
    window: u64,
) -> Vec<(String, Vec<Option<Key>>)> {
    let shared1 = (
        protocol.to_string(),
        payload,
        16,
        window,
        "shared".to_string(),
        1,
        "ipv4".to_string(),
    );
    let best: Vec<Option<Key>> = names
        .iter()
        .map(|n| best_io(cases, (protocol, payload), window, n))
        .collect();
    let shared1_is_best = best.iter().all(|k| k.as_ref() == Some(&shared1));
    let mut rows = vec![("shared 1".to_string(), vec![Some(shared1); names.len()])];
    if !shared1_is_best {
        let profiles = best
            .iter()
            .map(|k| {
                k.as_ref()
                    .map_or("–".into(), |k| format!("{} {}", k.4, k.5))
            })
            .collect::<Vec<_>>();
        rows.push((format!("best: {}", profiles.join(" / ")), best));
    }
    rows
}

/// One row of the headline: a protocol and window at one IO profile (`io`, with every
/// implementation's case key), `shared1` for the row held to the design target.
#[derive(Debug, Clone, Copy)]
struct HeadlineRow<'a> {
    protocol: &'a str,
    window: u64,
    io: &'a str,
    keys: &'a [Option<Key>],
    shared1: bool,
}

/// The cells of one headline row: medians of every implementation, the strongest peer, ark's
/// ratios to it and to every peer, and the design target's verdict.
fn headline_cells(
    cases: &BTreeMap<Key, Runs<'_>>,
    names: &[String],
    row: HeadlineRow<'_>,
) -> Vec<String> {
    let runs_of = |i: usize| runs(row.keys[i].as_ref().and_then(|k| cases.get(k)), &names[i]);
    let medians = |name| {
        (0..names.len())
            .map(|i| field(runs_of(i), name))
            .collect::<Vec<_>>()
    };
    let speed = medians("roundtrips_per_second");
    let strongest = (1..names.len())
        .filter_map(|i| speed[i].map(|s| (i, s.median)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i);
    let ratio_to = |i: usize, name: &str| ratio(runs_of(0), runs_of(i), name);
    let mut cells = vec![
        row.protocol.to_string(),
        row.window.to_string(),
        row.io.to_string(),
        joined(&speed, 0),
        strongest.map_or("–".into(), |i| names[i].clone()),
        ratio_cell(strongest.and_then(|i| ratio_to(i, "roundtrips_per_second"))),
    ];
    cells.extend((1..names.len()).map(|i| ratio_cell(ratio_to(i, "roundtrips_per_second"))));
    cells.push(joined(&medians("rtt_p99_us"), 0));
    cells.push(ratio_cell(
        strongest.and_then(|i| ratio_to(i, "rtt_p99_us")),
    ));
    let target = row
        .shared1
        .then(|| design_target(row.protocol, row.window))
        .flatten();
    cells.push(target_cell(target, |peer, name| {
        let i = names.iter().position(|n| n == peer)?;
        ratio_to(i, name)
    }));
    cells
}

/// Renders `DIR/report.md` with charts, and `docs/performance/README.md`.
pub(crate) fn render(dir: &Path) -> Result<(), String> {
    let matrices = load(dir)?;
    let metadata = read_metadata(dir, &matrices)?;
    refuse_mixed(dir, &matrices, &metadata)?;
    let mut out = String::new();
    let name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let _ = writeln!(out, "# Loopback benchmark: {name}\n");
    if let Some(m) = metadata.values().next() {
        let _ = writeln!(out, "{}", m.environment_rows());
    }
    let _ = writeln!(
        out,
        "Every case ran in a fresh process, repetition-major; cells are the median over repetitions with min–max; p99 is the median of per-run p99s. Server and clients run in one process and share its IO threads, as in arknet's benchmark, except in the owned model (a thread and a loop per endpoint: io_threads = clients + 1). CPU 100 % = one core.\n"
    );
    for (matrix, records) in &matrices {
        matrix_section(dir, matrix, records, metadata.get(matrix), &mut out)?;
    }
    std::fs::write(dir.join("report.md"), out).map_err(|e| e.to_string())?;
    docs_index(dir)?;
    eprintln!("wrote {}/report.md", dir.display());
    Ok(())
}

/// The metadata of each of `matrices` that has a `<matrix>.metadata.json` in `dir`.
fn read_metadata(
    dir: &Path,
    matrices: &BTreeMap<String, Vec<Value>>,
) -> Result<BTreeMap<String, Metadata>, String> {
    let mut metadata: BTreeMap<String, Metadata> = BTreeMap::new();
    for name in matrices.keys() {
        if let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.metadata.json"))) {
            metadata.insert(
                name.clone(),
                serde_json::from_str(&text).map_err(|e| format!("{name}.metadata.json: {e}"))?,
            );
        }
    }
    Ok(metadata)
}

/// Refuses mixed inputs: one host, one commit, one binary.
fn refuse_mixed(
    dir: &Path,
    matrices: &BTreeMap<String, Vec<Value>>,
    metadata: &BTreeMap<String, Metadata>,
) -> Result<(), String> {
    let hosts: BTreeSet<String> = metadata
        .values()
        .map(|m| format!("{} / {}", m.machine, m.cpu_model))
        .collect();
    let commits: BTreeSet<String> = matrices
        .values()
        .flatten()
        .filter_map(|r| r["git_commit"].as_str().map(str::to_string))
        .collect();
    let binaries: BTreeSet<String> = metadata.values().map(|m| m.binary_sha256.clone()).collect();
    if hosts.len() > 1 || commits.len() > 1 || binaries.len() > 1 {
        return Err(format!(
            "mixed inputs in {}: hosts {hosts:?}, commits {commits:?}, binaries {binaries:?}; report each set separately",
            dir.display()
        ));
    }
    Ok(())
}

/// The report's section of one matrix: the headline when ark is compared, a table per
/// protocol, the MTU table, reliable UDP's section, the failed runs and the charts.
fn matrix_section(
    dir: &Path,
    matrix: &str,
    records: &[Value],
    metadata: Option<&Metadata>,
    out: &mut String,
) -> Result<(), String> {
    let settings = metadata.map(|m| m.settings.to_string()).unwrap_or_default();
    let _ = writeln!(
        out,
        "## Matrix `{matrix}`\n\n{} records. Settings: `{settings}`\n",
        records.len()
    );
    // Reliable UDP has a section of its own (per link, FEC and KCP mode); the other
    // protocols the tables below.
    let (rudp, records): (Vec<Value>, Vec<Value>) =
        records.iter().cloned().partition(rudp::is_rudp);
    let records = &records;
    let cases = group(records);
    let names = ordered(records);
    let compared = names.len() > 1 && names[0] == "ark";
    if compared {
        headline(&cases, &names, out);
    }
    protocol_tables(&cases, &names, compared, out);
    many::targets(&cases, out);
    if matrix.starts_with("mtu") {
        let mtu = metadata.and_then(|m| m.settings["topology"]["mtu"].as_u64());
        mtu_table(&cases, mtu, &names, out);
    }
    if !rudp.is_empty() {
        rudp::section(dir, matrix, (&rudp, records), out)?;
    }
    failed_runs(records.iter().chain(&rudp), out);
    if !records.is_empty() {
        charts(dir, matrix, &cases, &names, out)?;
    }
    Ok(())
}

/// A table per protocol: the known protocols first, then connection variants
/// (`tcps reconnect 1`, ...); ark against the peers when `compared`, else each
/// implementation's own.
fn protocol_tables(
    cases: &BTreeMap<Key, Runs<'_>>,
    names: &[String],
    compared: bool,
    out: &mut String,
) {
    let mut protocols: Vec<String> = PROTOCOLS.iter().map(|p| p.to_string()).collect();
    for k in cases.keys() {
        if !protocols.contains(&k.0) {
            protocols.push(k.0.clone());
        }
    }
    for protocol in &protocols {
        let rows: Vec<(&Key, &Runs<'_>)> = cases.iter().filter(|(k, _)| &k.0 == protocol).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {protocol}\n");
        if protocol.contains(" reconnect ") {
            connections(&rows, names, out);
        }
        if compared {
            comparison(&rows, names, out);
        } else {
            for implementation in names {
                if names.len() > 1 {
                    let _ = writeln!(out, "{implementation}:\n");
                }
                single(&rows, implementation, out);
            }
        }
    }
}

/// The runs among `records` that are not ok, one line each (nothing when all are).
fn failed_runs<'a>(records: impl Iterator<Item = &'a Value>, out: &mut String) {
    let failed: Vec<&Value> = records.filter(|r| r["ok"] != true).collect();
    if failed.is_empty() {
        return;
    }
    let _ = writeln!(out, "### Failed runs\n");
    for r in failed {
        let k = key(r);
        let _ = writeln!(
            out,
            "- rep {} {} {} ({}): {}",
            r["repetition"],
            implementation(r),
            k.0,
            label(&k),
            r["error"]
        );
    }
    let _ = writeln!(out);
}

/// The median of `records`' `udp_kernel.<name>` (namespace-wide counter deltas of a run).
fn kernel_counter(records: &[&Value], name: &str) -> Option<Summary> {
    let values: Vec<f64> = records
        .iter()
        .filter_map(|r| r["udp_kernel"][name].as_f64())
        .collect();
    Summary::of(&values)
}

/// The MTU table (arknet's UDP page shape, measured): per family, payload and window, the
/// no-fragmentation limit of the link (MTU − 28 for IPv4, − 48 for IPv6), msg/s of each
/// implementation, and the first implementation's loss and the kernel's fragmentation
/// counters in the clients' namespace over its runs (medians).
fn mtu_table(
    cases: &BTreeMap<Key, Runs<'_>>,
    mtu: Option<u64>,
    names: &[String],
    out: &mut String,
) {
    let link = mtu.map_or("loopback".to_string(), |m| format!("a veth with MTU {m}"));
    let all = names.join(" / ");
    let first = &names[0];
    let _ = writeln!(
        out,
        "### Datagram size and MTU over {link}\n\nFragmentation counters are `/proc/net/snmp` deltas in the clients' namespace over a whole {first} run (requests fragmented on the way out, echoes reassembled on the way in), medians over repetitions.\n"
    );
    let columns = [
        "Family".to_string(),
        "Payload / B".to_string(),
        "No-fragmentation limit / B".to_string(),
        "Window".to_string(),
        format!("msg/s {all}"),
        format!("{first} UDP loss %"),
        format!("{first} frag_creates"),
        format!("{first} reasm_reqds"),
        format!("{first} reasm_fails"),
    ];
    table_header(out, &columns.iter().map(String::as_str).collect::<Vec<_>>());
    let mut rows: Vec<(&Key, &Runs<'_>)> = cases.iter().filter(|(k, _)| k.0 == "udp").collect();
    rows.sort_by_key(|(k, _)| (k.6.clone(), k.1, k.3));
    for (k, case) in rows {
        let header = if k.6 == "ipv6" { 48 } else { 28 };
        let limit = mtu.map_or("–".to_string(), |m| thousands((m - header) as f64));
        let of = |i: usize| runs(Some(case), &names[i]);
        let speed: Vec<Option<Summary>> = (0..names.len())
            .map(|i| field(of(i), "roundtrips_per_second"))
            .collect();
        let loss = field(of(0), "udp_loss_rate").map(|mut s| {
            s.median *= 100.0;
            s
        });
        let counter = |name| cell(kernel_counter(of(0), name), 0);
        let _ = writeln!(
            out,
            "| {} | {} | {limit} | {} | {} | {} | {} | {} | {} |",
            if k.6 == "ipv6" { "IPv6" } else { "IPv4" },
            thousands(k.1 as f64),
            k.3,
            joined(&speed, 0),
            joined(&[loss], 4),
            counter("frag_creates"),
            counter("reasm_reqds"),
            counter("reasm_fails"),
        );
    }
    let _ = writeln!(out);
}

/// A Markdown table header: the first column left-aligned, the others (figures) right-aligned.
fn table_header(out: &mut String, columns: &[&str]) {
    let _ = writeln!(out, "| {} |", columns.join(" | "));
    let align: Vec<&str> = (0..columns.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "| {} |", align.join(" | "));
}

/// One implementation's table: medians with min–max.
fn single(rows: &[(&Key, &Runs<'_>)], implementation: &str, out: &mut String) {
    table_header(
        out,
        &[
            "Case",
            "msg/s",
            "p99 / µs",
            "CPU %",
            "allocs/msg",
            "syscalls/msg",
            "UDP loss",
            "ok runs",
        ],
    );
    for (k, case) in rows {
        let runs = runs(Some(case), implementation);
        if runs.is_empty() {
            continue;
        }
        let ok = runs.iter().filter(|r| r["ok"] == true).count();
        let loss = field(runs, "udp_loss_rate")
            .map_or("–".to_string(), |s| format!("{:.4}%", s.median * 100.0));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {ok}/{} |",
            label(k),
            cell(field(runs, "roundtrips_per_second"), 0),
            cell(field(runs, "rtt_p99_us"), 0),
            cell(field(runs, "cpu_percent"), 1),
            cell(field(runs, "allocations_per_message"), 2),
            cell(field(runs, "syscalls_per_message"), 2),
            loss,
            runs.len()
        );
    }
    let _ = writeln!(out);
}

/// ark and its peers (`names[0]` is ark): a table of speed (msg/s and p99 of each, the
/// per-repetition ratios ark/peer) and one of costs.
/// New connections per second (a TLS handshake each for tcps) and how many were resumed,
/// for cases run with `--reconnect-every`.
fn connections(rows: &[(&Key, &Runs<'_>)], names: &[String], out: &mut String) {
    let all = names.join(" / ");
    let mut columns = vec!["Case".to_string(), format!("connections/s {all}")];
    columns.extend(names[1..].iter().map(|p| format!("ark/{p} connections/s")));
    columns.push(format!("resumed % {all}"));
    table_header(out, &columns.iter().map(String::as_str).collect::<Vec<_>>());
    for (k, case) in rows {
        let of = |i: usize| runs(Some(case), &names[i]);
        let rate = (0..names.len())
            .map(|i| field(of(i), "connections_per_second"))
            .collect::<Vec<_>>();
        let mut cells = vec![label(k), joined(&rate, 0)];
        cells.extend(
            (1..names.len()).map(|i| ratio_cell(ratio(of(0), of(i), "connections_per_second"))),
        );
        let resumed = (0..names.len())
            .map(|i| {
                let shares: Vec<f64> = of(i)
                    .iter()
                    .filter(|r| r["ok"] == true)
                    .filter_map(|r| {
                        let total = r["connections"].as_f64().filter(|t| *t > 0.0)?;
                        Some(100.0 * r["tls_resumed_connections"].as_f64()? / total)
                    })
                    .collect();
                Summary::of(&shares)
            })
            .collect::<Vec<_>>();
        cells.push(joined(&resumed, 1));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
}

fn comparison(rows: &[(&Key, &Runs<'_>)], names: &[String], out: &mut String) {
    let peers = &names[1..];
    let all = names.join(" / ");
    let mut columns = vec!["Case".to_string()];
    columns.extend(names.iter().map(|n| format!("{n} msg/s")));
    columns.extend(peers.iter().map(|p| format!("ark/{p} msg/s")));
    columns.extend(names.iter().map(|n| format!("{n} p99 / µs")));
    columns.extend(peers.iter().map(|p| format!("ark/{p} p99")));
    table_header(out, &columns.iter().map(String::as_str).collect::<Vec<_>>());
    for (k, case) in rows {
        let of = |i: usize| runs(Some(case), &names[i]);
        let mut cells = vec![label(k)];
        for name in ["roundtrips_per_second", "rtt_p99_us"] {
            cells.extend((0..names.len()).map(|i| cell(field(of(i), name), 0)));
            cells.extend((1..names.len()).map(|i| ratio_cell(ratio(of(0), of(i), name))));
        }
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
    let apart = rows.iter().any(|(_, case)| {
        case.values()
            .flatten()
            .any(|r| r.get("server_rss_per_connection_bytes").is_some())
    });
    let mut columns = vec![
        "Case".to_string(),
        format!("CPU % {all}"),
        format!("allocs/msg {all}"),
        format!("syscalls/msg {all}"),
        format!("UDP loss % {all}"),
        format!("ok runs {all}"),
    ];
    if apart {
        columns.push(format!("server RSS bytes per connection {all}"));
        columns.push(format!("server CPU s (whole run) {all}"));
    }
    table_header(out, &columns.iter().map(String::as_str).collect::<Vec<_>>());
    for (k, case) in rows {
        let of = |i: usize| runs(Some(case), &names[i]);
        let each = |f: &dyn Fn(&[&Value]) -> Option<Summary>| {
            (0..names.len()).map(|i| f(of(i))).collect::<Vec<_>>()
        };
        let loss = |runs: &[&Value]| {
            field(runs, "udp_loss_rate").map(|mut s| {
                s.median *= 100.0;
                s
            })
        };
        let loss_cell = if k.0 == "udp" {
            joined(&each(&loss), 4)
        } else {
            "–".to_string()
        };
        let ok = ok_runs((0..names.len()).map(of));
        let server = if apart {
            format!(
                " {} | {} |",
                joined(&each(&|r| field(r, "server_rss_per_connection_bytes")), 0),
                joined(&each(&|r| field(r, "server.cpu_seconds")), 2),
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {loss_cell} | {ok} |{server}",
            label(k),
            joined(&each(&|r| field(r, "cpu_percent")), 1),
            joined(&each(&|r| field(r, "allocations_per_message")), 2),
            joined(&each(&|r| field(r, "syscalls_per_message")), 2),
        );
    }
    let _ = writeln!(out);
}

/// Bar groups: one per `groups` entry, one bar per series (protocol, implementation), each
/// the median of `name` over the runs of the case `select` picks (by protocol and group).
fn bars<G>(
    cases: &BTreeMap<Key, Runs<'_>>,
    series: &[(&str, &str)],
    groups: &[G],
    group_label: impl Fn(&G) -> String,
    select: impl Fn(&Key, &str, &G) -> bool,
    name: &str,
) -> Vec<BarGroup> {
    groups
        .iter()
        .map(|g| BarGroup {
            label: group_label(g),
            values: series
                .iter()
                .map(|(protocol, implementation)| {
                    cases
                        .iter()
                        .find(|(k, _)| select(k, protocol, g))
                        .and_then(|(_, case)| field(runs(Some(case), implementation), name))
                })
                .collect(),
        })
        .collect()
}

const PROTOCOLS: [&str; 7] = ["tcp", "udp", "websocket", "tcps", "wss", "http", "https"];

fn has_data(groups: &[BarGroup]) -> bool {
    groups.iter().any(|g| g.values.iter().any(Option::is_some))
}

/// Throughput and p99 by IO profile (1024 B, 16 clients), and throughput by window: one set
/// of charts for every protocol when one implementation ran, a set per protocol (a bar per
/// implementation) when several did.
fn charts(
    dir: &Path,
    matrix: &str,
    cases: &BTreeMap<Key, Runs<'_>>,
    names: &[String],
    out: &mut String,
) -> Result<(), String> {
    let labels: Vec<&str> = names.iter().map(String::as_str).collect();
    if names.len() > 1 {
        for protocol in PROTOCOLS {
            let series: Vec<(&str, &str)> = labels.iter().map(|n| (protocol, *n)).collect();
            let prefix = format!("{matrix}-{protocol}");
            chart_set(
                dir,
                &prefix,
                &format!("{protocol}, "),
                cases,
                &series,
                &labels,
                out,
            )?;
        }
        return Ok(());
    }
    let series: Vec<(&str, &str)> = PROTOCOLS.iter().map(|p| (*p, labels[0])).collect();
    chart_set(dir, matrix, "", cases, &series, &PROTOCOLS, out)
}

/// The charts of `series` (protocol, implementation) named `names`, in files starting with
/// `prefix`, titles starting with `title`.
fn chart_set(
    dir: &Path,
    prefix: &str,
    title: &str,
    cases: &BTreeMap<Key, Runs<'_>>,
    series: &[(&str, &str)],
    names: &[&str],
    out: &mut String,
) -> Result<(), String> {
    let ios: Vec<(String, u64)> = cases
        .keys()
        .filter(|k| k.2 == 16)
        .map(|k| (k.4.clone(), k.5))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let io_label = |io: &(String, u64)| format!("{} {}", io.0, io.1);
    let busy = |k: &Key, p: &str, io: &(String, u64)| {
        k.0 == p && k.1 == 1024 && k.2 == 16 && k.4 == io.0 && k.5 == io.1
    };
    let throughput = bars(cases, series, &ios, io_label, busy, "roundtrips_per_second");
    if has_data(&throughput) {
        let file = format!("{prefix}-throughput-by-io.svg");
        grouped_bars_svg(
            &dir.join(&file),
            &format!("{title}1024 B, 16 clients: round trips per second by IO profile"),
            "msg/s (log)",
            names,
            &throughput,
        )?;
        let p99 = bars(cases, series, &ios, io_label, busy, "rtt_p99_us");
        let p99_file = format!("{prefix}-p99-by-io.svg");
        grouped_bars_svg(
            &dir.join(&p99_file),
            &format!("{title}1024 B, 16 clients: p99 round trip by IO profile"),
            "µs (log)",
            names,
            &p99,
        )?;
        let _ = writeln!(
            out,
            "![{title}throughput by IO profile]({file})\n\n![{title}p99 by IO profile]({p99_file})\n"
        );
    }
    let windows: Vec<u64> = cases
        .keys()
        .map(|k| k.3)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if windows.len() > 2 {
        let by_window = bars(
            cases,
            series,
            &windows,
            |w| format!("window {w}"),
            |k, p, w| k.0 == p && k.1 == 1024 && k.3 == *w && k.4 == "shared" && k.5 == 1,
            "roundtrips_per_second",
        );
        if has_data(&by_window) {
            let file = format!("{prefix}-throughput-by-window.svg");
            grouped_bars_svg(
                &dir.join(&file),
                &format!("{title}1024 B, shared 1: round trips per second by window"),
                "msg/s (log)",
                names,
                &by_window,
            )?;
            let _ = writeln!(out, "![{title}throughput by window]({file})\n");
        }
    }
    Ok(())
}

/// `docs/performance/README.md`: the newest set of each matrix under the set's parent.
fn docs_index(dir: &Path) -> Result<(), String> {
    // Only for sets inside a repository's results/ directory.
    let Some(results) = dir
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "results"))
    else {
        return Ok(());
    };
    // Newest by when the run finished (its metadata), not by the set's name: names sort
    // by machine first, and a set's number counts only that machine's sets of the day.
    let mut newest: BTreeMap<String, (RunAge, PathBuf)> = BTreeMap::new();
    let dirs = std::fs::read_dir(results)
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir());
    for d in dirs {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "jsonl") {
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let age = run_age(&d, &stem);
                if newest.get(&stem).is_none_or(|(seen, _)| age > *seen) {
                    newest.insert(stem, (age, d.clone()));
                }
            }
        }
    }
    let newest = newest.into_iter().map(|(stem, (_, d))| (stem, d));
    let docs = results
        .parent()
        .unwrap_or(Path::new("."))
        .join("docs/performance");
    std::fs::create_dir_all(&docs).map_err(|e| e.to_string())?;
    let mut out = String::from(
        "# Performance result sets\n\nThe newest committed result set of each benchmark matrix:\n\n| Matrix | Result set | Report |\n| --- | --- | --- |\n",
    );
    for (matrix, d) in newest {
        let name = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let report = if matrix == "framing" || matrix == "sessions" {
            "framing.md"
        } else {
            "report.md"
        };
        let _ = writeln!(
            out,
            "| `{matrix}` | [`{name}`](../../results/{name}/) | [{report}](../../results/{name}/{report}) |"
        );
    }
    let superseded = earlier_tokio_sets(results);
    if !superseded.is_empty() {
        let _ = writeln!(
            out,
            "\nSuperseded tokio ratios: {} compared ark with the first `peer-tokio-loopback` (tokio-util `Framed` with `forward`, tokio-tungstenite, a `recv_from` future per datagram), and ran no raw floor. The rewritten peer does 2.24× that peer's TCP window-16 rate in one run (bench-harness/README.md), so the ark/tokio ratios in those sets overstate ark; they stay as they were run, as the record of what that peer measured.",
            superseded
                .iter()
                .map(|n| format!("[`{n}`](../../results/{n}/)"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    out.push_str("\nFraming benchmark details: [framing.md](framing.md). Loopback fields and what each implementation does per message: [../loopback.md](../loopback.md).\n");
    std::fs::write(docs.join("README.md"), out).map_err(|e| e.to_string())
}

/// When a set named `<machine>-<YYYYMMDD>[-N]` was made: its date, then N (1 without).
/// When a matrix's run in a set finished (`finished_utc` of its metadata, ISO 8601 so it
/// sorts as text; empty if absent), then the set's name order ([`set_age`]).
type RunAge = (String, (String, u32, String));

/// The [`RunAge`] of matrix `stem` in set `dir`.
fn run_age(dir: &Path, stem: &str) -> RunAge {
    let finished = std::fs::read_to_string(dir.join(format!("{stem}.metadata.json")))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|v| v["finished_utc"].as_str().map(str::to_string))
        .unwrap_or_default();
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    (finished, set_age(&name))
}

fn set_age(name: &str) -> (String, u32, String) {
    let parts: Vec<&str> = name.split('-').collect();
    let is_date = |p: &&str| p.len() == 8 && p.bytes().all(|b| b.is_ascii_digit());
    match parts.iter().rposition(is_date) {
        Some(i) => {
            let n = parts.get(i + 1).and_then(|p| p.parse().ok()).unwrap_or(1);
            (parts[i].to_string(), n, name.to_string())
        }
        None => (String::new(), 0, name.to_string()),
    }
}

/// Sets under `results` with tokio records but no raw ones: run with the first tokio peer,
/// before the raw floor existed.
fn earlier_tokio_sets(results: &Path) -> Vec<String> {
    let mut sets: Vec<String> = std::fs::read_dir(results)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter(|e| {
            let records = load(&e.path()).unwrap_or_default();
            let all = || records.values().flatten();
            let implementations: BTreeSet<&str> = all().map(implementation).collect();
            // The raw floor leaves TLS out: only a set with plain protocols and no raw runs
            // is one of the first peer's.
            let plain = all().any(|r| {
                implementation(r) == "tokio"
                    && matches!(r["protocol"].as_str(), Some("tcp" | "udp" | "websocket"))
            });
            plain && !implementations.contains("raw")
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    sets.sort();
    sets
}

/// A Markdown table of the matching cases of two sets: medians and change.
pub(crate) fn compare(a: &Path, b: &Path) -> Result<String, String> {
    let medians = |dir: &Path| -> Result<BTreeMap<(String, Key), Option<f64>>, String> {
        let mut out = BTreeMap::new();
        for (matrix, records) in load(dir)? {
            for (k, case) in group(&records) {
                for (implementation, runs) in case {
                    // Peers are told apart in the matrix column: `baseline tokio`.
                    let name = if implementation == "ark" {
                        matrix.clone()
                    } else {
                        format!("{matrix} {implementation}")
                    };
                    out.insert(
                        (name, k.clone()),
                        field(&runs, "roundtrips_per_second").map(|s| s.median),
                    );
                }
            }
        }
        Ok(out)
    };
    let (ma, mb) = (medians(a)?, medians(b)?);
    let mut out = format!(
        "| Matrix | Protocol | Case | A msg/s ({}) | B msg/s ({}) | Change |\n| --- | --- | --- | ---: | ---: | ---: |\n",
        a.display(),
        b.display()
    );
    let fmt = |v: Option<f64>| v.map_or("failed".to_string(), thousands);
    for (k, va) in &ma {
        if let Some(vb) = mb.get(k) {
            let change = match (va, vb) {
                (Some(x), Some(y)) => percent_change(*y, *x),
                _ => "n/a".to_string(),
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {change} |",
                k.0,
                k.1.0,
                label(&k.1),
                fmt(*va),
                fmt(*vb)
            );
        }
    }
    let only = |x: &BTreeMap<(String, Key), Option<f64>>,
                y: &BTreeMap<(String, Key), Option<f64>>|
     -> Vec<String> {
        x.keys()
            .filter(|k| !y.contains_key(*k))
            .map(|k| format!("{} {} {}", k.0, k.1.0, label(&k.1)))
            .collect()
    };
    for (side, cases) in [("A", only(&ma, &mb)), ("B", only(&mb, &ma))] {
        if !cases.is_empty() {
            let _ = writeln!(out, "\nOnly in {side}: {}", cases.join("; "));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{run_age, set_age};

    #[test]
    fn sets_order_by_their_date_and_number_not_by_machine() {
        let mut names = [
            "xeon-2c-20261130-2",
            "epyc-2c-20261201-2",
            "xeon-2c-20261129",
            "epyc-2c-20261201",
        ];
        names.sort_by_key(|n| set_age(n));
        assert_eq!(
            names,
            [
                "xeon-2c-20261129",
                "xeon-2c-20261130-2",
                "epyc-2c-20261201",
                "epyc-2c-20261201-2"
            ]
        );
    }

    /// Regression: `xeon-2c-20261202-2` finished after `epyc-2c-20261202-8`, and the index
    /// named the EPYC set as the newest (by its name's number).
    #[test]
    fn the_newest_run_is_the_one_that_finished_last() {
        let root = std::env::temp_dir().join(format!("ark-run-age-{}", std::process::id()));
        let set = |name: &str, finished: &str| {
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let meta = format!(r#"{{"finished_utc": "{finished}"}}"#);
            std::fs::write(dir.join("baseline.metadata.json"), meta).unwrap();
            dir
        };
        let epyc = set("epyc-2c-20261202-8", "2026-12-02T16:40:06Z");
        let xeon = set("xeon-2c-20261202-2", "2026-12-02T23:47:11Z");
        assert!(run_age(&xeon, "baseline") > run_age(&epyc, "baseline"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
