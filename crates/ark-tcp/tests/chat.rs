//! The chat example with three clients on ark-tcp's client: broadcast, a leave notice, and a
//! graceful stop that says goodbye.

#[path = "../examples/tcp_chat_server.rs"]
mod chat;

use std::sync::mpsc;
use std::time::Duration;

use ark_tcp::{CloseReason, TcpClient, TcpClientHandle, TcpHandler, TcpSession};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A chat client: what it receives goes to a channel.
struct Listener(mpsc::Sender<String>);

impl TcpHandler for Listener {
    fn on_message(&mut self, _: &mut TcpSession<'_>, message: &[u8]) {
        let _ = self.0.send(String::from_utf8_lossy(message).into_owned());
    }
    fn on_close(&mut self, reason: &CloseReason) {
        let _ = self.0.send(format!("closed: {reason}"));
    }
}

fn join(addr: std::net::SocketAddr) -> (TcpClientHandle, mpsc::Receiver<String>, String) {
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder().connect(addr, Listener(tx)).unwrap();
    assert!(client.wait_connected(TIMEOUT));
    // Its name on the server is its address as the server sees it.
    let name = client.session().unwrap().local_addr().to_string();
    (client, rx, name)
}

/// The next line received, within the timeout.
fn next(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(TIMEOUT).expect("a line within the timeout")
}

#[test]
fn three_members_chat_one_leaves_and_the_stop_says_goodbye() {
    let server = chat::start("127.0.0.1:0").unwrap();
    let addr = server.local_addr();
    let (a, a_rx, a_name) = join(addr);
    // Each join is announced to those already there (once the server has registered them).
    assert!(ark_testkit::wait_until(TIMEOUT, || server.sessions().len() == 1));
    let (b, b_rx, b_name) = join(addr);
    assert_eq!(next(&a_rx), format!("* {b_name} joined"));
    assert!(ark_testkit::wait_until(TIMEOUT, || server.sessions().len() == 2));
    let (c, c_rx, c_name) = join(addr);
    assert_eq!(next(&a_rx), format!("* {c_name} joined"));
    assert_eq!(next(&b_rx), format!("* {c_name} joined"));
    assert!(ark_testkit::wait_until(TIMEOUT, || server.sessions().len() == 3));

    // A message goes to every other member, from any thread.
    a.send(b"hello, room").unwrap();
    assert_eq!(next(&b_rx), format!("{a_name}: hello, room"));
    assert_eq!(next(&c_rx), format!("{a_name}: hello, room"));

    // A member leaves: the others are told.
    c.stop().wait().unwrap();
    assert!(next(&c_rx).starts_with("closed: "));
    assert_eq!(next(&a_rx), format!("* {c_name} left"));
    assert_eq!(next(&b_rx), format!("* {c_name} left"));

    // The server stops: everyone left gets a goodbye, then the end of the connection.
    server.stop().wait().unwrap();
    for rx in [&a_rx, &b_rx] {
        assert_eq!(next(rx), "* the server is stopping: goodbye");
        assert_eq!(next(rx), "closed: peer closed the connection");
    }
    a.stop().wait().unwrap();
    b.stop().wait().unwrap();
    assert!(a_rx.try_recv().is_err() && b_rx.try_recv().is_err() && c_rx.try_recv().is_err());
}
