//! Echo round trips: every codec, IPv4 and IPv6, 100 concurrent sessions, a 16 MiB frame,
//! coalesced writes.

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use ark_frame::{ArkDgram, Delimiter, Endian, ExactSize, LengthPrefix, PrefixWidth};
use ark_reactor::{IoModel, ReactorConfig, ReactorPool};
use ark_tcp::{Framing, TcpClient, TcpServer};
use util::{Echo, PingResult, Pinger};

const TIMEOUT: Duration = Duration::from_secs(20);

fn echo_with<C: Framing>(addr: SocketAddr, codec: C, size: fn(u64) -> usize) {
    let server = TcpServer::builder()
        .bind(addr)
        .framing(codec.clone())
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .framing(codec)
        .connect(server.local_addr(), Pinger::new(300, 8, size, tx))
        .unwrap();
    let result = rx.recv_timeout(TIMEOUT);
    assert_eq!(
        result,
        Ok(PingResult::Done { echoed: 300 }),
        "{addr} {}",
        std::any::type_name::<C>()
    );
    client.stop().wait().unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .frames_in
        == 300));
    server.stop().wait().unwrap();
}

fn varied(seq: u64) -> usize {
    ((seq * 37) % 1000) as usize
}

fn exact(_: u64) -> usize {
    64
}

#[test]
fn echo_with_every_codec_over_ipv4_and_ipv6() {
    for addr in ["127.0.0.1:0", "[::1]:0"] {
        let addr: SocketAddr = addr.parse().unwrap();
        echo_with(addr, LengthPrefix::default(), varied);
        echo_with(
            addr,
            LengthPrefix::new(PrefixWidth::U16, Endian::Little),
            varied,
        );
        echo_with(
            addr,
            LengthPrefix::new(PrefixWidth::U64, Endian::Big),
            varied,
        );
        echo_with(addr, LengthPrefix::new(PrefixWidth::U8, Endian::Big), |s| {
            (s % 200) as usize
        });
        echo_with(addr, ArkDgram::new(), |s| ((s * 997) % 70_000) as usize);
        echo_with(addr, Delimiter::new(b"\r\n").unwrap(), varied);
        echo_with(addr, ExactSize::new(64).unwrap(), exact);
    }
}

#[test]
fn one_hundred_concurrent_sessions() {
    let pool = Arc::new(
        ReactorPool::start(IoModel::Sharded { reactors: 2 }, ReactorConfig::default()).unwrap(),
    );
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .io_model(IoModel::Shared { threads: 2 })
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let clients: Vec<_> = (0..100)
        .map(|_| {
            TcpClient::builder()
                .pool(pool.clone())
                .connect(server.local_addr(), Pinger::new(50, 4, varied, tx.clone()))
                .unwrap()
        })
        .collect();
    for _ in 0..100 {
        assert_eq!(
            rx.recv_timeout(TIMEOUT).unwrap(),
            PingResult::Done { echoed: 50 }
        );
    }
    // Counters are published at the end of each turn, just after the echoes were written.
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .frames_in
        == 5_000));
    assert_eq!(server.stats().sessions_total, 100);
    for c in clients {
        c.stop().wait().unwrap();
    }
    server.stop().wait().unwrap();
}

#[test]
fn a_sixteen_mib_frame_round_trips() {
    fn big(_: u64) -> usize {
        16 * 1024 * 1024
    }
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .connect(server.local_addr(), Pinger::new(2, 1, big, tx))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        PingResult::Done { echoed: 2 }
    );
    client.stop().wait().unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || server.stats().bytes_in
        == 2 * (16 * 1024 * 1024 + 4)));
    let stats = server.stats();
    server.stop().wait().unwrap();
    // Read straight into the receive buffer: far fewer reads than 64 KiB pieces would take.
    assert!(stats.reads < 2 * 256 + 20, "{} reads", stats.reads);
}

#[test]
fn window_sixteen_coalesces_writes() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder()
        .connect(server.local_addr(), Pinger::new(1_000, 16, |_| 32, tx))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        PingResult::Done { echoed: 1_000 }
    );
    assert!(ark_testkit::wait_until(TIMEOUT, || client
        .stats()
        .frames_out
        == 1_000));
    let client_stats = client.stats();
    client.stop().wait().unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .frames_out
        == 1_000));
    let server_stats = server.stats();
    server.stop().wait().unwrap();
    assert_eq!(client_stats.frames_out, 1_000);
    assert!(
        client_stats.writes < 1_000,
        "client: {} writes for 1,000 messages",
        client_stats.writes
    );
    assert!(
        server_stats.writes < 1_000,
        "server: {} writes for 1,000 messages",
        server_stats.writes
    );
}

/// Sends a byte stream in raw pieces and collects the echoed bytes.
struct RawStream {
    total: usize,
    got: Vec<u8>,
    buffers: Arc<std::sync::Mutex<ark_tcp::SocketBuffers>>,
    done: mpsc::Sender<Vec<u8>>,
}

impl ark_tcp::TcpHandler for RawStream {
    fn on_open(&mut self, session: &mut ark_tcp::TcpSession<'_>) {
        *self.buffers.lock().unwrap() = session.socket_buffers();
        // Alternate `send` and `append_raw`: the first append meets an empty queue (the buffers
        // are swapped), the later ones a non-empty one (appended); the byte stream must come
        // back whole and in order either way.
        let mut own = Vec::with_capacity(4096);
        for (i, piece) in util::payload(1, self.total).chunks(1000).enumerate() {
            if i % 2 == 0 {
                own.extend_from_slice(piece);
                session.append_raw(&mut own).unwrap();
                assert!(
                    own.is_empty(),
                    "append_raw leaves the caller's buffer empty"
                );
            } else {
                session.send(piece).unwrap();
            }
        }
    }
    fn on_message(&mut self, session: &mut ark_tcp::TcpSession<'_>, message: &[u8]) {
        self.got.extend_from_slice(message);
        if self.got.len() == self.total {
            let _ = self.done.send(std::mem::take(&mut self.got));
            session.close();
        }
    }
}

#[test]
fn raw_framing_echoes_the_byte_stream_and_buffer_sizes_are_readable() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .framing(ark_frame::Raw::new())
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let buffers = Arc::new(std::sync::Mutex::new(ark_tcp::SocketBuffers::default()));
    let client = TcpClient::builder()
        .framing(ark_frame::Raw::new())
        .socket_buffers(Some(64 * 1024), Some(64 * 1024))
        .connect(
            server.local_addr(),
            RawStream {
                total: 200_000,
                got: Vec::new(),
                buffers: buffers.clone(),
                done: tx,
            },
        )
        .unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), util::payload(1, 200_000));
    let ark_tcp::SocketBuffers { send, recv } = *buffers.lock().unwrap();
    // Linux doubles the requested size; other kernels may round it.
    assert!(
        send >= 64 * 1024 && recv >= 64 * 1024,
        "actual buffers {send} / {recv}"
    );
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
