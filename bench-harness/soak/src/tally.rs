//! What the clients saw: counters per protocol, how each bad actor ended, and the problems
//! that fail the run.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde_json::{Value, json};

/// Problems kept word for word (the rest are only counted).
const KEPT_PROBLEMS: usize = 20;

/// Why a well-behaved exchange ended early.
#[derive(Debug)]
pub enum Fault {
    /// An echo differed from what was sent, or came out of order.
    Wrong(String),
    /// The connection failed; `lost` messages were sent and never echoed.
    Broken {
        /// Messages in flight when it broke.
        lost: u64,
        /// What failed.
        why: String,
    },
}

impl Fault {
    /// A broken connection with `lost` messages in flight, while doing `what`.
    pub fn broken(lost: u64, what: &str, error: impl std::fmt::Display) -> Fault {
        Fault::Broken {
            lost,
            why: format!("{what}: {error}"),
        }
    }
}

/// Counters of one protocol's well-behaved clients.
#[derive(Debug, Default)]
pub struct Proto {
    /// Clients started (short-lived and long-lived).
    pub clients: AtomicU64,
    /// Long-lived clients started.
    pub long_lived: AtomicU64,
    /// Echoes received and checked byte for byte.
    pub messages: AtomicU64,
    /// Messages sent and never echoed.
    pub lost: AtomicU64,
    /// Echoes that differed or came out of order.
    pub wrong: AtomicU64,
    /// Clients that failed (connect, IO, timeout, unclean close).
    pub errors: AtomicU64,
}

impl Proto {
    /// The counters as JSON.
    pub fn json(&self) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "clients": get(&self.clients),
            "long_lived": get(&self.long_lived),
            "messages": get(&self.messages),
            "lost": get(&self.lost),
            "wrong": get(&self.wrong),
            "errors": get(&self.errors),
        })
    }
}

/// What the on-path forgers sent from a session's peer address: forged packets and seen
/// datagrams changed in one byte (each must be counted unauthenticated), and seen datagrams
/// sent again (each must be counted a replay).
#[derive(Debug, Default)]
pub struct Forged {
    /// Forged or changed, sent to the server.
    pub to_server: AtomicU64,
    /// Of those, changed copies of datagrams the relay saw.
    pub changed_to_server: AtomicU64,
    /// Replays sent to the server.
    pub replayed_to_server: AtomicU64,
    /// Forged or changed, sent to the forgers' own clients.
    pub to_clients: AtomicU64,
    /// Of those, what the clients counted as unauthenticated.
    pub counted_by_clients: AtomicU64,
    /// Replays sent to the forgers' own clients.
    pub replayed_to_clients: AtomicU64,
    /// What the clients counted as replays.
    pub replays_counted_by_clients: AtomicU64,
}

impl Forged {
    /// The counters as JSON.
    pub fn json(&self) -> Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        json!({
            "to_server": get(&self.to_server),
            "changed_to_server": get(&self.changed_to_server),
            "replayed_to_server": get(&self.replayed_to_server),
            "to_clients": get(&self.to_clients),
            "counted_by_clients": get(&self.counted_by_clients),
            "replayed_to_clients": get(&self.replayed_to_clients),
            "replays_counted_by_clients": get(&self.replays_counted_by_clients),
        })
    }
}

/// How one bad actor's run ended.
#[derive(Debug, Clone, Default)]
pub struct Ending {
    /// What happened, in a few words (the summary counts each distinct outcome).
    pub outcome: String,
    /// How long the run took (or how long until the server closed it).
    pub seconds: f64,
    /// Messages sent (frames, pings) or echoes checked.
    pub messages: u64,
    /// Echoes that never arrived (half-close only).
    pub lost: u64,
    /// Echoes that differed (half-close only).
    pub wrong: u64,
    /// Set when the ending fails the run.
    pub problem: Option<String>,
}

impl Ending {
    /// An ending with `outcome`, timed from `started`.
    pub fn new(outcome: impl Into<String>, started: Instant) -> Ending {
        Ending {
            outcome: outcome.into(),
            seconds: started.elapsed().as_secs_f64(),
            ..Ending::default()
        }
    }

    /// An ending that fails the run.
    pub fn failed(outcome: impl Into<String>, started: Instant, why: String) -> Ending {
        Ending {
            problem: Some(why),
            ..Ending::new(outcome, started)
        }
    }
}

