//! The report's "Reliable UDP" section: rudp records over a conditioned link, ark with FEC off
//! (ARQ only), fixed and adaptive, beside KCP's fast and default modes (`matrix rudp`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use ark_bench::chart::{BarGroup, lines_svg};
use ark_bench::matrix::decimal;
use ark_bench::stats::{Summary, thousands};
use serde_json::Value;

use super::{field_by, implementation, ok_runs, ratio, ratio_cell, table_header, value, verdict};

mod bulk;

/// Whether `r` is a reliable-UDP run.
pub(super) fn is_rudp(r: &Value) -> bool {
    r["protocol"] == "rudp"
}

/// A run's link, each way.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub(super) loss: f64,
    pub(super) delay_ms: f64,
    pub(super) jitter_ms: f64,
    pub(super) seed: u64,
}

/// The link a record ran over: its `link.settings`, or for a record without (a run that failed
/// before its link started, or no link) the case the harness asked for (`case`), or none.
pub(super) fn link_of(r: &Value) -> Link {
    let said = &r["link"]["settings"];
    let (settings, prefix) = if said.is_object() {
        (said, "")
    } else {
        (&r["case"], "link_")
    };
    let number = |name: &str| settings[format!("{prefix}{name}")].as_f64().unwrap_or(0.0);
    Link {
        loss: number("loss"),
        delay_ms: number("delay_ms"),
        jitter_ms: number("jitter_ms"),
        seed: settings[format!("{prefix}seed")].as_u64().unwrap_or(1),
    }
}

/// A record's FEC (`rudp.fec`): for ark's runs that did not say (failed early), the case's
/// `rudp_fec`; peers without FEC (KCP: `null`) have none.
pub(super) fn fec_of(r: &Value) -> Option<&str> {
    r["rudp"]["fec"]
        .as_str()
        .or_else(|| {
            (implementation(r) == "ark" && !r["rudp"].is_object())
                .then(|| r["case"]["rudp_fec"].as_str())
                .flatten()
        })
        .filter(|f| !f.is_empty())
}

/// The column of a run: `ark ARQ` (FEC off), `ark fixed:8,2`, `ark adaptive`, or the peer
/// (`kcp-fast`, `kcp-default`, `quinn`, `quinn-stream`).
fn column(r: &Value) -> String {
    match (implementation(r), fec_of(r)) {
        ("ark", Some("off")) => "ark ARQ".to_string(),
        ("ark", Some(fec)) => format!("ark {fec}"),
        (name, _) => name.to_string(),
    }
}

/// Column order: ark's ARQ, fixed, adaptive, then KCP fast and default, then quinn's stream
/// per message and one stream, then the rest.
fn column_rank(column: &str) -> u8 {
    match column {
        "ark ARQ" => 0,
        c if c.starts_with("ark fixed") => 1,
        "ark adaptive" => 2,
        c if c.starts_with("ark") => 3,
        "kcp-fast" => 4,
        "kcp-default" => 5,
        "quinn" => 6,
        "quinn-stream" => 7,
        _ => 8,
    }
}

/// Thousandths of a setting, for keys (f64 is not `Ord`): ms → µs, and ×1000 for loss in ppm.
fn milli(v: f64) -> u64 {
    (v * 1000.0).round() as u64
}

/// One table: the case's shape, its link's delay and jitter (µs) and window.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Panel {
    payload: u64,
    clients: u64,
    io: (String, u64),
    seed: u64,
    delay: u64,
    jitter: u64,
    window: u64,
}

impl Panel {
    fn of(r: &Value) -> Panel {
        let link = link_of(r);
        Panel {
            payload: r["payload_bytes"].as_u64().unwrap_or(0),
            clients: r["clients"].as_u64().unwrap_or(0),
            io: (
                r["io_model"].as_str().unwrap_or("?").to_string(),
                r["io_threads"].as_u64().unwrap_or(0),
            ),
            seed: link.seed,
            delay: milli(link.delay_ms),
            jitter: milli(link.jitter_ms),
            window: r["window"].as_u64().unwrap_or(0),
        }
    }

