//! The graceful-stop example: clients mid-conversation when the drain begins are told, still
//! answered, and leave; nothing they sent goes unanswered and nothing is cut.

#[path = "../examples/tcp_graceful_stop.rs"]
mod example;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;

/// A client that sends `lines` lines, one at a time; once it hears the drain notice it sends
/// no more, and leaves. Tells `ready` after its first answer; returns (sent, answered, told).
fn client(addr: std::net::SocketAddr, ready: mpsc::Sender<()>) -> (u32, u32, bool) {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let (mut sent, mut answered, mut told) = (0, 0, false);
    let mut line = String::new();
    while !told && sent < 100_000 {
        writeln!(writer, "request {sent}").unwrap();
        sent += 1;
        loop {
            line.clear();
            assert!(
                reader.read_line(&mut line).unwrap() > 0,
                "the service ended"
            );
            if line.trim_end().as_bytes() == example::DRAINING {
                told = true;
                continue;
            }
            assert_eq!(line.trim_end(), format!("request {answered}"));
            answered += 1;
            break;
        }
        if answered == 1 {
            let _ = ready.send(());
        }
    }
    (sent, answered, told)
}

#[test]
fn a_drain_answers_every_request_and_cuts_nobody() {
    let server = example::start("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr();
    let (ready, started) = mpsc::channel();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let ready = ready.clone();
            std::thread::spawn(move || client(addr, ready))
        })
        .collect();
    for _ in 0..4 {
        started.recv_timeout(Duration::from_secs(20)).unwrap();
    }
    let report = example::drain(server).unwrap();
    for client in clients {
        let (sent, answered, told) = client.join().unwrap();
        assert!(told);
        assert_eq!(sent, answered);
    }
    assert_eq!(report, ark_tcp::StopReport::default());
}
