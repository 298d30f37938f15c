//! The sans-IO connection: datagrams and time in, datagrams, messages and events out.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::RudpConfig;
use crate::proto::congestion::Controller;
use crate::proto::cookie::SessionTokens;
use crate::proto::crypto::{self, ClientHandshake, SessionKeys, TAG_LEN};
use crate::proto::fec::{FecReceiver, FecSender};
use crate::proto::lane::{LaneMode, MAX_LANES};
use crate::proto::packet::{
    self, AckBlock, COOKIE_LEN, FecTag, HELLO_SIZE, LaneTag, PREFIX, Packet, PacketError, TOKEN_LEN,
};
use crate::proto::protection::ClientProtection;
use crate::proto::recv::{Arrival, Receiver};
use crate::proto::replay::{PacketNumbers, ReplayWindow};
use crate::proto::send::Sender;
pub use crate::proto::stats::RudpStats;
pub use rate::RateGroup;

mod close;
mod rate;

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// Closed by this end; everything sent was acknowledged and the peer answered the CLOSE
    /// (or did not, after the CLOSE went the most times: `RudpStats::closes_unanswered`).
    #[error("closed locally")]
    Local,
    /// The peer sent CLOSE.
    #[error("closed by the peer")]
    PeerClosed,
    /// Nothing arrived from the peer for the idle timeout.
    #[error("nothing received for {0:?} (idle timeout)")]
    IdleTimeout(Duration),
    /// Data stayed unacknowledged, with no progress, for the timeout: the peer stopped
    /// acknowledging.
    #[error("data unacknowledged for {0:?}: the peer stopped acknowledging")]
    Unacknowledged(Duration),
    /// The peer's receive window stayed zero, with data waiting, for
    /// `RudpConfig::zero_window_timeout`: it acknowledges but takes nothing.
    #[error("the peer's receive window stayed zero for {0:?} with data waiting")]
    ZeroWindow(Duration),
    /// The handshake did not finish in time.
    #[error("no handshake within {0:?}")]
    HandshakeTimeout(Duration),
    /// The peer's address began a new connection (it restarted).
    #[error("replaced by a new handshake from the same address")]
    Replaced,
    /// This many datagrams failed to open under the session's keys: forged or corrupted
    /// traffic at a rate no honest path makes; the session ends well before AES-GCM's
    /// integrity limit (RFC 9001 §6.6).
    #[error(
        "{0} datagrams failed to open (forged or corrupted): ended before the AEAD's integrity limit"
    )]
    Forgeries(u64),
    /// The server or client stopped; everything sent was acknowledged first.
    #[error("stopped")]
    Stopped,
    /// A close or stop reached its deadline (`RudpConfig::close_timeout`) with reliable data
    /// still unacknowledged: `bytes` of payload accepted by `send` may not have arrived.
    #[error("{cause} cut after {timeout:?}: {bytes} bytes sent were never acknowledged")]
    Cut {
        /// `Local` or `Stopped`: what was closing.
        cause: Box<CloseReason>,
        /// Payload bytes accepted and unacknowledged.
        bytes: usize,
        /// `RudpConfig::close_timeout`.
        timeout: Duration,
    },
    /// The peer sent a message longer than this end's `RudpConfig::max_message`: it was dropped
    /// unread, and the connection closed (a CLOSE goes to the peer).
    #[error("the peer sent a message of {len} bytes, over the limit of {max} bytes")]
    MessageTooLarge {
        /// The message's length.
        len: usize,
        /// `RudpConfig::max_message`.
        max: usize,
    },
    /// The peer wrote lane fields no honest sender writes (a lane this end does not have, a
    /// lane sequence far outside the receive window, two fragments with one lane sequence):
    /// the connection closed (a CLOSE goes to the peer).
    #[error("the peer broke the protocol: {0}")]
    ProtocolViolation(&'static str),
}

/// Why a send was refused. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// Longer than a message can be (`RudpConfig::max_message`, or the MTU for unreliable ones).
    #[error("message of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The message's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The send buffer is full: the peer is slow or gone.
    #[error("send buffer full: {buffered} bytes buffered, limit {limit}")]
    Full {
        /// Bytes buffered (for a handle: in the session's buffer and on their way to it).
        buffered: usize,
        /// `RudpConfig::send_buffer`.
        limit: usize,
    },
    /// The connection is closed or closing.
    #[error("the connection is closed")]
    Closed,
    /// `Delivery::Lane` named a lane the session does not have (`RudpConfig::lanes`).
    #[error("no lane {lane}: the session has {lanes}")]
    NoLane {
        /// The lane asked for.
        lane: u8,
        /// How many the session has.
        lanes: usize,
    },
}

/// How a message travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Reliable, delivered in the order sent (the default).
    Ordered,
    /// Reliable, delivered as soon as it is whole.
    Unordered,
    /// One datagram, not repeated if lost (at most `RudpConfig::mtu` bytes).
    Unreliable,
    /// On this lane of `RudpConfig::lanes`, as the lane is configured (ordered, unordered
    /// or sequenced): ordered in the lane only, so it waits for no other lane's message.
    /// `Ordered` and `Unordered` use lane 0.
    Lane(u8),
}

/// Something the application should hear of.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake finished.
    Connected,
    /// The connection ended.
    Closed(CloseReason),
}

#[derive(Debug)]
enum State {
    /// A client waiting for the server: the cookie (zeros before one came), the next HELLO.
    Handshaking {
        cookie: [u8; COOKIE_LEN],
        next_hello: Instant,
        attempts: u32,
        /// When the first HELLO with this cookie left, and how many did: one, and its ACCEPT
        /// gives the first RTT sample (Karn's rule).
        cookie_hellos: Option<(Instant, u32)>,
    },
    Established,
    /// Closing by this end (a close or a stop): what was queued is sent and repeated until
    /// all of it is acknowledged, or until `deadline`; sends are refused.
    Finishing {
        reason: CloseReason,
        deadline: Instant,
    },
    /// Our CLOSE went out `sent` times (the next at `next`), waiting for the peer's answer;
    /// `reason` is reported then (`None`: an abrupt end, reported already).
    CloseSent {
        reason: Option<CloseReason>,
        sent: u32,
        next: Instant,
    },
    /// The peer closed and we answered: its repeated CLOSEs (our answer was lost) are answered
    /// again until `until`. Nothing else is taken or sent.
    Draining {
        until: Instant,
    },
    /// Closed: nothing more (a CLOSE in `close_out` may still leave once).
    Closed,
}