    /// `1024 B, 16 clients, shared 1`.
    fn shape(&self) -> String {
        let seed = if self.seed == 1 {
            String::new()
        } else {
            format!(", link seed {}", self.seed)
        };
        format!(
            "{} B, {} clients, {} {}{seed}",
            self.payload, self.clients, self.io.0, self.io.1
        )
    }

    /// `delay 20±5 ms` or `no delay`.
    fn delay(&self) -> String {
        match (self.delay, self.jitter) {
            (0, 0) => "no delay".to_string(),
            (d, 0) => format!("delay {} ms", decimal(d as f64 / 1000.0)),
            (d, j) => format!(
                "delay {}±{} ms",
                decimal(d as f64 / 1000.0),
                decimal(j as f64 / 1000.0)
            ),
        }
    }
}

/// Runs of a table: loss (parts per million) → column → runs.
type Rows<'a> = BTreeMap<u64, BTreeMap<String, Vec<&'a Value>>>;

fn loss_label(loss: u64) -> String {
    format!("{} %", decimal(loss as f64 / 1e4))
}

/// The runs of `column` in `row`.
fn runs_of<'a, 'b>(rows: &'b Rows<'a>, loss: u64, column: &str) -> &'b [&'a Value] {
    rows.get(&loss)
        .and_then(|r| r.get(column))
        .map_or(&[], Vec::as_slice)
}

/// One figure per column, ` / ` between: `–` for a column that did not run, `failed` when no
/// run of it is ok (or, with `measured`, when none measured anything), `—` when its runs do
/// not give the figure (KCP's FEC recoveries).
fn figures(
    per_column: &[&[&Value]],
    of: impl Fn(&Value) -> Option<f64>,
    digits: usize,
    measured: bool,
) -> String {
    per_column
        .iter()
        .map(|runs| {
            let usable: Vec<&Value> = runs
                .iter()
                .copied()
                .filter(|r| {
                    r["ok"] == true || (measured && r["messages_sent"].as_u64().unwrap_or(0) > 0)
                })
                .collect();
            let values: Vec<f64> = usable.iter().filter_map(|r| of(r)).collect();
            match Summary::of(&values) {
                _ if runs.is_empty() => "–".to_string(),
                _ if usable.is_empty() => "failed".to_string(),
                None => "—".to_string(),
                Some(s) if digits == 0 => thousands(s.median),
                Some(s) => format!("{:.*}", digits, s.median),
            }
        })
        .collect::<Vec<_>>()
        .join(" / ")
}

fn p_ms(name: &'static str) -> impl Fn(&Value) -> Option<f64> {
    move |r| value(r, name).map(|us| us / 1000.0)
}

/// Messages a run lost: UDP's lost messages, or those unfinished after the drain.
fn lost(r: &Value) -> Option<f64> {
    value(r, "udp_lost_messages").or_else(|| value(r, "unfinished_messages"))
}

const WIRE: &str = "link.wire_bytes_per_delivered_byte";

