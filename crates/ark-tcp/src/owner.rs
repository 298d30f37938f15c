//! What a session reports to the server or client it belongs to. The driver knows only this
//! interface, so sessions, servers and clients do not import each other in a circle, and
//! reconnecting stays in the client.

use std::sync::Arc;

use ark_reactor::{Phase, ReactorHandle};

use crate::error::CloseReason;
use crate::stats::TcpCounters;

/// The server or client a session belongs to.
pub(crate) trait Owner<H>: Send + Sync + 'static {
    /// Counters the session adds to.
    fn counters(&self) -> &TcpCounters;

    /// Running, draining (sessions get `on_drain` and go on), or stopping (sessions close
    /// gracefully).
    fn phase(&self) -> Phase;

    /// Whether a stop has begun (sessions then close gracefully).
    fn stopping(&self) -> bool {
        self.phase() == Phase::Stopping
    }

    /// The session is established.
    fn opened(&self, id: u64) {
        let _ = id;
    }

    /// The session ended and its handler comes back (a reconnecting client keeps it).
    fn closed(self: Arc<Self>, id: u64, reason: &CloseReason, handler: H, reactor: &ReactorHandle);
}
