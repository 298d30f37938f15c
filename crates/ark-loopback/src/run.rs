//! One benchmark run of any [`Stack`]: start the IO threads, the server and the clients,
//! warm up, measure, drain, and fill the record.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_udp::NetCounters;

use crate::args::LinkSettings;
use crate::args::{Args, IoModelArg, Protocol, Role, Switch};
use crate::clients::{Core, PHASE_DRAIN, PHASE_MEASURED, Totals};
use crate::link::Relay;
use crate::record::{RateLimitRecord, Record, RudpBulkRecord, UdpKernel};
use crate::servers::{Echo, ServerCounters};
use crate::signals;
use crate::stack::{ArkStack, Stack};

/// Process CPU seconds (all threads); 0 where the clock is missing (Windows).
#[cfg(unix)]
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the call; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc == 0 {
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    } else {
        0.0
    }
}

/// Process CPU seconds: not measured on this platform (0).
#[cfg(not(unix))]
fn cpu_seconds() -> f64 {
    0.0
}

/// Peak resident set size of this process, bytes: `VmHWM` of `/proc/self/status` on Linux,
/// which starts afresh at `execve`. (`getrusage`'s `ru_maxrss` keeps the peak of the process
/// that ran `execve`: under `cargo run`, or spawned by a harness holding 400 MB, the record
/// said 65 MB and 423 MB for a run that held 7 MB.) 0 if unavailable.
#[cfg(target_os = "linux")]
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| vm_hwm(&status))
        .unwrap_or(0)
}

/// The `VmHWM` line of a `/proc/<pid>/status` text, in bytes.
#[cfg(any(target_os = "linux", test))]
fn vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib = line["VmHWM:".len()..].trim().strip_suffix("kB")?.trim();
    kib.parse::<u64>().ok().map(|kib| kib * 1024)
}

/// Peak resident set size of the process, bytes (`getrusage`'s `ru_maxrss`: kibibytes on
/// the BSDs, bytes on macOS; it includes the peak of a parent that ran `execve` where the
/// kernel keeps it across, as Linux does); 0 if unavailable.
#[cfg(all(unix, not(target_os = "linux")))]
fn peak_rss() -> u64 {
    // SAFETY: all-zero is a valid `rusage` (integers and `timeval`s).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable `rusage` for the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let unit = if cfg!(any(target_os = "macos", target_os = "ios")) {
        1
    } else {
        1024
    };
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * unit
}

/// Peak resident set size: not measured on this platform (0).
#[cfg(not(unix))]
fn peak_rss() -> u64 {
    0
}

/// Raises the soft limit on open files towards `needed` (up to the hard limit); the limit
/// now. `None` where there is no such limit to read (off Unix).
#[cfg(unix)]
pub(crate) fn raise_descriptor_limit(needed: u64) -> Option<u64> {
    // SAFETY: all-zero is a valid `rlimit` (two integers).
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: `limit` is a valid, writable `rlimit` for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let soft = limit.rlim_cur as u64;
    if soft >= needed {
        return Some(soft);
    }
    let raised = libc::rlimit {
        rlim_cur: needed.min(limit.rlim_max as u64) as libc::rlim_t,
        ..limit
    };
    // SAFETY: `raised` is a valid `rlimit`, its soft limit within the hard one.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        return Some(raised.rlim_cur as u64);
    }
    Some(soft)
}

/// No open-files limit to read off Unix.
#[cfg(not(unix))]
pub(crate) fn raise_descriptor_limit(_needed: u64) -> Option<u64> {
    None
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// How long one client may take to connect and start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Clients started one at a time (each connected before the next) up to this many; more
/// start this many at a time.
pub const CONNECT_BATCH: usize = 256;

/// Polls `condition` every 100 µs until it holds or `timeout` passes.
fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// The record's `udp_steering`: for UDP on several sharded loops in this process, how clients
/// were placed on the server's shards.
fn udp_steering(args: &Args) -> Option<&'static str> {
    let sharded = args.io_model == IoModelArg::Sharded && args.io_threads > 1;
    if args.protocol != Protocol::Udp || !sharded || args.role != Role::Both {
        return None;
    }
    Some(match args.udp_port_steering() {
        Some(_) => "port",
        None => "hash",
    })
}