/// The section: a table per link delay and window, the target ratios, and the charts
/// (`rudp-latency.svg`, `rudp-overhead.svg` for the matrix `rudp`).
pub(super) fn section(
    dir: &Path,
    matrix: &str,
    (records, others): (&[Value], &[Value]),
    out: &mut String,
) -> Result<(), String> {
    let mut panels: BTreeMap<Panel, Rows<'_>> = BTreeMap::new();
    for r in records {
        panels
            .entry(Panel::of(r))
            .or_default()
            .entry(milli(link_of(r).loss * 1000.0))
            .or_default()
            .entry(column(r))
            .or_default()
            .push(r);
    }
    let _ = writeln!(
        out,
        "### Reliable UDP\n\nRound trips of reliable, ordered messages through a conditioned link (ark-link's relay between the clients and the server: the loss, delay and jitter apply each way). ark runs with FEC off (ARQ only), fixed Reed–Solomon FEC and adaptive FEC; KCP (`peer-kcp-loopback`) has no FEC and runs beside ark's ARQ; QUIC (`peer-quinn-loopback`, `quinn` and `quinn-stream`) has none either, and runs beside each of ark's modes (its column gathers them). Each cell lists the columns named above the table, ` / ` between: medians over the ok runs; lost (messages unfinished after the drain) and order errors over every run that measured, since such a run fails; `–` not run, `failed` no ok run, `—` not counted by the implementation. Wire B/B: bytes the endpoints offered the link, both ways (payloads, headers, acknowledgements, retransmissions, parity), per payload byte delivered; none without a link (no loss, no delay). Retransmissions and FEC recoveries are the transport's own counters (`rudp`).\n"
    );
    for (panel, rows) in &panels {
        let columns = columns(rows);
        let _ = writeln!(
            out,
            "#### {}, {}, window {}\n\nColumns: {}\n",
            panel.shape(),
            panel.delay(),
            panel.window,
            columns.join(" / ")
        );
        table_header(
            out,
            &[
                "Loss",
                "msg/s",
                "p50 / ms",
                "p99 / ms",
                "p99.9 / ms",
                "wire B/B",
                "lost",
                "order errors",
                "retransmissions",
                "FEC recoveries",
                "ok runs",
            ],
        );
        for &loss in rows.keys() {
            let per_column: Vec<&[&Value]> =
                columns.iter().map(|c| runs_of(rows, loss, c)).collect();
            let ok = ok_runs(per_column.iter().copied());
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {ok} |",
                loss_label(loss),
                figures(&per_column, |r| value(r, "roundtrips_per_second"), 0, false),
                figures(&per_column, p_ms("rtt_p50_us"), 2, false),
                figures(&per_column, p_ms("rtt_p99_us"), 2, false),
                figures(&per_column, p_ms("rtt_p999_us"), 2, false),
                figures(&per_column, |r| value(r, WIRE), 2, false),
                figures(&per_column, lost, 0, true),
                figures(&per_column, |r| value(r, "order_errors"), 0, true),
                figures(&per_column, |r| value(r, "rudp.retransmissions"), 0, false),
                figures(&per_column, |r| value(r, "rudp.fec_recoveries"), 0, false),
            );
        }
        let _ = writeln!(out);
    }
    targets(&panels, out);
    bulk::table(&panels, out);
    against_udp(&panels, others, out);
    charts(dir, matrix, &panels, out)
}

