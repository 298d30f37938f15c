//! The run's verdict: every reason it fails, from what the clients saw, the server's
//! resources over time, and its final stats.

use std::process::ExitStatus;
use std::sync::atomic::Ordering;

use serde_json::Value;

use crate::monitor::Readings;
use crate::tally::{Proto, Tally};

/// Descriptors the server may hold above its baseline after the drain.
const FD_SLACK: u64 = 4;
/// How far RSS may grow past max(RSS after the first minute, baseline), KiB.
const RSS_GROWTH_KIB: u64 = 64 * 1024;
/// The most RSS any sample may show, KiB.
const RSS_CEILING_KIB: u64 = 1024 * 1024;

/// Why the run fails; empty when it passed.
pub fn judge(
    tally: &Tally,
    readings: &Readings,
    server: &Result<Value, String>,
    exit: &Result<ExitStatus, String>,
) -> Vec<String> {
    let mut why = Vec::new();
    clients(tally, &mut why);
    resources(readings, &mut why);
    match server {
        Ok(final_stats) => {
            server_stats(final_stats, &mut why);
            forgeries(tally, final_stats, &mut why);
        }
        Err(e) => why.push(format!("no final stats from the server: {e}")),
    }
    match exit {
        Ok(status) if status.success() => {}
        Ok(status) => why.push(format!("the server exited with {status}")),
        Err(e) => why.push(e.clone()),
    }
    why
}

/// Lost or wrong messages, client errors, and bad actors that were not dealt with.
fn clients(tally: &Tally, why: &mut Vec<String>) {
    let protos: [(&str, &Proto); 5] = [
        ("tcp", &tally.tcp),
        ("udp", &tally.udp),
        ("ws", &tally.ws),
        ("http", &tally.http),
        ("rudp", &tally.rudp),
    ];
    for (name, p) in protos {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        let (lost, wrong, errors) = (get(&p.lost), get(&p.wrong), get(&p.errors));
        if lost + wrong + errors > 0 {
            why.push(format!(
                "{name}: {lost} lost, {wrong} wrong, {errors} client errors"
            ));
        }
    }
    let (count, kept) = tally.problems();
    if count > 0 {
        let first = kept.first().map_or("", String::as_str);
        why.push(format!("{count} problems during the run (first: {first})"));
    }
}

/// Descriptor leaks, memory growth, a dead server.
fn resources(r: &Readings, why: &mut Vec<String>) {
    if r.child_died {
        // Its last readings say nothing about leaks.
        why.push("the server process died during the run".into());
        return;
    }
    if r.fds.last > r.fds.first + FD_SLACK {
        why.push(format!(
            "descriptor leak: {} open after the drain, baseline {} (+{FD_SLACK} allowed)",
            r.fds.last, r.fds.first
        ));
    }
    let reference = r.first_minute_rss_kib.unwrap_or(0).max(r.rss_kib.first);
    if r.rss_kib.last > reference + RSS_GROWTH_KIB {
        why.push(format!(
            "memory growth: RSS {} KiB at the end, over {reference} KiB (max of the first \
             minute's and the baseline) + {RSS_GROWTH_KIB} KiB",
            r.rss_kib.last
        ));
    }
    if r.rss_kib.max > RSS_CEILING_KIB {
        why.push(format!(
            "RSS reached {} KiB (ceiling {RSS_CEILING_KIB} KiB)",
            r.rss_kib.max
        ));
    }
}

/// After the drain: no TCP or WebSocket session, receive buffer or send queue left; after the
/// stop: every handler opened was closed, and no stop failed.
fn server_stats(v: &Value, why: &mut Vec<String>) {
    for server in ["tcp", "ws", "http"] {
        for field in ["sessions_open", "recv_buffer_bytes", "send_queue_bytes"] {
            let n = v[server]["stats"][field].as_u64();
            if n != Some(0) {
                why.push(format!("{server} server after the drain: {field} = {n:?}"));
            }
        }
    }
    for server in ["tcp", "udp", "ws", "rudp"] {
        let after = &v[server]["after_stop"];
        let (opened, closed) = (&after["handlers_opened"], &after["handlers_closed"]);
        if opened.as_u64().is_none() || opened != closed {
            why.push(format!(
                "{server} server after the stop: {opened} handlers opened, {closed} closed"
            ));
        }
    }
    for server in ["tcp", "udp", "ws", "http", "rudp"] {
        let error = &v[server]["stop"]["stop_error"];
        if !error.is_null() {
            why.push(format!("{server} server's stop failed: {error}"));
        }
    }
}

/// Every forged or changed reliable-UDP datagram sent to the server was counted as
/// unauthenticated and every replayed one as a replay (the well-behaved clients send none of
/// either), and none was taken for a message.
fn forgeries(tally: &Tally, v: &Value, why: &mut Vec<String>) {
    let sent = tally.forged.to_server.load(Ordering::Relaxed);
    let counted = v["rudp"]["stats"]["unauthenticated"].as_u64();
    if counted != Some(sent) {
        why.push(format!(
            "rudp server: {counted:?} datagrams counted unauthenticated, {sent} forged or changed ones sent to it"
        ));
    }
    let replayed = tally.forged.replayed_to_server.load(Ordering::Relaxed);
    let counted = v["rudp"]["stats"]["replays"].as_u64();
    if counted != Some(replayed) {
        why.push(format!(
            "rudp server: {counted:?} datagrams counted as replays, {replayed} replayed to it"
        ));
    }
}
