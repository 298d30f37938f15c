//! SIGINT and SIGTERM end a run gracefully: the measured phase stops early, clients drain,
//! and a record of what was measured is still printed.

use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set once SIGINT or SIGTERM has arrived (after [`install`]).
fn flag() -> &'static Arc<AtomicBool> {
    static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Makes SIGINT and SIGTERM raise the stop flag instead of killing the process. Idempotent.
///
/// # Errors
/// Registering a handler failed.
pub fn install() -> std::io::Result<()> {
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, flag().clone())?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM has arrived.
pub fn stop_requested() -> bool {
    flag().load(Ordering::SeqCst)
}

/// Sleeps for `duration`, or less if a stop is requested; `true` if it was.
pub fn sleep_unless_stopped(duration: Duration) -> bool {
    let deadline = Instant::now() + duration;
    loop {
        if stop_requested() {
            return true;
        }
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return false;
        };
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
}