/// How this end protects its datagrams after the handshake.
#[derive(Debug)]
enum Protection {
    /// The handshake has not given keys yet.
    Pending,
    /// Plaintext, each datagram ending in its direction's token (an explicit opt-in).
    Tokens(Keys),
    /// AEAD (the default; see `crypto`).
    Sealed(Box<SessionKeys>),
}

/// What the handshake keeps beside the state.
#[derive(Debug)]
enum Handshake {
    /// A server in plaintext, or a client in plaintext: nothing.
    Plain,
    /// A client's encrypted handshake: the server's pinned key and the connect token, and
    /// the Noise state once the cookie came (its first message goes in every HELLO after).
    Client {
        server_key: crypto::RudpPublicKey,
        token: Vec<u8>,
        noise: Option<Box<ClientHandshake>>,
    },
    /// A server's: the Noise answer its ACCEPT carries, until the client is heard.
    Server { answer: Vec<u8> },
}

/// Sealed datagrams a client keeps while its keys are on their way.
const EARLY_DATAGRAMS: usize = 64;

/// The tokens one end sends and expects.
#[derive(Debug, Clone, Copy)]
struct Keys {
    tx: [u8; TOKEN_LEN],
    rx: [u8; TOKEN_LEN],
}

impl Keys {
    fn client(t: SessionTokens) -> Keys {
        Keys {
            tx: t.client,
            rx: t.server,
        }
    }

    fn server(t: SessionTokens) -> Keys {
        Keys {
            tx: t.server,
            rx: t.client,
        }
    }
}

/// The first data sequence of both directions: the low 32 bits of the handshake's nonce,
/// so sequences start anywhere in the 32-bit space (and wrap), and a blind injector must
/// guess them.
fn first_seq(nonce: u64) -> u64 {
    u64::from(nonce as u32)
}

/// The loss measure: DATA+PARITY sent against what the peer says it received.
#[derive(Debug, Default)]
struct LossMeter {
    peer_received: u64,
    peer_received_wire: u16,
    mark: Option<(u64, u64)>,
    estimate: f64,
}

impl LossMeter {
    /// The peer's (wrapping) receive count arrived, after our `tx_mark`-th datagram was acked.
    fn update(&mut self, wire: u16, tx_mark: u64) {
        let step = wire.wrapping_sub(self.peer_received_wire) as i16;
        if step > 0 {
            self.peer_received += step as u64;
            self.peer_received_wire = wire;
        }
        let (t0, r0) = *self.mark.get_or_insert((tx_mark, self.peer_received));
        let sent = tx_mark.saturating_sub(t0);
        if sent >= 32 {
            let got = self.peer_received.saturating_sub(r0) as f64;
            let sample = (1.0 - got / sent as f64).clamp(0.0, 1.0);
            self.estimate = self.estimate * 0.75 + sample * 0.25;
            self.mark = Some((tx_mark, self.peer_received));
        }
    }
}

/// One reliable-UDP connection as a state machine: no sockets, no clocks of its own.
///
/// Feed it datagrams ([`handle_datagram`](Self::handle_datagram)) and time
/// ([`handle_timeout`](Self::handle_timeout) at [`poll_timeout`](Self::poll_timeout)); take
/// what it sends ([`poll_transmit`](Self::poll_transmit), until `None`), the messages it
/// delivers ([`recv`](Self::recv)) and its events ([`poll_event`](Self::poll_event)).
#[derive(Debug)]
pub struct Connection {
    config: Arc<RudpConfig>,
    state: State,
    nonce: u64,
    /// How datagrams after the handshake are protected.
    protection: Protection,
    handshake: Handshake,
    /// Where a sealed datagram is opened (reused).
    open_buf: Vec<u8>,
    /// A client's sealed datagrams that came before its keys (its ACCEPT lost or late, the
    /// server's first flight on its way): opened once the keys come (at most
    /// [`EARLY_DATAGRAMS`], as QUIC clients keep undecryptable packets).
    early: Vec<Vec<u8>>,
    /// An authenticated datagram came from the peer after the handshake.
    peer_heard: bool,
    /// The connect token the client sent (a server's encrypted session; empty otherwise).
    connect_token: Vec<u8>,
    /// Tests playing a hostile peer: every acknowledgement advertises a window of 0.
    hostile_zero_window: bool,
    accept_pending: bool,
    /// A server's ACCEPT, sent once at this instant and not yet answered: the client's first
    /// datagram after it gives the server's first RTT sample.
    accepted_at: Option<Instant>,
    started: Instant,
    send: Sender,
    recv: Receiver,
    rtt: crate::proto::rtt::RttEstimator,
    cc: Controller,
    fec_tx: FecSender,
    fec_rx: FecReceiver,
    loss: LossMeter,
    /// Unreliable messages to send (with their lane tag if a sequenced lane's).
    unreliable: VecDeque<(Option<LaneTag>, Vec<u8>)>,
    /// Each sequenced lane's next message number.
    sequenced: [u32; MAX_LANES],
    ack_pending: bool,
    /// The packet numbers this end sends, and those it accepted from the peer.
    tx_numbers: PacketNumbers,
    rx_numbers: ReplayWindow,
    /// A CLOSE to send at the next transmit: `Some(true)` answers the peer's.
    close_out: Option<bool>,
    /// The peer's window is zero with data waiting: since when, and the next probe.
    persist: Option<close::Persist>,
    /// DATA and PARITY datagrams sent / received.
    tx_count: u64,
    rx_count: u64,
    rto_deadline: Option<Instant>,
    last_sent: Instant,
    last_received: Instant,
    last_progress: Instant,
    events: VecDeque<Event>,
    stats: RudpStats,
    /// Rate limits, each way, and the rates measured.
    rates: rate::Rates,
}

