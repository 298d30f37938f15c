//! A server's drain (`TcpServerHandle::drain`): no new connections, every session told
//! (`on_drain`) and still served until its peer goes, what is left stopped at the deadline and
//! counted. Clients are blocking std sockets speaking the default 4-byte length prefix.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_tcp::{StopReport, TcpHandler, TcpServer, TcpSession};

const BYE: &[u8] = b"server draining: finish and go";

/// Echoes; tells its peer to go when the server drains (and counts the goodbyes).
struct DrainingEcho {
    told: Arc<AtomicU64>,
}

impl TcpHandler for DrainingEcho {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        session.send(message).expect("echo queue has room");
    }
    fn on_drain(&mut self, session: &mut TcpSession<'_>) {
        session.send(BYE).expect("goodbye queue has room");
        self.told.fetch_add(1, Ordering::SeqCst);
    }
}

fn write_frame(stream: &mut TcpStream, payload: &[u8]) {
    let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(payload);
    stream.write_all(&frame).unwrap();
}

/// The next frame, or `None` at the end of the stream.
fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0; 4];
    match stream.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => return None,
        Err(e) => panic!("reading a frame: {e}"),
    }
    let mut payload = vec![0; u32::from_be_bytes(len) as usize];
    stream.read_exact(&mut payload).unwrap();
    Some(payload)
}

/// What one client saw.
#[derive(Debug, Default)]
struct Run {
    sent: u64,
    echoed: u64,
    told_to_go: bool,
}

/// Sends numbered messages with `window` in flight until the server says to go (or 30 s),
/// then waits for every echo, ends its side and reads to the server's end of stream.
fn client(addr: SocketAddr, window: u64, started: Arc<AtomicU64>) -> Run {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut run = Run::default();
    let until = Instant::now() + Duration::from_secs(30);
    while !run.told_to_go && Instant::now() < until {
        while run.sent - run.echoed < window {
            write_frame(&mut stream, &run.sent.to_be_bytes());
            run.sent += 1;
        }
        let frame = read_frame(&mut stream).expect("the server ended while echoing");
        if frame == BYE {
            run.told_to_go = true;
            continue;
        }
        assert_eq!(frame, run.echoed.to_be_bytes(), "echo out of order");
        run.echoed += 1;
        if run.echoed == 100 {
            started.fetch_add(1, Ordering::SeqCst);
        }
    }
    while run.echoed < run.sent {
        let frame = read_frame(&mut stream).expect("an echo was lost in the drain");
        assert_eq!(frame, run.echoed.to_be_bytes(), "echo out of order");
        run.echoed += 1;
    }
    stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_frame(&mut stream), None, "bytes after the last echo");
    run
}

#[test]
fn a_drain_under_load_answers_every_message_and_cuts_nothing() {
    let told = Arc::new(AtomicU64::new(0));
    let t = told.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| DrainingEcho { told: t.clone() })
        .unwrap();
    let addr = server.local_addr();
    let started = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..16)
        .map(|_| {
            let started = started.clone();
            std::thread::spawn(move || client(addr, 8, started))
        })
        .collect();
    assert!(
        ark_testkit::wait_until(Duration::from_secs(20), || started.load(Ordering::SeqCst)
            == 16),
        "16 clients under way"
    );
    let draining = server.drain(Duration::from_secs(20));
    let report = draining.report().unwrap();
    let runs: Vec<Run> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    assert_eq!(report, StopReport::default(), "every session finished");
    assert_eq!(told.load(Ordering::SeqCst), 16);
    for run in &runs {
        assert!(run.told_to_go, "{run:?}");
        assert_eq!(run.sent, run.echoed, "{run:?}");
    }
    // The listener closed at the drain's start.
    assert!(TcpStream::connect(addr).is_err(), "connected after a drain");
}

/// Echoes, and says goodbye when stopped; ignores the drain.
struct Stubborn;

impl TcpHandler for Stubborn {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        session.send(message).expect("echo queue has room");
    }
    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        session.send(b"stopped").expect("goodbye queue has room");
    }
}

#[test]
fn a_drain_stops_at_its_deadline_the_sessions_still_open_and_counts_them() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Stubborn)
        .unwrap();
    let mut stays = TcpStream::connect(server.local_addr()).unwrap();
    stays
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write_frame(&mut stays, b"ping");
    assert_eq!(read_frame(&mut stays).unwrap(), b"ping");
    let begun = Instant::now();
    let draining = server.drain(Duration::from_millis(300));
    // Still served in the drain.
    write_frame(&mut stays, b"still there");
    assert_eq!(read_frame(&mut stays).unwrap(), b"still there");
    let reader = std::thread::spawn(move || {
        let got = read_frame(&mut stays);
        // The stop's graceful close: its goodbye, then the end of the stream once we end ours.
        stays.shutdown(std::net::Shutdown::Write).unwrap();
        (got, read_frame(&mut stays))
    });
    let report = draining.report().unwrap();
    assert!(begun.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        report,
        StopReport {
            undrained: 1,
            forced: 0
        }
    );
    let (goodbye, end) = reader.join().unwrap();
    assert_eq!(goodbye.as_deref(), Some(&b"stopped"[..]));
    assert_eq!(end, None);
}
