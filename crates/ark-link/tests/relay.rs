//! The UDP relay over loopback: its counters match what the server and the clients received,
//! each client reaches the server from an address of its own, and the delay is applied.

use std::collections::HashSet;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_link::{LinkConfig, UdpRelay};

/// `socket` with the largest receive buffer the system grants.
fn big_buffers(socket: UdpSocket) -> UdpSocket {
    let socket = socket2::Socket::from(socket);
    let _ = socket.set_recv_buffer_size(4 << 20);
    socket.into()
}

/// An echo server that counts what it got and from whom; stops when `stop` is set.
fn echo_server(
    stop: Arc<AtomicBool>,
) -> (
    std::net::SocketAddr,
    std::thread::JoinHandle<(u64, HashSet<std::net::SocketAddr>)>,
) {
    let socket = big_buffers(UdpSocket::bind("127.0.0.1:0").unwrap());
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let (mut got, mut peers) = (0u64, HashSet::new());
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::SeqCst) {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                got += 1;
                peers.insert(from);
                socket.send_to(&buf[..n], from).unwrap();
            }
        }
        (got, peers)
    });
    (addr, thread)
}

#[test]
fn the_counters_match_what_arrived_on_both_sides() {
    let stop = Arc::new(AtomicBool::new(false));
    let (server, thread) = echo_server(stop.clone());
    let lossy = |seed| LinkConfig {
        loss: 0.1,
        delay: Duration::from_millis(2),
        seed,
        ..LinkConfig::default()
    };
    let relay = UdpRelay::start(server, lossy(1), lossy(2)).unwrap();
    let received = Arc::new(Mutex::new(0u64));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let socket = big_buffers(UdpSocket::bind("127.0.0.1:0").unwrap());
            socket
                .set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            socket
        })
        .collect();
    // Each client reads its echoes as they come, until none came for 300 ms.
    let readers: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, received) = (client.try_clone().unwrap(), received.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while client.recv_from(&mut buf).is_ok() {
                    *received.lock().unwrap() += 1;
                }
            })
        })
        .collect();
    for round in 0..500u32 {
        for client in &clients {
            client
                .send_to(&round.to_be_bytes(), relay.local_addr())
                .unwrap();
        }
        // Paced, so that the test's own sockets (small kernel buffers) drop nothing even
        // on a busy machine: only the link loses datagrams.
        std::thread::sleep(Duration::from_millis(1));
    }
    for reader in readers {
        reader.join().unwrap();
    }
    let counters = relay.stop();
    stop.store(true, Ordering::SeqCst);
    let (server_got, peers) = thread.join().unwrap();
    assert_eq!(counters.upstream.offered, 2000);
    assert_eq!(counters.upstream.delivered, server_got);
    assert_eq!(counters.downstream.offered, server_got);
    assert_eq!(counters.downstream.delivered, *received.lock().unwrap());
    assert_eq!(peers.len(), 4, "one address towards the server per client");
    let loss = counters.upstream.dropped() as f64 / 2000.0;
    assert!((0.06..0.14).contains(&loss), "{loss}");
    assert_eq!(counters.send_errors + counters.refused_clients, 0);
}

#[test]
fn the_delay_is_applied_each_way() {
    let stop = Arc::new(AtomicBool::new(false));
    let (server, thread) = echo_server(stop.clone());
    let slow = LinkConfig {
        delay: Duration::from_millis(30),
        ..LinkConfig::default()
    };
    let relay = UdpRelay::start(server, slow.clone(), slow).unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 16];
    for _ in 0..5 {
        let sent = Instant::now();
        client.send_to(b"ping", relay.local_addr()).unwrap();
        let (n, _) = client.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"ping");
        let rtt = sent.elapsed();
        assert!(rtt >= Duration::from_millis(60), "{rtt:?}");
        assert!(rtt < Duration::from_millis(500), "{rtt:?}");
    }
    drop(relay);
    stop.store(true, Ordering::SeqCst);
    thread.join().unwrap();
}
