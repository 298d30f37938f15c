//! The session API on real sockets (127.0.0.1): many clients echoing over a lossy relay,
//! handles used from other threads, user timers, closes from either side, a server that
//! stops, and a client whose server vanished.

mod util;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use ark_link::{LinkConfig, UdpRelay};
use ark_rudp::{
    CloseReason, Delivery, RudpClient, RudpConfig, RudpHandler, RudpServer, RudpSession,
    RudpSessionHandle, SendError, TimerId,
};
use util::{Note, Reporter, Side, next_event, next_note};

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn eight_clients_echo_in_order_over_a_lossy_relay() {
    let (server, _server_notes) = util::reporting_server(RudpConfig::default(), true);
    let link = |seed| LinkConfig {
        loss: 0.1,
        delay: Duration::from_millis(5),
        seed,
        ..LinkConfig::default()
    };
    let relay = UdpRelay::start(server.local_addr(), link(7), link(8)).unwrap();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (handler, notes) = Reporter::new(false);
            let client = RudpClient::builder()
                .server_key(server.public_key().unwrap())
                .connect(relay.local_addr(), handler)
                .unwrap();
            (client, notes)
        })
        .collect();
    const MESSAGES: usize = 150;
    let mut message = Vec::new();
    for (client, notes) in &clients {
        assert_eq!(next_note(notes, WAIT), Note::Open);
        // Sent from this thread, not the client's: through its handle's mailbox.
        for i in 0..MESSAGES {
            util::message(Side::Client, i, &mut message);
            client.send(&message, Delivery::Ordered).unwrap();
        }
    }
    for (c, (_, notes)) in clients.iter().enumerate() {
        for i in 0..MESSAGES {
            util::message(Side::Client, i, &mut message);
            match next_note(notes, WAIT) {
                Note::Message(m) => assert!(m == message, "client {c}: echo {i} wrong"),
                other => panic!("client {c}: {other:?} instead of echo {i}"),
            }
        }
    }
    let stats = server.stats().unwrap();
    assert_eq!(stats.messages_delivered, (8 * MESSAGES) as u64);
    assert!(stats.retransmissions > 0, "{stats:?}");
    for (client, notes) in clients {
        let client_stats = client.stats().unwrap();
        assert_eq!(client_stats.messages_delivered, MESSAGES as u64);
        client.stop().wait().unwrap();
        assert_eq!(next_event(&notes, WAIT), Note::Stopping);
        assert_eq!(next_event(&notes, WAIT), Note::Close(CloseReason::Stopped));
    }
    let counters = relay.stop();
    assert!(counters.upstream.dropped() > 0 && counters.downstream.dropped() > 0);
    server.stop().wait().unwrap();
}

/// A server handler that hands its session's handle to the test, then reports.
struct Handing {
    handles: mpsc::Sender<RudpSessionHandle>,
    inner: Reporter,
}

impl RudpHandler for Handing {
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        self.handles.send(session.handle()).unwrap();
        self.inner.on_open(session);
    }
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        self.inner.on_message(session, message);
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.inner.on_close(reason);
    }
}

#[test]
fn a_session_handle_sends_from_other_threads_and_closes() {
    let (handles_tx, handles) = mpsc::channel();
    let (reporter, server_notes) = Reporter::new(false);
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| Handing {
            handles: handles_tx.clone(),
            inner: reporter.clone(),
        })
        .unwrap();
    let (handler, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(server.local_addr(), handler)
        .unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Open);
    let handle = handles.recv_timeout(WAIT).unwrap();
    assert_eq!(handle.peer_addr(), client.local_addr());
    assert_eq!(next_note(&server_notes, WAIT), Note::Open);
    // Four threads, 50 messages each; each thread's messages arrive in its order.
    let senders: Vec<_> = (0..4u8)
        .map(|t| {
            let handle = handle.clone();
            thread::spawn(move || {
                for i in 0..50u8 {
                    handle.send(&[t, i], Delivery::Ordered).unwrap();
                }
            })
        })
        .collect();
    for s in senders {
        s.join().unwrap();
    }
    let mut next = [0u8; 4];
    for _ in 0..200 {
        let Note::Message(m) = next_note(&notes, WAIT) else {
            panic!("a message expected")
        };
        let t = usize::from(m[0]);
        assert_eq!(m[1], next[t], "thread {t}'s messages in order");
        next[t] += 1;
    }
    assert_eq!(next, [50; 4]);
    handle.send(b"unreliable", Delivery::Unreliable).unwrap();
    handle.send(b"unordered", Delivery::Unordered).unwrap();
    let mut got = vec![next_note(&notes, WAIT), next_note(&notes, WAIT)];
    got.sort_by_key(|n| format!("{n:?}"));
    assert_eq!(
        got,
        [
            Note::Message(b"unordered".to_vec()),
            Note::Message(b"unreliable".to_vec())
        ]
    );
    // A close from the handle: Local on the server, PeerClosed on the client.
    handle.close();
    assert_eq!(
        next_note(&server_notes, WAIT),
        Note::Close(CloseReason::Local)
    );
    assert_eq!(
        next_note(&notes, WAIT),
        Note::Close(CloseReason::PeerClosed)
    );
    // The handle outlives its session harmlessly: it refuses.
    assert_eq!(
        handle.send(b"late", Delivery::Ordered),
        Err(SendError::Closed)
    );
    handle.close();
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    assert!(
        notes.recv_timeout(Duration::from_millis(100)).is_err(),
        "closed once"
    );
    assert!(
        server_notes
            .recv_timeout(Duration::from_millis(100))
            .is_err()
    );
}

