//! ark's "answer later" types in async code: `Pending` and `Stopping` awaited on a tokio
//! runtime (tokio is a dev-dependency only; ark assumes no runtime), a dropped `Pending`
//! cancels its request, and dropping a server handle inside a task returns at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_http::{HttpAgent, HttpRequest, HttpServer, Origin, Responder, Router};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn pending_answers_and_stops_are_awaited_on_a_tokio_runtime() {
    let router = Router::new().post("/echo", |req, res| {
        res.body(req.body());
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let origin = Origin::http(server.local_addr());
    let agent = HttpAgent::builder().build().unwrap();
    runtime().block_on(async {
        // Two requests in flight at once from one task, awaited together.
        let first = agent.send(&origin, HttpRequest::post("/echo", "one"));
        let second = agent.send(&origin, HttpRequest::post("/echo", "two"));
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert_eq!((first.status, &first.body[..]), (200, &b"one"[..]));
        assert_eq!(second.body, b"two");
        agent.stop().await.unwrap();
        server.stop().await.unwrap();
    });
}

#[test]
fn a_dropped_pending_cancels_its_request_and_a_dropped_server_does_not_block_the_task() {
    let held: Arc<Mutex<Vec<Responder>>> = Arc::default();
    let keep = held.clone();
    let router = Router::new().get("/hold", move |_, res| {
        keep.lock().unwrap().push(res.defer());
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let origin = Origin::http(server.local_addr());
    let agent = HttpAgent::builder().build().unwrap();
    let pending = agent.send(&origin, HttpRequest::get("/hold"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while held.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(agent.connections(&origin), 1);
    // A future given up (a timeout around it, a select that took another branch): the
    // request is cancelled and its connection, whose answer will never be read, closed.
    drop(pending);
    while agent.connections(&origin) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(agent.connections(&origin), 0, "the connection is closed");

    // A client that holds its connection open: a graceful stop waits for its end of stream up
    // to the close timeout (10 s by default). Dropping the handle inside a task only signals.
    let _idle = std::net::TcpStream::connect(server.local_addr()).unwrap();
    while server.tcp_stats().sessions_open == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        server.tcp_stats().sessions_open,
        1,
        "the idle connection is served"
    );
    let started = Instant::now();
    runtime().block_on(async move {
        drop(server);
        drop(agent);
    });
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "dropping took {:?}",
        started.elapsed()
    );
}
