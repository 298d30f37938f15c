//! Tracing (cargo feature `tracing`, off by default: then nothing here is compiled in): a
//! span per session (`tcp_session`: id, peer, direction) entered around its turns, and events
//! for its open, its close with the reason (INFO for an orderly end, WARN for a failure), and
//! backpressure (DEBUG: reading paused while answers pile up, resumed). A peer can make every
//! one of them happen at will (by connecting, closing, not reading): each is rate-limited
//! per call site (`ark_reactor::log_limited!`: 10 a second, the next one written counting
//! those left out in its `suppressed` field); `TcpStats` has the exact counts.

use crate::error::CloseReason;
use crate::handler::SessionInfo;

/// A session's span (a unit without the feature).
#[cfg(feature = "tracing")]
pub(crate) type SessionSpan = tracing::Span;

/// A session's span (nothing without the feature).
#[cfg(not(feature = "tracing"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionSpan;

/// An entered span's guard (nothing without the feature).
#[cfg(not(feature = "tracing"))]
#[derive(Debug)]
pub(crate) struct Entered;

/// The span of a session described by `info`; `outgoing` for a client's.
#[cfg(feature = "tracing")]
pub(crate) fn span(info: &SessionInfo, outgoing: bool) -> SessionSpan {
    let side = if outgoing { "client" } else { "server" };
    tracing::info_span!("tcp_session", id = info.id, peer = %info.peer, side)
}

/// The span of a session (nothing without the feature).
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn span(_: &SessionInfo, _: bool) -> SessionSpan {
    SessionSpan
}

/// No span (what a session's is while it is entered).
#[cfg(feature = "tracing")]
pub(crate) fn none() -> SessionSpan {
    tracing::Span::none()
}

/// No span (nothing without the feature).
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn none() -> SessionSpan {
    SessionSpan
}

/// Enters `span` until the guard is dropped.
#[cfg(feature = "tracing")]
pub(crate) fn enter(span: &SessionSpan) -> tracing::span::Entered<'_> {
    span.enter()
}

/// Enters the span (nothing without the feature).
#[cfg(not(feature = "tracing"))]
#[inline(always)]
pub(crate) fn enter(_: &SessionSpan) -> Entered {
    Entered
}

/// The session opened.
#[inline(always)]
pub(crate) fn opened(info: &SessionInfo) {
    #[cfg(feature = "tracing")]
    ark_reactor::log_limited!(tracing::Level::INFO, local = %info.local, "tcp session opened");
    #[cfg(not(feature = "tracing"))]
    let _ = info;
}

/// The session described by `info` ended for `reason` (its id and peer are fields too: after
/// a handler's panic the close is reported outside the span).
#[inline(always)]
pub(crate) fn closed(info: &SessionInfo, reason: &CloseReason) {
    #[cfg(feature = "tracing")]
    {
        let (id, peer) = (info.id, info.peer);
        match reason {
            CloseReason::Local
            | CloseReason::PeerClosed
            | CloseReason::Stopped
            | CloseReason::IdleTimeout(_) => {
                ark_reactor::log_limited!(tracing::Level::INFO, id, %peer, %reason, "tcp session closed");
            }
            _ => {
                ark_reactor::log_limited!(tracing::Level::WARN, id, %peer, %reason, "tcp session closed")
            }
        }
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (info, reason);
}

/// Reading paused (`true`: the send queue passed the high watermark) or resumed.
#[inline(always)]
pub(crate) fn backpressure(paused: bool, queued: usize) {
    #[cfg(feature = "tracing")]
    if paused {
        ark_reactor::log_limited!(
            tracing::Level::DEBUG,
            queued,
            "reading paused: answers pile up past the high watermark"
        );
    } else {
        ark_reactor::log_limited!(tracing::Level::DEBUG, queued, "reading resumed");
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (paused, queued);
}
