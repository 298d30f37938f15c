//! # ark-testkit
//!
//! Helpers shared by the ark crates' tests and benchmark programs (not published):
//!
//! * [`CountingAllocator`]: the system allocator, counting allocation calls and live bytes, for
//!   "allocations per message" and "bytes held" figures. A test binary opts in with
//!   `#[global_allocator] static A: ark_testkit::CountingAllocator = ark_testkit::CountingAllocator;`.
//! * [`wait_until`]: a bounded poll for a condition.
//! * [`process_cpu_seconds`]: exact process CPU time (`CLOCK_PROCESS_CPUTIME_ID`).
//! * [`last_record`]: the JSON record a benchmark program printed last on its stdout.
//! * [`workspace_binary`]: another workspace package's program, for a test that runs it.
//! * [`CapturedLog`]: the process's `tracing` log in memory, and [`LogLines`], the lines of
//!   one event with the count of those a rate limit left out.
//! * [`check_max_sessions`] and, on Linux, [`socket_options_of`] and [`listen_backlog_of`]:
//!   what a server builder's settings did to the sockets it serves, read back from the kernel
//!   or seen by connections.
//! * [`Window`] and [`payload`]: the closed loop of an echo client (so many messages, so
//!   many unanswered at most) and the numbered payloads it sends, which every transport's
//!   test clients (`Pinger`s, allocation counters) share; each crate's tests keep only their
//!   handler, which implements that crate's own trait.
//!
//! ```
//! use std::time::Duration;
//!
//! assert!(ark_testkit::wait_until(Duration::from_millis(10), || true));
//! assert!(ark_testkit::process_cpu_seconds().is_some_and(|s| s >= 0.0));
//!
//! let mut window = ark_testkit::Window::new(3, 2);
//! assert_eq!((window.next_to_send(), window.next_to_send(), window.next_to_send()), (Some(0), Some(1), None));
//! assert_eq!(window.answered(), 0); // the answer to message 0 arrived
//! assert_eq!((window.next_to_send(), window.next_to_send()), (Some(2), None));
//! assert_eq!((window.answered(), window.answered()), (1, 2));
//! assert!(window.is_done());
//! assert_eq!(ark_testkit::payload(1, 4), b"hijk");
//! ```

#![warn(missing_docs, missing_debug_implementations)]

mod socket;
pub use socket::check_max_sessions;
#[cfg(target_os = "linux")]
pub use socket::{SocketOptionsSeen, listen_backlog_of, socket_options_of};

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Allocation calls made by this thread (const-initialised: no lazy allocation inside the
    /// allocator).
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);
static FREED_BYTES: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting calls and bytes with relaxed atomics (exact in a
/// single-threaded section, one uncontended add per call).
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAllocator;

/// Allocation calls so far by every thread (`alloc`, `alloc_zeroed` and `realloc` each count
/// one).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::SeqCst)
}

/// Allocation calls so far by the calling thread only: immune to what the test harness's own
/// threads do.
pub fn thread_allocations() -> u64 {
    THREAD_ALLOCATIONS.with(Cell::get)
}

