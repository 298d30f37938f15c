//! One turn of a handler, run with the reactor held (single thread) or lent to a thread of the
//! shared model.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::handler::{Budget, Context, Effect, Handler, Shared};
use crate::ids::{SourceId, TimerId};
use crate::source::{Ready, Turn};

/// What a source is served for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Work {
    Ready(Ready),
    Timer(TimerId),
}

/// A handler lent for one turn (shared model with several threads).
pub(crate) struct Job {
    pub(crate) id: SourceId,
    pub(crate) handler: Box<dyn Handler>,
    pub(crate) work: Work,
    /// When it was lent (the turn's clock).
    pub(crate) now: Instant,
    /// Its source's last turn was long ([`LONG_TURN`](crate::shared::LONG_TURN)): the thread
    /// that takes it hands the polling to an idle thread first.
    pub(crate) long: bool,
}

/// A handler given back after its turn, with what it asked for.
pub(crate) struct Done {
    pub(crate) id: SourceId,
    pub(crate) handler: Box<dyn Handler>,
    pub(crate) turn: Turn,
    pub(crate) ready: Ready,
    pub(crate) effects: Vec<Effect>,
    /// When the turn ended.
    pub(crate) ended: Instant,
    /// From lend to the turn's end.
    pub(crate) took: Duration,
    /// The handler panicked: the source is to be closed.
    pub(crate) panicked: bool,
}

/// Runs one lent handler's turn and packs the handler with what it asked for.
pub(crate) fn serve_job(
    job: Job,
    scratch: &mut [u8],
    effects: &mut Vec<Effect>,
    shared: &Arc<Shared>,
    budget: Budget,
) -> Done {
    let Job {
        id,
        mut handler,
        work,
        now,
        long: _,
    } = job;
    let mut cx = Context {
        id,
        now,
        scratch,
        effects,
        shared,
        budget,
    };
    let (outcome, ready) = run_turn(handler.as_mut(), &mut cx, work);
    let ended = Instant::now();
    Done {
        id,
        handler,
        turn: outcome.unwrap_or(Turn::Done),
        ready,
        // Most turns have no effects; an empty Vec does not allocate.
        effects: std::mem::take(effects),
        ended,
        took: ended.saturating_duration_since(now),
        panicked: outcome.is_none(),
    }
}

/// Runs one callback of `handler` for `work`; `None` if it panicked (the panic is caught: one
/// source's bug must not take its thread, and every other source on it, down).
pub(crate) fn run_turn(
    handler: &mut dyn Handler,
    cx: &mut Context<'_>,
    work: Work,
) -> (Option<Turn>, Ready) {
    let ready = match work {
        Work::Ready(ready) => ready,
        Work::Timer(_) => Ready::EMPTY,
    };
    let turn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match work {
        Work::Ready(ready) => handler.on_ready(cx, ready),
        Work::Timer(timer) => handler.on_timer(cx, timer),
    }));
    #[cfg(feature = "tracing")]
    if let Err(payload) = &turn {
        // Input a peer sends may be what makes a handler panic: rate-limited.
        crate::log_limited!(
            tracing::Level::ERROR,
            panic = panic_message(payload.as_ref()),
            "a handler panicked; its source is closed"
        );
    }
    (turn.ok(), ready)
}

/// A panic's message (a `&str` or `String` payload), or a placeholder.
#[cfg(feature = "tracing")]
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(a non-string panic payload)")
}