fn min_max(values: impl Iterator<Item = usize> + Clone) -> (Option<usize>, Option<usize>) {
    (values.clone().min(), values.max())
}

/// What tracing this run has, for the record: null without the `tracing` feature,
/// `"no subscriber"`, or the level of `ARK_LOG`'s subscriber.
pub fn tracing_mode() -> Option<String> {
    if !cfg!(feature = "tracing") {
        return None;
    }
    Some(std::env::var("ARK_LOG").unwrap_or_else(|_| "no subscriber".to_string()))
}

/// With the `tracing` feature and `ARK_LOG` set (`error`, `warn`, `info`, `debug`, `trace`):
/// a subscriber writing ark's events to stderr at that level.
fn install_subscriber() -> Result<(), String> {
    #[cfg(feature = "tracing")]
    if let Ok(level) = std::env::var("ARK_LOG") {
        let level: tracing_subscriber::filter::LevelFilter = level.parse().map_err(|_| {
            format!("ARK_LOG={level} is not a level (error, warn, info, debug, trace)")
        })?;
        tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(std::io::stderr)
            .try_init()
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The body of a loopback program's `main` for implementation `E`: runs `args` (server only,
/// or a measured run), prints the JSON record on stdout and returns the exit code: 0 iff the
/// run is `ok`, 1 otherwise. Flags are checked with [`Args::validate`] first (exit 2).
pub fn main_for<E: Stack>(args: &Args, allocations: Option<fn() -> u64>) -> std::process::ExitCode {
    use std::process::ExitCode;
    if let Err(message) = args.validate() {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    if let Err(e) = signals::install() {
        eprintln!("error: cannot handle SIGINT/SIGTERM: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(message) = install_subscriber() {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    if args.role == Role::Server {
        return match serve::<E>(args) {
            Ok(record) => {
                println!("{record}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let record = measure::<E>(args, allocations);
    match serde_json::to_string(&record) {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("error: cannot serialize the record: {e}");
            return ExitCode::FAILURE;
        }
    }
    if record.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs ark's server only (`--role server`); see [`serve`].
///
/// # Errors
/// The IO threads or the server could not start.
pub fn run_server(args: &Args) -> std::io::Result<serde_json::Value> {
    serve::<ArkStack>(args)
}

/// Runs the server only (`--role server`) for warm-up + measured + drain + 5 s (or until
/// SIGINT/SIGTERM), then stops it, giving its sessions at most the drain to close (the rest
/// are cut and counted in `server_sessions_cut`), and returns what it served.
///
/// # Errors
/// The IO threads or the server could not start.
pub fn serve<E: Stack>(args: &Args) -> std::io::Result<serde_json::Value> {
    refuse_unsupported::<E>(args)?;
    let mut endpoints = E::start(args)?;
    let counters = Arc::new(ServerCounters::default());
    let echo = Echo::new(args, counters.clone());
    let addr = endpoints.start_server(args, echo)?;
    let rss_at_start = peak_rss();
    eprintln!("{} loopback server on {addr}", E::NAME);
    let rudp_public_key = endpoints.rudp_public_key();
    if let Some(key) = &rudp_public_key {
        eprintln!("rudp public key {key} (clients: --rudp-server-key {key})");
    }
    // Until told to stop (SIGTERM: `ark-bench pair`), or past the run's own length plus time
    // for its clients to connect (a minute per 10,000).
    let connecting = f64::from(args.clients) * 0.006;
    let interrupted = signals::sleep_unless_stopped(Duration::from_secs_f64(
        args.warmup + args.seconds + args.drain + 5.0 + connecting,
    ));
    let syscalls = endpoints.syscalls();
    // Told when to end, the server ends then: sessions still open after the drain (a client
    // that never reads, say) are cut and counted, not waited for to their close timeout.
    let cut = endpoints.stop_within(Duration::from_secs_f64(args.drain))?;
    Ok(serde_json::json!({
        "server_sessions_cut": cut,
        "role": "server",
        "implementation": E::NAME,
        "address": addr.to_string(),
        "protocol": args.protocol.name(),
        "rudp_public_key": rudp_public_key,
        "server_send_rejections": counters.send_rejections.load(Ordering::Relaxed),
        "syscalls": syscalls,
        "interrupted": interrupted,
        "peak_rss_at_start_bytes": rss_at_start,
        "peak_rss_bytes": peak_rss(),
        "cpu_seconds": cpu_seconds(),
        "ok": true,
    }))
}

/// One run of ark with server and clients (`--role both`) or clients only (`--role
/// client`); see [`measure`].
pub fn run(args: &Args, allocations: Option<fn() -> u64>) -> Record {
    measure::<ArkStack>(args, allocations)
}

/// One run of `E` with server and clients (`--role both`) or clients only (`--role client`).
/// `allocations` reads the process's allocation counter when the binary installed one.
pub fn measure<E: Stack>(args: &Args, allocations: Option<fn() -> u64>) -> Record {
    match measure_inner::<E>(args, allocations) {
        Ok(record) => record,
        Err(e) => Record {
            error: Some(e.to_string()),
            ..base_record(args, E::NAME)
        },
    }
}

/// What the implementation has not: `--ws-deflate` (permessage-deflate) or `--rate-limit`
/// (per-session limits) asked of one without them.
fn refuse_unsupported<E: Stack>(args: &Args) -> std::io::Result<()> {
    if args.ws_deflate == crate::args::Switch::On && !E::WS_DEFLATE {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "--ws-deflate is ark-ws's permessage-deflate: {} has none",
                E::NAME
            ),
        ));
    }
    if args.rate_limit > 0 && !E::RATE_LIMITS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "--rate-limit is ark's per-session rate limit: {} has none",
                E::NAME
            ),
        ));
    }
    Ok(())
}

/// What a run set up before it measures: where the clients send, the relay between, and
/// what the clients count.
struct Started {
    totals: Arc<Totals>,
    relay: Option<(Relay, LinkSettings)>,
    /// Each client's granted UDP socket buffers.
    udp_buffers: Vec<ark_udp::SocketBuffers>,
    ipv6: bool,
    kernel_before: Option<NetCounters>,
}

/// The measured phase: how long it ran, the process CPU, syscall and allocation counters at
/// its two ends, and whether a signal cut it short.
struct Window {
    elapsed: f64,
    cpu: f64,
    syscalls: (Option<u64>, Option<u64>),
    allocations: (Option<u64>, Option<u64>),
    interrupted: bool,
    /// `--rudp-bulk` bytes the server took in it.
    bulk_bytes: u64,
    /// Bytes the server's sockets read and wrote in it, where counted.
    wire_bytes: Option<u64>,
}

fn measure_inner<E: Stack>(
    args: &Args,
    allocations: Option<fn() -> u64>,
) -> std::io::Result<Record> {
    refuse_unsupported::<E>(args)?;
    let mut endpoints = E::start(args)?;
    let server_counters = Arc::new(ServerCounters::default());
    let started = start::<E>(args, &mut endpoints, &server_counters)?;
    let window = measure_window::<E>(
        args,
        (&endpoints, &started.totals),
        &server_counters.bulk_bytes,
        allocations,
    );
    let totals = &started.totals;
    let drain_deadline = Instant::now() + Duration::from_secs_f64(args.drain);
    while totals.in_flight() > 0 && Instant::now() < drain_deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let drained = totals.in_flight() <= 0;
    let kernel = udp_kernel(args, started.kernel_before, started.ipv6);
    let udp_server_buffers = endpoints.udp_server_buffers();
    let udp_batched = endpoints.udp_batched(args);
    let udp_offload = endpoints.udp_offload(args);
    let rudp = endpoints.rudp_stats();
    let implementation = endpoints.implementation(args);
    endpoints.stop()?;
    // Every echo of the run, warm-up and drain included, as the relay saw the whole run.
    let delivered = totals.warmup_received() + totals.measured_done();
    let link = started
        .relay
        .map(|(relay, settings)| relay.finish(settings, delivered * 2 * u64::from(args.payload)));
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::SeqCst);
    let record = Record {
        server_send_rejections: get(&server_counters.send_rejections),
        drain_timeouts: u64::from(!drained),
        udp_kernel: kernel,
        udp_batch: (args.protocol == Protocol::Udp).then_some(udp_batched),
        udp_offload,
        udp_server_send_buffer_bytes: udp_server_buffers.map(|b| b.send),
        udp_server_receive_buffer_bytes: udp_server_buffers.map(|b| b.recv),
        link,
        rudp,
        ..base_record(args, implementation)
    };
    let record = with_udp_clients(record, args, &started.udp_buffers);
    let record = with_rudp_bulk(record, args, &window);
    Ok(with_results(record, args, totals, &window))
}

