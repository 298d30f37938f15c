//! Hostile and unlucky peers over real sockets: each test reproduces a way a peer could make
//! a session lose data, hold memory or hang, and proves it no longer can.

mod util;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use ark_tcp::{CloseReason, TcpHandler, TcpServer, TcpServerHandle, TcpSession, TcpStats};
use util::Echo;

const TIMEOUT: Duration = Duration::from_secs(20);

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream
}

/// Waits until `done(stats)` holds (bounded by [`TIMEOUT`]).
fn wait_for(server: &TcpServerHandle, what: &str, done: impl Fn(&TcpStats) -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !done(&server.stats()) {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {:?}",
            server.stats()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn frame(seq: u32) -> Vec<u8> {
    let mut f = 1024u32.to_be_bytes().to_vec();
    f.extend((0..1024u32).map(|i| (i.wrapping_mul(7) ^ seq) as u8));
    f
}

#[test]
fn a_half_closed_client_gets_every_echo_before_the_end_of_stream() {
    // The client sends everything, shuts down writing, and only then reads: its echoes are
    // still queued on the server when the server sees its end of stream (7.2 MB stays under
    // the 8 MiB high watermark, so the server never stops reading).
    const FRAMES: u32 = 7000; // 7.2 MB of 1 KiB frames
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo::default())
        .unwrap();
    let mut client = connect(server.local_addr());
    for seq in 0..FRAMES {
        client.write_all(&frame(seq)).unwrap();
    }
    client.shutdown(Shutdown::Write).unwrap();
    let mut received = Vec::new();
    client
        .read_to_end(&mut received)
        .expect("the stream ends with a FIN, not a reset");
    assert_eq!(
        received.len(),
        FRAMES as usize * 1028,
        "{} echoes of {FRAMES} arrived; the stream ends at a frame boundary",
        received.len() as f64 / 1028.0
    );
    for (seq, echo) in received.chunks(1028).enumerate() {
        assert!(echo == frame(seq as u32), "echo {seq} differs");
    }
}

#[test]
fn an_announced_length_costs_only_the_bytes_that_arrive() {
    const LIARS: usize = 200;
    let echo = Echo::default();
    let closes = echo.closes.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| echo.clone())
        .unwrap();
    // Each announces a 16 MiB frame (the default maximum) and sends one byte of it.
    let mut liars = Vec::new();
    for _ in 0..LIARS {
        let mut s = connect(server.local_addr());
        s.write_all(&(16u32 * 1024 * 1024).to_be_bytes()).unwrap();
        s.write_all(&[1]).unwrap();
        liars.push(s);
    }
    wait_for(&server, "every liar's 5 bytes", |s| {
        s.bytes_in >= LIARS as u64 * 5
    });
    let held = server.stats().recv_buffer_bytes;
    assert!(
        held <= LIARS as u64 * 4096,
        "{held} bytes of receive buffers for {LIARS} sessions holding 5 bytes each"
    );
    // A well-behaved client is served meanwhile.
    let mut good = connect(server.local_addr());
    good.write_all(&frame(9)).unwrap();
    let mut echo = vec![0; 1028];
    good.read_exact(&mut echo).unwrap();
    assert!(echo == frame(9));
    // When they leave, their buffers go with them.
    drop(liars);
    wait_for(&server, "the liars' sessions to close", |s| {
        s.sessions_open == 1
    });
    assert_eq!(server.stats().recv_buffer_bytes, 0);
    let closes = closes.lock().unwrap();
    assert_eq!(closes.len(), LIARS);
    assert!(
        closes
            .iter()
            .all(|c| *c == CloseReason::EofMidFrame { buffered: 5 }),
        "{:?}",
        closes.first()
    );
}

/// Pushes `total` bytes in 64 KiB frames as soon as it opens, then records how it closed.
struct Pusher {
    total: usize,
    closed: mpsc::Sender<CloseReason>,
}

impl TcpHandler for Pusher {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        let chunk = vec![0x42; 64 * 1024];
        for _ in 0..self.total / chunk.len() {
            session.send(&chunk).expect("room in the queue");
        }
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.closed.send(reason.clone());
    }
}

