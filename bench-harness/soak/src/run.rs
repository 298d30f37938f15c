//! `ark-soak run`: spawns `ark-soak server`, drives it with well-behaved clients and bad actors
//! for the given minutes while sampling its memory and descriptors, waits for it to drain,
//! stops it, and judges the run.

use std::io::{self, BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::monitor::{Monitor, Readings};
use crate::shared::{Addrs, Ctx};
use crate::tally::round;
use crate::{agent, bad, good, http, rudp, rudp_zero, verdict};

/// How long the server may take to print its addresses.
const STARTUP_WAIT: Duration = Duration::from_secs(10);
/// How long the server's sessions may take to drain after the clients stop: bad actors'
/// sessions may take the servers' timeouts (stall 10 s, write stall 30 s, close 10 s).
const DRAIN_WAIT: Duration = Duration::from_secs(60);
/// How long the server may take to stop and print its final stats once stdin closes.
const FINAL_WAIT: Duration = Duration::from_secs(60);
/// How long the server may take to exit after its final stats.
const EXIT_WAIT: Duration = Duration::from_secs(10);
/// How often a progress line goes to stderr.
const PROGRESS_EVERY: Duration = Duration::from_secs(30);

/// Options of `ark-soak run`.
#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// How long to drive the servers, in minutes (fractions allowed).
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// Seed of the clients' random choices (default: from the clock; printed in the summary).
    #[arg(long)]
    seed: Option<u64>,
}

/// The server child: its stdin (closing it stops the servers) and its stdout's lines.
struct ServerChild {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl ServerChild {
    /// Starts `<this program> server`, reading its stdout on a thread of its own.
    fn spawn() -> io::Result<ServerChild> {
        let mut child = Command::new(std::env::current_exe()?)
            .arg("server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Ok(ServerChild {
            child,
            stdin,
            lines,
        })
    }

    /// The next JSON line the server prints, waiting at most `within`.
    fn line(&self, within: Duration) -> Result<Value, String> {
        let line = self.lines.recv_timeout(within).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => format!("the server printed nothing for {within:?}"),
            mpsc::RecvTimeoutError::Disconnected => "the server's stdout closed".to_string(),
        })?;
        serde_json::from_str(&line).map_err(|e| format!("bad line from the server ({e}): {line}"))
    }

    /// Closes the server's stdin, reads its final stats line and waits for it to exit.
    fn finish(&mut self) -> (Result<Value, String>, Result<ExitStatus, String>) {
        drop(self.stdin.take());
        let line = self.line(FINAL_WAIT);
        let deadline = Instant::now() + EXIT_WAIT;
        while Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => return (line, Ok(status)),
                Ok(None) => thread::sleep(Duration::from_millis(50)),
                Err(e) => return (line, Err(format!("waiting for the server: {e}"))),
            }
        }
        (
            line,
            Err(format!("the server did not exit within {EXIT_WAIT:?}")),
        )
    }
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A client thread's work: `(ctx, generator stream)`.
type Job = fn(&Ctx, u64);

/// Every client thread of a run, by name.
fn jobs() -> Vec<(&'static str, Job)> {
    vec![
        ("tcp-short-1", good::tcp_short),
        ("tcp-short-2", good::tcp_short),
        ("tcp-long", good::tcp_long),
        ("ws-short-1", good::ws_short),
        ("ws-short-2", good::ws_short),
        ("ws-long", good::ws_long),
        ("udp-short", good::udp_short),
        ("udp-long", good::udp_long),
        ("http-short", good::http_short),
        ("http-long", good::http_long),
        ("rudp-short", good::rudp_short),
        ("rudp-long", good::rudp_long),
        ("tcp-half-close", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "tcp_half_close", bad::half_close)
        }),
        ("tcp-stalled", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "tcp_stalled", bad::stalled_tcp)
        }),
        ("tcp-flooder", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "tcp_flooder", bad::flooder)
        }),
        ("tcp-oversized", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "tcp_oversized", bad::oversized)
        }),
        ("ws-stalled", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "ws_stalled_upgrade", bad::ws_stalled)
        }),
        ("ws-ping-flood", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "ws_ping_flood", bad::ws_ping_flood)
        }),
        ("http-bad-framing", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "http_bad_framing", http::bad_framing)
        }),
        ("http-agent-hostile", agent::hostile_origins),
        ("rudp-forger", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "rudp_forger", rudp::forger)
        }),
        ("rudp-zero-window", |c: &Ctx, s: u64| {
            bad::repeat(c, s, "rudp_zero_window", rudp_zero::zero_window)
        }),
    ]
}

/// Starts every client thread in `scope`.
fn start_clients<'scope>(
    scope: &'scope Scope<'scope, '_>,
    ctx: &'scope Ctx,
) -> Vec<(&'static str, ScopedJoinHandle<'scope, ()>)> {
    let mut started = Vec::new();
    for (stream, (name, job)) in (1u64..).zip(jobs()) {
        match thread::Builder::new()
            .name(name.into())
            .spawn_scoped(scope, move || job(ctx, stream))
        {
            Ok(handle) => started.push((name, handle)),
            Err(e) => ctx
                .tally
                .problem(format!("could not start client thread {name}: {e}")),
        }
    }
    started
}

/// Prints one progress line to stderr.
fn progress(ctx: &Ctx, r: &Readings, elapsed: Duration) {
    let t = &ctx.tally;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let (problems, _) = t.problems();
    eprintln!(
        "[ark-soak] {:>4} s: echoes tcp {} ws {} udp {} http {} rudp {}; bad actors {}; \
         problems {problems}; server rss {:.1} MiB, fds {}",
        elapsed.as_secs(),
        get(&t.tcp.messages),
        get(&t.ws.messages),
        get(&t.udp.messages),
        get(&t.http.messages),
        get(&t.rudp.messages),
        t.actor_runs(),
        r.rss_kib.last as f64 / 1024.0,
        r.fds.last,
    );
}

