//! The retransmitting request client example against a server that drops the first try of
//! every even-numbered request: timers in a UDP handler turn a lossy exchange into a complete
//! one.

#[path = "../examples/udp_request_client.rs"]
mod request_client;

use std::collections::HashSet;
use std::time::Duration;

use ark_udp::{UdpHandler, UdpServer, UdpSession};

/// Echoes, except the first try of every even-numbered request, which it drops (a lossy
/// link).
struct Lossy {
    dropped: HashSet<Vec<u8>>,
}

impl UdpHandler for Lossy {
    fn on_message(&mut self, session: &mut UdpSession<'_>, datagram: &[u8]) {
        let even = datagram.last().is_some_and(|b| b % 2 == 0);
        if even && self.dropped.insert(datagram.to_vec()) {
            return;
        }
        let _ = session.send(datagram);
    }
}

#[test]
fn a_retransmitting_client_gets_every_answer_from_a_lossy_server() {
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Lossy {
            dropped: HashSet::new(),
        })
        .unwrap();
    let (client, outcome) = request_client::start(&server.local_addr().to_string(), 30).unwrap();
    let outcome = outcome.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(outcome.answered, 30);
    assert!(!outcome.gave_up);
    // 15 requests lose their first try: at least 15 retransmissions (more only if an answer
    // was slower than the timeout, on a busy machine).
    assert!(outcome.retransmissions >= 15, "{outcome:?}");
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
