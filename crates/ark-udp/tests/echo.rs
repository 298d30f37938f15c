//! Echo over IPv4 and IPv6, batched and unbatched; many peers; session open and expiry;
//! SO_REUSEPORT shards.

mod util;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use ark_reactor::{IoModel, ReactorConfig, ReactorPool};
use ark_udp::{CloseReason, Steering, UdpClient, UdpServer, bind_for_shard};
use util::{Echo, Pinger};

const TIMEOUT: Duration = Duration::from_secs(20);

fn echo(addr: &str, batching: bool) {
    let addr: SocketAddr = addr.parse().unwrap();
    let server = UdpServer::builder()
        .bind(addr)
        .batching(batching, 32)
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = UdpClient::builder()
        .batching(batching, 8)
        .connect(server.local_addr(), Pinger::new(2_000, 8, 512, tx))
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        2_000,
        "{addr} batching={batching}"
    );
    // Counters are published at the end of the turn that delivered the last echo.
    assert!(ark_testkit::wait_until(TIMEOUT, || client
        .stats()
        .datagrams_in
        == 2_000));
    client.stop().wait().unwrap();
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .datagrams_sent
        == 2_000));
    let server_stats = server.stats();
    server.stop().wait().unwrap();
    assert_eq!(server_stats.sessions_opened, 1);
    assert_eq!(server_stats.datagrams_in, 2_000);
    if !batching {
        // One syscall per datagram each way (plus the final WouldBlock reads).
        assert!(server_stats.sends >= 2_000);
    }
}

#[test]
fn echo_over_ipv4_and_ipv6_batched_and_unbatched() {
    for batching in [true, false] {
        echo("127.0.0.1:0", batching);
        echo("[::1]:0", batching);
    }
}

/// A peer that sends one datagram at a time puts the server's socket on `recvfrom`; a burst
/// after that is still all echoed in order, and read in batches again once a second datagram
/// shows they queue up.
#[test]
fn a_burst_after_single_exchanges_is_read_in_batches() {
    const SINGLE: usize = 50;
    const BURST: usize = 100; // within the server socket's default receive buffer
    let pool = Arc::new(
        ReactorPool::start(IoModel::Shared { threads: 1 }, ReactorConfig::default()).unwrap(),
    );
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .pool(pool.clone())
        .start(|_| Echo::default())
        .unwrap();
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket2::SockRef::from(&peer)
        .set_recv_buffer_size(4 << 20)
        .unwrap();
    peer.set_read_timeout(Some(TIMEOUT)).unwrap();
    peer.connect(server.local_addr()).unwrap();
    let mut buf = [0u8; 64];
    for i in 0..SINGLE as u32 {
        peer.send(&i.to_be_bytes()).unwrap();
        assert_eq!(peer.recv(&mut buf).unwrap(), 4);
        assert_eq!(buf[..4], i.to_be_bytes());
    }
    // The reactor's thread is held while the burst arrives, so it queues up whole.
    let (held, gate) = mpsc::channel::<()>();
    let (entered, is_held) = mpsc::channel();
    pool.handles()[0].post(move |_| {
        let _ = entered.send(());
        let _ = gate.recv_timeout(TIMEOUT);
    });
    is_held.recv_timeout(TIMEOUT).unwrap();
    // Counted now that the turns of the single exchanges are over (their replies may leave
    // before a turn's last receive, the one that finds the socket empty, is counted).
    let before = server.stats().receives;
    for i in 0..BURST as u32 {
        peer.send(&i.to_be_bytes()).unwrap();
    }
    drop(held);
    for i in 0..BURST as u32 {
        assert_eq!(peer.recv(&mut buf).unwrap(), 4);
        assert_eq!(buf[..4], i.to_be_bytes(), "echo {i} in order");
    }
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .datagrams_in
        == (SINGLE + BURST) as u64));
    // One datagram per `recvfrom` would take more receives than datagrams; two `recvfrom`,
    // then batches of 32. The portable path has no batched receive: one per datagram.
    let receives = server.stats().receives - before;
    if ark_reactor::IO_PATH == "portable" {
        assert!(receives >= BURST as u64, "{receives} receives for {BURST}");
        return;
    }
    assert!(
        receives <= 2 + BURST as u64 / 32 + 1,
        "{receives} receives for a burst of {BURST}"
    );
    server.stop().wait().unwrap();
    Arc::try_unwrap(pool).ok().unwrap().stop().unwrap();
}