/// Starts the server (unless `--role client`), the relay of `--link-*`, and the clients, one
/// at a time, each connected and its first window sent before the next starts.
fn start<E: Stack>(
    args: &Args,
    endpoints: &mut E,
    server_counters: &Arc<ServerCounters>,
) -> std::io::Result<Started> {
    let server = match args.role {
        Role::Client => None,
        _ => {
            let echo = Echo::new(args, server_counters.clone());
            Some(endpoints.start_server(args, echo)?)
        }
    };
    let target = match (server, args.connect) {
        (Some(addr), _) | (None, Some(addr)) => addr,
        (None, None) => return Err(std::io::Error::other("--role client needs --connect")),
    };
    // With --link-*, the clients reach the server through the relay.
    let relay = match LinkSettings::of(args) {
        Some(settings) => Some((Relay::start(&settings, args.protocol, target)?, settings)),
        None => None,
    };
    let target = relay
        .as_ref()
        .map_or(target, |(relay, _)| relay.local_addr());
    let ipv6 = target.is_ipv6();
    let kernel_before = NetCounters::snapshot_for(ipv6);
    let totals = Totals::new();
    let exact_order = args.protocol != Protocol::Udp;
    let mut udp_buffers = Vec::new();
    // Up to CONNECT_BATCH clients, one at a time: the server then sees them in order, and
    // every implementation's placement of clients and server sessions over its threads is
    // the same (both round-robin, in client order). Past that (a thousand connections and
    // more), a batch at a time: one by one, each new connection would wait for a turn of
    // loops already busy with every client before it.
    let batch = if args.clients as usize <= CONNECT_BATCH {
        1
    } else {
        CONNECT_BATCH as u32
    };
    for id in 0..args.clients {
        let core = Core::new(
            id,
            args.payload as usize,
            args.window as usize,
            exact_order,
            totals.clone(),
        )
        .with_reconnect_every(args.reconnect_every);
        udp_buffers.extend(endpoints.start_client(args, target, core)?);
        if (id + 1) % batch != 0 && id + 1 != args.clients {
            continue;
        }
        let started = wait_until(CONNECT_TIMEOUT, || {
            totals.started.load(Ordering::SeqCst) > u64::from(id)
        });
        if !started {
            let count = totals.started.load(Ordering::SeqCst);
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "client {id} did not connect within {CONNECT_TIMEOUT:?} ({count} of {} started)",
                    args.clients
                ),
            ));
        }
    }
    Ok(Started {
        totals,
        relay,
        udp_buffers,
        ipv6,
        kernel_before,
    })
}

