//! The TCP relay over loopback: bytes arrive whole and in order with the link's delay and
//! rate, the end of a stream travels through, and a link that would lose bytes is refused.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use ark_link::{LinkConfig, TcpRelay};

/// An echo server for one connection at a time, until its listener's thread ends.
fn echo_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let mut stream = stream.unwrap();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                loop {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => stream.write_all(&buf[..n]).unwrap(),
                    }
                }
                // Echo the end too.
                let _ = stream.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

#[test]
fn bytes_arrive_in_order_after_the_delay_and_the_end_travels_through() {
    let slow = LinkConfig {
        delay: Duration::from_millis(20),
        jitter: Duration::from_millis(5),
        ..LinkConfig::default()
    };
    let relay = TcpRelay::start(echo_server(), slow.clone(), slow).unwrap();
    let mut client = TcpStream::connect(relay.local_addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    client.write_all(b"hello").unwrap();
    let mut buf = [0u8; 5];
    client.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    let rtt = started.elapsed();
    assert!(rtt >= Duration::from_millis(30), "{rtt:?}");
    // 3 MiB in order through the relay's backpressure (read and write at once).
    let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut writer = client.try_clone().unwrap();
    let sent = data.clone();
    let writing = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    client.read_to_end(&mut back).unwrap();
    writing.join().unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data, "the same bytes in the same order");
    let counters = relay.stop();
    assert_eq!(counters.upstream.delivered_bytes, 5 + (3 << 20));
    assert_eq!(counters.downstream.delivered_bytes, 5 + (3 << 20));
    assert_eq!(
        counters.upstream.dropped() + counters.downstream.dropped(),
        0
    );
}

#[test]
fn the_rate_limits_the_stream() {
    // 80 Mbit/s: 2 MiB take at least 0.2 s on the way up.
    let rated = LinkConfig {
        rate_bits_per_second: Some(80_000_000),
        ..LinkConfig::default()
    };
    let relay = TcpRelay::start(echo_server(), rated, LinkConfig::default()).unwrap();
    let mut client = TcpStream::connect(relay.local_addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let data = vec![7u8; 2 << 20];
    let started = Instant::now();
    let mut writer = client.try_clone().unwrap();
    let writing = std::thread::spawn(move || writer.write_all(&data).unwrap());
    let mut back = vec![0u8; 2 << 20];
    client.read_exact(&mut back).unwrap();
    writing.join().unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(back.iter().all(|b| *b == 7));
}

#[test]
fn a_link_that_would_lose_reorder_or_duplicate_bytes_is_refused() {
    for config in [
        LinkConfig {
            loss: 0.01,
            ..LinkConfig::default()
        },
        LinkConfig {
            reorder: 0.01,
            ..LinkConfig::default()
        },
        LinkConfig {
            duplicate: 0.01,
            ..LinkConfig::default()
        },
    ] {
        let error = TcpRelay::start(echo_server(), config, LinkConfig::default()).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("TCP relay cannot"), "{error}");
    }
}
