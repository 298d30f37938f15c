//! A server's HTTP counters ([`HttpStats`]): requests by method and status, the server's own
//! refusals, upgrades, and a latency histogram. Its TCP counters are
//! `HttpServerHandle::tcp_stats`. And an agent's ([`AgentStats`]): answers, and the answers
//! and bytes its connections refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::AnswerError;

ark_reactor::counters! {
    /// Live counters shared by a server's connections, added once per callback from a plain
    /// tally.
    pub(crate) struct HttpCounters(HttpCounterSet);
    /// A copy of an HTTP server's counters. Every answer is counted once in one status class;
    /// a request the router routed also in its method; `latency_*` is a histogram of the time
    /// from the read that completed a request to its answer being queued (the end of that
    /// read's serving, or a deferred answer's arrival on the connection's thread).
    pub struct HttpStats {
        /// Answers sent (the server's own refusals included).
        answers,
        /// 1xx answers (101 upgrades).
        status_1xx,
        /// 2xx answers.
        status_2xx,
        /// 3xx answers.
        status_3xx,
        /// 4xx answers.
        status_4xx,
        /// 5xx answers.
        status_5xx,
        /// Routed requests by method.
        method_get,
        /// `POST` requests.
        method_post,
        /// `PUT` requests.
        method_put,
        /// `DELETE` requests.
        method_delete,
        /// `PATCH` requests.
        method_patch,
        /// `HEAD` requests.
        method_head,
        /// `OPTIONS` requests.
        method_options,
        /// Requests with any other method.
        method_other,
        /// Answers the server gave itself to requests it refused (400, 408, 413, 431, 501,
        /// 505), each closing its connection.
        refused,
        /// Connections handed over by an upgrade (`Response::upgrade`).
        upgrades,
        /// Answers queued within 100 µs of their request's read.
        latency_under_100us,
        /// Within 1 ms (and not 100 µs).
        latency_under_1ms,
        /// Within 10 ms.
        latency_under_10ms,
        /// Within 100 ms.
        latency_under_100ms,
        /// Within 1 s.
        latency_under_1s,
        /// 1 s or more.
        latency_over_1s,
    }
}

impl HttpStats {
    /// Counts an answer of `status`.
    pub(crate) fn count_status(&mut self, status: u16) {
        self.answers += 1;
        match status {
            100..=199 => self.status_1xx += 1,
            200..=299 => self.status_2xx += 1,
            300..=399 => self.status_3xx += 1,
            400..=499 => self.status_4xx += 1,
            _ => self.status_5xx += 1,
        }
    }

    /// Counts a routed request's method.
    pub(crate) fn count_method(&mut self, method: &str) {
        let counter = match method {
            "GET" => &mut self.method_get,
            "POST" => &mut self.method_post,
            "PUT" => &mut self.method_put,
            "DELETE" => &mut self.method_delete,
            "PATCH" => &mut self.method_patch,
            "HEAD" => &mut self.method_head,
            "OPTIONS" => &mut self.method_options,
            _ => &mut self.method_other,
        };
        *counter += 1;
    }

    /// Counts `n` answers queued `latency` after their request's read.
    pub(crate) fn count_latency(&mut self, latency: Duration, n: u64) {
        let micros = latency.as_micros();
        let bucket = match micros {
            0..100 => &mut self.latency_under_100us,
            100..1_000 => &mut self.latency_under_1ms,
            1_000..10_000 => &mut self.latency_under_10ms,
            10_000..100_000 => &mut self.latency_under_100ms,
            100_000..1_000_000 => &mut self.latency_under_1s,
            _ => &mut self.latency_over_1s,
        };
        *bucket += n;
    }
}

/// A copy of an [`HttpAgent`](crate::HttpAgent)'s counters
/// ([`HttpAgent::stats`](crate::HttpAgent::stats)): what its connections met, all origins
/// together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentStats {
    /// Answers delivered to their requests.
    pub answers: u64,
    /// Of those, answers whose body ran to the close (RFC 9112 §6.3): delivered when the
    /// server closed cleanly; their connection was never reused.
    pub close_delimited: u64,
    /// Connections dropped because bytes arrived that no request asked for: on an idle
    /// connection, after the answer in the same read, or after an answer that ends the
    /// connection. The bytes were never delivered ([`AnswerError::Unsolicited`]).
    pub unsolicited: u64,
    /// Answers refused as malformed or ambiguous, or a `101` not asked for
    /// ([`AnswerError::Malformed`], [`AnswerError::Switching`]): the request failed and the
    /// connection was dropped.
    pub bad_answers: u64,
    /// Answers past the bound on one answer's bytes on the wire
    /// ([`AnswerError::TooLarge`]): the request failed and the connection was dropped.
    pub too_large: u64,
    /// Bytes the connections hold now of answers under way (heads, bodies so far).
    pub held: u64,
    /// The most bytes one connection held at once of an answer under way.
    pub held_peak: u64,
}

/// The live counters behind [`AgentStats`].
#[derive(Debug, Default)]
pub(crate) struct AgentCounters {
    pub(crate) answers: AtomicU64,
    pub(crate) close_delimited: AtomicU64,
    pub(crate) unsolicited: AtomicU64,
    pub(crate) bad_answers: AtomicU64,
    pub(crate) too_large: AtomicU64,
    held: AtomicU64,
    held_peak: AtomicU64,
}

impl AgentCounters {
    /// Counts one refused answer by its kind.
    pub(crate) fn refused(&self, error: &AnswerError) {
        let counter = match error {
            AnswerError::Unsolicited { .. } => &self.unsolicited,
            AnswerError::TooLarge { .. } => &self.too_large,
            _ => &self.bad_answers,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection that reported holding `before` bytes now holds `now`.
    pub(crate) fn held(&self, before: usize, now: usize) {
        if now > before {
            self.held
                .fetch_add((now - before) as u64, Ordering::Relaxed);
            self.held_peak.fetch_max(now as u64, Ordering::Relaxed);
        } else if now < before {
            self.held
                .fetch_sub((before - now) as u64, Ordering::Relaxed);
        }
    }

    /// A copy.
    pub(crate) fn snapshot(&self) -> AgentStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        AgentStats {
            answers: get(&self.answers),
            close_delimited: get(&self.close_delimited),
            unsolicited: get(&self.unsolicited),
            bad_answers: get(&self.bad_answers),
            too_large: get(&self.too_large),
            held: get(&self.held),
            held_peak: get(&self.held_peak),
        }
    }
}