#[test]
fn a_client_close_is_local_here_and_peer_closed_there() {
    let (reporter, server_notes) = Reporter::new(true);
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| reporter.clone())
        .unwrap();
    let (handler, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(server.local_addr(), handler)
        .unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Open);
    client.send(b"ping", Delivery::Ordered).unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Message(b"ping".to_vec()));
    client.session().close();
    assert_eq!(next_note(&notes, WAIT), Note::Close(CloseReason::Local));
    assert_eq!(next_note(&server_notes, WAIT), Note::Open);
    assert_eq!(
        next_event(&server_notes, WAIT),
        Note::Close(CloseReason::PeerClosed)
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    assert!(
        notes.recv_timeout(Duration::from_millis(100)).is_err(),
        "closed once"
    );
    assert!(
        server_notes
            .recv_timeout(Duration::from_millis(100))
            .is_err()
    );
}

/// What the timer handler reports.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TimerNote {
    Set {
        kept: TimerId,
        cancelled: TimerId,
        after_close: TimerId,
    },
    Fired(TimerId, Duration),
    Closed(CloseReason),
}

/// Sets three timers on open and cancels one; on the first one firing, sends "tick" and
/// closes the session in its last one's lifetime.
struct Timers {
    notes: mpsc::Sender<TimerNote>,
    opened: Option<Instant>,
    kept: Option<TimerId>,
}

impl RudpHandler for Timers {
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        // The turn's time, which the timers count from (a clock read here would be later).
        self.opened = Some(session.now());
        let kept = session.set_timer(Duration::from_millis(60));
        let cancelled = session.set_timer(Duration::from_millis(20));
        let after_close = session.set_timer(Duration::from_millis(400));
        assert!(session.cancel_timer(cancelled), "pending");
        assert!(!session.cancel_timer(cancelled), "cancelled already");
        self.kept = Some(kept);
        let _ = self.notes.send(TimerNote::Set {
            kept,
            cancelled,
            after_close,
        });
    }
    fn on_message(&mut self, _: &mut RudpSession<'_>, _: &[u8]) {}
    fn on_timer(&mut self, session: &mut RudpSession<'_>, timer: TimerId) {
        let waited = self.opened.unwrap().elapsed();
        let _ = self.notes.send(TimerNote::Fired(timer, waited));
        if Some(timer) == self.kept.take() {
            assert!(!session.cancel_timer(timer), "a fired timer is not pending");
            session.send(b"tick").unwrap();
            session.set_timer(Duration::from_millis(30));
        } else {
            session.close();
        }
    }
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.notes.send(TimerNote::Closed(reason.clone()));
    }
}

#[test]
fn user_timers_fire_once_cancelled_ones_never_and_they_end_with_the_session() {
    let (notes_tx, notes) = mpsc::channel();
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| Timers {
            notes: notes_tx.clone(),
            opened: None,
            kept: None,
        })
        .unwrap();
    let (handler, client_notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(server.local_addr(), handler)
        .unwrap();
    let TimerNote::Set {
        kept,
        cancelled,
        after_close,
    } = notes.recv_timeout(WAIT).unwrap()
    else {
        panic!("no timers set")
    };
    // The kept timer, then the one it set, which closes the session.
    let TimerNote::Fired(first, waited) = notes.recv_timeout(WAIT).unwrap() else {
        panic!("no timer fired")
    };
    assert_eq!(first, kept);
    assert!(
        waited >= Duration::from_millis(60),
        "fired after {waited:?}"
    );
    let TimerNote::Fired(second, waited) = notes.recv_timeout(WAIT).unwrap() else {
        panic!("the second timer did not fire")
    };
    assert!(![kept, cancelled, after_close].contains(&second));
    assert!(
        waited >= Duration::from_millis(90),
        "fired after {waited:?}"
    );
    assert_eq!(
        notes.recv_timeout(WAIT).unwrap(),
        TimerNote::Closed(CloseReason::Local)
    );
    // The 400 ms timer ended with the session; the cancelled one never fired.
    assert!(
        notes.recv_timeout(Duration::from_millis(600)).is_err(),
        "a timer outlived its session"
    );
    assert_eq!(next_note(&client_notes, WAIT), Note::Open);
    assert_eq!(
        next_note(&client_notes, WAIT),
        Note::Message(b"tick".to_vec())
    );
    assert_eq!(
        next_note(&client_notes, WAIT),
        Note::Close(CloseReason::PeerClosed)
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

/// Reports into a channel of its own per session, and says goodbye when the server stops.
struct Goodbye(Reporter);

impl RudpHandler for Goodbye {
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        self.0.on_message(session, message);
    }
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        self.0.on_open(session);
    }
    fn on_stopping(&mut self, session: &mut RudpSession<'_>) {
        session.send(b"bye").unwrap();
        self.0.on_stopping(session);
    }
    fn on_close(&mut self, reason: &CloseReason) {
        self.0.on_close(reason);
    }
}

