//! A TCP server's accept limits: the backlog reaches the listening socket (read back from the
//! kernel; Linux) and `max_sessions` resets the connection past it until one closes.

use ark_tcp::{TcpHandler, TcpServer, TcpSession};

struct Quiet;

impl TcpHandler for Quiet {
    fn on_message(&mut self, _: &mut TcpSession<'_>, _: &[u8]) {}
}

#[cfg(target_os = "linux")]
#[test]
fn the_backlog_reaches_the_listener() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .backlog(37)
        .start(|_| Quiet)
        .unwrap();
    assert_eq!(ark_testkit::listen_backlog_of(server.local_addr()), Ok(37));
    let default = TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Quiet)
        .unwrap();
    let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        ark_testkit::listen_backlog_of(default.local_addr()),
        Ok(somaxconn.min(1024)),
        "the default: 1024 (capped by net.core.somaxconn)"
    );
    server.stop().wait().unwrap();
    default.stop().wait().unwrap();
}

#[test]
fn connections_past_max_sessions_are_reset_until_one_closes() {
    let server = TcpServer::builder()
        .bind("127.0.0.1:0")
        .max_sessions(Some(3))
        .start(|_| Quiet)
        .unwrap();
    let checked =
        ark_testkit::check_max_sessions(server.local_addr(), 3, || server.stats().sessions_open);
    assert_eq!(checked, Ok(()));
    let stats = server.stats();
    assert_eq!(stats.refused_sessions, 1, "{stats:?}");
    assert_eq!(
        stats.sessions_total, 4,
        "the refused one never opened: {stats:?}"
    );
    server.stop().wait().unwrap();
}
