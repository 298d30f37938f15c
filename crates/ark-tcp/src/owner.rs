//! What a connection belongs to: a server or a client, and the state they share with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ark_reactor::{ReactorHandle, SourceId};

use crate::client::{ClientShared, reconnect_later};
use crate::conn::Framing;
use crate::session::{CloseReason, TcpHandler};
use crate::stats::TcpCounters;

/// State a server shares with its listener and sessions.
#[derive(Debug, Default)]
pub(crate) struct ServerShared {
    pub(crate) counters: TcpCounters,
    pub(crate) stopping: AtomicBool,
    next_id: AtomicU64,
    /// Open sessions and where they run, for a graceful stop.
    pub(crate) sessions: Mutex<HashMap<u64, (ReactorHandle, SourceId)>>,
}

impl ServerShared {
    pub(crate) fn sessions(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, (ReactorHandle, SourceId)>> {
        // A panic elsewhere while holding the lock leaves the map usable.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[derive(Clone)]
pub(crate) enum Owner {
    Server(Arc<ServerShared>),
    Client(Arc<ClientShared>),
}

impl Owner {
    pub(crate) fn counters(&self) -> &TcpCounters {
        match self {
            Owner::Server(s) => &s.counters,
            Owner::Client(c) => &c.counters,
        }
    }

    pub(crate) fn next_session_id(&self) -> u64 {
        match self {
            Owner::Server(s) => s.next_id.fetch_add(1, Ordering::Relaxed),
            Owner::Client(c) => c.next_id.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub(crate) fn stopping(&self) -> bool {
        match self {
            Owner::Server(s) => s.stopping.load(Ordering::Relaxed),
            Owner::Client(c) => c.stopping.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn connect_timeout(&self) -> Option<Duration> {
        match self {
            Owner::Server(_) => None,
            Owner::Client(c) => Some(c.connect_timeout),
        }
    }

    pub(crate) fn connected(&self) {
        if let Owner::Client(c) = self {
            c.on_connected();
        }
    }

    pub(crate) fn session_closed(&self, id: u64) {
        match self {
            Owner::Server(s) => {
                s.sessions().remove(&id);
            }
            Owner::Client(c) => c.on_disconnected(),
        }
    }

    /// A client with reconnect on, whose connection ended other than by its own choice,
    /// connects again after its backoff, with the same handler.
    pub(crate) fn maybe_reconnect<C: Framing, H: TcpHandler>(
        &self,
        reason: &CloseReason,
        handler: H,
        codec: C,
        reactor: &ReactorHandle,
    ) {
        if let Owner::Client(c) = self {
            let chosen = matches!(
                reason,
                CloseReason::Local | CloseReason::Aborted | CloseReason::Stopped
            );
            if !chosen && !c.stopping.load(Ordering::Relaxed) && c.reconnect.is_some() {
                reconnect_later(c.clone(), handler, codec, reactor);
            }
        }
    }
}
