//! A WebSocket server's accept limits reach ark-tcp's listener: the backlog is the listening
//! socket's (read back from the kernel; Linux) and `max_sessions` resets connections past it
//! until one closes.

use ark_ws::{Message, WsHandler, WsServer, WsSession};

struct Quiet;

impl WsHandler for Quiet {
    fn on_message(&mut self, _: &mut WsSession<'_>, _: Message) {}
}

#[cfg(target_os = "linux")]
#[test]
fn the_backlog_reaches_the_listener() {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .backlog(41)
        .start(|_| Quiet)
        .unwrap();
    assert_eq!(ark_testkit::listen_backlog_of(server.local_addr()), Ok(41));
    server.stop().wait().unwrap();
}

#[test]
fn connections_past_max_sessions_are_reset_until_one_closes() {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .max_sessions(Some(2))
        .start(|_| Quiet)
        .unwrap();
    let checked = ark_testkit::check_max_sessions(server.local_addr(), 2, || {
        server.tcp_stats().sessions_open
    });
    assert_eq!(checked, Ok(()));
    let stats = server.tcp_stats();
    assert_eq!(stats.refused_sessions, 1, "{stats:?}");
    server.stop().wait().unwrap();
}