/// Warms up, then measures for `--seconds`, reading the counters at both ends.
fn measure_window<E: Stack>(
    args: &Args,
    (endpoints, totals): (&E, &Totals),
    bulk: &AtomicU64,
    allocations: Option<fn() -> u64>,
) -> Window {
    let mut interrupted = signals::sleep_unless_stopped(Duration::from_secs_f64(args.warmup));
    let (cpu0, sys0, allocs0, wire0) = (
        cpu_seconds(),
        endpoints.syscalls(),
        allocations.map(|f| f()),
        endpoints.wire_bytes(),
    );
    totals.phase.store(PHASE_MEASURED, Ordering::SeqCst);
    let bulk0 = bulk.load(Ordering::SeqCst);
    let started = Instant::now();
    eprintln!("{}: measuring for {} s", E::NAME, args.seconds);
    if !interrupted {
        interrupted = signals::sleep_unless_stopped(Duration::from_secs_f64(args.seconds));
    }
    totals.phase.store(PHASE_DRAIN, Ordering::SeqCst);
    let elapsed = started.elapsed().as_secs_f64();
    let (cpu1, sys1, allocs1, wire1) = (
        cpu_seconds(),
        endpoints.syscalls(),
        allocations.map(|f| f()),
        endpoints.wire_bytes(),
    );
    Window {
        elapsed,
        cpu: cpu1 - cpu0,
        syscalls: (sys0, sys1),
        wire_bytes: wire0.zip(wire1).map(|(w0, w1)| w1.saturating_sub(w0)),
        allocations: (allocs0, allocs1),
        interrupted,
        bulk_bytes: bulk.load(Ordering::SeqCst) - bulk0,
    }
}

