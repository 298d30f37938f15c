//! `ark-bench wrk`: one HTTP case measured by an independent load generator, wrk (the Debian
//! package; `scripts/setup-test-deps.sh` installs it). The case's program runs as `--role
//! server` on loopback; wrk keeps `--clients` keep-alive connections busy with `GET /static`
//! (the server's page of `--payload` bytes), one request in flight on each, first for the
//! warm-up and then for the measured seconds (wrk takes whole seconds: both are rounded up).
//! wrk's own figures become the record: requests/s, latency percentiles, errors; with the
//! server's CPU time over the measured run. The record echoes the case like ark-loopback's,
//! with `"load_generator": "wrk"`, so the runner treats it like any other case.

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use ark_bench::runner::without_repetition;
use ark_loopback::args::{Args, Protocol};
use clap::Parser;
use serde_json::{Value, json};

use crate::server_process::{SERVER_TIMEOUT, stop, wait_listening};

/// The page wrk asks for.
const PATH: &str = "/static";

/// wrk's `done` hook: the summary and the latency distribution (µs) as one JSON line.
const REPORT_SCRIPT: &str = r#"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"duration_us":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"latency_us":{"min":%d,"mean":%.1f,"max":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.max,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)))
end
"#;

/// The flags of `ark-bench wrk`.
#[derive(clap::Args, Debug)]
pub(crate) struct WrkArgs {
    /// wrk's threads (`-t`).
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// The server's program and the case's ark-loopback flags (`--role server` is added).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    command: Vec<String>,
}

