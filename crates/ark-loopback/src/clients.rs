//! The closed-loop clients: keep `window` messages in flight, check every echo, time it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::message::{self, MEASURED, WARMUP};

/// Phase of the whole run, read by every client before it sends.
pub const PHASE_WARMUP: u8 = 0;
/// Measured phase.
pub const PHASE_MEASURED: u8 = 1;
/// Drain: no new messages.
pub const PHASE_DRAIN: u8 = 2;

/// Counters of all clients together.
#[derive(Debug)]
pub struct Totals {
    /// The run's phase.
    pub phase: AtomicU8,
    /// Each client's counters of sends and echoes (see [`ClientCounts`]).
    clients: Mutex<Vec<Arc<ClientCounts>>>,
    /// Bad echoes during warm-up.
    pub warmup_errors: AtomicU64,
    /// Echoes whose content was wrong.
    pub content_errors: AtomicU64,
    /// Echoes out of order.
    pub order_errors: AtomicU64,
    /// Echoes of messages not in flight.
    pub unexpected: AtomicU64,
    /// Sends the client transport refused.
    pub send_rejections: AtomicU64,
    /// Connections lost before the end.
    pub disconnects: AtomicU64,
    /// Clients that have started (connected and sent their first window).
    pub started: AtomicU64,
    /// Round trips of each client in the measured phase, added when the client ends.
    pub per_client: Mutex<Vec<u64>>,
    /// Round-trip times of measured echoes, microseconds.
    pub rtt: Mutex<Histogram<u64>>,
    /// The TLS version and cipher suite the first TLS client negotiated.
    pub tls: Mutex<Option<(String, String)>>,
    /// Connections opened during the measured phase (`--reconnect-every`).
    pub connections: AtomicU64,
    /// Of those, TLS sessions resumed (no full handshake).
    pub resumed: AtomicU64,
}

impl Totals {
    /// Fresh counters in the warm-up phase.
    pub fn new() -> Arc<Totals> {
        Arc::new(Totals {
            phase: AtomicU8::new(PHASE_WARMUP),
            clients: Mutex::new(Vec::new()),
            warmup_errors: AtomicU64::new(0),
            content_errors: AtomicU64::new(0),
            order_errors: AtomicU64::new(0),
            unexpected: AtomicU64::new(0),
            send_rejections: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            started: AtomicU64::new(0),
            per_client: Mutex::new(Vec::new()),
            rtt: Mutex::new(
                Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"),
            ),
            tls: Mutex::new(None),
            connections: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
        })
    }

    /// Counters for one more client.
    fn add_client(&self) -> Arc<ClientCounts> {
        let counts = Arc::new(ClientCounts::default());
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(counts.clone());
        counts
    }

    /// `field` summed over the clients.
    fn sum(&self, field: impl Fn(&ClientCounts) -> i64) -> i64 {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.iter().map(|c| field(c)).sum()
    }

    /// Messages in flight now, over all clients.
    pub fn in_flight(&self) -> i64 {
        self.sum(|c| c.in_flight.load(Ordering::Acquire))
    }

    /// Messages sent in the measured phase.
    pub fn sent_measured(&self) -> u64 {
        self.sum(|c| count(&c.sent_measured)) as u64
    }

    /// Echoes of measured messages received during the measured phase.
    pub fn messages(&self) -> u64 {
        self.sum(|c| count(&c.messages)) as u64
    }

    /// Echoes of measured messages received at any time (measured phase or drain).
    pub fn measured_done(&self) -> u64 {
        self.sum(|c| count(&c.measured_done)) as u64
    }

    /// Echoes of warm-up messages.
    pub fn warmup_received(&self) -> u64 {
        self.sum(|c| count(&c.warmup_received)) as u64
    }
}

/// The counters every send and echo of one client moves: on a cache line of their own, and
/// written only by the one thread serving the client at a time (a `Core` is `&mut` to it).
/// Kept in [`Totals`] for all clients together, they were written by every message of every
/// client, and their cache line bounced between the cores: at TCP 64 B with 16 clients on two
/// threads a `lock`ed add on it took 7 % of all cycles, in every implementation alike (perf).
#[derive(Debug, Default)]
#[repr(align(128))]
struct ClientCounts {
    sent_measured: AtomicU64,
    messages: AtomicU64,
    measured_done: AtomicU64,
    warmup_received: AtomicU64,
    in_flight: AtomicI64,
}

/// A counter's value, as the sum of `i64`s [`Totals::sum`] takes.
fn count(counter: &AtomicU64) -> i64 {
    counter.load(Ordering::Acquire) as i64
}