#[test]
fn a_close_against_a_peer_that_never_reads_ends_by_the_close_timeout() {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .idle_timeout(Some(Duration::from_millis(300)))
        .close_timeout(Duration::from_millis(300))
        .start(move |_| Pusher {
            total: 8 * 1024 * 1024,
            closed: tx.lock().unwrap().clone(),
        })
        .unwrap();
    // Connects, then neither reads nor sends: the idle timeout starts a close that cannot
    // flush 8 MiB into a peer that does not read.
    let silent = connect(server.local_addr());
    let reason = rx.recv_timeout(TIMEOUT).expect("the session closed");
    match reason {
        CloseReason::Unflushed { cause, unsent } => {
            assert_eq!(*cause, CloseReason::IdleTimeout(Duration::from_millis(300)));
            assert!(unsent > 0);
        }
        other => panic!("closed with {other:?}"),
    }
    wait_for(&server, "the session to go", |s| s.sessions_open == 0);
    assert_eq!(server.stats().send_queue_bytes, 0, "the queue was freed");
    assert!(server.stats().aborted_send_bytes > 0);
    drop(silent);
}

#[test]
fn a_frame_that_stalls_mid_way_is_closed_after_the_stall_timeout() {
    let echo = Echo::default();
    let closes = echo.closes.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .stall_timeout(Some(Duration::from_millis(200)))
        .start(move |_| echo.clone())
        .unwrap();
    let mut dripping = connect(server.local_addr());
    dripping.write_all(&[0, 0, 4]).unwrap(); // 3 bytes of a 4-byte header, then nothing
    let mut rest = Vec::new();
    dripping
        .read_to_end(&mut rest)
        .expect("the server ends the stream");
    drop(dripping);
    wait_for(&server, "the session to close", |s| s.sessions_open == 0);
    assert_eq!(
        *closes.lock().unwrap(),
        [CloseReason::FrameStalled {
            buffered: 3,
            after: Duration::from_millis(200)
        }]
    );
}

#[test]
fn stop_honours_its_deadline_with_a_client_that_never_reads() {
    let (tx, _rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .close_timeout(Duration::from_secs(60))
        .start(move |_| Pusher {
            total: 8 * 1024 * 1024,
            closed: tx.lock().unwrap().clone(),
        })
        .unwrap();
    let silent = connect(server.local_addr());
    wait_for(&server, "the push to back up", |s| s.send_queue_bytes > 0);
    let started = Instant::now();
    server.stop_timeout(Duration::from_millis(300)).unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "stop took {took:?} with a 300 ms deadline (the close timeout is 60 s)"
    );
    drop(silent);
}

/// Counts goodbyes sent from `on_stopping`.
struct Polite {
    goodbyes: Arc<AtomicU64>,
}

impl TcpHandler for Polite {
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        if session.send(b"bye").is_ok() {
            self.goodbyes.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn a_graceful_stop_lets_every_session_say_goodbye() {
    let goodbyes = Arc::new(AtomicU64::new(0));
    let g = goodbyes.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| Polite {
            goodbyes: g.clone(),
        })
        .unwrap();
    let mut clients: Vec<TcpStream> = (0..3).map(|_| connect(server.local_addr())).collect();
    wait_for(&server, "three sessions", |s| s.sessions_open == 3);
    let reading = std::thread::spawn(move || {
        clients
            .iter_mut()
            .map(|c| {
                let mut got = Vec::new();
                c.read_to_end(&mut got).unwrap();
                got
            })
            .collect::<Vec<_>>()
    });
    server.stop().wait().unwrap();
    let got = reading.join().unwrap();
    assert_eq!(goodbyes.load(Ordering::SeqCst), 3);
    for bytes in got {
        assert_eq!(
            bytes,
            [0, 0, 0, 3, b'b', b'y', b'e'],
            "a goodbye frame, then a FIN"
        );
    }
}

#[test]
fn a_partial_frames_buffer_is_freed_once_the_session_is_quiet() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo::default())
        .unwrap();
    let mut client = connect(server.local_addr());
    let mut frame = 16_384u32.to_be_bytes().to_vec();
    frame.extend((0..16_384u32).map(|i| i as u8));
    // Half a frame, a pause, the rest: the server keeps the first half in a buffer of its own.
    client.write_all(&frame[..8_000]).unwrap();
    wait_for(&server, "the first half", |s| s.recv_buffer_bytes > 0);
    client.write_all(&frame[8_000..]).unwrap();
    let mut echo = vec![0; frame.len()];
    client.read_exact(&mut echo).unwrap();
    assert!(echo == frame);
    // Emptied, then freed once the session has been quiet for the release delay (20 ms).
    wait_for(&server, "the emptied buffer to be freed", |s| {
        s.recv_buffer_bytes == 0
    });
    assert_eq!(server.stats().sessions_open, 1);
    drop(client);
    server.stop().wait().unwrap();
}