pub(crate) fn wrk(args: &WrkArgs) -> ExitCode {
    let flags_at = args
        .command
        .iter()
        .position(|a| a.starts_with("--"))
        .unwrap_or(args.command.len());
    let flags = std::iter::once("ark-loopback".to_string())
        .chain(without_repetition(args.command[flags_at..].to_vec()));
    let case = match Args::try_parse_from(flags) {
        Ok(case) => case,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let mut record = base_record(&case, args.threads);
    let outcome = if case.protocol == Protocol::Http {
        measure(args, &case, &mut record)
    } else {
        Err("wrk cases are for --protocol http".to_string())
    };
    if let Err(e) = outcome {
        record["ok"] = false.into();
        record["error"] = e.into();
    }
    println!("{record}");
    if record["ok"] == true {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The fields that echo the case (what [`LoopbackCase::matches`] checks), not yet `ok`.
///
/// [`LoopbackCase::matches`]: ark_bench::matrix::LoopbackCase::matches
fn base_record(case: &Args, threads: u32) -> Value {
    json!({
        "schema_version": 1,
        "implementation": "?",
        "protocol": case.protocol.name(),
        "payload_bytes": case.payload,
        "clients": case.clients,
        "window": case.window,
        "io_model": case.io_model.name(),
        "io_threads": case.total_io_threads(),
        "address_family": case.address_family.name(),
        "load_generator": "wrk",
        "method": "GET",
        "path": PATH,
        "wrk_threads": threads,
        "ok": false,
    })
}

/// Starts the server, runs wrk for the warm-up and the measured seconds, stops the server and
/// fills `record`.
fn measure(args: &WrkArgs, case: &Args, record: &mut Value) -> Result<(), String> {
    if case.window != 1 {
        return Err("wrk keeps one request in flight per connection: --window must be 1".into());
    }
    record["wrk_version"] = wrk_version()?.into();
    let mut server = Command::new(&args.command[0])
        .args(&args.command[1..])
        .args(["--role", "server"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the server {}: {e}", args.command[0]))?;
    let measured = listening(&mut server).and_then(|address| {
        let url = format!("http://{address}{PATH}");
        let whole = |s: f64| (s.ceil() as u64).max(1);
        if case.warmup > 0.0 {
            run_wrk(args.threads, case.clients, whole(case.warmup), &url)?;
        }
        let cpu_before = cpu_seconds(server.id());
        let started = Instant::now();
        let report = run_wrk(args.threads, case.clients, whole(case.seconds), &url)?;
        let cpu = cpu_seconds(server.id()) - cpu_before;
        let cpu_percent = 100.0 * cpu / started.elapsed().as_secs_f64();
        Ok((report, cpu_percent))
    });
    let served = stop_server(&mut server);
    let (report, cpu_percent) = measured?;
    let served = served?;
    fill(record, &report, cpu_percent, served)
}

/// Copies wrk's figures and the server's record into `record`; `ok` iff wrk answered every
/// request without an error and the server stopped cleanly.
fn fill(record: &mut Value, report: &Value, cpu_percent: f64, served: Value) -> Result<(), String> {
    let requests = report["requests"].as_u64().unwrap_or(0);
    let seconds = report["duration_us"].as_f64().unwrap_or(0.0) / 1e6;
    if requests == 0 || seconds <= 0.0 {
        return Err(format!("wrk completed no request: {report}"));
    }
    let latency = &report["latency_us"];
    record["implementation"] = served["implementation"].clone();
    record["seconds"] = seconds.into();
    record["roundtrips"] = requests.into();
    record["roundtrips_per_second"] = (requests as f64 / seconds).into();
    for (field, name) in [
        ("rtt_p50_us", "p50"),
        ("rtt_p90_us", "p90"),
        ("rtt_p99_us", "p99"),
        ("rtt_p999_us", "p999"),
        ("rtt_max_us", "max"),
        ("rtt_mean_us", "mean"),
    ] {
        record[field] = latency[name].clone();
    }
    record["bytes_per_response"] =
        (report["bytes"].as_f64().unwrap_or(0.0) / requests as f64).into();
    record["wrk_errors"] = report["errors"].clone();
    record["cpu_percent"] = cpu_percent.into();
    record["cpu_percent_covers"] = "the server process alone (wrk runs apart)".into();
    record["server"] = served;
    let errors: u64 = report["errors"]
        .as_object()
        .map_or(1, |e| e.values().filter_map(Value::as_u64).sum());
    if errors > 0 {
        return Err(format!("wrk counted errors: {}", report["errors"]));
    }
    record["ok"] = true.into();
    Ok(())
}

/// `wrk -v`'s first line, or why wrk cannot run.
fn wrk_version() -> Result<String, String> {
    let out = Command::new("wrk").arg("-v").output().map_err(|e| {
        format!("wrk not found ({e}): scripts/setup-test-deps.sh installs Debian's wrk")
    })?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Ok(text.lines().next().unwrap_or("wrk").trim().to_string())
}

/// One wrk run of `seconds` against `url`; its JSON report.
fn run_wrk(threads: u32, connections: u32, seconds: u64, url: &str) -> Result<Value, String> {
    let script = std::env::temp_dir().join(format!("ark-wrk-{}.lua", std::process::id()));
    std::fs::write(&script, REPORT_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    let out = Command::new("wrk")
        .args(["-t", &threads.to_string(), "-c", &connections.to_string()])
        .args(["-d", &format!("{seconds}s"), "--timeout", "2s", "-s"])
        .arg(&script)
        .arg(url)
        .output();
    let _ = std::fs::remove_file(&script);
    let out = out.map_err(|e| format!("cannot run wrk: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "wrk failed ({}): {stdout} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("WRK_JSON "))
        .ok_or_else(|| format!("wrk printed no report: {stdout}"))?;
    serde_json::from_str(line).map_err(|e| format!("wrk's report ({e}): {line}"))
}

/// Waits until the server listens; its address.
fn listening(server: &mut Child) -> Result<SocketAddr, String> {
    let address = wait_listening(server)?;
    address
        .parse()
        .map_err(|e| format!("the server's address `{address}`: {e}"))
}

/// Stops the server; its record.
fn stop_server(server: &mut Child) -> Result<Value, String> {
    let Some(status) = stop(server) else {
        return Err(format!("the server did not stop within {SERVER_TIMEOUT:?}"));
    };
    let mut out = String::new();
    if let Some(mut stdout) = server.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let line = out.lines().rev().find(|l| l.trim_start().starts_with('{'));
    match (status.success(), line) {
        (true, Some(line)) => {
            serde_json::from_str(line).map_err(|e| format!("the server's record ({e}): {line}"))
        }
        _ => Err(format!("the server failed ({status}): {out}")),
    }
}

/// CPU seconds (user + system) process `pid` has used; 0 if /proc cannot tell.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // After the command name (in parentheses, which may hold spaces): fields 3.. of stat(5);
    // utime and stime are fields 14 and 15.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // SAFETY: sysconf with a valid name has no memory effects.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    (ticks(11) + ticks(12)) / per_second
}
