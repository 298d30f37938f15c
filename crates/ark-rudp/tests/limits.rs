//! Limits on real sockets (127.0.0.x): a handle's sends over the send buffer or over
//! `max_message` are refused at once and counted; peers that hold a zero receive window are
//! ended at the zero-window deadline; one address cannot take more than its share of the
//! session table; the handles' stats carry the RTT and loss estimates.

mod util;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use ark_link::{LinkConfig, Towards, UdpForwarder, UdpRelay};
use ark_rudp::{
    CloseReason, Delivery, RudpClient, RudpConfig, RudpHandler, RudpServer, RudpSession, SendError,
};
use util::{Note, RawPeer, Reporter, next_note};

const WAIT: Duration = Duration::from_secs(10);

/// A regression test: `RudpClientHandle::send` returned nothing, and what did not fit the send
/// buffer (48 of 64 × 64 KiB) or was over `max_message` vanished without an error or a count.
#[test]
fn a_handle_send_over_the_send_buffer_or_max_message_is_refused_and_counted() {
    let (server, _server_notes) = util::reporting_server(RudpConfig::default(), false);
    // After the handshake the forwarder drops everything: nothing sent is acknowledged, so
    // the send buffer only fills.
    let cut = Arc::new(AtomicBool::new(false));
    let cut_in = cut.clone();
    let keep = move |_: Towards, _: &[u8]| !cut_in.load(Ordering::SeqCst);
    let forwarder =
        UdpForwarder::start(server.local_addr(), Duration::from_secs(60), keep).unwrap();
    let (handler, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(forwarder.local_addr(), handler)
        .unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Open);
    cut.store(true, Ordering::SeqCst);
    let chunk = vec![5u8; 64 * 1024];
    let results: Vec<_> = (0..64)
        .map(|_| client.send(&chunk, Delivery::Ordered))
        .collect();
    let accepted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(accepted, 16, "1 MiB of send buffer takes 16 × 64 KiB");
    for refused in &results[16..] {
        assert!(
            matches!(refused, Err(SendError::Full { limit, .. }) if *limit == 1024 * 1024),
            "{refused:?}"
        );
    }
    let over = vec![1u8; 256 * 1024 + 1];
    assert_eq!(
        client.send(&over, Delivery::Ordered),
        Err(SendError::TooLarge {
            len: 262_145,
            max: 262_144
        })
    );
    assert_eq!(
        client.send(&[0; 1201], Delivery::Unreliable),
        Err(SendError::TooLarge {
            len: 1201,
            max: 1200
        })
    );
    let stats = client.stats().unwrap();
    assert_eq!((stats.refused_full, stats.refused_too_large), (48, 2));
    assert_eq!(stats.bytes_accepted, 16 * 64 * 1024, "{stats:?}");
    client.session().close();
    let deadline = Instant::now() + WAIT;
    while client.send(b"x", Delivery::Ordered) != Err(SendError::Closed) {
        assert!(Instant::now() < deadline, "the handle never saw the close");
        thread::sleep(Duration::from_millis(5));
    }
    assert!(client.stats().unwrap().refused_closed >= 1);
    drop(client);
    forwarder.stop();
    server.stop_timeout(Duration::from_secs(1)).unwrap();
}

/// Counts what a server's sessions end with.
#[derive(Clone)]
struct Ends(
    Arc<Mutex<Vec<(CloseReason, Duration)>>>,
    mpsc::Sender<()>,
    Option<Instant>,
);

impl RudpHandler for Ends {
    fn on_open(&mut self, _: &mut RudpSession<'_>) {
        let _ = self.1.send(());
    }
    fn on_message(&mut self, session: &mut RudpSession<'_>, message: &[u8]) {
        // An echo: what the zero-window peers never take. From here data waits on a window
        // of 0, so the zero-window deadline runs.
        let _ = session.send(message);
        self.2.get_or_insert_with(Instant::now);
    }
    /// Records why the session ended and how long after its first echo was queued.
    fn on_close(&mut self, reason: &CloseReason) {
        let waited = self.2.map_or(Duration::ZERO, |echoed| echoed.elapsed());
        self.0.lock().unwrap().push((reason.clone(), waited));
    }
}

