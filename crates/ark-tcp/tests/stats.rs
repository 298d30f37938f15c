//! Counters users read: one session's own (bytes and messages each way, queued) through its
//! handle, and the server's closes counted by kind.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ark_tcp::{TcpHandler, TcpServer, TcpSession};

struct Echo;

impl TcpHandler for Echo {
    fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
        let _ = session.send(message);
    }
}

/// Writes `count` length-prefixed messages of `len` bytes and reads their echoes.
fn exchange(stream: &mut TcpStream, count: usize, len: usize) {
    let mut frame = (len as u32).to_be_bytes().to_vec();
    frame.resize(4 + len, 7);
    for _ in 0..count {
        stream.write_all(&frame).unwrap();
    }
    let mut echoed = vec![0u8; count * frame.len()];
    stream.read_exact(&mut echoed).unwrap();
}

#[test]
fn a_sessions_handle_counts_its_traffic_and_the_server_counts_closes_by_kind() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .idle_timeout(Some(Duration::from_millis(200)))
        .start(|_| Echo)
        .unwrap();
    let mut client = TcpStream::connect(server.local_addr()).unwrap();
    exchange(&mut client, 10, 100);
    let sessions = server.sessions();
    assert_eq!(sessions.len(), 1);
    // A handle's counters are as of the end of the session's last turn: the echoes can reach
    // us before that turn has published them.
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        sessions[0].stats().messages_out == 10
    }));
    let session = sessions[0].stats();
    assert_eq!((session.messages_in, session.messages_out), (10, 10));
    assert_eq!((session.bytes_in, session.bytes_out), (1040, 1040));
    assert_eq!(session.queued_bytes, 0);
    // One session ends by the peer's close, one by the idle timeout, one by a reset.
    drop(client);
    let idle = TcpStream::connect(server.local_addr()).unwrap();
    let reset = TcpStream::connect(server.local_addr()).unwrap();
    socket2::SockRef::from(&reset)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        server.stats().sessions_total == 3
    }));
    drop(reset);
    // The idle session's close: the server's end of stream after the timeout, then ours.
    let mut idle = idle;
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        idle.read(&mut [0u8; 16]).unwrap(),
        0,
        "the server ends the idle stream"
    );
    drop(idle);
    assert!(
        ark_testkit::wait_until(Duration::from_secs(10), || {
            let stats = server.stats();
            (
                stats.closed_by_peer,
                stats.closed_reset,
                stats.closed_timeout,
            ) == (1, 1, 1)
        }),
        "{:?}",
        server.stats()
    );
    let stats = server.stats();
    assert_eq!(
        stats.closed_local + stats.closed_bad_input + stats.closed_panicked,
        0
    );
    server.stop().wait().unwrap();
}