#[test]
fn a_server_stop_gives_on_stopping_then_on_close_stopped_once_per_session() {
    let (sessions_tx, sessions) = mpsc::channel();
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| {
            let (reporter, notes) = Reporter::new(true);
            sessions_tx.send(notes).unwrap();
            Goodbye(reporter)
        })
        .unwrap();
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (handler, notes) = Reporter::new(false);
            let client = RudpClient::builder()
                .server_key(server.public_key().unwrap())
                .connect(server.local_addr(), handler)
                .unwrap();
            assert_eq!(next_note(&notes, WAIT), Note::Open);
            client.send(b"hello", Delivery::Ordered).unwrap();
            assert_eq!(next_note(&notes, WAIT), Note::Message(b"hello".to_vec()));
            (client, notes)
        })
        .collect();
    let server_sessions: Vec<_> = (0..3)
        .map(|_| sessions.recv_timeout(WAIT).unwrap())
        .collect();
    server.stop().wait().unwrap();
    for notes in &server_sessions {
        let seen: Vec<Note> = notes.try_iter().collect();
        assert_eq!(
            seen,
            [
                Note::Open,
                Note::Message(b"hello".to_vec()),
                Note::Stopping,
                Note::Close(CloseReason::Stopped)
            ]
        );
    }
    for (client, notes) in clients {
        // What on_stopping sent leaves before the CLOSE.
        assert_eq!(next_note(&notes, WAIT), Note::Message(b"bye".to_vec()));
        assert_eq!(
            next_note(&notes, WAIT),
            Note::Close(CloseReason::PeerClosed)
        );
        client.stop().wait().unwrap();
        assert!(
            notes.recv_timeout(Duration::from_millis(50)).is_err(),
            "closed once"
        );
    }
}

/// Counts closes; on open, sends 1000-byte messages until the send buffer refuses.
struct Flooder {
    refused: mpsc::Sender<(usize, SendError)>,
    closes: Arc<Mutex<Vec<CloseReason>>>,
}

impl RudpHandler for Flooder {
    fn on_open(&mut self, session: &mut RudpSession<'_>) {
        for sent in 0..1_000 {
            if let Err(e) = session.send(&[9; 1000]) {
                let _ = self.refused.send((sent, e));
                return;
            }
        }
    }
    fn on_message(&mut self, _: &mut RudpSession<'_>, _: &[u8]) {}
    fn on_close(&mut self, reason: &CloseReason) {
        self.closes.lock().unwrap().push(reason.clone());
    }
}

/// A plaintext "server" on a raw socket: answers the handshake (any cookie will do for the
/// client), then swallows everything. Returns the datagrams swallowed.
fn black_hole(socket: UdpSocket, stop: Arc<AtomicBool>) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 2048];
        let mut swallowed = 0;
        while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            let Ok((n, from)) = socket.recv_from(&mut buf) else {
                continue;
            };
            if n == 1200 && buf[0] == 0x50 {
                let nonce = &buf[2..10];
                let reply = if buf[10..30] == [0; 20] {
                    [&[0x60][..], nonce, &[7; 20]].concat()
                } else {
                    [&[0x70][..], nonce].concat()
                };
                socket.send_to(&reply, from).unwrap();
            } else {
                swallowed += 1;
            }
        }
        swallowed
    })
}