/// The columns of a table's runs, in [`column_rank`] order.
fn columns(rows: &Rows<'_>) -> Vec<String> {
    let mut columns: Vec<String> = rows
        .values()
        .flat_map(|r| r.keys().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    columns.sort_by(|a, b| column_rank(a).cmp(&column_rank(b)).then(a.cmp(b)));
    columns
}

/// The reliable-UDP targets at 5 % loss, delay 20±5 ms, window 16: ark adaptive's p99 at most
/// 0.8 of KCP fast's, and its wire bytes per payload byte at most KCP fast's. Ratios are
/// medians of per-repetition ratios (min–max).
fn targets(panels: &BTreeMap<Panel, Rows<'_>>, out: &mut String) {
    let at: Vec<(&Panel, &Rows<'_>)> = panels
        .iter()
        .filter(|(p, rows)| {
            (p.delay, p.jitter, p.window) == (20_000, 5_000, 16) && rows.contains_key(&50_000)
        })
        .collect();
    if at.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "#### Targets: loss 5 %, delay 20±5 ms, window 16\n\nark adaptive over kcp-fast, medians of per-repetition ratios (min–max).\n"
    );
    table_header(
        out,
        &["Case", "Figure", "adaptive / kcp-fast", "Target", "Verdict"],
    );
    for (panel, rows) in at {
        let (ark, kcp) = (
            runs_of(rows, 50_000, "ark adaptive"),
            runs_of(rows, 50_000, "kcp-fast"),
        );
        for (figure, name, target) in [("p99", "rtt_p99_us", 0.8), ("wire B/B", WIRE, 1.0)] {
            let r = ratio(ark, kcp, name);
            let verdict = verdict(r, target, false);
            let _ = writeln!(
                out,
                "| {} | {figure} | {} | ≤ {} | {verdict} |",
                panel.shape(),
                ratio_cell(r),
                decimal(target)
            );
        }
    }
    let _ = writeln!(out);
}

/// The clean-link target: ark-rudp's msg/s without loss or link at least 0.8 of plain ark
/// udp's of the same shape and window in the same set (medians of per-repetition ratios).
fn against_udp(panels: &BTreeMap<Panel, Rows<'_>>, others: &[Value], out: &mut String) {
    let mut lines = Vec::new();
    for (panel, rows) in panels.iter().filter(|(p, _)| (p.delay, p.jitter) == (0, 0)) {
        let plain: Vec<&Value> = others
            .iter()
            .filter(|r| {
                r["protocol"] == "udp"
                    && implementation(r) == "ark"
                    && r["window"].as_u64() == Some(panel.window)
                    && r["clients"].as_u64() == Some(panel.clients)
                    && r["payload_bytes"].as_u64() == Some(panel.payload)
            })
            .collect();
        if plain.is_empty() {
            // No plain udp of this shape in the set (the bulk matrix has none): no row.
            continue;
        }
        for column in columns(rows).iter().filter(|c| c.starts_with("ark")) {
            let r = ratio(runs_of(rows, 0, column), &plain, "roundtrips_per_second");
            let verdict = verdict(r, 0.8, true);
            lines.push(format!(
                "| {}, window {} | {column} | {} | ≥ 0.8 | {verdict} |",
                panel.shape(),
                panel.window,
                ratio_cell(r)
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "#### Target: a clean link (no loss, no link), against plain ark udp

msg/s of ark-rudp over plain ark udp of the same shape and window, medians of per-repetition ratios (min–max).
"
    );
    table_header(out, &["Case", "Mode", "rudp / udp", "Target", "Verdict"]);
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

/// p99 and wire bytes against loss, a line per column, for the largest window of the first
/// case shape: `{prefix}-latency.svg` and `{prefix}-overhead.svg` for the largest link delay,
/// `{prefix}-latency-delay{D}ms.svg` and `-overhead-delay{D}ms.svg` for the others; `prefix`
/// is `rudp` for the matrix of that name, `{matrix}-rudp` otherwise.
fn charts(
    dir: &Path,
    matrix: &str,
    panels: &BTreeMap<Panel, Rows<'_>>,
    out: &mut String,
) -> Result<(), String> {
    let Some(first) = panels.keys().next() else {
        return Ok(());
    };
    let same_shape = |p: &Panel| {
        (p.payload, p.clients, &p.io, p.seed)
            == (first.payload, first.clients, &first.io, first.seed)
    };
    let window = panels
        .keys()
        .filter(|p| same_shape(p))
        .map(|p| p.window)
        .max()
        .unwrap_or(0);
    let chosen: Vec<(&Panel, &Rows<'_>)> = panels
        .iter()
        .filter(|(p, _)| same_shape(p) && p.window == window)
        .collect();
    let largest = chosen.iter().map(|(p, _)| (p.delay, p.jitter)).max();
    let prefix = if matrix == "rudp" {
        "rudp".to_string()
    } else {
        format!("{matrix}-rudp")
    };
    for (panel, rows) in chosen {
        let suffix = if Some((panel.delay, panel.jitter)) == largest {
            String::new()
        } else {
            format!("-delay{}ms", decimal(panel.delay as f64 / 1000.0))
        };
        panel_charts(dir, (&prefix, &suffix), (panel, rows), out)?;
    }
    Ok(())
}

/// The latency and overhead charts of one panel (`rows`: its columns' runs by loss),
/// `{prefix}-latency{suffix}.svg` and `{prefix}-overhead{suffix}.svg`, linked from `out`.
fn panel_charts(
    dir: &Path,
    (prefix, suffix): (&str, &str),
    (panel, rows): (&Panel, &Rows<'_>),
    out: &mut String,
) -> Result<(), String> {
    let columns = columns(rows);
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let points = |of: &dyn Fn(&Value) -> Option<f64>| -> Vec<BarGroup> {
        rows.keys()
            .map(|&loss| BarGroup {
                label: loss_label(loss),
                values: columns
                    .iter()
                    .map(|c| field_by(runs_of(rows, loss, c), of))
                    .collect(),
            })
            .collect()
    };
    let case = format!(
        "{}, {}, window {}",
        panel.shape(),
        panel.delay(),
        panel.window
    );
    for (kind, figure, of, log, y) in [
        (
            "latency",
            "p99 round trip",
            &p_ms("rtt_p99_us") as &dyn Fn(&Value) -> Option<f64>,
            true,
            "p99 / ms (log)",
        ),
        (
            "overhead",
            "wire bytes per payload byte",
            &|r: &Value| value(r, WIRE),
            false,
            "wire B per delivered payload B",
        ),
    ] {
        let file = format!("{prefix}-{kind}{suffix}.svg");
        match lines_svg(
            &dir.join(&file),
            &format!("rudp {figure} by link loss: {case}"),
            ("loss each way", y),
            &names,
            &points(of),
            log,
        ) {
            Ok(()) => {
                let _ = writeln!(out, "![rudp {figure}, {case}]({file})\n");
            }
            // Every run failed, or none had a link: the tables say so.
            Err(e) if e.starts_with("no positive values") => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `implementation` (and ark's `fec`) at `loss`, delay 20±5 ms, window 16.
    fn run(implementation: &str, fec: Option<&str>, loss: f64, p99_us: f64, wire: f64) -> Value {
        serde_json::json!({
            "schema_version": 1, "implementation": implementation, "protocol": "rudp",
            "payload_bytes": 1024, "clients": 16, "window": 16, "io_model": "shared",
            "io_threads": 1, "address_family": "ipv4", "ok": true, "repetition": 1,
            "messages_sent": 1000, "roundtrips_per_second": 12345.0, "rtt_p50_us": 41000.0,
            "rtt_p99_us": p99_us, "rtt_p999_us": p99_us * 1.5, "unfinished_messages": 0,
            "order_errors": 0,
            "link": {"settings": {"loss": loss, "delay_ms": 20.0, "jitter_ms": 5.0, "seed": 1},
                "wire_bytes_per_delivered_byte": wire},
            "rudp": {"fec": fec, "retransmissions": 17, "fec_recoveries": match fec {
                None => Value::Null,
                Some("off") => 0.into(),
                Some(_) => 3.into(),
            }},
            "case": {"rudp_fec": fec.unwrap_or("off")},
        })
    }

    #[test]
    fn tables_hold_every_mode_and_the_targets_and_failures_show() {
        let mut records = vec![
            run("ark", Some("off"), 0.05, 90_000.0, 1.3),
            run("ark", Some("fixed:8,2"), 0.05, 70_000.0, 1.4),
            run("ark", Some("adaptive"), 0.05, 60_000.0, 1.2),
            run("kcp-fast", None, 0.05, 100_000.0, 1.5),
            run("ark", Some("adaptive"), 0.01, 50_000.0, 1.1),
        ];
        // kcp-default failed before its link started: placed by its case.
        records.push(serde_json::json!({
            "schema_version": 1, "implementation": "kcp-default", "protocol": "rudp",
            "payload_bytes": 1024, "clients": 16, "window": 16, "io_model": "shared",
            "io_threads": 1, "ok": false, "error": "boom", "messages_sent": 0,
            "link": null, "rudp": null, "repetition": 1,
            "case": {"link_loss": 0.05, "link_delay_ms": 20.0, "link_jitter_ms": 5.0,
                "rudp_fec": "off"},
        }));
        let dir =
            std::env::temp_dir().join(format!("ark-bench-rudp-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut out = String::new();
        section(&dir, "rudp", (&records, &[]), &mut out).unwrap();
        assert!(
            out.contains("#### 1024 B, 16 clients, shared 1, delay 20±5 ms, window 16"),
            "{out}"
        );
        assert!(
            out.contains(
                "Columns: ark ARQ / ark fixed:8,2 / ark adaptive / kcp-fast / kcp-default"
            ),
            "{out}"
        );
        let row = out
            .lines()
            .find(|l| l.starts_with("| 5 % |"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            row.contains("| 90.00 / 70.00 / 60.00 / 100.00 / failed |"),
            "p99 in ms, kcp-default failed: {row}"
        );
        assert!(
            row.contains("| 1.30 / 1.40 / 1.20 / 1.50 / failed |"),
            "{row}"
        );
        assert!(
            row.contains("| 0 / 3 / 3 / — / failed |"),
            "FEC recoveries: {row}"
        );
        assert!(row.ends_with("| 1/1 / 1/1 / 1/1 / 1/1 / 0/1 |"), "{row}");
        let one = out.lines().find(|l| l.starts_with("| 1 % |")).unwrap();
        assert!(one.contains("| – / – / 12,345 / – / – |"), "{one}");
        // adaptive / kcp-fast: p99 0.6 (met), wire 0.8 (met).
        assert!(
            out.contains("| p99 | 0.60 (0.60–0.60) | ≤ 0.8 | met |"),
            "{out}"
        );
        assert!(
            out.contains("| wire B/B | 0.80 (0.80–0.80) | ≤ 1 | met |"),
            "{out}"
        );
        for chart in ["rudp-latency.svg", "rudp-overhead.svg"] {
            let svg = std::fs::read_to_string(dir.join(chart)).unwrap();
            assert!(
                svg.contains("kcp-fast") && svg.contains("ark adaptive"),
                "{chart}"
            );
            assert!(out.contains(chart));
        }
        if std::env::var_os("KEEP_RUDP_CHARTS").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn failed_runs_are_placed_by_their_case() {
        let failed = serde_json::json!({"implementation": "ark", "protocol": "rudp",
            "ok": false, "link": null, "rudp": null,
            "case": {"link_loss": 0.1, "link_delay_ms": 20.0, "rudp_fec": "fixed:8,2"}});
        let link = link_of(&failed);
        assert_eq!(
            (link.loss, link.delay_ms, link.jitter_ms, link.seed),
            (0.1, 20.0, 0.0, 1)
        );
        assert_eq!(column(&failed), "ark fixed:8,2");
        assert_eq!(
            super::super::key(&failed).0,
            "rudp loss 10% delay 20ms fec fixed:8,2"
        );
        let kcp = serde_json::json!({"implementation": "kcp-fast", "rudp": {"fec": null},
            "case": {"rudp_fec": "off"}});
        assert_eq!(column(&kcp), "kcp-fast");
        assert_eq!(fec_of(&kcp), None);
    }

    #[test]
    fn a_clean_link_is_compared_with_plain_udp_of_the_same_window() {
        let rudp = serde_json::json!({
            "implementation": "ark", "protocol": "rudp", "ok": true, "repetition": 1,
            "payload_bytes": 1024, "clients": 16, "window": 16, "io_model": "shared",
            "io_threads": 1, "roundtrips_per_second": 90.0, "link": null,
            "rudp": {"fec": "adaptive"},
        });
        let udp = serde_json::json!({
            "implementation": "ark", "protocol": "udp", "ok": true, "repetition": 1,
            "payload_bytes": 1024, "clients": 16, "window": 16, "roundtrips_per_second": 100.0,
        });
        let dir = std::env::temp_dir().join(format!("ark-bench-rudp-udp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut out = String::new();
        section(&dir, "x", (&[rudp], &[udp]), &mut out).unwrap();
        assert!(
            out.contains("| ark adaptive | 0.90 (0.90–0.90) | ≥ 0.8 | met |"),
            "{out}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