#[inline]
fn count_call() {
    ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    // `try_with`: during thread teardown the slot may be gone; such calls count globally only.
    let _ = THREAD_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

/// Heap bytes currently allocated through the counting allocator.
pub fn live_bytes() -> i64 {
    ALLOCATED_BYTES.load(Ordering::Relaxed) as i64 - FREED_BYTES.load(Ordering::Relaxed) as i64
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counters have no effect on the memory returned.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_call();
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_call();
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_call();
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, which we pass on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        FREED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract, which we pass on.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Polls `condition` every millisecond for at most `timeout`; whether it became true.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// CPU time (user + system, all threads) this process has used, in seconds, from
/// `clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`, which is exact rather than tick-sampled. `None`
/// if the clock is unavailable.
#[cfg(unix)]
pub fn process_cpu_seconds() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call, and the clock
    // id is a constant the kernel defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

/// Process CPU seconds (all threads, user and kernel) from `GetProcessTimes` (100 ns units,
/// accounted at the scheduler's tick). `None` if the call fails.
#[cfg(windows)]
pub fn process_cpu_seconds() -> Option<f64> {
    use windows_sys::Win32::Foundation::FILETIME;
    use windows_sys::Win32::System::Threading::{GetCurrentProcess, GetProcessTimes};
    let zero = || FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero(), zero(), zero(), zero());
    // SAFETY: the pseudo-handle of the current process is always valid, and the four
    // FILETIMEs are valid and writable for the call.
    let ok = unsafe {
        GetProcessTimes(
            GetCurrentProcess(),
            &mut created,
            &mut exited,
            &mut kernel,
            &mut user,
        )
    };
    let ticks = |t: FILETIME| (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime);
    (ok != 0).then(|| (ticks(kernel) + ticks(user)) as f64 / 1e7)
}

/// Process CPU time: not measured where there is neither (`None`).
#[cfg(not(any(unix, windows)))]
pub fn process_cpu_seconds() -> Option<f64> {
    None
}

/// The JSON record on the last line of a program's `stdout` (as ark-loopback and the peers
/// print it); `Value::Null` when that line is missing or not JSON.
///
/// ```
/// let record = ark_testkit::last_record(b"progress\n{\"ok\":true}\n");
/// assert_eq!(record["ok"], true);
/// assert!(ark_testkit::last_record(b"no record").is_null());
/// ```
pub fn last_record(stdout: &[u8]) -> serde_json::Value {
    String::from_utf8_lossy(stdout)
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Checks that a loopback program's run ended cleanly and returns its record: the program
/// exited 0, its record says `ok` under `implementation` and counts messages, and none was
/// wrong in content or order, unexpected, cut by a disconnect or left unanswered. `label`
/// names the run in a failure's message.
pub fn clean_record(
    out: &std::process::Output,
    label: &str,
    implementation: &str,
) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let record = last_record(&out.stdout);
    assert!(out.status.success(), "{label}: {stderr} {record}");
    assert_eq!(record["ok"], true, "{label}: {record}");
    assert_eq!(
        record["implementation"], implementation,
        "{label}: {record}"
    );
    assert!(
        record["messages"].as_u64().unwrap_or(0) > 0,
        "{label}: {record}"
    );
    for field in [
        "content_errors",
        "order_errors",
        "unexpected_messages",
        "disconnect_errors",
        "unfinished_messages",
    ] {
        assert_eq!(record[field], 0, "{label}: {field} in {record}");
    }
    record
}

/// Checks that a loopback program refused its run: it exited non-zero, and its record says
/// not `ok` with an error that contains `cause`. Returns the record.
pub fn refused_record(out: &std::process::Output, cause: &str) -> serde_json::Value {
    let record = last_record(&out.stdout);
    assert!(!out.status.success(), "{record}");
    assert_eq!(record["ok"], false, "{record}");
    let error = record["error"].as_str().unwrap_or_default();
    assert!(error.contains(cause), "not refused for {cause:?}: {record}");
    record
}

/// The program `name` of the workspace package `package`, for a test that runs a program of
/// another package (`env!("CARGO_BIN_EXE_..")` names only the test's own package's programs):
/// `<target>/<profile>/<name>`, next to the `deps/` directory of the running test.
///
/// `cargo test --workspace` builds every member's programs before any test runs, so there the
/// program is present and current. Under `cargo test -p <this package>` cargo builds only this
/// package's programs: when the other one is missing, the first call builds it with
/// `cargo build -p <package> --bin <name>` in the test's profile and target directory. A
/// program already there is used as it is (building it again from a test would rebuild it
/// with `-p`'s features, not the workspace's, on every run): after changing its package,
/// test the workspace or build that package. Panics with the program's path and the command
/// that builds it when that build fails or the program is still missing.
pub fn workspace_binary(package: &str, name: &str) -> PathBuf {
    // One build at a time: tests of one process may ask for the same program together.
    static BUILDING: Mutex<()> = Mutex::new(());
    let exe = std::env::current_exe().expect("the running test's path");
    let dir = exe.parent().expect("the test's directory");
    let profile_dir = if dir.ends_with("deps") {
        dir.parent().expect("the profile directory")
    } else {
        dir
    };
    let program = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let _building = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if program.is_file() {
        return program;
    }
    let args = build_args(package, name, profile_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let failure = match Command::new(&cargo).args(&args).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(String::from_utf8_lossy(&out.stderr).into_owned()),
        Err(e) => Some(format!("could not start {}: {e}", cargo.to_string_lossy())),
    };
    assert!(
        failure.is_none() && program.is_file(),
        "this test runs `{name}` of package `{package}` ({}), which `cargo {}` did not build: {}",
        program.display(),
        args.join(" "),
        failure.as_deref().unwrap_or("no such file after the build"),
    );
    program
}

/// The arguments of `cargo build` for one program into `profile_dir`: `<target>/debug` is the
/// dev profile's, `<target>/<profile>` the others'.
fn build_args(package: &str, name: &str, profile_dir: &Path) -> Vec<String> {
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let mut args: Vec<String> = [
        "build",
        "--quiet",
        "-p",
        package,
        "--bin",
        name,
        "--profile",
        profile,
    ]
    .map(String::from)
    .into();
    if let Some(target) = profile_dir.parent() {
        args.push("--target-dir".to_string());
        args.push(target.to_string_lossy().into_owned());
    }
    args
}

/// The closed loop of an echo client: `total` messages, at most `window` of them sent and not
/// yet answered; answers arrive in order (a stream, or a test that checks the order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Messages to send in all.
    pub total: u64,
    /// Most messages sent and not yet answered.
    pub window: u64,
    /// Messages sent so far.
    pub sent: u64,
    /// Answers received so far.
    pub answers: u64,
}