impl Connection {
    fn new(config: Arc<RudpConfig>, now: Instant, nonce: u64, state: State) -> Connection {
        let window = u64::from(config.receive_window);
        Connection {
            send: Sender::new(first_seq(nonce), window, &config.lanes),
            recv: Receiver::new(
                first_seq(nonce),
                usize::from(config.receive_window),
                config.lane_count(),
            )
            .with_limit(config.max_message),
            rtt: crate::proto::rtt::RttEstimator::new(
                config.initial_rto,
                config.min_rto,
                config.max_rto,
            ),
            cc: Controller::new(config.congestion, config.initial_window, config.min_window),
            fec_tx: FecSender::new(config.fec, config.fec_residual),
            fec_rx: FecReceiver::new(),
            loss: LossMeter::default(),
            unreliable: VecDeque::new(),
            sequenced: [0; MAX_LANES],
            state,
            nonce,
            protection: Protection::Pending,
            handshake: Handshake::Plain,
            open_buf: Vec::new(),
            early: Vec::new(),
            peer_heard: false,
            connect_token: Vec::new(),
            hostile_zero_window: false,
            accept_pending: false,
            accepted_at: None,
            started: now,
            ack_pending: false,
            tx_numbers: PacketNumbers::default(),
            rx_numbers: ReplayWindow::default(),
            close_out: None,
            persist: None,
            tx_count: 0,
            rx_count: 0,
            rto_deadline: None,
            last_sent: now,
            last_received: now,
            last_progress: now,
            events: VecDeque::new(),
            stats: RudpStats::default(),
            rates: rate::Rates::new(&config, now, nonce),
            config,
        }
    }

    /// A client connection; its first [`poll_transmit`](Self::poll_transmit) sends the HELLO.
    /// `nonce` names this connection attempt (random); `protection` says how the session is
    /// protected (encrypted to the server's pinned key, or plaintext).
    pub fn client(
        config: Arc<RudpConfig>,
        now: Instant,
        nonce: u64,
        protection: ClientProtection,
    ) -> Connection {
        let state = State::Handshaking {
            cookie: [0; COOKIE_LEN],
            next_hello: now,
            attempts: 0,
            cookie_hellos: None,
        };
        let mut conn = Connection::new(config, now, nonce, state);
        if let ClientProtection::Encrypted { server_key, token } = protection {
            conn.handshake = Handshake::Client {
                server_key,
                token,
                noise: None,
            };
        }
        conn
    }

    /// A server connection in plaintext for a HELLO whose cookie checked out (see
    /// [`crate::Listener`]).
    pub(crate) fn accepted_plain(
        config: Arc<RudpConfig>,
        now: Instant,
        nonce: u64,
        cookie: &[u8; COOKIE_LEN],
    ) -> Connection {
        let keys = Keys::server(SessionTokens::derive(nonce, cookie));
        Connection::accepted(config, now, nonce, Protection::Tokens(keys))
    }

    /// An encrypted server connection: the handshake gave `keys`, and its ACCEPT carries
    /// `answer`.
    pub(crate) fn accepted_sealed(
        config: Arc<RudpConfig>,
        now: Instant,
        nonce: u64,
        (keys, answer): (SessionKeys, Vec<u8>),
    ) -> Connection {
        let mut conn = Connection::accepted(config, now, nonce, Protection::Sealed(Box::new(keys)));
        conn.handshake = Handshake::Server { answer };
        conn
    }

    fn accepted(
        config: Arc<RudpConfig>,
        now: Instant,
        nonce: u64,
        protection: Protection,
    ) -> Connection {
        let mut conn = Connection::new(config, now, nonce, State::Established);
        conn.protection = protection;
        conn.accept_pending = true;
        // A read limit's window goes right behind the ACCEPT, before the client's first flight.
        conn.ack_pending = conn.rates.limits_reads();
        conn.accepted_at = Some(now);
        conn.events.push_back(Event::Connected);
        conn
    }

    /// A server's first datagram from its client: the round trip since the ACCEPT is the
    /// first RTT sample — if the ACCEPT went once and the client answered within the initial
    /// RTO (a client that waits before sending would inflate it).
    fn first_answer(&mut self, now: Instant) {
        if let Some(sent) = self.accepted_at.take() {
            let rtt = now.saturating_duration_since(sent);
            if rtt <= self.config.initial_rto {
                self.rtt.sample(rtt);
            }
        }
    }

    /// The nonce of the handshake that made this connection.
    pub fn nonce(&self) -> u64 {
        self.nonce
    }

    /// The token a datagram from the peer must end in, once a plaintext handshake has given
    /// one (`None` for an encrypted session). For tests that play a peer who knows it (a
    /// hostile peer, or an on-path attacker of a plaintext session).
    #[doc(hidden)]
    pub fn peer_token(&self) -> Option<[u8; TOKEN_LEN]> {
        match &self.protection {
            Protection::Tokens(k) => Some(k.rx),
            _ => None,
        }
    }

    /// The connect token the client sent, as the server's check saw it (a server's encrypted
    /// session; empty otherwise).
    pub fn connect_token(&self) -> &[u8] {
        &self.connect_token
    }

    pub(crate) fn set_connect_token(&mut self, token: Vec<u8>) {
        self.connect_token = token;
    }

    /// Whether a new handshake from this session's address may replace it at `now`: the
    /// session has not heard its peer for two keep-alive intervals (a restarted client's old
    /// session falls silent; a live one hears at least a keep-alive each interval), or it
    /// has ended. An on-path attacker who spoofs the address cannot end a live session so.
    pub fn is_replaceable(&self, now: Instant) -> bool {
        self.is_closed()
            || now.saturating_duration_since(self.last_received) >= 2 * self.config.keep_alive
    }

