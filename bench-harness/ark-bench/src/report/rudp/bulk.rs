//! The bulk table of the "Reliable UDP" section: for messages of 64 KiB and more, each ark
//! mode's payload rate and CPU per byte against the stronger of quinn's two modes and KCP's
//! fast mode, with issue 37's targets (a clean link: ≥ 1.5× quinn's MB/s at ≤ its CPU per
//! byte, ≥ 3× KCP's; 1 % loss with a delay: ≥ 1.2× quinn's MB/s).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ark_bench::stats::Summary;
use serde_json::Value;

use super::super::{field_by, ratio_by, ratio_cell, table_header, value};
use super::{Panel, Rows, columns, loss_label, runs_of};

/// Messages this large or larger make a bulk case.
const BULK_PAYLOAD: u64 = 65_536;

/// Echoed payload per second, one way, in MB (10^6 B).
fn mb_per_second(r: &Value) -> Option<f64> {
    Some(value(r, "roundtrips_per_second")? * value(r, "payload_bytes")? / 1e6)
}

/// CPU seconds of the run's process (server, clients, link) per GB (10^9 B) of payload
/// echoed (one way) while it measured.
fn cpu_seconds_per_gb(r: &Value) -> Option<f64> {
    let bytes = value(r, "messages")? * value(r, "payload_bytes")?;
    (bytes > 0.0)
        .then(|| value(r, "cpu_seconds").unwrap_or(f64::NAN) * 1e9 / bytes)
        .filter(|v| v.is_finite())
}

/// A target on the ratios of one row: MB/s over quinn's, CPU per byte over quinn's, MB/s
/// over KCP's (each a bound, or none).
struct Target {
    over_quinn: Option<f64>,
    cpu_over_quinn: Option<f64>,
    over_kcp: Option<f64>,
}

/// The target of a row of ark's `column` at `loss` (ppm) on `panel`'s link, if any: ark's own
/// modes are held to them, ark without the offloads (`ark-no-offload`) is shown beside.
fn target(panel: &Panel, loss: u64, column: &str) -> Option<Target> {
    if column == "ark-no-offload" {
        return None;
    }
    match (loss, panel.delay) {
        (0, 0) => Some(Target {
            over_quinn: Some(1.5),
            cpu_over_quinn: Some(1.0),
            over_kcp: Some(3.0),
        }),
        (10_000, d) if d > 0 => Some(Target {
            over_quinn: Some(1.2),
            cpu_over_quinn: None,
            over_kcp: None,
        }),
        _ => None,
    }
}

/// "met", or "short (…)" naming each bound missed, or "no data"; a KCP without an ok run
/// (it refuses messages over 127 segments) is said, not counted as short.
fn verdict(target: &Target, ratios: [Option<Summary>; 3]) -> String {
    let bounds = [
        ("quinn", target.over_quinn, true),
        ("CPU/B", target.cpu_over_quinn, false),
        ("KCP", target.over_kcp, true),
    ];
    let (mut short, mut unmeasured) = (Vec::new(), "");
    for ((name, bound, at_least), ratio) in bounds.into_iter().zip(ratios) {
        let Some(bound) = bound else { continue };
        match ratio {
            None if name == "KCP" => unmeasured = "; KCP: no ok run",
            None => return "no data".to_string(),
            Some(r) if r.median == bound || (r.median > bound) == at_least => {}
            Some(r) => short.push(format!("{name} {:.2}", r.median)),
        }
    }
    if short.is_empty() {
        format!("met{unmeasured}")
    } else {
        format!("short ({}){unmeasured}", short.join(", "))
    }
}

