//! The router as an axum user expects it, over real sockets: bad routes refused when added
//! (each case by name), the method helpers, `Allow` listing HEAD with GET, middleware that sees
//! every answer (refusals through the `refused` hook, deferred answers with their real status,
//! state from `before` to `after`), typed parameters and JSON bodies.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ark_http::{HttpConfig, HttpServer, Responder, RouteError, Router};

/// Sends `bytes` (the last request says `connection: close`), reads until the server closes.
fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes()
}

fn panic_message(route: impl FnOnce() -> Router + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(route).expect_err("the route is refused");
    payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default()
}

/// A method and pattern, and the refusal expected.
type Case = (&'static str, &'static str, fn(&RouteError) -> bool);

#[test]
fn each_bad_route_is_refused_when_added_naming_the_pattern() {
    let cases: [Case; 8] = [
        ("GET", "/a/*rest/b", |e| {
            matches!(e, RouteError::WildcardNotLast { .. })
        }),
        ("GET", "items/:id", |e| {
            matches!(e, RouteError::NoLeadingSlash { .. })
        }),
        ("GET", "/users/:id/posts/:id", |e| {
            matches!(e, RouteError::DuplicateParam { .. })
        }),
        ("GET POST", "/x", |e| {
            matches!(e, RouteError::BadMethod { .. })
        }),
        ("GET", "/a//b", |e| {
            matches!(e, RouteError::EmptySegment { .. })
        }),
        ("GET", "/file.{ext}", |e| {
            matches!(e, RouteError::PartialCapture { .. })
        }),
        ("GET", "/:", |e| {
            matches!(e, RouteError::BadCaptureName { .. })
        }),
        ("GET", "/users/{id", |e| {
            matches!(e, RouteError::PartialCapture { .. })
        }),
    ];
    for (method, pattern, expected) in cases {
        let error = Router::new()
            .try_route(method, pattern, |_, _| {})
            .unwrap_err();
        assert!(expected(&error), "{method} {pattern}: {error:?}");
        let message = panic_message(move || Router::new().route(method, pattern, |_, _| {}));
        assert!(
            message.contains(pattern) || message.contains(method),
            "{message}"
        );
    }
    // The same route twice (whatever the parameter's name) could never be reached.
    let twice = Router::new()
        .get("/users/:id", |_, _| {})
        .try_route("GET", "/users/{user}", |_, _| {})
        .unwrap_err();
    assert!(matches!(twice, RouteError::Duplicate { .. }), "{twice:?}");
    // The other framework's syntax is accepted and means the same.
    let router = Router::new().get("/items/{id}/{*rest}", |req, res| {
        res.body(format!(
            "{} {}",
            req.param("id").unwrap(),
            req.param("rest").unwrap()
        ));
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let answer = exchange(server.local_addr(), &get("/items/7/a/b"));
    assert!(answer.ends_with("7 a/b"), "{answer}");
    server.stop().wait().unwrap();
}

#[test]
fn method_helpers_route_and_405_lists_head_with_get() {
    let router = Router::new()
        .get("/r", |_, res| {
            res.body("get");
        })
        .put("/r", |_, res| {
            res.body("put");
        })
        .delete("/r", |_, res| {
            res.body("delete");
        })
        .patch("/r", |_, res| {
            res.body("patch");
        })
        .options("/r", |_, res| {
            res.body("options");
        })
        .head("/h", |_, res| {
            res.header("x-head", "own");
        });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let addr = server.local_addr();
    for method in ["PUT", "DELETE", "PATCH", "OPTIONS"] {
        let request = format!("{method} /r HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let answer = exchange(addr, request.as_bytes());
        assert!(answer.ends_with(&method.to_ascii_lowercase()), "{answer}");
    }
    let head = exchange(
        addr,
        b"HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(head.contains("x-head: own"), "{head}");
    let post = exchange(
        addr,
        b"POST /r HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    assert!(
        post.contains("allow: GET, HEAD, PUT, DELETE, PATCH, OPTIONS\r\n"),
        "{post}"
    );
    server.stop().wait().unwrap();
}

#[test]
fn middleware_sees_refusals_deferred_answers_and_state_from_before() {
    let refused: Arc<Mutex<Vec<u16>>> = Arc::default();
    let seen: Arc<Mutex<Vec<(String, u16, bool)>>> = Arc::default();
    let held: Arc<Mutex<Vec<Responder>>> = Arc::default();
    let (refused_log, seen_log, keep) = (refused.clone(), seen.clone(), held.clone());
    let router = Router::new()
        .get("/now", |_, res| {
            res.status(201);
        })
        .get("/later/:id", move |_, res| {
            keep.lock().unwrap().push(res.defer());
        })
        .before(|_, res| {
            res.set_state(Instant::now());
            true
        })
        .after(move |req, res| {
            let timed = res.state::<Instant>().is_some();
            let route = format!("{} {}", req.path(), req.param("id").unwrap_or("-"));
            seen_log
                .lock()
                .unwrap()
                .push((route, res.status_code(), timed));
            res.header("x-seen", "yes");
        })
        .refused(move |error, res| {
            refused_log.lock().unwrap().push(error.status());
            res.header("x-refused", "yes");
        });
    let config = HttpConfig {
        request_timeout: Duration::from_millis(300),
        ..HttpConfig::default()
    };
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .config(config)
        .start(router)
        .unwrap();
    let addr = server.local_addr();
    assert!(exchange(addr, &get("/now")).contains("x-seen: yes"));
    let bad = exchange(
        addr,
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert!(
        bad.starts_with("HTTP/1.1 400") && bad.contains("x-refused: yes"),
        "{bad}"
    );
    let slow = exchange(addr, b"GET /now HTTP/1.1\r\nHost: x\r\n");
    assert!(slow.starts_with("HTTP/1.1 408"), "{slow}");
    // A deferred answer passes `after` when it is given, with its own status.
    let answering = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(10);
        while held.lock().unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let responder = held.lock().unwrap().pop().expect("a deferred request");
        responder.respond(|res| {
            res.status(202).body("done");
        });
    });
    let later = exchange(addr, &get("/later/9"));
    answering.join().unwrap();
    assert!(
        later.starts_with("HTTP/1.1 202") && later.contains("x-seen: yes"),
        "{later}"
    );
    server.stop().wait().unwrap();
    assert_eq!(*refused.lock().unwrap(), [400, 408]);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("/now -".to_string(), 201, true),
            ("/later/9 9".to_string(), 202, true)
        ]
    );
}

#[test]
fn typed_parameters_answer_400_naming_the_parameter() {
    let sum = Arc::new(AtomicU64::new(0));
    let total = sum.clone();
    let router = Router::new().get("/add/:n", move |req, res| match req.param_as::<u64>("n") {
        Ok(n) => {
            total.fetch_add(n, Ordering::SeqCst);
            res.body("ok");
        }
        Err(e) => {
            res.reject(&e);
        }
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let addr = server.local_addr();
    assert!(exchange(addr, &get("/add/40")).ends_with("ok"));
    let bad = exchange(addr, &get("/add/forty"));
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
    assert!(
        bad.contains("route parameter \"n\" = \"forty\" is not a valid u64"),
        "{bad}"
    );
    assert_eq!(sum.load(Ordering::SeqCst), 40);
    server.stop().wait().unwrap();
}