/// The kernel's UDP counters over the run (UDP runs only, where the kernel has them).
fn udp_kernel(args: &Args, before: Option<NetCounters>, ipv6: bool) -> Option<UdpKernel> {
    if args.protocol != Protocol::Udp {
        return None;
    }
    let d = NetCounters::snapshot_for(ipv6)?.since(&before?);
    Some(UdpKernel {
        in_datagrams: d.udp_in_datagrams,
        in_errors: d.udp_in_errors,
        rcvbuf_errors: d.udp_rcvbuf_errors,
        sndbuf_errors: d.udp_sndbuf_errors,
        reasm_reqds: d.ip_reasm_reqds,
        reasm_fails: d.ip_reasm_fails,
        frag_creates: d.ip_frag_creates,
    })
}

/// The clients' UDP socket buffers in `record` (UDP runs only).
fn with_udp_clients(record: Record, args: &Args, buffers: &[ark_udp::SocketBuffers]) -> Record {
    let (send_min, send_max) = min_max(buffers.iter().map(|b| b.send));
    let (recv_min, recv_max) = min_max(buffers.iter().map(|b| b.recv));
    Record {
        udp_steering: udp_steering(args),
        udp_send_buffer_requested_bytes: (args.protocol == Protocol::Udp)
            .then_some(args.udp_send_buffer),
        udp_receive_buffer_requested_bytes: (args.protocol == Protocol::Udp)
            .then_some(args.udp_receive_buffer),
        udp_client_send_buffer_min_bytes: send_min,
        udp_client_send_buffer_max_bytes: send_max,
        udp_client_receive_buffer_min_bytes: recv_min,
        udp_client_receive_buffer_max_bytes: recv_max,
        ..record
    }
}

/// Why the run does not count, if it does not: interrupted, nothing measured, message
/// errors, messages left unfinished, or no echo in the warm-up.
fn run_error(
    args: &Args,
    window: &Window,
    messages: u64,
    errors: u64,
    unfinished: u64,
    warmup_ok: bool,
) -> Option<String> {
    if window.interrupted {
        Some(format!(
            "interrupted by SIGINT/SIGTERM after {:.3} s of {} s measured; the figures cover that time",
            window.elapsed, args.seconds
        ))
    } else if messages == 0 {
        Some("no round trip completed in the measured phase".to_string())
    } else if errors > 0 {
        Some(format!(
            "{errors} message errors (content, order, unexpected, disconnects, warm-up)"
        ))
    } else if unfinished > 0 {
        Some(format!("{unfinished} messages unfinished after the drain"))
    } else if !warmup_ok {
        Some("no echo during the warm-up".to_string())
    } else {
        None
    }
}

