//! Counters users read: a server's WebSocket counters (sessions, data messages each way,
//! closes by kind, opens that failed) and one session's through its handle.

mod util;

use std::io::{Read, Write};
use std::time::Duration;

use tungstenite::Message;

const TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn the_server_counts_messages_and_closes_by_kind_and_a_handle_its_sessions() {
    let (server, _) = util::echo_server(1024 * 1024);
    let addr = server.local_addr();
    let mut client = util::blocking_client(addr);
    for i in 0..5 {
        client.send(Message::text(format!("message {i}"))).unwrap();
        assert!(client.read().unwrap().is_text());
    }
    let sessions = server.sessions();
    assert_eq!(sessions.len(), 1);
    let session = sessions[0].stats();
    assert_eq!((session.messages_in, session.messages_out), (5, 5));
    assert!(session.tcp.bytes_in > 5 * 9 && session.tcp.bytes_out > 5 * 9);

    // The peer closes with a close frame; a second peer sends invalid UTF-8 (1007); a bad
    // upgrade (no key) never opens.
    client.close(None).unwrap();
    while client.read().is_ok() {}
    drop(client);
    let mut bad = util::blocking_client(addr);
    bad.send(Message::Frame(
        tungstenite::protocol::frame::Frame::message(
            vec![0xff, 0xfe],
            tungstenite::protocol::frame::coding::OpCode::Data(
                tungstenite::protocol::frame::coding::Data::Text,
            ),
            true,
        ),
    ))
    .unwrap();
    while bad.read().is_ok() {}
    drop(bad);
    let mut refused = std::net::TcpStream::connect(addr).unwrap();
    refused.set_read_timeout(Some(TIMEOUT)).unwrap();
    refused
        .write_all(
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        )
        .unwrap();
    let _ = refused.read_to_end(&mut Vec::new());
    drop(refused);
    assert!(
        ark_testkit::wait_until(TIMEOUT, || {
            let s = server.stats();
            (s.closed_by_peer, s.closed_bad_input, s.opens_failed) == (1, 1, 1)
        }),
        "{:?}",
        server.stats()
    );
    let stats = server.stats();
    assert_eq!(stats.sessions_opened, 2);
    assert_eq!((stats.messages_in, stats.messages_out), (5, 5));
    assert_eq!(stats.closed_local + stats.closed_abnormal, 0);
    assert_eq!(server.tcp_stats().sessions_total, 3);
    server.stop().wait().unwrap();
}