#[test]
fn one_hundred_peers_open_sessions_that_expire() {
    let echo = Echo::default();
    let e = echo.clone();
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .session_expiry(Some(Duration::from_millis(150)))
        // 100 peers open with 2 datagrams each at once: 200 datagrams on the server's socket,
        // and more as echoes come back. The kernel charges each datagram its buffer, not its
        // payload: a default 208 KiB receive buffer holds 256 datagrams of 64 B (measured on
        // Linux 6.18), so it could overflow while a loaded machine's server thread waits to
        // run, and a Pinger whose datagram was dropped never finishes (a clean-clone CI run's
        // portable stage timed out here once).
        .socket_buffers(None, Some(2 << 20))
        .start(move |_| e.clone())
        .unwrap();
    let pool = Arc::new(
        ReactorPool::start(IoModel::Shared { threads: 1 }, ReactorConfig::default()).unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let clients: Vec<_> = (0..100)
        .map(|_| {
            UdpClient::builder()
                .pool(pool.clone())
                .connect(server.local_addr(), Pinger::new(20, 2, 64, tx.clone()))
                .unwrap()
        })
        .collect();
    for _ in 0..100 {
        assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), 20);
    }
    assert_eq!(
        echo.opened.load(Ordering::SeqCst),
        100,
        "one session per peer"
    );
    // Silence: every session expires.
    assert!(ark_testkit::wait_until(TIMEOUT, || echo
        .closes
        .lock()
        .unwrap()
        .len()
        == 100));
    assert!(
        echo.closes
            .lock()
            .unwrap()
            .iter()
            .all(|r| *r == CloseReason::Expired(Duration::from_millis(150)))
    );
    assert_eq!(server.stats().sessions_closed, 100);
    for c in clients {
        c.stop().wait().unwrap();
    }
    server.stop().wait().unwrap();
}

/// Where a sharded server cannot be (no `SO_REUSEPORT`: Windows) it is refused by name.
fn refused_without_reuseport(builder: ark_udp::UdpServerBuilder) -> bool {
    if cfg!(unix) {
        return false;
    }
    let refused = builder.start(|_| Echo::default()).map(|_| ()).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::Unsupported);
    assert!(refused.to_string().contains("SO_REUSEPORT"), "{refused}");
    true
}

#[test]
fn sharded_server_spreads_peers_over_reuseport_sockets() {
    let sharded = || {
        UdpServer::builder()
            .bind("127.0.0.1:0")
            .io_model(IoModel::Sharded { reactors: 2 })
    };
    if refused_without_reuseport(sharded()) {
        return;
    }
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .io_model(IoModel::Sharded { reactors: 2 })
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let clients: Vec<_> = (0..40)
        .map(|_| {
            UdpClient::builder()
                .connect(server.local_addr(), Pinger::new(10, 1, 32, tx.clone()))
                .unwrap()
        })
        .collect();
    for _ in 0..40 {
        assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), 10);
    }
    let shards = server.shard_stats();
    assert_eq!(shards.len(), 2);
    assert_eq!(shards.iter().map(|s| s.sessions_opened).sum::<u64>(), 40);
    assert!(
        shards.iter().all(|s| s.sessions_opened > 0),
        "peers on both shards: {shards:?}"
    );
    for c in clients {
        c.stop().wait().unwrap();
    }
    server.stop().wait().unwrap();
}