/// Adds one to a counter only its client's thread writes: a plain load and store, no `lock`ed
/// read-modify-write.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// One client's loop state, shared by the three transports' handlers.
#[derive(Debug)]
pub struct Core {
    id: u32,
    window: usize,
    buf: Vec<u8>,
    next_seq: u64,
    /// Sequence, send time and phase of each message in flight, oldest first.
    in_flight: VecDeque<(u64, Instant, u8)>,
    last_seq: Option<u64>,
    /// Exact order expected (TCP, WebSocket); UDP only needs increasing sequences.
    exact_order: bool,
    totals: Arc<Totals>,
    /// This client's hot counters (also in `totals`).
    counts: Arc<ClientCounts>,
    rtt: Histogram<u64>,
    unflushed: u32,
    started: bool,
    /// Round trips completed in the measured phase.
    measured: u64,
    /// `--reconnect-every`: messages per connection, after which the server closes it and
    /// the client connects again.
    per_connection: Option<u64>,
    /// Messages sent on the current connection.
    sent_on_connection: u64,
}

impl Core {
    /// A client with `id`, sending `payload`-byte messages, `window` in flight.
    pub fn new(
        id: u32,
        payload: usize,
        window: usize,
        exact_order: bool,
        totals: Arc<Totals>,
    ) -> Self {
        Core {
            id,
            window,
            buf: vec![0; payload],
            next_seq: 0,
            in_flight: VecDeque::with_capacity(window),
            last_seq: None,
            exact_order,
            rtt: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds"),
            counts: totals.add_client(),
            totals,
            unflushed: 0,
            started: false,
            measured: 0,
            per_connection: None,
            sent_on_connection: 0,
        }
    }

    /// Sends at most `messages` per connection (the server closes it after answering them,
    /// and the client connects again); 0 keeps one connection.
    pub fn with_reconnect_every(mut self, messages: u64) -> Self {
        self.per_connection = (messages > 0).then_some(messages);
        self
    }