/// A regression test: peers that acknowledge everything with a receive window of 0 and ping
/// held their sessions (and the echo they never took) forever, since `unacked_timeout` runs
/// only with data in flight. Now each ends at `zero_window_timeout` (shortened here to 2 s)
/// with `CloseReason::ZeroWindow`, its buffers freed.
#[test]
fn fifty_zero_window_peers_are_ended_at_the_zero_window_deadline() {
    const PEERS: usize = 50;
    let mut config = RudpConfig::default();
    config.zero_window_timeout = Duration::from_secs(2);
    let ends = Arc::new(Mutex::new(Vec::new()));
    let (opened_tx, opened) = mpsc::channel();
    let handler = Ends(ends.clone(), opened_tx, None);
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .config(config)
        .start(move |_| handler.clone())
        .unwrap();
    let mut peers: Vec<RawPeer> = (0..PEERS)
        .map(|i| {
            RawPeer::new(
                "127.0.0.1:0",
                (server.local_addr(), server.public_key()),
                true,
                0x2E50_0000 + i as u64,
            )
        })
        .collect();
    let started = Instant::now();
    let mut sent = [false; PEERS];
    let mut done = false;
    while !done && started.elapsed() < Duration::from_secs(20) {
        for (i, peer) in peers.iter_mut().enumerate() {
            if peer.conn.is_established() && !sent[i] {
                // 200 kB the server echoes into a window of 0.
                peer.conn
                    .send(&vec![3; 200_000], Delivery::Ordered)
                    .unwrap();
                sent[i] = true;
            }
            peer.pump();
        }
        // The server records an end before its CLOSE reaches the peer: pump on until
        // both sides have seen it (under Wine the last CLOSE arrived after the last end).
        done = ends.lock().unwrap().len() == PEERS && peers.iter().all(|p| p.conn.is_closed());
        thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(opened.try_iter().count(), PEERS);
    let ends = ends.lock().unwrap();
    assert_eq!(ends.len(), PEERS, "every zero-window session ended");
    // Each session within its 2 s deadline and some scheduling, counted from the echo that
    // starts it: not from the test's start (50 Noise handshakes in a debug build, beside the
    // binary's other tests, took one session past 6 s to open in a CI run), nor from the
    // session's open (50 uploads of 200 kB pumped in turn by this thread, in a debug build
    // under CI's load, took one session 6.8 s from open to end in another).
    for (reason, waited) in ends.iter() {
        assert_eq!(*reason, CloseReason::ZeroWindow(Duration::from_secs(2)));
        assert!(
            *waited < Duration::from_secs(6),
            "ended {waited:?} after its echo was queued"
        );
    }
    let stats = server.stats().unwrap();
    assert_eq!(stats.zero_window_closes, PEERS as u64, "{stats:?}");
    assert!(stats.acks_sent > 0, "window probes went out: {stats:?}");
    assert!(
        peers.iter().all(|p| p.conn.is_closed()),
        "each peer got the server's CLOSE"
    );
    server.stop_timeout(Duration::from_secs(1)).unwrap();
}

/// A regression test: one address could hold the whole session table. With
/// `max_sessions_per_ip` 2, a third session from 127.0.0.1 is refused (counted) while
/// 127.0.0.2 still gets one.
#[test]
fn a_second_address_gets_a_session_while_the_first_is_at_its_limit() {
    let mut config = RudpConfig::default();
    config.max_sessions_per_ip = 2;
    let (opened_tx, opened) = mpsc::channel();
    let handler = Ends(Arc::new(Mutex::new(Vec::new())), opened_tx, None);
    let server = RudpServer::builder()
        .bind("127.0.0.1:0")
        .config(config)
        .start(move |_| handler.clone())
        .unwrap();
    let addr = (server.local_addr(), server.public_key());
    let mut first: Vec<RawPeer> = (0..3)
        .map(|i| RawPeer::new("127.0.0.1:0", addr, false, 0x1E00 + i))
        .collect();
    let mut second = RawPeer::new("127.0.0.2:0", addr, false, 0x2E00);
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && !second.conn.is_established() {
        first.iter_mut().for_each(RawPeer::pump);
        second.pump();
        thread::sleep(Duration::from_millis(2));
    }
    // The third from 127.0.0.1 keeps sending HELLOs: give it a few more.
    let more = Instant::now() + Duration::from_millis(700);
    while Instant::now() < more {
        first.iter_mut().for_each(RawPeer::pump);
        second.pump();
        thread::sleep(Duration::from_millis(5));
    }
    assert!(second.conn.is_established(), "127.0.0.2 was refused");
    let first_in = first.iter().filter(|p| p.conn.is_established()).count();
    assert_eq!(first_in, 2, "127.0.0.1 got more than its limit");
    assert_eq!(opened.try_iter().count(), 3);
    let stats = server.stats().unwrap();
    assert!(stats.refused_per_ip >= 1, "{stats:?}");
    assert_eq!(stats.refused_sessions, 0);
    server.stop_timeout(Duration::from_secs(1)).unwrap();
}

/// A regression test: `RudpStats::add` skipped the estimates, so a handle's stats (a sum)
/// said srtt 0 and loss 0 whatever the session measured.
#[test]
fn the_handles_stats_carry_the_rtt_and_loss_estimates() {
    let (server, _server_notes) = util::reporting_server(RudpConfig::default(), true);
    let link = |seed| LinkConfig {
        loss: 0.1,
        delay: Duration::from_millis(5),
        seed,
        ..LinkConfig::default()
    };
    let relay = UdpRelay::start(server.local_addr(), link(17), link(18)).unwrap();
    let (handler, notes) = Reporter::new(false);
    let client = RudpClient::builder()
        .server_key(server.public_key().unwrap())
        .connect(relay.local_addr(), handler)
        .unwrap();
    assert_eq!(next_note(&notes, WAIT), Note::Open);
    for i in 0..300u32 {
        client.send(&[i as u8; 1000], Delivery::Ordered).unwrap();
    }
    for i in 0..300u32 {
        assert_eq!(next_note(&notes, WAIT), Note::Message(vec![i as u8; 1000]));
    }
    let stats = client.stats().unwrap();
    assert_eq!(stats.sessions, 1);
    assert!(
        stats.srtt >= Duration::from_millis(10) && stats.srtt < Duration::from_secs(1),
        "a 10 ms round trip: {stats:?}"
    );
    assert_eq!(stats.srtt_max, stats.srtt, "one session: its own");
    assert!(stats.loss_estimate > 0.0, "10 % loss measured: {stats:?}");
    let server_stats = server.stats().unwrap();
    assert_eq!(server_stats.sessions, 1);
    assert!(
        server_stats.srtt >= Duration::from_millis(10),
        "{server_stats:?}"
    );
    client.stop().wait().unwrap();
    relay.stop();
    server.stop_timeout(Duration::from_secs(1)).unwrap();
}