/// With `Steering::PeerPort` each peer reaches the shard its source port names, over IPv4
/// and IPv6, plain sockets and ark clients given a socket from `bind_for_shard`.
#[test]
fn peer_port_steering_sends_each_peer_to_the_shard_its_port_names() {
    let steered = || {
        UdpServer::builder()
            .bind("127.0.0.1:0")
            .io_model(IoModel::Sharded { reactors: 2 })
            .steering(Steering::PeerPort)
    };
    if refused_without_reuseport(steered()) {
        return;
    }
    if !Steering::PeerPort.is_available() {
        // The portable path has no steering program: a sharded server refuses it by name.
        let refused = UdpServer::builder()
            .bind("127.0.0.1:0")
            .io_model(IoModel::Sharded { reactors: 2 })
            .steering(Steering::PeerPort)
            .start(|_| Echo::default())
            .map(|_| ())
            .unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::Unsupported);
        assert!(
            refused.to_string().contains("Steering::PeerPort"),
            "{refused}"
        );
        return;
    }
    for local in ["127.0.0.1:0", "[::1]:0"] {
        const SHARDS: usize = 4;
        let server = UdpServer::builder()
            .bind(local)
            .io_model(IoModel::Sharded { reactors: SHARDS })
            .steering(Steering::PeerPort)
            .start(|_| Echo::default())
            .unwrap();
        let local: SocketAddr = local.parse().unwrap();
        let mut buf = [0u8; 16];
        // Three plain peers per shard, each placed by its port.
        for i in 0..3 * SHARDS {
            let peer = bind_for_shard(local, i % SHARDS, SHARDS).unwrap();
            let port = peer.local_addr().unwrap().port();
            assert_eq!(Steering::shard_of(port, SHARDS), i % SHARDS);
            peer.set_read_timeout(Some(TIMEOUT)).unwrap();
            peer.send_to(b"hi", server.local_addr()).unwrap();
            assert_eq!(peer.recv(&mut buf).unwrap(), 2);
        }
        // And an ark client on shard 1's port.
        let (tx, rx) = mpsc::channel();
        let client = UdpClient::builder()
            .socket(bind_for_shard(local, 1, SHARDS).unwrap())
            .connect(server.local_addr(), Pinger::new(5, 1, 32, tx))
            .unwrap();
        assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), 5);
        let opened: Vec<u64> = server
            .shard_stats()
            .iter()
            .map(|s| s.sessions_opened)
            .collect();
        assert_eq!(opened, [3, 4, 3, 3], "{local}: sessions per shard");
        client.stop().wait().unwrap();
        server.stop().wait().unwrap();
    }
}

#[test]
fn bind_for_shard_refuses_what_it_cannot_do() {
    let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
    assert!(bind_for_shard(local, 4, 4).is_err(), "no shard 4 of 4");
    assert!(
        bind_for_shard("127.0.0.1:9".parse().unwrap(), 0, 2).is_err(),
        "a fixed port"
    );
}

/// Sends "ping" to `to` on open (if given); answers "ping" with "pong"; reports a "pong".
struct PingPong {
    to: Option<SocketAddr>,
    got_pong: mpsc::Sender<SocketAddr>,
}

impl ark_udp::UdpHandler for PingPong {
    fn on_open(&mut self, session: &mut ark_udp::UdpSession<'_>) {
        if let Some(to) = self.to {
            session.send_to(to, b"ping").unwrap();
        }
    }
    fn on_message(&mut self, session: &mut ark_udp::UdpSession<'_>, datagram: &[u8]) {
        match datagram {
            b"ping" => session.send(b"pong").unwrap(), // replies to the sender
            b"pong" => self.got_pong.send(session.peer_addr()).unwrap(),
            _ => {}
        }
    }
}

#[test]
fn cast_sockets_send_to_any_address_and_reply_to_senders() {
    let (tx, rx) = mpsc::channel();
    let b = ark_udp::UdpCast::builder()
        .bind("127.0.0.1:0")
        .start(PingPong {
            to: None,
            got_pong: tx.clone(),
        })
        .unwrap();
    let a = ark_udp::UdpCast::builder()
        .bind("127.0.0.1:0")
        .start(PingPong {
            to: Some(b.local_addr()),
            got_pong: tx,
        })
        .unwrap();
    assert_eq!(
        rx.recv_timeout(TIMEOUT).unwrap(),
        b.local_addr(),
        "A ({}) got B's pong",
        a.local_addr()
    );
    a.stop().wait().unwrap();
    b.stop().wait().unwrap();
}
