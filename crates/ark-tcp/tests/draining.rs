//! How a session drains its socket's readiness. On Linux's fast path a short read means the
//! socket is drained: one read per message that arrives alone. On the portable path (Windows,
//! macOS, the BSDs, and Linux built with `ARK_PORTABLE=1`) mio promises another event only after
//! a `WouldBlock`, so the session reads until it sees one: two reads per such message. A
//! session that stopped at a short read there would hang on Windows with data still waiting.

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

#[test]
fn reads_stop_at_a_short_read_only_where_that_drains_the_socket() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo)
        .unwrap();
    let mut client = TcpStream::connect(server.local_addr()).unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let messages = 20u64;
    let mut frame = 100u32.to_be_bytes().to_vec();
    frame.resize(104, 7);
    let mut echo = [0u8; 104];
    // One message at a time, each after the session's turn for the one before has ended:
    // each arrives alone, in one read.
    for _ in 0..messages {
        client.write_all(&frame).unwrap();
        client.read_exact(&mut echo).unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        server.stats().frames_out == messages
    }));
    let reads = server.stats().reads;
    if ark_reactor::SHORT_IO_DRAINS {
        assert!(
            reads <= messages + 2,
            "{reads} reads for {messages} messages"
        );
    } else {
        // Each message's read, then the read that saw `WouldBlock` (the last one may not be
        // counted yet).
        assert!(
            reads >= 2 * messages - 1,
            "{reads} reads for {messages} messages"
        );
    }
    drop(client);
    server.stop().wait().unwrap();
}