    /// A connection (re)opened: `resumed` says whether its TLS session was resumed. Counted
    /// during the measured phase.
    pub fn on_connected(&mut self, resumed: bool) {
        self.sent_on_connection = 0;
        if self.totals.phase.load(Ordering::Relaxed) == PHASE_MEASURED {
            self.totals.connections.fetch_add(1, Ordering::Relaxed);
            if resumed {
                self.totals.resumed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether the connection has carried all it may (`--reconnect-every`) and every
    /// message on it was answered: its end is expected.
    pub fn connection_done(&self) -> bool {
        self.per_connection
            .is_some_and(|n| self.sent_on_connection >= n && self.in_flight.is_empty())
    }

    /// Sends until `window` messages are in flight (none once draining). `send` returns
    /// whether the transport took the message.
    pub fn pump(&mut self, mut send: impl FnMut(&[u8]) -> bool) {
        if !self.started {
            self.started = true;
            self.totals.started.fetch_add(1, Ordering::SeqCst);
        }
        let phase = self.totals.phase.load(Ordering::Relaxed);
        if phase == PHASE_DRAIN {
            return;
        }
        let byte = if phase == PHASE_MEASURED {
            MEASURED
        } else {
            WARMUP
        };
        while self.in_flight.len() < self.window
            && self
                .per_connection
                .is_none_or(|n| self.sent_on_connection < n)
        {
            message::fill(&mut self.buf, byte, self.id, self.next_seq);
            if !send(&self.buf) {
                self.totals.send_rejections.fetch_add(1, Ordering::Relaxed);
                return;
            }
            self.in_flight
                .push_back((self.next_seq, Instant::now(), byte));
            let in_flight = &self.counts.in_flight;
            in_flight.store(in_flight.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            self.sent_on_connection += 1;
            if byte == MEASURED {
                bump(&self.counts.sent_measured);
            }
            self.next_seq += 1;
        }
    }

    /// Checks one echo, records its round trip, and refills the window.
    pub fn on_echo(&mut self, echo: &[u8], send: impl FnMut(&[u8]) -> bool) {
        let answered = self.count_echo(echo);
        self.pump(send);
        // Only now, after the refill, and with Release: the run ends its drain when it sees
        // nothing in flight. Taken off before the refill, the total could touch 0 while this
        // client was about to send one more measured message (its phase read just before the
        // drain began), and the drain would end with that message unanswered.
        if answered {
            let in_flight = &self.counts.in_flight;
            in_flight.store(in_flight.load(Ordering::Relaxed) - 1, Ordering::Release);
        }
    }

    /// Checks and counts one echo; returns whether it answered a message in flight.
    fn count_echo(&mut self, echo: &[u8]) -> bool {
        let now = Instant::now();
        let phase = self.totals.phase.load(Ordering::Relaxed);
        match message::check(echo, self.id, self.buf.len()) {
            None => {
                let counter = if phase == PHASE_WARMUP {
                    &self.totals.warmup_errors
                } else {
                    &self.totals.content_errors
                };
                counter.fetch_add(1, Ordering::Relaxed);
                // Keep the loop going: the oldest message is answered, badly.
                self.in_flight.pop_front().is_some()
            }
            Some(parsed) => {
                let position = self
                    .in_flight
                    .iter()
                    .position(|&(seq, _, _)| seq == parsed.seq);
                let Some(position) = position else {
                    self.totals.unexpected.fetch_add(1, Ordering::Relaxed);
                    return false;
                };
                let in_order = if self.exact_order {
                    position == 0
                } else {
                    self.last_seq.is_none_or(|last| parsed.seq > last)
                };
                if !in_order {
                    self.totals.order_errors.fetch_add(1, Ordering::Relaxed);
                }
                self.last_seq = Some(parsed.seq);
                let (_, sent_at, sent_phase) = self
                    .in_flight
                    .remove(position)
                    .expect("position is in range");
                if sent_phase != parsed.phase {
                    self.totals.content_errors.fetch_add(1, Ordering::Relaxed);
                } else if parsed.phase == MEASURED {
                    bump(&self.counts.measured_done);
                    if phase == PHASE_MEASURED {
                        bump(&self.counts.messages);
                        self.measured += 1;
                        let micros = now.duration_since(sent_at).as_micros().max(1) as u64;
                        let _ = self.rtt.record(micros.min(60_000_000));
                        self.unflushed += 1;
                        if self.unflushed >= 1024 {
                            self.flush_rtt();
                        }
                    } else {
                        self.flush_rtt();
                    }
                } else {
                    bump(&self.counts.warmup_received);
                }
                true
            }
        }
    }

    /// Messages sent and not yet answered: the echoes that can still arrive.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Adds this client's round trips to the totals.
    pub fn flush_rtt(&mut self) {
        if self.unflushed > 0 {
            let mut all = self
                .totals
                .rtt
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let _ = all.add(&self.rtt);
            self.rtt.reset();
            self.unflushed = 0;
        }
    }

    /// The connection ended; counts it as an error unless the run is draining or the end was
    /// expected ([`connection_done`](Self::connection_done)).
    pub fn on_disconnect(&mut self) {
        if self.connection_done() {
            // Round trips are merged every 1,024 and when the client ends, not per connection:
            // merging a histogram costs far more than a round trip.
            return;
        }
        self.flush_rtt();
        if self.totals.phase.load(Ordering::Relaxed) != PHASE_DRAIN {
            self.totals.disconnects.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Core {
    /// Notes what TLS negotiated (the first client's is kept for the record).
    pub fn note_tls(&self, version: &str, cipher_suite: &str) {
        let mut slot = self
            .totals
            .tls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some((version.to_string(), cipher_suite.to_string()));
        }
    }
}

impl Drop for Core {
    /// A client stopped without a close event (its task was dropped) still counts its round
    /// trips.
    fn drop(&mut self) {
        self.flush_rtt();
        self.totals
            .per_client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(self.measured);
    }
}

/// TCP client handler.
#[derive(Debug)]
pub struct TcpClient(pub Core);

impl ark_tcp::TcpHandler for TcpClient {
    fn on_open(&mut self, session: &mut ark_tcp::TcpSession<'_>) {
        if let Some(tls) = session.tls() {
            self.0.note_tls(&tls.version, &tls.cipher_suite);
        }
        self.0
            .on_connected(session.tls().is_some_and(|t| t.resumed));
        self.0.pump(|m| session.send(m).is_ok());
    }
    fn on_message(&mut self, session: &mut ark_tcp::TcpSession<'_>, message: &[u8]) {
        self.0.on_echo(message, |m| session.send(m).is_ok());
    }
    fn on_writable(&mut self, session: &mut ark_tcp::TcpSession<'_>) {
        self.0.pump(|m| session.send(m).is_ok());
    }
    fn on_close(&mut self, _: &ark_tcp::CloseReason) {
        self.0.on_disconnect();
    }
}

/// UDP client handler.
#[derive(Debug)]
pub struct UdpClient(pub Core);

impl ark_udp::UdpHandler for UdpClient {
    fn on_open(&mut self, session: &mut ark_udp::UdpSession<'_>) {
        self.0.pump(|m| session.send(m).is_ok());
    }
    fn on_message(&mut self, session: &mut ark_udp::UdpSession<'_>, datagram: &[u8]) {
        self.0.on_echo(datagram, |m| session.send(m).is_ok());
    }
    fn on_close(&mut self, _: &ark_udp::CloseReason) {
        self.0.flush_rtt();
    }
}

/// Reliable-UDP client handler; with `--rudp-bulk`, it keeps two bulk messages queued
/// beside the echoes.
#[derive(Debug)]
pub struct RudpClient(pub Core, pub Option<RudpBulk>);

/// How often a bulk client tops its bulk messages up between echoes (acknowledgements free
/// the send buffer without a callback).
const BULK_REFILL: std::time::Duration = std::time::Duration::from_millis(1);

/// `--rudp-bulk`: the bulk message and the lane it goes on.
#[derive(Debug, Clone)]
pub struct RudpBulk {
    /// The message (its size tells the server it is bulk).
    pub message: Arc<[u8]>,
    /// Lane 1 with `--rudp-lanes on`, else lane 0 (the echoes' order).
    pub lane: u8,
}

impl RudpClient {
    /// Tops the bulk messages up to two queued (unacknowledged ones count).
    fn refill(&self, session: &mut ark_rudp::RudpSession<'_>) {
        let Some(bulk) = &self.1 else {
            return;
        };
        while session.buffered() < 2 * bulk.message.len() {
            if session.send_on(bulk.lane, &bulk.message).is_err() {
                return;
            }
        }
    }
}

impl ark_rudp::RudpHandler for RudpClient {
    fn on_open(&mut self, session: &mut ark_rudp::RudpSession<'_>) {
        self.0.pump(|m| session.send(m).is_ok());
        if self.1.is_some() {
            self.refill(session);
            session.set_timer(BULK_REFILL);
        }
    }
    fn on_timer(&mut self, session: &mut ark_rudp::RudpSession<'_>, _: ark_rudp::TimerId) {
        self.refill(session);
        session.set_timer(BULK_REFILL);
    }
    fn on_message(&mut self, session: &mut ark_rudp::RudpSession<'_>, message: &[u8]) {
        self.0.on_echo(message, |m| session.send(m).is_ok());
        self.refill(session);
    }
    fn on_close(&mut self, reason: &ark_rudp::CloseReason) {
        match reason {
            ark_rudp::CloseReason::Stopped => self.0.flush_rtt(),
            _ => self.0.on_disconnect(),
        }
    }
}

/// WebSocket client handler.
#[derive(Debug)]
pub struct WsClient(pub Core);

impl ark_ws::WsHandler for WsClient {
    fn on_open(&mut self, session: &mut ark_ws::WsSession<'_>, _: &ark_ws::UpgradeRequest) {
        if let Some(tls) = session.tls() {
            self.0.note_tls(&tls.version, &tls.cipher_suite);
        }
        self.0.pump(|m| session.send_binary(m).is_ok());
    }
    fn on_message(&mut self, _: &mut ark_ws::WsSession<'_>, _: ark_ws::Message) {}

    fn on_data(&mut self, session: &mut ark_ws::WsSession<'_>, data: ark_ws::ReceivedData<'_>) {
        if !data.is_text() {
            self.0
                .on_echo(data.bytes(), |m| session.send_binary(m).is_ok());
        }
    }
    fn on_close(&mut self, _: &ark_ws::WsClose) {
        self.0.on_disconnect();
    }
}

/// HTTP client handler: every message a pipelined `POST /echo`.
#[derive(Debug)]
pub struct HttpClient(pub Core);

impl ark_http::HttpClientHandler for HttpClient {
    fn on_open(&mut self, session: &mut ark_http::ClientSession<'_, '_>) {
        self.0.on_connected(false);
        self.0
            .pump(|m| session.request("POST", "/echo", &[], m).is_ok());
    }
    fn on_response(
        &mut self,
        session: &mut ark_http::ClientSession<'_, '_>,
        response: &ark_http::ClientResponse<'_>,
    ) {
        if response.status != 200 {
            self.0.on_echo(&[], |_| false);
            return;
        }
        self.0.on_echo(response.body, |m| {
            session.request("POST", "/echo", &[], m).is_ok()
        });
    }
    fn on_writable(&mut self, session: &mut ark_http::ClientSession<'_, '_>) {
        self.0
            .pump(|m| session.request("POST", "/echo", &[], m).is_ok());
    }
    fn on_close(&mut self, _: &ark_tcp::CloseReason, _: usize) {
        self.0.on_disconnect();
    }
}
