//! The axum bridge example: an axum service on tokio whose handlers await an ark-tcp backend's
//! replies and an ark-http agent's answers; many requests at once, each with its own answer,
//! and a backend that goes away answered 502.

#[path = "../examples/axum_bridge.rs"]
mod axum_bridge;

use std::sync::Arc;
use std::time::Duration;

use ark_http::{HttpAgent, HttpRequest, Origin};
use axum_bridge::{Bridge, app, backends};

#[test]
fn axum_handlers_await_ark_backends() {
    let backends = backends().unwrap();
    let bridge = Arc::new(Bridge::connect(&backends).unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let service = Origin::http(listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, app(bridge)).await });
    // A client of the service (ark's agent, from this thread): 40 requests in flight at once.
    let client = HttpAgent::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let pending: Vec<_> = (0..20)
        .flat_map(|i| {
            [
                (format!("/upper/word{i}"), format!("WORD{i}")),
                (format!("/greet/user{i}"), format!("hello user{i}")),
            ]
        })
        .map(|(path, want)| (client.send(&service, HttpRequest::get(path)), want))
        .collect();
    for (answer, want) in pending {
        let answer = answer.wait().unwrap();
        assert_eq!(
            (answer.status, String::from_utf8(answer.body).unwrap()),
            (200, want)
        );
    }
    // The TCP backend goes away: the call in flight or the next one ends, answered 502.
    backends.tcp.stop().wait().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        let status = client
            .send(&service, HttpRequest::get("/upper/gone"))
            .wait()
            .unwrap()
            .status;
        if status != 200 || std::time::Instant::now() > deadline {
            break status;
        }
    };
    assert_eq!(status, 502);
    client.stop().wait().unwrap();
    backends.http.stop().wait().unwrap();
    runtime.shutdown_timeout(Duration::from_secs(5));
}