    /// Whether the session's datagrams are encrypted (once the handshake gave keys).
    pub fn is_encrypted(&self) -> bool {
        matches!(self.protection, Protection::Sealed(_))
    }

    /// The bytes a datagram adds after its payload: the AEAD tag, or the plaintext token.
    pub(crate) fn suffix_len(&self) -> usize {
        match (&self.protection, &self.handshake) {
            (Protection::Sealed(_), _)
            | (_, Handshake::Client { .. } | Handshake::Server { .. }) => TAG_LEN,
            _ => TOKEN_LEN,
        }
    }

    /// Makes every acknowledgement this end sends advertise a receive window of 0 (a peer
    /// that acknowledges everything and takes nothing). For tests and soaks that play such a
    /// hostile peer with the real protocol (its datagrams are sealed: they cannot be
    /// rewritten on the way out).
    #[doc(hidden)]
    pub fn advertise_zero_window(&mut self, on: bool) {
        self.hostile_zero_window = on;
    }

    /// The packet number after the largest accepted from the peer (its low 32 bits go on the
    /// wire): a number this end has not seen. For tests that play a hostile peer.
    #[doc(hidden)]
    pub fn fresh_peer_number(&self) -> u32 {
        self.rx_numbers.largest().map_or(0, |n| n + 1) as u32
    }

    /// Whether the handshake finished and the connection is neither closing nor closed.
    pub fn is_established(&self) -> bool {
        matches!(self.state, State::Established)
    }

    /// Whether the connection is closing or closed: it takes no more sends.
    pub fn is_closed(&self) -> bool {
        !matches!(self.state, State::Handshaking { .. } | State::Established)
    }