/// `record` with what the clients measured in `window`: rates, round-trip times, errors,
/// connections, TLS, and the per-message costs.
fn with_results(record: Record, args: &Args, totals: &Totals, window: &Window) -> Record {
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::SeqCst);
    let (messages, sent) = (totals.messages(), totals.sent_measured());
    let missing = sent.saturating_sub(totals.measured_done());
    let udp = args.protocol == Protocol::Udp;
    let errors = get(&totals.content_errors)
        + get(&totals.order_errors)
        + get(&totals.unexpected)
        + get(&totals.disconnects)
        + get(&totals.warmup_errors);
    let warmup_ok = args.warmup == 0.0 || totals.warmup_received() > 0;
    let unfinished = if udp { 0 } else { missing };
    let error = run_error(args, window, messages, errors, unfinished, warmup_ok);
    let per_message = |(a, b): (Option<u64>, Option<u64>)| match (a, b) {
        (Some(a), Some(b)) if messages > 0 => Some((b - a) as f64 / messages as f64),
        _ => None,
    };
    let elapsed = window.elapsed;
    let record = with_rate_limit(with_rtt(record, totals), args, elapsed);
    Record {
        elapsed_seconds: elapsed,
        messages_sent: sent,
        messages,
        payload_roundtrip_bytes: messages * u64::from(args.payload),
        wire_bytes_per_message: window
            .wire_bytes
            .filter(|_| messages > 0)
            .map(|bytes| bytes as f64 / (2 * messages) as f64),
        roundtrips_per_second: messages as f64 / elapsed,
        payload_mib_per_second: (messages * u64::from(args.payload)) as f64
            / elapsed
            / (1024.0 * 1024.0),
        client_send_rejections: get(&totals.send_rejections),
        content_errors: get(&totals.content_errors),
        order_errors: get(&totals.order_errors),
        unexpected_messages: get(&totals.unexpected),
        disconnect_errors: get(&totals.disconnects),
        udp_lost_messages: udp.then_some(missing),
        udp_loss_rate: udp.then(|| {
            if sent == 0 {
                0.0
            } else {
                missing as f64 / sent as f64
            }
        }),
        unfinished_messages: unfinished,
        warmup_ok,
        warmup_errors: get(&totals.warmup_errors),
        allocations_per_message: per_message(window.allocations),
        syscalls_per_message: per_message(window.syscalls),
        cpu_seconds: window.cpu,
        cpu_elapsed_seconds: elapsed,
        cpu_percent: window.cpu / elapsed * 100.0,
        peak_rss_bytes: peak_rss(),
        interrupted: window.interrupted,
        ok: error.is_none(),
        error,
        ..with_connections(record, args, totals, elapsed)
    }
}

/// `record` with the round-trip times and the spread of messages over clients.
fn with_rtt(record: Record, totals: &Totals) -> Record {
    let rtt = totals
        .rtt
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let q = |p: f64| (!rtt.is_empty()).then(|| rtt.value_at_quantile(p) as f64);
    let per_client = totals
        .per_client
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Record {
        rtt_samples: rtt.len(),
        rtt_p50_us: q(0.5),
        rtt_p95_us: q(0.95),
        rtt_p99_us: q(0.99),
        rtt_p999_us: q(0.999),
        rtt_max_us: (!rtt.is_empty()).then(|| rtt.max() as f64),
        client_messages_min: per_client.iter().min().copied(),
        client_messages_max: per_client.iter().max().copied(),
        ..record
    }
}

