//! `HttpAgent` against ark's server over loopback: connections reused per origin and bounded,
//! answers matched to their requests, deadlines, cancellation (queued and in flight), a server
//! that closes, a refused connection, https.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_http::{
    ConnectionError, HttpAgent, HttpRequest, HttpServer, HttpServerHandle, Origin, RequestError,
    Responder, Router,
};

/// A server with `POST /echo`, `GET /close` (answers with `connection: close`) and `GET
/// /hold` (answers only when the test releases it, through the returned list).
fn server() -> (HttpServerHandle, Arc<Mutex<Vec<Responder>>>) {
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    let router = Router::new()
        .post("/echo", |req, res| {
            res.body(req.body());
        })
        .get("/close", |_, res| {
            res.header("connection", "close").body("bye");
        })
        .get("/hold", move |_, res| {
            keep.lock().unwrap().push(res.defer());
        });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    (server, held)
}

fn agent(per_host: usize) -> HttpAgent {
    HttpAgent::builder()
        .max_connections_per_host(per_host)
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[test]
fn sequential_requests_reuse_one_connection() {
    let (server, _) = server();
    let agent = agent(4);
    let origin = Origin::http(server.local_addr());
    for i in 0..20 {
        let body = format!("request {i}");
        let answer = agent
            .send(&origin, HttpRequest::post("/echo", body.clone()))
            .wait()
            .unwrap();
        assert_eq!((answer.status, answer.body), (200, body.into_bytes()));
    }
    assert_eq!(agent.connections(&origin), 1);
    assert_eq!(
        server.tcp_stats().sessions_total,
        1,
        "one connection served all"
    );
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn concurrent_requests_share_at_most_the_limit_of_connections_and_each_gets_its_own_answer() {
    let (server, _) = server();
    let agent = agent(3);
    let origin = Origin::http(server.local_addr());
    let pending: Vec<_> = (0..60)
        .map(|i| {
            let body = format!("request {i}");
            (
                body.clone(),
                agent.send(&origin, HttpRequest::post("/echo", body)),
            )
        })
        .collect();
    for (body, pending) in pending {
        let answer = pending.wait().unwrap();
        assert_eq!(answer.body, body.into_bytes());
    }
    assert!(agent.connections(&origin) <= 3);
    let opened = server.tcp_stats().sessions_total;
    assert!((1..=3).contains(&opened), "{opened} connections");
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_request_past_its_deadline_times_out_and_the_next_one_gets_a_fresh_connection() {
    let (server, held) = server();
    let agent = agent(1);
    let origin = Origin::http(server.local_addr());
    let started = Instant::now();
    let late = agent
        .send(
            &origin,
            HttpRequest::get("/hold").timeout(Duration::from_millis(200)),
        )
        .wait();
    let waited = started.elapsed();
    assert_eq!(late, Err(RequestError::Timeout(Duration::from_millis(200))));
    assert!(waited >= Duration::from_millis(200), "{waited:?}");
    // The timed-out connection is closed: an answer to it now would be for no one.
    held.lock().unwrap().drain(..).for_each(|r| {
        r.respond(|res| {
            res.body("too late");
        })
    });
    let answer = agent
        .send(&origin, HttpRequest::post("/echo", "next"))
        .wait()
        .unwrap();
    assert_eq!(answer.body, b"next");
    assert_eq!(server.tcp_stats().sessions_total, 2);
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_queued_request_waits_for_the_connection_and_keeps_its_own_deadline() {
    let (server, held) = server();
    let agent = agent(1);
    let origin = Origin::http(server.local_addr());
    let first = agent.send(&origin, HttpRequest::get("/hold"));
    // Queued behind the held request on the only connection.
    let mut queued = agent.send(&origin, HttpRequest::post("/echo", "queued"));
    std::thread::sleep(Duration::from_millis(100));
    assert!(queued.try_result().is_none(), "waits for the connection");
    while held.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(5));
    }
    held.lock().unwrap().pop().unwrap().respond(|res| {
        res.body("released");
    });
    assert_eq!(first.wait().unwrap().body, b"released");
    assert_eq!(queued.wait().unwrap().body, b"queued");
    assert_eq!(server.tcp_stats().sessions_total, 1);
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn cancelling_a_queued_request_ends_it_at_once_and_an_in_flight_one_closes_its_connection() {
    let (server, held) = server();
    let agent = agent(1);
    let origin = Origin::http(server.local_addr());
    let in_flight = agent.send(&origin, HttpRequest::get("/hold"));
    let queued = agent.send(&origin, HttpRequest::post("/echo", "never sent"));
    queued.cancel();
    assert_eq!(queued.wait(), Err(RequestError::Cancelled));
    while held.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let canceller = in_flight.canceller();
    std::thread::spawn(move || canceller.cancel())
        .join()
        .unwrap();
    assert_eq!(in_flight.wait(), Err(RequestError::Cancelled));
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.connections(&origin) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(agent.connections(&origin), 0, "the connection is closed");
    // Cancelling after the answer changes nothing.
    let done = agent.send(&origin, HttpRequest::post("/echo", "kept"));
    let canceller = done.canceller();
    assert_eq!(done.wait().unwrap().body, b"kept");
    canceller.cancel();
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_connection_the_server_closes_is_not_reused() {
    let (server, _) = server();
    let agent = agent(2);
    let origin = Origin::http(server.local_addr());
    for _ in 0..3 {
        let answer = agent
            .send(&origin, HttpRequest::get("/close"))
            .wait()
            .unwrap();
        assert_eq!(answer.body, b"bye");
        assert_eq!(answer.header("Connection"), Some(&b"close"[..]));
    }
    let answer = agent
        .send(&origin, HttpRequest::post("/echo", "after"))
        .wait()
        .unwrap();
    assert_eq!(answer.body, b"after");
    assert_eq!(
        server.tcp_stats().sessions_total,
        4,
        "a new connection after each close"
    );
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn a_refused_connection_fails_every_request_with_the_cause() {
    // A port with no listener: bind one, note it, close it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let agent = agent(2);
    let origin = Origin::http(addr);
    let results: Vec<_> = (0..5)
        .map(|_| agent.send(&origin, HttpRequest::get("/")))
        .map(|p| p.wait())
        .collect();
    for result in results {
        // Typed: a caller matches on the cause; the message says it plainly.
        let error = result.unwrap_err();
        assert_eq!(
            error,
            RequestError::Connection(ConnectionError::Refused(addr))
        );
        assert_eq!(
            error.to_string(),
            format!("could not connect: connection refused by {addr}")
        );
    }
    assert_eq!(agent.connections(&origin), 0);
}

#[test]
#[cfg(feature = "tls")]
fn callbacks_and_https_origins() {
    let pki = ark_tls::Pki::generate(&["localhost"]).unwrap();
    let router = Router::new().post("/echo", |req, res| {
        res.body(req.body());
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .tls(pki.server_tls().unwrap())
        .start(router)
        .unwrap();
    let origin = Origin::https(server.local_addr(), "localhost");
    let plain_agent = agent(1);
    assert_eq!(
        plain_agent
            .send(&origin, HttpRequest::post("/echo", "x"))
            .wait(),
        Err(RequestError::NoTls("localhost".into()))
    );
    let agent = HttpAgent::builder()
        .tls(pki.client_tls().unwrap())
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..10 {
        let tx = tx.clone();
        agent.send_with(
            &origin,
            HttpRequest::post("/echo", format!("{i}")),
            move |r| {
                let _ = tx.send((i, r.map(|a| a.body)));
            },
        );
    }
    let mut answers: Vec<_> = (0..10)
        .map(|_| rx.recv_timeout(Duration::from_secs(20)).unwrap())
        .collect();
    answers.sort_by_key(|(i, _)| *i);
    for (i, body) in answers {
        assert_eq!(body.unwrap(), format!("{i}").into_bytes());
    }
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
#[cfg(feature = "tls")]
fn a_request_whose_connection_is_still_being_made_is_cancelled_at_once_or_times_out() {
    // A server that takes the TCP connection and never answers the TLS handshake: the
    // agent's connection stays in the making.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = Origin::https(silent.local_addr().unwrap(), "localhost");
    let pki = ark_tls::Pki::generate(&["localhost"]).unwrap();
    let agent = HttpAgent::builder()
        .tls(pki.client_tls().unwrap())
        .build()
        .unwrap();
    let pending = agent.send(&origin, HttpRequest::get("/"));
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    pending.cancel();
    assert_eq!(pending.wait(), Err(RequestError::Cancelled));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    // The request's deadline bounds the connect too.
    let started = Instant::now();
    let late = agent
        .send(
            &origin,
            HttpRequest::get("/").timeout(Duration::from_millis(300)),
        )
        .wait();
    assert_eq!(late, Err(RequestError::Timeout(Duration::from_millis(300))));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(silent);
    agent.stop().wait().unwrap();
}
