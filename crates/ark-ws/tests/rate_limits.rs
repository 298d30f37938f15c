//! Rate limits of WebSocket sessions: ark-ws passes them to its TCP sessions (whose sans-IO
//! core has the deterministic tests, ark-tcp's tests/rate_limits.rs) and counts bytes on the
//! wire. Here, over sockets: a fan-out where one session is limited from its handler beside
//! an unlimited one, lifted from its handle; a read limit set on the builder holding a client
//! that sends as fast as it can; a server's group limits changed and refused.

mod util;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ark_ws::{
    Message, RateLimit, RateLimitError, RateLimits, WsHandler, WsServer, WsServerHandle, WsSession,
};

const RATE: u64 = 100_000;
const MESSAGE: usize = 4096;
const COUNT: usize = 200;
const TIMEOUT: Duration = Duration::from_secs(10);
/// At most the bytes of the server's 101 response (129 with tungstenite's headers).
const UPGRADE_RESPONSE_MAX: u64 = 256;

/// On a text message, sends `COUNT` binary messages of `MESSAGE` bytes; "limited" first
/// limits the session's writes to `RATE`.
struct Fanout;

impl WsHandler for Fanout {
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        let Message::Text(text) = message else { return };
        if text.as_str() == "limited" {
            session.set_rate_limits(RateLimits {
                write: Some(RateLimit::new(RATE)),
                read: None,
            });
        }
        for _ in 0..COUNT {
            session.send(Message::binary(vec![1u8; MESSAGE])).unwrap();
        }
    }
}

fn fanout_server() -> WsServerHandle {
    WsServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Fanout)
        .unwrap()
}