/// `record` with what the `--rudp-bulk` messages moved in the measured phase.
fn with_rudp_bulk(record: Record, args: &Args, window: &Window) -> Record {
    if args.rudp_bulk == 0 {
        return record;
    }
    let seconds = window.elapsed.max(f64::MIN_POSITIVE);
    Record {
        rudp_bulk: Some(RudpBulkRecord {
            message_bytes: args.rudp_bulk,
            lanes: args.rudp_lanes == Switch::On,
            bytes: window.bulk_bytes,
            mib_per_second: window.bulk_bytes as f64 / seconds / f64::from(1u32 << 20),
        }),
        ..record
    }
}

/// `record` with what `--rate-limit` held: the limit and the payload each client moved a
/// second each way (the fastest and the slowest client).
fn with_rate_limit(record: Record, args: &Args, elapsed: f64) -> Record {
    let limits = args.rate_limits();
    let Some(write) = limits.write else {
        return record;
    };
    let rate = |messages: Option<u64>| {
        messages.map(|m| (m * u64::from(args.payload)) as f64 / elapsed.max(f64::MIN_POSITIVE))
    };
    let rate_limit = RateLimitRecord {
        bytes_per_second: write.bytes_per_second,
        burst_bytes: write.burst,
        reads_limited: limits.read.is_some(),
        client_payload_bytes_per_second_max: rate(record.client_messages_max),
        client_payload_bytes_per_second_min: rate(record.client_messages_min),
    };
    Record {
        rate_limit: Some(rate_limit),
        ..record
    }
}

/// `record` with the connections made (when clients reconnect) and the TLS negotiated.
fn with_connections(record: Record, args: &Args, totals: &Totals, elapsed: f64) -> Record {
    let reconnecting = args.reconnect_every > 0;
    let connections = totals.connections.load(Ordering::SeqCst);
    let negotiated = totals
        .tls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    Record {
        connections: reconnecting.then_some(connections),
        connections_per_second: reconnecting.then(|| connections as f64 / elapsed),
        tls_resumed_connections: (reconnecting && args.protocol.is_tls())
            .then(|| totals.resumed.load(Ordering::SeqCst)),
        tls_version: negotiated.as_ref().map(|n| n.0.clone()),
        tls_cipher_suite: negotiated.map(|n| n.1),
        ..record
    }
}

/// A record of this run's parameters with no measurement yet (`ok: false`).
fn base_record(args: &Args, implementation: &'static str) -> Record {
    let tls = args.protocol.is_tls();
    Record {
        schema_version: 1,
        implementation,
        version: env!("CARGO_PKG_VERSION"),
        git_commit: git_commit(),
        protocol: args.protocol.name(),
        address_family: args.address_family.name(),
        payload_bytes: args.payload,
        clients: args.clients,
        window: args.window,
        io_model: args.io_model.name(),
        io_path: ark_reactor::IO_PATH,
        handler_work: args.work,
        io_contexts: args.io_contexts(),
        io_threads: args.total_io_threads(),
        server_and_clients_share_io_threads: args.role == Role::Both
            && args.io_model != IoModelArg::Owned,
        requested_seconds: args.seconds,
        warmup_seconds: args.warmup,
        tls_certificates: tls.then_some(if args.certs.is_some() {
            "dir"
        } else {
            "generated"
        }),
        tls_resumption: tls.then_some(args.tls_resumption == crate::args::Switch::On),
        reconnect_every: args.reconnect_every,
        tracing: tracing_mode(),
        ws_server: matches!(args.protocol, Protocol::Websocket | Protocol::Wss)
            .then(|| args.ws_server.name()),
        ws_deflate: matches!(args.protocol, Protocol::Websocket | Protocol::Wss)
            .then_some(args.ws_deflate == crate::args::Switch::On),
        peak_rss_bytes: peak_rss(),
        // Every other field: nothing measured yet (zeros, `None`, `ok: false`).
        ..Record::default()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status =
            "Name:\tark-loopback\nVmPeak:\t  12345 kB\nVmHWM:\t    7040 kB\nVmRSS:\t 6000 kB\n";
        assert_eq!(super::vm_hwm(status), Some(7040 * 1024));
        assert_eq!(super::vm_hwm("VmRSS:\t1 kB\n"), None);
    }
}
