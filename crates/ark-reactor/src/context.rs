//! `Context`: what a handler may do during its turn.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::handle::{ReactorHandle, Shared};
use crate::source::{Handler, SourceId};
use crate::stats::Counters;
use crate::timer::TimerId;

/// Per-turn limits that keep one busy source from starving the others. A handler counts its
/// own operations and bytes against them and returns [`Turn::Again`](crate::Turn::Again) when
/// either is used up with work remaining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Operations (reads, receives, accepts, ...) per turn. Default 16.
    pub operations: u32,
    /// Bytes per turn. Default 1 MiB: sixteen full reads of the default 64 KiB scratch, so a
    /// session that keeps its socket full is limited by `operations`. (At 256 KiB, a window of
    /// sixteen 16 KiB WebSocket messages per connection, 256 KiB and a few header bytes, was
    /// cut just short of its last frame, which then waited behind every other ready session:
    /// p99 1.5 times the tokio program's.)
    pub bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            operations: 16,
            bytes: 1024 * 1024,
        }
    }
}

/// A change a handler asked for, applied by the reactor when the handler's turn ends.
pub(crate) enum Effect {
    SetTimer {
        id: TimerId,
        deadline: Instant,
        period: Option<Duration>,
    },
    CancelTimer(TimerId),
    Close,
    Wake(SourceId),
    Insert {
        id: SourceId,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    },
}

/// A handler's view of the reactor during one callback: the turn's time, the shared scratch
/// read buffer, counters, registration, timers and closing. Operations that change the
/// reactor (timers, close, new sources) take effect when the callback returns, in order.
pub struct Context<'a> {
    pub(crate) id: SourceId,
    pub(crate) now: Instant,
    pub(crate) scratch: &'a mut [u8],
    pub(crate) effects: &'a mut Vec<Effect>,
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) budget: Budget,
}

impl std::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("id", &self.id)
            .field("now", &self.now)
            .field("scratch_len", &self.scratch.len())
            .finish_non_exhaustive()
    }
}

impl Context<'_> {
    /// The source being served.
    #[inline]
    pub fn id(&self) -> SourceId {
        self.id
    }

    /// The time read once at the start of this loop turn.
    #[inline]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The scratch read buffer of the thread serving this source (64 KiB by default), lent
    /// for this callback only: read into it and handle the bytes before returning.
    #[inline]
    pub fn scratch(&mut self) -> &mut [u8] {
        self.scratch
    }

    /// The fairness budget for this turn.
    #[inline]
    pub fn budget(&self) -> Budget {
        self.budget
    }

    /// Counters for reporting syscalls.
    #[inline]
    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// The registry, to change this source's interest:
    /// `cx.registry().reregister(socket, cx.token(), interest)`.
    #[inline]
    pub fn registry(&self) -> &mio::Registry {
        &self.shared.registry
    }

    /// The token this source is registered with (for `reregister`).
    #[inline]
    pub fn token(&self) -> mio::Token {
        self.id.token()
    }

    /// A handle to post work to this reactor or stop it.
    pub fn handle(&self) -> ReactorHandle {
        ReactorHandle::new(self.shared.clone())
    }

    /// Starts a timer for this source: `on_timer` runs after `delay`, then every `period` if
    /// one is given. The timer is cancelled when the source closes.
    pub fn set_timer(&mut self, delay: Duration, period: Option<Duration>) -> TimerId {
        let id = self.shared.next_timer_id();
        self.effects.push(Effect::SetTimer {
            id,
            deadline: self.now + delay,
            period,
        });
        id
    }

    /// Cancels a timer of this source; it will not fire after this callback returns.
    pub fn cancel_timer(&mut self, timer: TimerId) {
        self.effects.push(Effect::CancelTimer(timer));
    }

    /// Closes this source when the callback returns: it is deregistered, its timers are
    /// cancelled and `on_close(CloseReason::Closed)` runs.
    pub fn close(&mut self) {
        self.effects.push(Effect::Close);
    }

    /// Gives another source of this reactor a turn when the callback returns (its `on_ready`
    /// sees [`Ready::WAKE`](crate::Ready::WAKE)); see [`Reactor::wake`](crate::Reactor::wake).
    pub fn wake(&mut self, id: SourceId) {
        self.effects.push(Effect::Wake(id));
    }

    /// Registers a new source on this reactor when the callback returns (an accepted
    /// connection, say) and returns its id now. A registration failure reaches the new
    /// handler as `on_close(CloseReason::RegistrationFailed(kind))`; `None` if the source
    /// table is full (the handler is dropped).
    pub fn insert(
        &mut self,
        handler: Box<dyn Handler>,
        interest: mio::Interest,
    ) -> Option<SourceId> {
        let id = self.shared.ids.reserve()?;
        self.effects.push(Effect::Insert {
            id,
            handler,
            interest,
        });
        Some(id)
    }
}
