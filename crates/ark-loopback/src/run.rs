//! One benchmark run of any [`Endpoints`]: start the IO threads, the server and the clients,
//! warm up, measure, drain, and fill the record.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ark_udp::NetCounters;

use crate::args::{Args, IoModelArg, Protocol, Role};
use crate::clients::{Core, PHASE_DRAIN, PHASE_MEASURED, Totals};
use crate::endpoints::{ArkEndpoints, Endpoints};
use crate::link::{LinkSettings, Relay};
use crate::record::{Record, UdpKernel};
use crate::servers::{Echo, ServerCounters};
use crate::signals;

/// Process CPU seconds (all threads).
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

/// Peak resident set size (`VmHWM`), bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
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

/// The body of a loopback program's `main` for implementation `E`: runs `args` (server only,
/// or a measured run), prints the JSON record on stdout and returns the exit code: 0 iff the
/// run is `ok`, 1 otherwise. Flags are checked with [`Args::validate`] first (exit 2).
pub fn main_for<E: Endpoints>(
    args: &Args,
    allocations: Option<fn() -> u64>,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    if let Err(message) = args.validate() {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    if let Err(e) = signals::install() {
        eprintln!("error: cannot handle SIGINT/SIGTERM: {e}");
        return ExitCode::FAILURE;
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
    serve::<ArkEndpoints>(args)
}

/// Runs the server only (`--role server`) for warm-up + measured + drain + 5 s (or until
/// SIGINT/SIGTERM), then stops it, giving its sessions at most the drain to close (the rest
/// are cut and counted in `server_sessions_cut`), and returns what it served.
///
/// # Errors
/// The IO threads or the server could not start.
pub fn serve<E: Endpoints>(args: &Args) -> std::io::Result<serde_json::Value> {
    let mut endpoints = E::start(args)?;
    let counters = Arc::new(ServerCounters::default());
    let echo = Echo::new(args, counters.clone());
    let addr = endpoints.start_server(args, echo)?;
    eprintln!("{} loopback server on {addr}", E::NAME);
    let interrupted = signals::sleep_unless_stopped(Duration::from_secs_f64(
        args.warmup + args.seconds + args.drain + 5.0,
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
        "server_send_rejections": counters.send_rejections.load(Ordering::Relaxed),
        "syscalls": syscalls,
        "interrupted": interrupted,
        "ok": true,
    }))
}

/// One run of ark with server and clients (`--role both`) or clients only (`--role
/// client`); see [`measure`].
pub fn run(args: &Args, allocations: Option<fn() -> u64>) -> Record {
    measure::<ArkEndpoints>(args, allocations)
}

/// One run of `E` with server and clients (`--role both`) or clients only (`--role client`).
/// `allocations` reads the process's allocation counter when the binary installed one.
pub fn measure<E: Endpoints>(args: &Args, allocations: Option<fn() -> u64>) -> Record {
    match measure_inner::<E>(args, allocations) {
        Ok(record) => record,
        Err(e) => Record {
            error: Some(e.to_string()),
            ..base_record(args, E::NAME)
        },
    }
}

fn measure_inner<E: Endpoints>(
    args: &Args,
    allocations: Option<fn() -> u64>,
) -> std::io::Result<Record> {
    let mut endpoints = E::start(args)?;
    let server_counters = Arc::new(ServerCounters::default());
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
    let link = LinkSettings::of(args);
    let relay = match &link {
        Some(settings) => Some(Relay::start(settings, args.protocol, target)?),
        None => None,
    };
    let target = relay.as_ref().map_or(target, Relay::local_addr);
    let ipv6 = target.is_ipv6();
    let kernel_before = NetCounters::snapshot_for(ipv6);
    let totals = Totals::new();
    let exact_order = args.protocol != Protocol::Udp;
    let mut udp_buffers = Vec::new();
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
        // One client at a time, each started (connected, first window sent) before the next:
        // the server then sees the clients in order, and every implementation's placement of
        // clients and server sessions over its threads is the same (both round-robin, in
        // client order).
        let started = wait_until(CONNECT_TIMEOUT, || {
            totals.started.load(Ordering::SeqCst) > u64::from(id)
        });
        if !started {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("client {id} did not connect within {CONNECT_TIMEOUT:?}"),
            ));
        }
    }

    let mut interrupted = signals::sleep_unless_stopped(Duration::from_secs_f64(args.warmup));
    let (cpu0, sys0, allocs0) = (
        cpu_seconds(),
        endpoints.syscalls(),
        allocations.map(|f| f()),
    );
    totals.phase.store(PHASE_MEASURED, Ordering::SeqCst);
    let started = Instant::now();
    eprintln!("{}: measuring for {} s", E::NAME, args.seconds);
    if !interrupted {
        interrupted = signals::sleep_unless_stopped(Duration::from_secs_f64(args.seconds));
    }
    totals.phase.store(PHASE_DRAIN, Ordering::SeqCst);
    let elapsed = started.elapsed().as_secs_f64();
    let (cpu1, sys1, allocs1) = (
        cpu_seconds(),
        endpoints.syscalls(),
        allocations.map(|f| f()),
    );

    let drain_deadline = Instant::now() + Duration::from_secs_f64(args.drain);
    while totals.in_flight() > 0 && Instant::now() < drain_deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let drained = totals.in_flight() <= 0;
    let kernel = match (kernel_before, NetCounters::snapshot_for(ipv6)) {
        (Some(before), Some(after)) if args.protocol == Protocol::Udp => {
            let d = after.since(&before);
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
        _ => None,
    };
    let udp_server_buffers = endpoints.udp_server_buffers();
    let udp_batched = endpoints.udp_batched(args);
    let rudp = endpoints.rudp_stats();
    endpoints.stop()?;
    let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::SeqCst);
    // Every echo of the run, warm-up and drain included, as the relay saw the whole run.
    let delivered = totals.warmup_received() + totals.measured_done();
    let link = relay
        .zip(link)
        .map(|(relay, settings)| relay.finish(settings, delivered * 2 * u64::from(args.payload)));

    let messages = totals.messages();
    let sent = totals.sent_measured();
    let missing = sent.saturating_sub(totals.measured_done());
    let udp = args.protocol == Protocol::Udp;
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
    let payload = u64::from(args.payload);
    let cpu = cpu1 - cpu0;
    let errors = get(&totals.content_errors)
        + get(&totals.order_errors)
        + get(&totals.unexpected)
        + get(&totals.disconnects)
        + get(&totals.warmup_errors);
    let warmup_ok = args.warmup == 0.0 || totals.warmup_received() > 0;
    let unfinished = if udp { 0 } else { missing };
    let mut error = None;
    if interrupted {
        error = Some(format!(
            "interrupted by SIGINT/SIGTERM after {elapsed:.3} s of {} s measured; the figures cover that time",
            args.seconds
        ));
    } else if messages == 0 {
        error = Some("no round trip completed in the measured phase".to_string());
    } else if errors > 0 {
        error = Some(format!(
            "{errors} message errors (content, order, unexpected, disconnects, warm-up)"
        ));
    } else if unfinished > 0 {
        error = Some(format!("{unfinished} messages unfinished after the drain"));
    } else if !warmup_ok {
        error = Some("no echo during the warm-up".to_string());
    }
    let reconnecting = args.reconnect_every > 0;
    let connections = get(&totals.connections);
    let negotiated = totals
        .tls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let (csend_min, csend_max) = min_max(udp_buffers.iter().map(|b| b.0));
    let (crecv_min, crecv_max) = min_max(udp_buffers.iter().map(|b| b.1));
    Ok(Record {
        elapsed_seconds: elapsed,
        messages_sent: sent,
        messages,
        payload_roundtrip_bytes: messages * payload,
        roundtrips_per_second: messages as f64 / elapsed,
        payload_mib_per_second: (messages * payload) as f64 / elapsed / (1024.0 * 1024.0),
        rtt_samples: rtt.len(),
        rtt_p50_us: q(0.5),
        rtt_p95_us: q(0.95),
        rtt_p99_us: q(0.99),
        rtt_p999_us: q(0.999),
        rtt_max_us: (!rtt.is_empty()).then(|| rtt.max() as f64),
        client_messages_min: per_client.iter().min().copied(),
        client_messages_max: per_client.iter().max().copied(),
        client_send_rejections: get(&totals.send_rejections),
        server_send_rejections: get(&server_counters.send_rejections),
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
        drain_timeouts: u64::from(!drained),
        warmup_ok,
        warmup_errors: get(&totals.warmup_errors),
        udp_batch: udp.then_some(udp_batched),
        udp_steering: udp_steering(args),
        udp_send_buffer_requested_bytes: udp.then_some(args.udp_send_buffer),
        udp_receive_buffer_requested_bytes: udp.then_some(args.udp_receive_buffer),
        udp_server_send_buffer_bytes: udp_server_buffers.map(|b| b.0),
        udp_server_receive_buffer_bytes: udp_server_buffers.map(|b| b.1),
        udp_client_send_buffer_min_bytes: csend_min,
        udp_client_send_buffer_max_bytes: csend_max,
        udp_client_receive_buffer_min_bytes: crecv_min,
        udp_client_receive_buffer_max_bytes: crecv_max,
        udp_kernel: kernel,
        connections: reconnecting.then_some(connections),
        connections_per_second: reconnecting.then(|| connections as f64 / elapsed),
        tls_resumed_connections: (reconnecting && args.protocol.is_tls())
            .then(|| get(&totals.resumed)),
        tls_version: negotiated.as_ref().map(|n| n.0.clone()),
        tls_cipher_suite: negotiated.map(|n| n.1),
        allocations_per_message: match (allocs0, allocs1) {
            (Some(a), Some(b)) if messages > 0 => Some((b - a) as f64 / messages as f64),
            _ => None,
        },
        syscalls_per_message: match (sys0, sys1) {
            (Some(a), Some(b)) if messages > 0 => Some((b - a) as f64 / messages as f64),
            _ => None,
        },
        cpu_seconds: cpu,
        cpu_elapsed_seconds: elapsed,
        cpu_percent: cpu / elapsed * 100.0,
        peak_rss_bytes: peak_rss(),
        link,
        rudp,
        interrupted,
        ok: error.is_none(),
        error,
        ..base_record(args, E::NAME)
    })
}