impl Window {
    /// A loop of `total` messages with `window` in flight at most (at least one).
    pub fn new(total: u64, window: u64) -> Self {
        Window {
            total,
            window: window.max(1),
            sent: 0,
            answers: 0,
        }
    }

    /// The number of the next message if the loop may send one now (counted as sent), so
    /// `while let Some(seq) = window.next_to_send() { send(seq) }` fills the window.
    pub fn next_to_send(&mut self) -> Option<u64> {
        let room = self.sent < self.total && self.sent - self.answers < self.window;
        room.then(|| {
            self.sent += 1;
            self.sent - 1
        })
    }

    /// Counts an answer and returns the number of the message it answers.
    ///
    /// # Panics
    /// More answers than messages sent (a test's peer answered something never asked).
    pub fn answered(&mut self) -> u64 {
        assert!(
            self.answers < self.sent,
            "answer {} with only {} messages sent",
            self.answers,
            self.sent
        );
        self.answers += 1;
        self.answers - 1
    }

    /// Every message has been answered.
    pub fn is_done(&self) -> bool {
        self.answers == self.total
    }
}

/// The payload of message `seq`: `len` bytes, different per message, letters only (so
/// delimiter and text framings carry it unchanged).
pub fn payload(seq: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((seq as usize).wrapping_mul(7).wrapping_add(i) % 26) as u8)
        .collect()
}

/// The process's `tracing` log, written into memory: what a test of a `tracing` feature reads.
/// Sessions run on the reactors' threads, so the subscriber is the process's (one per test
/// binary: [`install`](Self::install) panics the second time).
#[derive(Debug, Clone, Default)]
pub struct CapturedLog(std::sync::Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    /// Makes the process's subscriber write events at `level` and above, without colours,
    /// into the returned log.
    ///
    /// # Panics
    /// A subscriber was installed already.
    pub fn install(level: tracing::Level) -> CapturedLog {
        let log = CapturedLog::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("one subscriber per test binary");
        log
    }

    /// What was written so far.
    pub fn text(&self) -> String {
        let bytes = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The lines of the event whose message is `message`, and how many events of it they
    /// account for (the lines, plus the `suppressed=N` each carries from a rate limit).
    pub fn lines_of(&self, message: &str) -> LogLines {
        let text = self.text();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(message)).collect();
        let suppressed: u64 = lines
            .iter()
            .map(|line| {
                let Some(at) = line.find("suppressed=") else {
                    return 0;
                };
                let digits: String = line[at + "suppressed=".len()..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                digits.parse::<u64>().unwrap_or(0)
            })
            .sum();
        LogLines {
            lines: lines.len() as u64,
            suppressed,
        }
    }
}

/// The lines of one event in a [`CapturedLog`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLines {
    /// Lines written.
    pub lines: u64,
    /// Events left out, as the written lines count them.
    pub suppressed: u64,
}

impl LogLines {
    /// Every event the lines account for: written or left out.
    pub fn events(&self) -> u64 {
        self.lines + self.suppressed
    }
}