#[test]
fn a_client_whose_server_vanished_fills_its_buffer_and_closes_once() {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let hole = black_hole(socket, stop.clone());
    let mut config = RudpConfig::default();
    config.send_buffer = 16 * 1024;
    config.initial_rto = Duration::from_millis(50);
    config.keep_alive = Duration::from_millis(100);
    config.unacked_timeout = Duration::from_millis(300);
    config.idle_timeout = Duration::from_millis(300);
    let (refused_tx, refused) = mpsc::channel();
    let closes = Arc::new(Mutex::new(Vec::new()));
    // The black hole plays a plaintext server (it cannot answer an encrypted handshake).
    let client = RudpClient::builder()
        .plaintext()
        .config(config)
        .connect(
            addr,
            Flooder {
                refused: refused_tx,
                closes: closes.clone(),
            },
        )
        .unwrap();
    let (sent, error) = refused.recv_timeout(WAIT).unwrap();
    assert_eq!(sent, 16, "16 KiB of 1000-byte messages");
    assert!(
        matches!(error, SendError::Full { limit: 16_384, .. }),
        "{error:?}"
    );
    assert!(ark_testkit::wait_until(WAIT, || !closes
        .lock()
        .unwrap()
        .is_empty()));
    let reason = closes.lock().unwrap()[0].clone();
    assert!(
        matches!(
            reason,
            CloseReason::Unacknowledged(_) | CloseReason::IdleTimeout(_)
        ),
        "{reason:?}"
    );
    let stats = client.stats().unwrap();
    assert!(stats.retransmissions > 0, "it tried again: {stats:?}");
    thread::sleep(Duration::from_millis(200));
    client.stop().wait().unwrap();
    assert_eq!(closes.lock().unwrap().len(), 1, "on_close exactly once");
    stop.store(true, Ordering::SeqCst);
    let swallowed = hole.join().unwrap();
    assert!(swallowed >= 16, "{swallowed} datagrams swallowed");
}

/// A client whose server never answers hears `on_close(HandshakeTimeout)` once, without
/// `on_open`; a client stopped before its handshake finished hears `on_close(Stopped)`.
#[test]
fn a_client_hears_of_a_handshake_that_fails_or_is_stopped() {
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut config = RudpConfig::default();
    config.handshake_timeout = Duration::from_millis(300);
    let (reporter, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(ark_rudp::RudpServerKey::generate().public())
        .config(config)
        .connect(silent.local_addr().unwrap(), reporter)
        .unwrap();
    assert_eq!(
        next_note(&notes, WAIT),
        Note::Close(CloseReason::HandshakeTimeout(Duration::from_millis(300)))
    );
    client.stop().wait().unwrap();
    assert!(
        notes.recv_timeout(Duration::from_millis(200)).is_err(),
        "once"
    );

    let (reporter, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(ark_rudp::RudpServerKey::generate().public())
        .connect(silent.local_addr().unwrap(), reporter)
        .unwrap();
    client.stop().wait().unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Close(CloseReason::Stopped));
}

/// A server at `max_sessions` answers no further valid handshake (the client's handshake times
/// out, the refusal is counted) and takes a new client once a session has ended.
#[test]
fn a_server_at_max_sessions_refuses_new_ones_until_one_ends() {
    let mut config = RudpConfig::default();
    config.max_sessions = 2;
    config.handshake_timeout = Duration::from_millis(800);
    let (server, _server_notes) = util::reporting_server(config.clone(), true);
    let connect = || {
        let (handler, notes) = Reporter::new(false);
        let client = RudpClient::builder()
            .server_key(server.public_key().unwrap())
            .config(config.clone())
            .connect(server.local_addr(), handler)
            .unwrap();
        (client, notes)
    };
    let (first, first_notes) = connect();
    let (second, second_notes) = connect();
    assert_eq!(next_note(&first_notes, WAIT), Note::Open);
    assert_eq!(next_note(&second_notes, WAIT), Note::Open);
    let (third, third_notes) = connect();
    assert_eq!(
        next_note(&third_notes, WAIT),
        Note::Close(CloseReason::HandshakeTimeout(Duration::from_millis(800)))
    );
    let refused = server.stats().map_or(0, |s| s.refused_sessions);
    assert!(refused >= 1, "{refused} refusals counted");
    first.session().close();
    assert_eq!(
        next_note(&first_notes, WAIT),
        Note::Close(CloseReason::Local)
    );
    // The server hears the CLOSE and frees the slot.
    let deadline = Instant::now() + WAIT;
    let (fourth, fourth_notes) = loop {
        let (client, notes) = connect();
        match notes.recv_timeout(WAIT) {
            Ok(Note::Open) => break (client, notes),
            other => assert!(Instant::now() < deadline, "never let in: {other:?}"),
        }
        client.stop().wait().unwrap();
    };
    fourth.send(b"in", Delivery::Ordered).unwrap();
    assert_eq!(
        next_note(&fourth_notes, WAIT),
        Note::Message(b"in".to_vec())
    );
    for c in [first, second, third, fourth] {
        c.stop().wait().unwrap();
    }
    server.stop().wait().unwrap();
}