/// Waits for the run's end, with a progress line every 30 s; ends the run early if the
/// server dies.
fn supervise(ctx: &Ctx, monitor: &Monitor) {
    let started = Instant::now();
    let mut next = started + PROGRESS_EVERY;
    while ctx.running() {
        thread::sleep(Duration::from_millis(200));
        let readings = monitor.readings();
        if readings.child_died {
            eprintln!("[ark-soak] the server process died; stopping the clients");
            return;
        }
        if Instant::now() >= next {
            progress(ctx, &readings, started.elapsed());
            next += PROGRESS_EVERY;
        }
    }
}

/// Polls the server's descriptors down to the baseline (at most [`DRAIN_WAIT`]); returns
/// the seconds it took.
fn drain(monitor: &Monitor) -> f64 {
    let started = Instant::now();
    loop {
        let r = monitor.take();
        if r.child_died || r.fds.last <= r.fds.first || started.elapsed() >= DRAIN_WAIT {
            return started.elapsed().as_secs_f64();
        }
        thread::sleep(Duration::from_millis(250));
    }
}

/// Runs the clients and the sampler until the run ends, stops the clients, and waits for the
/// server to drain; returns the drain time in seconds.
fn drive(ctx: &Ctx, monitor: &Monitor) -> f64 {
    let done = AtomicBool::new(false);
    let sampler_until = ctx.deadline() + Duration::from_secs(600);
    thread::scope(|s| {
        s.spawn(|| monitor.run(&done, sampler_until));
        let clients = start_clients(s, ctx);
        supervise(ctx, monitor);
        ctx.stop();
        eprintln!("[ark-soak] stopping the clients");
        for (name, handle) in clients {
            if handle.join().is_err() {
                ctx.tally.problem(format!("client thread {name} panicked"));
            }
        }
        eprintln!("[ark-soak] waiting for the server to drain");
        let drained = drain(monitor);
        done.store(true, Ordering::Relaxed);
        drained
    })
}

/// A seed from the clock.
fn clock_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ u64::from(std::process::id()).rotate_left(32)
}

/// The run's JSON summary.
fn summary(
    minutes: f64,
    ctx: &Ctx,
    r: &Readings,
    drain_s: f64,
    server: &Result<Value, String>,
    failures: &[String],
) -> Value {
    let mib = |kib: u64| round(kib as f64 / 1024.0);
    let t = &ctx.tally;
    let (problem_count, problems) = t.problems();
    json!({
        "minutes": minutes,
        "seed": ctx.seed,
        "ok": failures.is_empty(),
        "tcp": t.tcp.json(),
        "udp": t.udp.json(),
        "ws": t.ws.json(),
        "http": t.http.json(),
        "rudp": t.rudp.json(),
        "rudp_forged": t.forged.json(),
        "bad_actors": t.actors_json(),
        "rss_mib": {
            "baseline": mib(r.rss_kib.first),
            "first_minute": r.first_minute_rss_kib.map(mib),
            "max": mib(r.rss_kib.max),
            "end": mib(r.rss_kib.last),
        },
        "fds": {"baseline": r.fds.first, "max": r.fds.max, "end": r.fds.last},
        "drain_s": round(drain_s),
        "server_final": server.as_ref().ok(),
        "problem_count": problem_count,
        "problems": problems,
        "failures": failures,
    })
}

/// The whole run; `Err` when it could not even start.
fn soak(args: &RunArgs) -> Result<Value, String> {
    if !(args.minutes.is_finite() && args.minutes > 0.0) {
        return Err(format!("--minutes must be positive, not {}", args.minutes));
    }
    let seed = args.seed.unwrap_or_else(clock_seed);
    let mut child = ServerChild::spawn().map_err(|e| format!("starting the server: {e}"))?;
    let addrs = Addrs::from_json(&child.line(STARTUP_WAIT)?)?;
    crate::rudp::pin_server_key(addrs.rudp_key);
    let monitor = Monitor::new(child.child.id()).map_err(|e| format!("reading /proc: {e}"))?;
    eprintln!(
        "[ark-soak] servers {addrs:?}, seed {seed}, {} minutes",
        args.minutes
    );
    let ctx = Ctx::new(addrs, Duration::from_secs_f64(args.minutes * 60.0), seed);
    let drain_s = drive(&ctx, &monitor);
    let (server, exit) = child.finish();
    let readings = monitor.readings();
    let failures = verdict::judge(&ctx.tally, &readings, &server, &exit);
    Ok(summary(
        args.minutes,
        &ctx,
        &readings,
        drain_s,
        &server,
        &failures,
    ))
}

/// `ark-soak run`: prints the summary line; exit code 1 with the reasons on stderr on failure.
pub fn run(args: &RunArgs) -> ExitCode {
    match soak(args) {
        Ok(summary) => {
            println!("{summary}");
            let failures = summary["failures"].as_array().cloned().unwrap_or_default();
            for why in &failures {
                eprintln!("[ark-soak] FAIL: {}", why.as_str().unwrap_or_default());
            }
            if failures.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            println!(
                "{}",
                json!({"minutes": args.minutes, "ok": false, "failures": [e]})
            );
            eprintln!("[ark-soak] FAIL: {e}");
            ExitCode::FAILURE
        }
    }
}