/// The stronger of quinn's columns in a row (the higher median MB/s), with its runs.
fn strongest_quinn<'a, 'b>(
    rows: &'b Rows<'a>,
    loss: u64,
) -> Option<(&'static str, &'b [&'a Value])> {
    ["quinn", "quinn-stream"]
        .into_iter()
        .map(|c| (c, runs_of(rows, loss, c)))
        .filter_map(|(c, runs)| Some((c, runs, field_by(runs, mb_per_second)?.median)))
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .map(|(c, runs, _)| (c, runs))
}

/// The bulk table, if the section has bulk cases.
pub(super) fn table(panels: &BTreeMap<Panel, Rows<'_>>, out: &mut String) {
    let bulk: Vec<(&Panel, &Rows<'_>)> = panels
        .iter()
        .filter(|(p, _)| p.payload >= BULK_PAYLOAD)
        .collect();
    if bulk.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "#### Bulk: payload rate and CPU per byte against quinn and KCP\n\nMB/s: payload echoed per second, one way (10^6 B); CPU s/GB: the process's CPU seconds (server, clients and link together) per 10^9 B of payload echoed while it measured; medians of ok runs. Ratios are medians of per-repetition ratios (min–max), against the stronger of quinn's two modes in that row (named) and against kcp-fast; CPU/B below 1 favours ark. quinn encrypts and authenticates every packet (AES-GCM); ark-rudp authenticates its handshake (HMAC cookie) and carries per-session tokens, with no per-packet MAC.\n"
    );
    table_header(
        out,
        &[
            "Case",
            "Loss",
            "ark",
            "MB/s ark / quinn / quinn-stream / kcp-fast",
            "CPU s/GB ark / quinn / quinn-stream / kcp-fast",
            "ark/quinn MB/s",
            "ark/quinn CPU/B",
            "ark/kcp-fast MB/s",
            "Target",
            "Verdict",
        ],
    );
    for (panel, rows) in bulk {
        for &loss in rows.keys() {
            for column in columns(rows).iter().filter(|c| c.starts_with("ark")) {
                row(panel, (rows, loss), column, out);
            }
        }
    }
    let _ = writeln!(out);
}

/// One row: ark's `column` at `loss` against the peers of that row.
fn row(panel: &Panel, (rows, loss): (&Rows<'_>, u64), column: &str, out: &mut String) {
    let ark = runs_of(rows, loss, column);
    let peers = ["quinn", "quinn-stream", "kcp-fast"].map(|c| runs_of(rows, loss, c));
    let figures = |of: fn(&Value) -> Option<f64>| {
        std::iter::once(ark)
            .chain(peers)
            .map(|runs| match field_by(runs, of) {
                _ if runs.is_empty() => "–".to_string(),
                None => "failed".to_string(),
                Some(s) if s.median >= 100.0 => format!("{:.0}", s.median),
                Some(s) => format!("{:.1}", s.median),
            })
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let quinn = strongest_quinn(rows, loss);
    let over_quinn = quinn.and_then(|(_, q)| ratio_by(ark, q, mb_per_second));
    let cpu = quinn.and_then(|(_, q)| ratio_by(ark, q, cpu_seconds_per_gb));
    let over_kcp = ratio_by(ark, peers[2], mb_per_second);
    let named = |r: Option<Summary>| match quinn {
        Some((name, _)) if r.is_some() => format!("{} vs {name}", ratio_cell(r)),
        _ => ratio_cell(r),
    };
    let (target_cell, verdict_cell) = match target(panel, loss, column) {
        Some(t) => (target_text(&t), verdict(&t, [over_quinn, cpu, over_kcp])),
        None => ("–".to_string(), "–".to_string()),
    };
    let _ = writeln!(
        out,
        "| {}, {}, window {} | {} | {column} | {} | {} | {} | {} | {} | {target_cell} | {verdict_cell} |",
        panel.shape(),
        panel.delay(),
        panel.window,
        loss_label(loss),
        figures(mb_per_second),
        figures(cpu_seconds_per_gb),
        named(over_quinn),
        named(cpu),
        ratio_cell(over_kcp),
    );
}

/// `≥ 1.5× quinn, CPU/B ≤ 1, ≥ 3× KCP`.
fn target_text(t: &Target) -> String {
    let mut parts = Vec::new();
    if let Some(b) = t.over_quinn {
        parts.push(format!("≥ {b}× quinn"));
    }
    if let Some(b) = t.cpu_over_quinn {
        parts.push(format!("CPU/B ≤ {b}"));
    }
    if let Some(b) = t.over_kcp {
        parts.push(format!("≥ {b}× KCP"));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean-link 64 KiB run of `implementation` (ark: FEC off) at `rate` round trips per
    /// second, `cpu` CPU seconds for 1,000 messages.
    fn run(implementation: &str, rate: f64, cpu: f64) -> Value {
        serde_json::json!({
            "implementation": implementation, "protocol": "rudp", "ok": true, "repetition": 1,
            "payload_bytes": 65_536, "clients": 1, "window": 8, "io_model": "shared",
            "io_threads": 1, "roundtrips_per_second": rate, "messages": 1_000,
            "cpu_seconds": cpu, "link": null,
            "rudp": {"fec": if implementation == "ark" { Value::from("off") } else { Value::Null }},
        })
    }

    fn rendered(records: &[Value]) -> String {
        let mut panels: BTreeMap<Panel, Rows<'_>> = BTreeMap::new();
        for r in records {
            panels
                .entry(Panel::of(r))
                .or_default()
                .entry(0)
                .or_default()
                .entry(super::super::column(r))
                .or_default()
                .push(r);
        }
        let mut out = String::new();
        table(&panels, &mut out);
        out
    }

    #[test]
    fn ark_is_held_to_the_stronger_quinn_and_to_kcp() {
        // MB/s: ark 65.5, quinn 13.1, quinn-stream 26.2, KCP 13.1; CPU s/GB: 1,000 messages
        // of 64 KiB are 0.0655 GB, so 0.0655 CPU s is 1.0 s/GB.
        let records = [
            run("ark", 1_000.0, 0.0655),
            run("quinn", 200.0, 0.262),
            run("quinn-stream", 400.0, 0.131),
            run("kcp-fast", 200.0, 0.5),
        ];
        let out = rendered(&records);
        let row = out
            .lines()
            .find(|l| l.contains("| ark ARQ |"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(row.contains("| 65.5 / 13.1 / 26.2 / 13.1 |"), "{row}");
        assert!(row.contains("| 1.0 / 4.0 / 2.0 / 7.6 |"), "{row}");
        assert!(
            row.contains("| 2.50 (2.50–2.50) vs quinn-stream |"),
            "{row}"
        );
        assert!(
            row.contains("| 0.50 (0.50–0.50) vs quinn-stream |"),
            "{row}"
        );
        assert!(row.contains("| 5.00 (5.00–5.00) |"), "{row}");
        assert!(row.ends_with("| met |"), "{row}");
    }

    #[test]
    fn a_miss_is_named_and_a_kcp_without_ok_runs_is_said() {
        let mut kcp = run("kcp-fast", 0.0, 0.0);
        kcp["ok"] = false.into();
        let records = [
            run("ark", 1_000.0, 0.0655),
            run("quinn", 800.0, 0.0328),
            kcp,
        ];
        let out = rendered(&records);
        assert!(
            out.contains("| short (quinn 1.25, CPU/B 2.00); KCP: no ok run |"),
            "{out}"
        );
        assert!(out.contains("| 65.5 / 52.4 / – / failed |"), "{out}");
    }
}
