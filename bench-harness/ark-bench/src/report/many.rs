//! The report's targets for many connections (`matrix connections`): at 10,000 connected
//! clients, ark's msg/s at least 1.1× the peer's, its p99 at most the peer's, and its server
//! RSS per connection at most half the peer's — against tokio and against tokio-4k (tokio
//! with 4 KiB buffers per connection, the peer tuned for many connections) alike.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Key, Runs, label, ratio, ratio_cell, runs, table_header, verdict};

/// Connected clients the targets are set at.
const MANY: u64 = 10_000;

/// (figure, field, bound, whether ark must be at least the bound).
const TARGETS: [(&str, &str, f64, bool); 3] = [
    ("msg/s", "roundtrips_per_second", 1.1, true),
    ("p99", "rtt_p99_us", 1.0, false),
    (
        "server RSS per connection",
        "server_rss_per_connection_bytes",
        0.5,
        false,
    ),
];

/// The peers the targets hold against.
const PEERS: [&str; 2] = ["tokio", "tokio-4k"];

/// The targets table, if the set has cases at [`MANY`] clients with ark and a tokio peer.
pub(super) fn targets(cases: &BTreeMap<Key, Runs<'_>>, out: &mut String) {
    let mut lines = Vec::new();
    for (k, case) in cases.iter().filter(|(k, _)| k.2 == MANY) {
        let ark = runs(Some(case), "ark");
        for peer in PEERS.into_iter().filter(|p| case.contains_key(*p)) {
            let theirs = runs(Some(case), peer);
            for (figure, field, bound, at_least) in TARGETS {
                let r = ratio(ark, theirs, field);
                lines.push(format!(
                    "| {} {} | {peer} | {figure} | {} | {} {bound} | {} |",
                    k.0,
                    label(k),
                    ratio_cell(r),
                    if at_least { "≥" } else { "≤" },
                    verdict(r, bound, at_least)
                ));
            }
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### Targets at {MANY} connections\n\nark over each tokio peer, medians of per-repetition ratios (min–max); RSS per connection is the server's growth in peak RSS from the start of the run over the clients connected (`server_rss_per_connection_bytes`).\n"
    );
    table_header(
        out,
        &["Case", "Peer", "Figure", "ark / peer", "Target", "Verdict"],
    );
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(implementation: &str, rate: f64, p99: f64, rss: f64) -> serde_json::Value {
        serde_json::json!({
            "implementation": implementation, "protocol": "tcp", "ok": true, "repetition": 1,
            "payload_bytes": 1024, "clients": 10_000, "window": 1, "io_model": "shared",
            "io_threads": 1, "roundtrips_per_second": rate, "rtt_p99_us": p99,
            "server_rss_per_connection_bytes": rss,
        })
    }

    #[test]
    fn each_figure_is_held_to_its_bound_against_each_tokio() {
        let records = [
            run("ark", 110.0, 100.0, 1_000.0),
            run("tokio", 100.0, 90.0, 2_000.0),
            run("tokio-4k", 120.0, 100.0, 1_500.0),
        ];
        let cases = super::super::group(&records);
        let mut out = String::new();
        targets(&cases, &mut out);
        let line = |peer: &str, figure: &str| {
            out.lines()
                .find(|l| l.contains(&format!("| {peer} | {figure} |")))
                .unwrap_or_else(|| panic!("{out}"))
                .to_string()
        };
        assert!(line("tokio", "msg/s").ends_with("| ≥ 1.1 | met |"));
        assert!(line("tokio", "p99").ends_with("| ≤ 1 | short (1.11) |"));
        assert!(line("tokio", "server RSS per connection").ends_with("| ≤ 0.5 | met |"));
        assert!(line("tokio-4k", "msg/s").ends_with("| ≥ 1.1 | short (0.92) |"));
        assert!(line("tokio-4k", "server RSS per connection").ends_with("| short (0.67) |"));
    }
}