/// Asks for the fan-out with `ask`, reads for `for_` (or until all arrived); returns the
/// payload bytes received and the client, still open.
fn receive(
    addr: SocketAddr,
    ask: &str,
    for_: Duration,
) -> (usize, tungstenite::WebSocket<std::net::TcpStream>) {
    let mut client = util::blocking_client(addr);
    client
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    client.send(Message::text(ask)).unwrap();
    let (start, mut received) = (Instant::now(), 0);
    while start.elapsed() < for_ && received < COUNT * MESSAGE {
        match client.read() {
            Ok(message) => received += message.len(),
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(tungstenite::Error::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("client: {e}"),
        }
    }
    (received, client)
}

#[test]
fn a_session_limited_from_its_handler_keeps_its_rate_beside_an_unlimited_one() {
    let server = fanout_server();
    let addr = server.local_addr();
    let fast = std::thread::spawn(move || receive(addr, "unlimited", TIMEOUT).0);
    let span = Duration::from_secs(2);
    let (limited, mut client) = receive(addr, "limited", span);
    let fast = fast.join().unwrap();
    assert_eq!(
        fast,
        COUNT * MESSAGE,
        "the unlimited session got everything"
    );
    // Payload within the wire bytes allowed: a burst (16 KiB) and the rate for the span, and
    // the reader's own lateness (one 50 ms read timeout) at most.
    let allowed = RATE as f64 * (span.as_secs_f64() + 0.05) + 16_384.0;
    assert!(
        (limited as f64) <= allowed,
        "limited: {limited} payload bytes in {span:?}, allowed {allowed}"
    );
    assert!(
        limited as f64 >= 0.5 * RATE as f64 * span.as_secs_f64(),
        "limited: only {limited} bytes in {span:?}"
    );
    let limited_session = server
        .sessions()
        .into_iter()
        .find(|s| s.stats().tcp.queued_bytes > 0)
        .expect("the limited session has frames waiting");
    let stats = limited_session.stats();
    // The rate over a whole second of the session's window, the first one included: a burst
    // and the rate, and the 101 response (129 B), which went out in that first window before
    // the handler set the limit (seen: 116,968 B out over its first 1.0045 s). Without it
    // the bound failed 2 runs in 40 at e60f3be, by 3 to 16 B/s.
    assert!(
        stats.tcp.bytes_out_per_second <= RATE + 16_384 + UPGRADE_RESPONSE_MAX,
        "bytes_out_per_second {} over the limit and a burst",
        stats.tcp.bytes_out_per_second
    );
    assert!(
        stats
            .tcp
            .queue_delay
            .is_some_and(|d| d > Duration::from_secs(1)),
        "the queue's delay at the rate: {:?}",
        stats.tcp.queue_delay
    );

    // Lifted from the handle: the rest arrives at once.
    limited_session.set_rate_limits(RateLimits::default());
    client.get_ref().set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut rest = 0;
    let start = Instant::now();
    while limited + rest < COUNT * MESSAGE {
        rest += client.read().unwrap().len();
    }
    assert!(start.elapsed() < TIMEOUT);
    drop(client);
    server.stop().wait().unwrap();
}

/// Counts what arrives.
struct Sink;

impl WsHandler for Sink {
    fn on_message(&mut self, _: &mut WsSession<'_>, _: Message) {}
}

#[test]
fn a_read_limit_from_the_builder_holds_a_client_that_sends_as_fast_as_it_can() {
    let limit = RateLimit::new(RATE);
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .rate_limits(RateLimits {
            read: Some(limit),
            write: None,
        })
        .start(|_| Sink)
        .unwrap();
    let addr = server.local_addr();
    // The session's bucket fills from its open, and the upgrade is read under the limit too:
    // the bound counts from before the connection.
    let start = Instant::now();
    let mut client = util::blocking_client(addr);
    client
        .get_ref()
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let span = Duration::from_secs(2);
    // The client writes until its socket is full (the server reads at the limit), for 2 s.
    let mut sent = 0usize;
    while start.elapsed() < span {
        match client.send(Message::binary(vec![2u8; MESSAGE])) {
            Ok(()) => sent += MESSAGE,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(tungstenite::Error::WriteBufferFull(_)) => {}
            Err(e) => panic!("client: {e}"),
        }
    }
    let session = server.sessions().pop().expect("one session");
    let read = session.stats().tcp.bytes_in;
    let elapsed = start.elapsed().as_secs_f64();
    let allowed = RATE as f64 * elapsed + limit.burst as f64;
    assert!(
        (read as f64) <= allowed,
        "read {read} bytes in {elapsed:.2} s, allowed {allowed}"
    );
    assert!(
        read as f64 >= 0.5 * RATE as f64 * span.as_secs_f64(),
        "read only {read} bytes"
    );
    assert!(sent as u64 > read, "the client got ahead of the reads");
    // The peer's end may wait behind megabytes it sent that the session reads at its rate
    // (on Linux it does; under Wine the peer's close resets the connection): the stop's
    // deadline ends the session then, instead of the 30 s close timeout.
    drop(client);
    let report = server
        .stop()
        .report_timeout(Duration::from_millis(500))
        .unwrap();
    assert!(report.forced <= 1, "{report:?}");
}

#[test]
fn group_limits_change_and_a_direction_the_server_was_built_without_is_refused() {
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .group_rate_limits(RateLimits {
            write: Some(RateLimit::new(RATE)),
            read: None,
        })
        .start(|_| Fanout)
        .unwrap();
    assert_eq!(
        server.set_group_rate_limits(RateLimits::both(RATE)),
        Err(RateLimitError::NoGroupLimit { direction: "read" })
    );
    let span = Duration::from_secs(1);
    let addr = server.local_addr();
    let (held, first) = receive(addr, "unlimited", span);
    let allowed = RATE as f64 * (span.as_secs_f64() + 0.05) + 16_384.0;
    assert!(
        (held as f64) <= allowed,
        "group-limited: {held} payload bytes in {span:?}, allowed {allowed}"
    );
    // Lifting the group's write limit lets a new session have everything.
    server.set_group_rate_limits(RateLimits::default()).unwrap();
    let (all, second) = receive(addr, "unlimited", TIMEOUT);
    assert_eq!(all, COUNT * MESSAGE);
    drop((first, second));
    server.stop().wait().unwrap();
}