    /// Whether the connection has nothing more to do: closed, and its last CLOSE (if any)
    /// sent. (After [`Event::Closed`] a connection whose peer closed still answers repeated
    /// CLOSEs for a while: keep feeding it until this says `true`.)
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Closed) && self.close_out.is_none()
    }

    /// The counters and estimates.
    pub fn stats(&self) -> RudpStats {
        let mut stats = RudpStats {
            parity_sent: self.fec_tx.parity_sent,
            fec_recovered: self.fec_rx.recovered,
            duplicates: self.recv.duplicates,
            stale_sequenced: self.recv.stale,
            bytes_accepted: self.send.accepted_bytes,
            bytes_acked: self.send.acked_bytes,
            loss_estimate: self.loss.estimate,
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            srtt_max: self.rtt.srtt(),
            sessions: 1,
            ..self.stats
        };
        self.rate_stats(&mut stats);
        stats
    }

    /// The largest message [`send`](Self::send) takes for `delivery` (0 for a lane the
    /// session does not have).
    pub fn message_limit(&self, delivery: Delivery) -> usize {
        self.config.limit_for(delivery).unwrap_or(0)
    }

    /// Payload bytes queued and not yet acknowledged (reliable ones), or not yet sent
    /// (unreliable ones): what `RudpConfig::send_buffer` bounds.
    pub fn buffered(&self) -> usize {
        self.send.buffered + self.unreliable.iter().map(|(_, m)| m.len()).sum::<usize>()
    }

    /// Queues a message (copied).
    ///
    /// # Errors
    /// [`SendError::TooLarge`], [`SendError::Full`] or [`SendError::Closed`] (also while
    /// closing); nothing is queued, and the refusal is counted
    /// ([`RudpStats::refused_full`] and its neighbours).
    pub fn send(&mut self, message: &[u8], delivery: Delivery) -> Result<(), SendError> {
        let refused = self.check_send(message.len(), delivery);
        if let Err(e) = &refused {
            self.count_refusal(e);
            return refused;
        }
        self.queue(message, delivery);
        Ok(())
    }

    /// Queues a message a handle admitted against the send buffer on its own thread (its
    /// bytes were counted there): refused only if the connection closed since (counted).
    pub(crate) fn send_admitted(&mut self, message: &[u8], delivery: Delivery) {
        if self.is_closed() {
            self.count_refusal(&SendError::Closed);
        } else {
            self.queue(message, delivery);
        }
    }

    fn queue(&mut self, message: &[u8], delivery: Delivery) {
        let mtu = self.config.mtu;
        let lane = match delivery {
            Delivery::Ordered => return self.send.push(message, mtu, (0, false)),
            Delivery::Unordered => return self.send.push(message, mtu, (0, true)),
            Delivery::Unreliable => None,
            Delivery::Lane(lane) => match self.config.lane_mode(lane) {
                Some(LaneMode::Ordered) => return self.send.push(message, mtu, (lane, false)),
                Some(LaneMode::Unordered) => return self.send.push(message, mtu, (lane, true)),
                Some(LaneMode::Sequenced) => {
                    let next = &mut self.sequenced[usize::from(lane)];
                    *next = next.wrapping_add(1);
                    Some(LaneTag {
                        lane,
                        seq: next.wrapping_sub(1),
                    })
                }
                None => return, // refused by `check_send`
            },
        };
        let buf = self.recv.copy(&[message]);
        self.unreliable.push_back((lane, buf));
    }

    fn check_send(&self, len: usize, delivery: Delivery) -> Result<(), SendError> {
        if self.is_closed() {
            return Err(SendError::Closed);
        }
        let max = self.config.limit_for(delivery)?;
        if len > max {
            return Err(SendError::TooLarge { len, max });
        }
        let buffered = self.buffered();
        if buffered > 0 && buffered + len > self.config.send_buffer {
            return Err(SendError::Full {
                buffered,
                limit: self.config.send_buffer,
            });
        }
        Ok(())
    }

    /// Counts a refused send (this connection's, or one its handle refused).
    pub(crate) fn count_refusal(&mut self, error: &SendError) {
        match error {
            SendError::Full { .. } => self.stats.refused_full += 1,
            SendError::TooLarge { .. } => self.stats.refused_too_large += 1,
            SendError::Closed => self.stats.refused_closed += 1,
            SendError::NoLane { .. } => self.stats.refused_no_lane += 1,
        }
    }

    /// The next delivered message, if any. Give its buffer back with
    /// [`recycle`](Self::recycle) to keep the connection allocation-free.
    pub fn recv(&mut self) -> Option<Vec<u8>> {
        let message = self.recv.inbox.pop_front()?;
        self.stats.messages_delivered += 1;
        Some(message)
    }

    /// Returns a buffer from [`recv`](Self::recv) for reuse.
    pub fn recycle(&mut self, buffer: Vec<u8>) {
        if self.recv.spare.len() < 256 {
            self.recv.spare.push(buffer);
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

/// Receiving.
impl Connection {
    /// A datagram from the peer arrived at `now`.
    ///
    /// After the handshake a datagram must open under the session's keys (encrypted, the
    /// default) or end in the session's token (plaintext); one that does not (forged, changed
    /// on the way, or from an earlier session), and a handshake datagram with another nonce,
    /// is counted ([`RudpStats::unauthenticated`]) and dropped unread: it closes, feeds and
    /// refreshes nothing. One whose packet number was accepted before, or is older than the
    /// replay window, is counted ([`RudpStats::replays`]) and dropped likewise.
    ///
    /// # Errors
    /// The datagram was not understood, not authenticated or a replay; it is ignored, the
    /// connection goes on.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), PacketError> {
        if matches!(self.state, State::Closed) {
            return Ok(());
        }
        let first = datagram.first().copied().unwrap_or(0);
        if packet::is_handshake(first) {
            return self.handle_handshake(now, datagram);
        }
        match &self.protection {
            Protection::Tokens(keys) => match packet::open(datagram, &keys.rx) {
                Some(plain) => self.on_authenticated(now, plain, datagram.len()),
                None => self.unauthenticated(first),
            },
            Protection::Sealed(_) => {
                let mut buf = std::mem::take(&mut self.open_buf);
                let result = self.open_sealed(now, datagram, &mut buf);
                self.open_buf = buf;
                result
            }
            Protection::Pending => {
                let waiting_keys =
                    matches!(&self.handshake, Handshake::Client { noise: Some(_), .. });
                if waiting_keys && self.early.len() < EARLY_DATAGRAMS {
                    self.early.push(datagram.to_vec());
                    return Ok(());
                }
                self.unauthenticated(first)
            }
        }
    }

    /// The datagrams that came before the keys, now that they are here.
    fn open_early(&mut self, now: Instant) {
        for datagram in std::mem::take(&mut self.early) {
            let _ = self.handle_datagram(now, &datagram);
        }
    }

    fn unauthenticated(&mut self, first: u8) -> Result<(), PacketError> {
        self.stats.unauthenticated += 1;
        Err(PacketError::Unauthenticated(first))
    }

    /// A sealed datagram, opened into `buf` under the key of its packet number's epoch.
    fn open_sealed(
        &mut self,
        now: Instant,
        datagram: &[u8],
        buf: &mut Vec<u8>,
    ) -> Result<(), PacketError> {
        let first = datagram.first().copied().unwrap_or(0);
        let Some(wire) = packet::packet_number(datagram) else {
            return self.unauthenticated(first);
        };
        // Opened before its number is judged (as QUIC does): what does not open is a forgery
        // (`unauthenticated`), what opens and was seen is a replay.
        let number = self.rx_numbers.widen(wire);
        let Protection::Sealed(keys) = &mut self.protection else {
            return self.unauthenticated(first);
        };
        buf.clear();
        buf.extend_from_slice(datagram);
        let Some(n) = keys.open(number, buf, PREFIX) else {
            if keys.failed_opens() >= crypto::MAX_FAILED_OPENS {
                let failed = keys.failed_opens();
                self.abort(now, CloseReason::Forgeries(failed));
            }
            return self.unauthenticated(first);
        };
        self.on_authenticated(now, &buf[..n], datagram.len())
    }

    /// An authenticated datagram (`datagram`: its plaintext without token or tag, `len` its
    /// length on the wire): parsed, judged fresh, and taken.
    fn on_authenticated(
        &mut self,
        now: Instant,
        datagram: &[u8],
        len: usize,
    ) -> Result<(), PacketError> {
        let first = datagram.first().copied().unwrap_or(0);
        let packet = packet::parse(datagram).inspect_err(|_| self.stats.malformed += 1)?;
        // parse checked the length: every kind after the handshake has its number.
        let wire = packet::packet_number(datagram).unwrap_or_default();
        let number = self.rx_numbers.widen(wire);
        if !self.rx_numbers.is_fresh(number) {
            self.stats.replays += 1;
            return Err(PacketError::Replayed {
                kind: first,
                number,
            });
        }
        self.rx_numbers.mark(number);
        self.heard_from_peer();
        self.last_received = now;
        self.count_received(len, matches!(packet, Packet::Data { .. }), now);
        if let State::Draining { .. } = self.state {
            if let Packet::Close { answer: false, .. } = packet {
                self.close_out = Some(true);
            }
            return Ok(());
        }
        self.on_packet(now, packet, datagram);
        self.update_persist(now);
        Ok(())
    }

    /// The peer was heard after the handshake: a server's ACCEPT answer is no longer kept,
    /// and a HELLO from now on is a replay.
    fn heard_from_peer(&mut self) {
        if !self.peer_heard {
            self.peer_heard = true;
            if let Handshake::Server { answer } = &mut self.handshake {
                *answer = Vec::new();
            }
        }
    }

    /// An authenticated, fresh datagram (`datagram` without its token: FEC keeps DATA whole).
    fn on_packet(&mut self, now: Instant, packet: Packet<'_>, datagram: &[u8]) {
        match packet {
            Packet::Data {
                flags,
                seq,
                lane,
                ack,
                fec,
                fragment,
            } => {
                self.implicit_accept();
                self.first_answer(now);
                self.rx_count += 1;
                self.on_ack(&ack, now);
                if let Some(tag) = fec {
                    self.fec_rx.on_data(tag, datagram);
                }
                self.on_fragment(now, (seq, lane), flags, fragment);
            }
            Packet::Parity {
                ack,
                group,
                k,
                m,
                index,
                shard,
            } => {
                self.implicit_accept();
                self.rx_count += 1;
                self.on_ack(&ack, now);
                self.on_parity(now, (group, k, m, index), shard);
            }
            Packet::Ack { ping, ack } => {
                self.implicit_accept();
                self.on_ack(&ack, now);
                self.ack_pending |= ping;
            }
            Packet::Unreliable { sequenced, message } => {
                self.implicit_accept();
                match sequenced {
                    Some(lane) => {
                        if let Arrival::Violation(what) = self.recv.on_sequenced(lane, message) {
                            self.abort(now, CloseReason::ProtocolViolation(what));
                        }
                    }
                    None => {
                        let buf = self.recv.copy(&[message]);
                        self.recv.inbox.push_back(buf);
                    }
                }
            }
            Packet::Close { answer, .. } => self.on_close(now, answer),
            Packet::Cookie { .. } | Packet::Accept { .. } | Packet::Hello { .. } => {}
        }
    }

    /// A HELLO, COOKIE or ACCEPT: believed only with this connection's nonce.
    fn handle_handshake(&mut self, now: Instant, datagram: &[u8]) -> Result<(), PacketError> {
        let packet = packet::parse(datagram).inspect_err(|_| self.stats.malformed += 1)?;
        let nonce = match packet {
            Packet::Cookie { nonce, .. }
            | Packet::Accept { nonce, .. }
            | Packet::Hello { nonce, .. } => nonce,
            _ => return Ok(()),
        };
        if nonce != self.nonce {
            self.stats.unauthenticated += 1;
            return Err(PacketError::Unauthenticated(datagram[0]));
        }
        if self.is_closed() {
            return Ok(());
        }
        match packet {
            Packet::Cookie { cookie, .. } => self.on_cookie(cookie, now),
            Packet::Accept { handshake, .. } => return self.on_accept(now, handshake),
            Packet::Hello { .. } if self.peer_heard => {
                // The client has the keys: its HELLO can only be a replay.
                self.stats.replays += 1;
            }
            Packet::Hello { .. } => {
                // The ACCEPT is sent again: its round trip no longer tells the RTT.
                self.accepted_at = None;
                self.accept_pending = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// The server answered (ACCEPT, or anything only an accepted connection gets).
    fn implicit_accept(&mut self) {
        if let State::Handshaking { cookie, .. } = &self.state
            && *cookie != [0; COOKIE_LEN]
        {
            self.state = State::Established;
            self.events.push_back(Event::Connected);
            // A read limit's window goes at once, before the server's first flight.
            self.ack_pending |= self.rates.limits_reads();
        }
    }

    /// The server's ACCEPT arrived at `now` (`handshake`: its Noise answer): established
    /// once it verifies, with the handshake's round trip as the first RTT sample when one
    /// HELLO carried the cookie. One that does not verify is counted and changes nothing.
    fn on_accept(&mut self, now: Instant, handshake: &[u8]) -> Result<(), PacketError> {
        let State::Handshaking { cookie_hellos, .. } = self.state else {
            return Ok(()); // a repeated ACCEPT
        };
        match &mut self.handshake {
            Handshake::Client { noise, .. } => {
                let keys = noise.as_mut().map(|n| n.finish(handshake));
                let Some(Ok(keys)) = keys else {
                    return self.unauthenticated(packet::KIND_ACCEPT);
                };
                self.protection = Protection::Sealed(Box::new(keys));
                self.handshake = Handshake::Plain;
                self.finish_accept(now, cookie_hellos);
                self.open_early(now);
                return Ok(());
            }
            _ if !handshake.is_empty() => {
                // An encrypted answer to a plaintext client: not this session's server.
                return self.unauthenticated(packet::KIND_ACCEPT);
            }
            _ => {}
        }
        self.finish_accept(now, cookie_hellos);
        Ok(())
    }

    /// Established by the ACCEPT at `now`: the handshake's round trip is the first RTT
    /// sample when one HELLO carried the cookie (Karn's rule).
    fn finish_accept(&mut self, now: Instant, cookie_hellos: Option<(Instant, u32)>) {
        if let Some((sent, 1)) = cookie_hellos {
            self.rtt.sample(now.saturating_duration_since(sent));
        }
        self.last_received = now;
        self.implicit_accept();
        // An encrypted server holds its unreliable datagrams until it hears the client: an
        // acknowledgement goes at once.
        self.ack_pending |= self.is_encrypted();
    }

    fn on_cookie(&mut self, cookie: &[u8], now: Instant) {
        if let State::Handshaking {
            cookie: ours,
            next_hello,
            cookie_hellos,
            ..
        } = &mut self.state
            && let Ok(c) = <[u8; COOKIE_LEN]>::try_from(cookie)
        {
            if *ours != c {
                *ours = c;
                *cookie_hellos = None;
                match &mut self.handshake {
                    Handshake::Client {
                        server_key,
                        token,
                        noise,
                    } => {
                        let started = ClientHandshake::new(server_key, self.nonce, &c, token);
                        *noise = started.ok().map(Box::new);
                    }
                    _ => {
                        let keys = Keys::client(SessionTokens::derive(self.nonce, &c));
                        self.protection = Protection::Tokens(keys);
                    }
                }
            }
            self.last_received = now;
            *next_hello = now; // answer with the cookie at once
        }
    }

    fn on_fragment(&mut self, now: Instant, (seq, lane): (u32, LaneTag), flags: u8, data: &[u8]) {
        self.ack_pending = true;
        // A fragment past the window is dropped: the sender repeats it once the window opens.
        if let Arrival::Violation(what) = self.recv.on_fragment(seq, lane, flags, data) {
            self.abort(now, CloseReason::ProtocolViolation(what));
            return;
        }
        if let Some(len) = self.recv.oversized.take() {
            let max = self.config.max_message;
            self.abort(now, CloseReason::MessageTooLarge { len, max });
        }
    }

    fn on_parity(&mut self, now: Instant, (group, k, m, index): (u32, u8, u8, u8), shard: &[u8]) {
        let mut fec_rx = std::mem::replace(&mut self.fec_rx, FecReceiver::new());
        fec_rx.on_parity((group, k, m, index), shard, &mut |datagram| {
            if let Ok(Packet::Data {
                flags,
                seq,
                lane,
                fragment,
                ..
            }) = packet::parse(datagram)
            {
                self.on_fragment(now, (seq, lane), flags, fragment);
            }
        });
        self.fec_rx = fec_rx;
    }

    fn on_ack(&mut self, ack: &AckBlock, now: Instant) {
        let out = self.send.on_ack(ack, now, self.loss_times());
        if out.forged {
            self.stats.forged_acks += 1;
            return;
        }
        if let Some((sent_at, once, tx_mark)) = out.newest {
            if once {
                self.rtt.sample(now.saturating_duration_since(sent_at));
            }
            self.loss.update(ack.received, tx_mark);
            self.fec_tx.loss = self.loss.estimate;
            self.cc.on_ack(out.newly_acked, sent_at);
        }
        for sent_at in &out.lost {
            self.cc.on_loss(*sent_at, now);
        }
        if out.newly_acked > 0 {
            self.rtt.reset_backoff();
            self.last_progress = now;
            self.rto_deadline = self.send.has_unacked().then(|| now + self.rtt.rto());
        }
    }
}

/// Sending and time.
impl Connection {
    /// Writes the next datagram to send into `out` (at least `RudpConfig::mtu` + 64 bytes, and
    /// 1200 for a client's HELLO); returns its length, or `None` when nothing is due.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        self.progress_close(now);
        if let Some(answer) = self.close_out.take() {
            if matches!(self.protection, Protection::Pending) {
                return None;
            }
            let pn = self.tx_numbers.take();
            let n = packet::write_close(out, pn, close::CLOSE_NORMAL, answer);
            let len = self.protect(out, n, pn)?;
            self.count_sent(len, now);
            return Some(len);
        }
        match &mut self.state {
            State::Closed | State::Draining { .. } => return None,
            State::Handshaking {
                cookie,
                next_hello,
                attempts,
                cookie_hellos,
            } => {
                if now < *next_hello || out.len() < HELLO_SIZE {
                    return None;
                }
                // Again after 250 ms, 500 ms, then every second, until the handshake timeout.
                let wait = Duration::from_millis(250) * (1 << (*attempts).min(2));
                *attempts += 1;
                *next_hello = now + wait;
                if *cookie != [0; COOKIE_LEN] {
                    let (first, count) = cookie_hellos.get_or_insert((now, 0));
                    *cookie_hellos = Some((*first, *count + 1));
                }
                let encrypted = matches!(self.handshake, Handshake::Client { .. });
                let first = match &self.handshake {
                    Handshake::Client {
                        noise: Some(noise), ..
                    } => noise.first_message(),
                    _ => &[],
                };
                return Some(packet::write_hello(
                    out,
                    self.nonce,
                    cookie,
                    (encrypted, first),
                ));
            }
            State::Established | State::Finishing { .. } | State::CloseSent { .. } => {}
        }
        if std::mem::take(&mut self.accept_pending) {
            let answer = match &self.handshake {
                Handshake::Server { answer } => answer.as_slice(),
                _ => &[],
            };
            return Some(packet::write_accept(out, self.nonce, answer));
        }
        if matches!(self.protection, Protection::Pending) {
            return None;
        }
        let n = self.next_datagram(now, out)?;
        self.last_sent = now;
        let len = self.protect(out, n, self.tx_numbers.last())?;
        self.count_sent(len, now);
        Some(len)
    }

    /// Protects the datagram of `n` bytes in `out` with packet number `pn`: sealed (a tag
    /// appended), or the plaintext token appended; its length on the wire.
    fn protect(&mut self, out: &mut [u8], n: usize, pn: u64) -> Option<usize> {
        match &mut self.protection {
            Protection::Sealed(keys) => Some(keys.seal(pn, out, PREFIX, n)),
            Protection::Tokens(keys) => Some(packet::seal(out, n, &keys.tx)),
            Protection::Pending => None,
        }
    }

    fn next_datagram(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        if let Some(n) = self.next_paced(now, out) {
            return Some(n);
        }
        let keep_alive = now.saturating_duration_since(self.last_sent) >= self.config.keep_alive;
        let probe = self
            .persist
            .as_mut()
            .is_some_and(close::Persist::take_probe);
        if self.ack_pending || keep_alive || probe {
            self.ack_pending = false;
            self.stats.acks_sent += 1;
            let (pn, ack) = (self.tx_numbers.take(), self.ack_block(now));
            return Some(packet::write_ack(out, pn, &ack, keep_alive || probe));
        }
        None
    }

    /// The next datagram the write rate limit paces, if one is due and the limit lets it go:
    /// parity first, then a fragment (retransmissions first), then an unreliable message —
    /// except that a sequenced lane's message goes before the fragments of lanes of a lower
    /// priority (a higher number).
    fn next_paced(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let data = if self.fec_tx.parity.is_empty() && !self.sequenced_first() {
            self.send.next_to_send(self.cc.window())
        } else {
            None
        };
        if self.rates.paces_writes() && !self.write_allowed(data, now) {
            return None;
        }
        if let Some(n) = self.transmit_parity(now, out) {
            return Some(n);
        }
        if let Some(seq) = data {
            return Some(self.transmit_data(seq, now, out));
        }
        if matches!(self.handshake, Handshake::Server { .. }) && !self.peer_heard {
            // Until the client is heard it may lack its keys (its ACCEPT lost): unreliable
            // datagrams wait for it (reliable ones are repeated anyway).
            return None;
        }
        let (lane, message) = self.unreliable.pop_front()?;
        let n = packet::write_unreliable(out, self.tx_numbers.take(), lane, &message);
        self.recv.spare.push(message);
        Some(n)
    }

    /// Whether the next unreliable message is a sequenced lane's whose priority is above
    /// that of the next fragment's lane.
    fn sequenced_first(&self) -> bool {
        let Some((Some(tag), _)) = self.unreliable.front() else {
            return false;
        };
        let priority = self.send.lane_priority(tag.lane);
        self.send.next_priority().is_none_or(|p| priority < p)
    }

    /// The acknowledgement block of what arrived, its window cut to the read rate limit.
    fn ack_block(&mut self, now: Instant) -> AckBlock {
        let mut ack = self.recv.ack(self.rx_count);
        if self.rates.limits_reads() {
            self.limit_window(&mut ack, now);
        }
        if self.hostile_zero_window {
            ack.window = 0;
        }
        ack
    }

    fn transmit_parity(&mut self, now: Instant, out: &mut [u8]) -> Option<usize> {
        let (group, k, m, index, shard) = self.fec_tx.parity.pop_front()?;
        let ack = self.ack_block(now);
        self.ack_pending = false;
        let pn = self.tx_numbers.take();
        let n = packet::write_parity_header(out, (pn, &ack), group, (k, m, index));
        let len = n + shard.len();
        out[n..len].copy_from_slice(&shard);
        self.fec_tx.recycle(shard);
        self.tx_count += 1;
        Some(len)
    }

    fn transmit_data(&mut self, seq: u64, now: Instant, out: &mut [u8]) -> usize {
        let ack = self.ack_block(now);
        self.ack_pending = false;
        let tag: Option<FecTag> = self.fec_tx.next_tag(now);
        let Some(o) = self.send.get(seq) else {
            return 0;
        };
        let retransmission = o.transmissions > 0;
        let pn = self.tx_numbers.take();
        let n = packet::write_data_header(out, (pn, o.flags), (seq as u32, o.lane), &ack, tag);
        out[n..n + o.data.len()].copy_from_slice(&o.data);
        let len = n + o.data.len();
        if tag.is_some() {
            self.fec_tx.add(&out[..len]);
        }
        self.tx_count += 1;
        if !self.send.has_unacked() {
            // The no-progress clock of `unacked_timeout` starts when data goes in flight, not
            // at the last progress before a quiet spell.
            self.last_progress = now;
        }
        self.send.sent(seq, now, self.tx_count, tag.is_some());
        self.stats.data_sent += 1;
        self.stats.retransmissions += u64::from(retransmission);
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rtt.rto());
        }
        len
    }

    /// Loss detection's times: the RTT it judges by, and the extra wait of FEC-protected
    /// fragments.
    fn loss_times(&self) -> (Duration, Duration) {
        (self.rtt.srtt().max(self.rtt.latest()), self.fec_delay())
    }

    /// The group's closing time: half the smoothed RTT, within `fec_min_delay` and
    /// `fec_max_delay`.
    fn fec_delay(&self) -> Duration {
        (self.rtt.srtt() / 2)
            .max(self.config.fec_min_delay)
            .min(self.config.fec_max_delay)
    }

    /// When [`handle_timeout`](Self::handle_timeout) must run next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.state {
            State::Closed => None,
            State::Draining { until } => Some(*until),
            State::Handshaking { next_hello, .. } => {
                Some((*next_hello).min(self.started + self.config.handshake_timeout))
            }
            State::Established | State::Finishing { .. } | State::CloseSent { .. } => [
                self.rto_deadline,
                self.send.loss_deadline(),
                self.fec_tx.deadline(self.fec_delay()),
                Some(self.last_sent + self.config.keep_alive),
                Some(self.last_received + self.config.idle_timeout),
                self.send
                    .has_unacked()
                    .then(|| self.last_progress + self.config.unacked_timeout),
                self.persist
                    .as_ref()
                    .map(|p| p.deadline(self.config.zero_window_timeout)),
                self.close_deadline(),
                self.rates.deadline(),
            ]
            .into_iter()
            .flatten()
            .min(),
        }
    }

    /// Time passed: retransmission timer, FEC group closing, keep-alive, window probes,
    /// dead-peer checks and the steps of a close.
    pub fn handle_timeout(&mut self, now: Instant) {
        let config = self.config.clone();
        match self.state {
            State::Closed => {}
            State::Draining { until } => {
                if now >= until {
                    self.state = State::Closed;
                }
            }
            State::Handshaking { .. } => {
                if now >= self.started + config.handshake_timeout {
                    let reason = CloseReason::HandshakeTimeout(config.handshake_timeout);
                    self.close_now(now, reason, false);
                }
            }
            State::Established | State::Finishing { .. } | State::CloseSent { .. } => {
                if now >= self.last_received + config.idle_timeout {
                    return self.abort(now, CloseReason::IdleTimeout(config.idle_timeout));
                }
                if self.send.has_unacked() && now >= self.last_progress + config.unacked_timeout {
                    let reason = CloseReason::Unacknowledged(config.unacked_timeout);
                    return self.abort(now, reason);
                }
                if self.persist_expired(now) {
                    return;
                }
                self.fec_tx.close_if_due(now, self.fec_delay());
                self.on_rate_timeout(now);
                if self.send.loss_deadline().is_some_and(|d| d <= now) {
                    for sent_at in self.send.on_loss_timer(now, self.loss_times()) {
                        self.cc.on_loss(sent_at, now);
                    }
                }
                if self.rto_deadline.is_some_and(|d| d <= now) {
                    self.on_rto(now);
                }
                self.progress_close(now);
            }
        }
    }

    fn on_rto(&mut self, now: Instant) {
        let rto = self.rtt.rto();
        let resent = self.send.on_timeout(now, rto);
        if resent > 0 {
            self.cc.on_timeout(now);
            self.rtt.back_off();
        }
        self.rto_deadline = self
            .send
            .oldest_in_flight()
            .map(|t| t + self.rtt.rto())
            .or_else(|| self.send.has_unacked().then(|| now + self.rtt.rto()));
    }
}
