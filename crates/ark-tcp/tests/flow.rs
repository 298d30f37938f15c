//! Backpressure and graceful close: nothing queued is lost, nothing spins.

mod util;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ark_tcp::{CloseReason, SendError, TcpClient, TcpHandler, TcpServer, TcpSession};

const TIMEOUT: Duration = Duration::from_secs(30);
const CHUNK: usize = 64 * 1024;

/// A raw client socket with a small receive buffer (set before connecting).
fn small_buffer_client(addr: SocketAddr) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(16 * 1024).unwrap();
    socket.connect(&addr.into()).unwrap();
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream
}

/// Sends 64 KiB frames until the queue is full, again on every `on_writable`, up to `total`.
struct Flooder {
    chunk: Vec<u8>,
    total: u64,
    sent: u64,
    fulls: Arc<AtomicU64>,
    writables: Arc<AtomicU64>,
}

impl Flooder {
    fn fill(&mut self, session: &mut TcpSession<'_>) {
        while self.sent < self.total {
            match session.send(&self.chunk) {
                Ok(()) => self.sent += 1,
                Err(SendError::Full { .. }) => {
                    self.fulls.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Err(e) => panic!("unexpected send error: {e}"),
            }
        }
    }
}

impl TcpHandler for Flooder {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        self.fill(session);
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_writable(&mut self, session: &mut TcpSession<'_>) {
        self.writables.fetch_add(1, Ordering::SeqCst);
        self.fill(session);
    }
}

#[test]
fn a_slow_reader_gets_full_then_writable_without_spinning() {
    const TOTAL: u64 = 96; // 6 MiB
    let fulls = Arc::new(AtomicU64::new(0));
    let writables = Arc::new(AtomicU64::new(0));
    let (f, w) = (fulls.clone(), writables.clone());
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .send_limit(1024 * 1024)
        .high_watermark(1024 * 1024)
        .low_watermark(256 * 1024)
        .socket_buffers(Some(32 * 1024), None)
        .start(move |_| Flooder {
            chunk: vec![0x5a; CHUNK],
            total: TOTAL,
            sent: 0,
            fulls: f.clone(),
            writables: w.clone(),
        })
        .unwrap();
    let mut reader = small_buffer_client(server.local_addr());
    // The reader does not read: the sender fills its queue and the sockets, then must wait.
    assert!(ark_testkit::wait_until(TIMEOUT, || fulls
        .load(Ordering::SeqCst)
        >= 1));
    std::thread::sleep(Duration::from_millis(200));
    let writables_before = writables.load(Ordering::SeqCst);
    let cpu_before = ark_testkit::process_cpu_seconds().expect("process CPU clock");
    let wall = Instant::now();
    std::thread::sleep(Duration::from_millis(500));
    let cpu = ark_testkit::process_cpu_seconds().expect("process CPU clock") - cpu_before;
    let share = cpu / wall.elapsed().as_secs_f64();
    assert!(
        share < 0.05,
        "blocked sender used {:.1}% CPU",
        share * 100.0
    );
    assert_eq!(
        writables.load(Ordering::SeqCst),
        writables_before,
        "no writable callbacks while blocked"
    );
    assert!(
        server.stats().send_queue_bytes > 0,
        "data is waiting in the queue"
    );

    // Now read everything: the queue drains and on_writable lets the sender go on.
    let expected = TOTAL * (CHUNK as u64 + 4);
    let mut got = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    while got < expected {
        let n = reader.read(&mut buf).unwrap();
        assert!(n > 0, "stream ended after {got} of {expected} bytes");
        got += n as u64;
    }
    assert_eq!(got, expected);
    assert!(
        writables.load(Ordering::SeqCst) >= 1,
        "on_writable followed the drain"
    );
    drop(reader);
    server.stop().wait().unwrap();
}

/// Sends `count` numbered 1 KiB messages on open, then closes at once.
struct SendThenClose {
    count: u64,
    closed: Arc<AtomicU64>,
}

impl TcpHandler for SendThenClose {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        let mut body = vec![0u8; 1024];
        for seq in 0..self.count {
            body[..8].copy_from_slice(&seq.to_be_bytes());
            session.send(&body).unwrap();
        }
        session.close();
        assert_eq!(session.send(b"late"), Err(SendError::Closed));
    }
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
    fn on_close(&mut self, reason: &CloseReason) {
        assert_eq!(*reason, CloseReason::Local);
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

/// Counts numbered messages and checks their order.
#[derive(Clone, Default)]
struct Count {
    received: Arc<AtomicU64>,
    out_of_order: Arc<AtomicU64>,
}

impl TcpHandler for Count {
    fn on_message(&mut self, _: &mut TcpSession<'_>, message: &[u8]) {
        let seq = u64::from_be_bytes(message[..8].try_into().unwrap());
        if seq != self.received.fetch_add(1, Ordering::SeqCst) {
            self.out_of_order.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn graceful_close_delivers_everything_queued_before_it() {
    let count = Count::default();
    let c = count.clone();
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(move |_| Count {
            received: c.received.clone(),
            out_of_order: c.out_of_order.clone(),
        })
        .unwrap();
    let closed = Arc::new(AtomicU64::new(0));
    let client = TcpClient::builder()
        .connect(
            server.local_addr(),
            SendThenClose {
                count: 5_000,
                closed: closed.clone(),
            },
        )
        .unwrap();
    assert!(
        ark_testkit::wait_until(TIMEOUT, || closed.load(Ordering::SeqCst) == 1),
        "client closed"
    );
    assert_eq!(count.received.load(Ordering::SeqCst), 5_000);
    assert_eq!(count.out_of_order.load(Ordering::SeqCst), 0);
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn graceful_server_stop_delivers_everything_queued() {
    let fulls = Arc::new(AtomicU64::new(0));
    let writables = Arc::new(AtomicU64::new(0));
    let (f, w) = (fulls.clone(), writables.clone());
    const TOTAL: u64 = 48; // 3 MiB, most of it still queued when stop is called
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .socket_buffers(Some(32 * 1024), None)
        .start(move |_| Flooder {
            chunk: vec![0x33; CHUNK],
            total: TOTAL,
            sent: 0,
            fulls: f.clone(),
            writables: w.clone(),
        })
        .unwrap();
    let mut reader = small_buffer_client(server.local_addr());
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .frames_out
        == TOTAL));
    assert!(server.stats().send_queue_bytes > 0);
    let stopper = std::thread::spawn(move || server.stop().wait());
    let mut got = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    assert_eq!(
        got,
        TOTAL * (CHUNK as u64 + 4),
        "every queued byte arrived before the end of stream"
    );
    drop(reader);
    stopper.join().unwrap().unwrap();
}