/// A record of this run's parameters with no measurement yet (`ok: false`).
fn base_record(args: &Args, implementation: &'static str) -> Record {
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
        handler_work: args.work,
        io_contexts: args.io_contexts(),
        io_threads: args.total_io_threads(),
        server_and_clients_share_io_threads: args.role == Role::Both
            && args.io_model != IoModelArg::Owned,
        requested_seconds: args.seconds,
        warmup_seconds: args.warmup,
        elapsed_seconds: 0.0,
        messages_sent: 0,
        messages: 0,
        payload_roundtrip_bytes: 0,
        roundtrips_per_second: 0.0,
        payload_mib_per_second: 0.0,
        rtt_samples: 0,
        rtt_p50_us: None,
        rtt_p95_us: None,
        rtt_p99_us: None,
        rtt_p999_us: None,
        rtt_max_us: None,
        client_messages_min: None,
        client_messages_max: None,
        client_send_rejections: 0,
        server_send_rejections: 0,
        content_errors: 0,
        order_errors: 0,
        unexpected_messages: 0,
        disconnect_errors: 0,
        udp_lost_messages: None,
        udp_loss_rate: None,
        unfinished_messages: 0,
        drain_timeouts: 0,
        warmup_ok: false,
        warmup_errors: 0,
        udp_batch: None,
        udp_steering: None,
        udp_send_buffer_requested_bytes: None,
        udp_receive_buffer_requested_bytes: None,
        udp_server_send_buffer_bytes: None,
        udp_server_receive_buffer_bytes: None,
        udp_client_send_buffer_min_bytes: None,
        udp_client_send_buffer_max_bytes: None,
        udp_client_receive_buffer_min_bytes: None,
        udp_client_receive_buffer_max_bytes: None,
        udp_kernel: None,
        tls_version: None,
        tls_cipher_suite: None,
        tls_certificates: args.protocol.is_tls().then_some(if args.certs.is_some() {
            "dir"
        } else {
            "generated"
        }),
        tls_resumption: args
            .protocol
            .is_tls()
            .then_some(args.tls_resumption == crate::args::Switch::On),
        reconnect_every: args.reconnect_every,
        connections: None,
        connections_per_second: None,
        tls_resumed_connections: None,
        allocations_per_message: None,
        syscalls_per_message: None,
        cpu_seconds: 0.0,
        cpu_elapsed_seconds: 0.0,
        cpu_percent: 0.0,
        peak_rss_bytes: peak_rss(),
        link: None,
        rudp: None,
        interrupted: false,
        ok: false,
        error: None,
    }
}