/// Everything one kind of bad actor did.
#[derive(Debug, Default)]
struct Actor {
    runs: u64,
    outcomes: BTreeMap<String, u64>,
    min_seconds: Option<f64>,
    max_seconds: f64,
    messages: u64,
    lost: u64,
    wrong: u64,
}

impl Actor {
    fn json(&self) -> Value {
        json!({
            "runs": self.runs,
            "outcomes": self.outcomes,
            "min_s": round(self.min_seconds.unwrap_or(0.0)),
            "max_s": round(self.max_seconds),
            "messages": self.messages,
            "lost": self.lost,
            "wrong": self.wrong,
        })
    }
}

/// A number rounded to two decimals, for the summary.
pub fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The tallies of a run.
#[derive(Debug, Default)]
pub struct Tally {
    /// TCP well-behaved clients.
    pub tcp: Proto,
    /// UDP well-behaved clients.
    pub udp: Proto,
    /// WebSocket well-behaved clients.
    pub ws: Proto,
    /// HTTP well-behaved clients.
    pub http: Proto,
    /// Reliable-UDP well-behaved clients.
    pub rudp: Proto,
    /// Forged reliable-UDP packets the forgers sent: to the server, and to their clients.
    pub forged: Forged,
    actors: Mutex<BTreeMap<&'static str, Actor>>,
    problems: Mutex<Vec<String>>,
    problem_count: AtomicU64,
}

/// Locks a mutex, ignoring poisoning (a panicking client thread is reported on its own).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tally {
    /// Records something that fails the run; the first few are also printed to stderr at
    /// once and kept for the summary, the rest only counted.
    pub fn problem(&self, what: String) {
        let n = self.problem_count.fetch_add(1, Ordering::Relaxed) as usize + 1;
        if n > KEPT_PROBLEMS {
            if n == KEPT_PROBLEMS + 1 {
                eprintln!("[ark-soak] more problems: counted only");
            }
            return;
        }
        eprintln!("[ark-soak] problem: {what}");
        lock(&self.problems).push(what);
    }

    /// Problems so far: how many, and the first few word for word.
    pub fn problems(&self) -> (u64, Vec<String>) {
        let count = self.problem_count.load(Ordering::Relaxed);
        (count, lock(&self.problems).clone())
    }

    /// Records how a well-behaved client of `proto` (named `name`) ended; `true` if well.
    pub fn client_ended(&self, proto: &Proto, name: &str, result: Result<(), Fault>) -> bool {
        match result {
            Ok(()) => return true,
            Err(Fault::Wrong(what)) => {
                proto.wrong.fetch_add(1, Ordering::Relaxed);
                self.problem(format!("{name}: wrong echo: {what}"));
            }
            Err(Fault::Broken { lost, why }) => {
                proto.errors.fetch_add(1, Ordering::Relaxed);
                proto.lost.fetch_add(lost, Ordering::Relaxed);
                self.problem(format!("{name}: client failed ({lost} lost): {why}"));
            }
        }
        false
    }

    /// Records one bad actor's run of `kind`.
    pub fn actor(&self, kind: &'static str, ending: Ending) {
        if let Some(why) = &ending.problem {
            self.problem(format!("{kind}: {why}"));
        }
        let mut actors = lock(&self.actors);
        let a = actors.entry(kind).or_default();
        a.runs += 1;
        *a.outcomes.entry(ending.outcome).or_default() += 1;
        a.min_seconds = Some(
            a.min_seconds
                .map_or(ending.seconds, |m| m.min(ending.seconds)),
        );
        a.max_seconds = a.max_seconds.max(ending.seconds);
        a.messages += ending.messages;
        a.lost += ending.lost;
        a.wrong += ending.wrong;
    }

    /// Bad-actor runs so far, all kinds.
    pub fn actor_runs(&self) -> u64 {
        lock(&self.actors).values().map(|a| a.runs).sum()
    }

    /// Every bad actor kind's record as JSON.
    pub fn actors_json(&self) -> Value {
        let actors = lock(&self.actors);
        Value::Object(
            actors
                .iter()
                .map(|(kind, a)| (kind.to_string(), a.json()))
                .collect(),
        )
    }
}
