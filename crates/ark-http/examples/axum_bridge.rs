//! ark inside a tokio application: an axum service whose handlers call an ark-tcp backend
//! (request/reply over one connection, awaited) and an HTTP origin through ark-http's
//! `HttpAgent` (its `Pending` awaited), on the same tokio runtime as axum.
//!
//! Run: `cargo run --release -p ark-http --example axum_bridge` (starts both backends and the
//! service on 127.0.0.1, prints the service's address; Enter stops).

use std::sync::Arc;

use ark_http::{HttpAgent, HttpRequest, HttpServer, HttpServerHandle, Origin, Router as ArkRouter};
use ark_tcp::{
    Replies, TcpClient, TcpClientHandle, TcpHandler, TcpServer, TcpServerHandle, TcpSession,
};
use axum::extract::{Path, State};
use axum::http::StatusCode;

/// The backends the service calls: a TCP service (upper-cases each request) and an HTTP one.
pub struct Backends {
    /// The TCP backend.
    pub tcp: TcpServerHandle,
    /// The HTTP backend (`GET /greet/:name`).
    pub http: HttpServerHandle,
}

struct Upper;
impl TcpHandler for Upper {
    fn on_message(&mut self, session: &mut TcpSession<'_>, request: &[u8]) {
        let _ = session.send(&request.to_ascii_uppercase());
    }
}

/// Starts both backends on 127.0.0.1.
pub fn backends() -> std::io::Result<Backends> {
    let tcp = TcpServer::builder().bind("127.0.0.1:0").start(|_| Upper)?;
    let router = ArkRouter::new().get("/greet/:name", |req, res| {
        res.body(format!("hello {}", req.param("name").unwrap_or("?")));
    });
    let http = HttpServer::builder().bind("127.0.0.1:0").start(router)?;
    Ok(Backends { tcp, http })
}

/// Replies from the TCP backend, matched to requests in order.
struct ToRequest(Arc<Replies<Vec<u8>>>);
impl TcpHandler for ToRequest {
    fn on_message(&mut self, _: &mut TcpSession<'_>, reply: &[u8]) {
        self.0.reply(reply.to_vec());
    }
    fn on_close(&mut self, _: &ark_tcp::CloseReason) {
        self.0.fail_all();
    }
}

/// What the axum handlers share: the TCP backend's connection and the agent.
pub struct Bridge {
    tcp: TcpClientHandle,
    replies: Arc<Replies<Vec<u8>>>,
    agent: HttpAgent,
    origin: Origin,
}

impl Bridge {
    /// Connects to `backends` (one TCP connection, waited for; the agent's per origin, reused).
    ///
    /// # Errors
    /// The TCP backend did not accept a connection within 10 s, or a pool could not start.
    pub fn connect(backends: &Backends) -> std::io::Result<Bridge> {
        let replies = Arc::new(Replies::default());
        let tcp =
            TcpClient::builder().connect(backends.tcp.local_addr(), ToRequest(replies.clone()))?;
        // The service is no use before its backend: a request that came sooner would get 502
        // ("not connected").
        if !tcp.wait_connected(std::time::Duration::from_secs(10)) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the TCP backend did not accept a connection within 10 s",
            ));
        }
        let agent = HttpAgent::builder().build()?;
        let origin = Origin::http(backends.http.local_addr());
        Ok(Bridge {
            tcp,
            replies,
            agent,
            origin,
        })
    }
}

type Failed = (StatusCode, String);

fn bad_gateway(e: impl std::fmt::Display) -> Failed {
    (StatusCode::BAD_GATEWAY, e.to_string())
}

async fn upper(
    State(bridge): State<Arc<Bridge>>,
    Path(text): Path<String>,
) -> Result<String, Failed> {
    let reply = bridge
        .replies
        .request(|| bridge.tcp.send(text.as_bytes()))
        .map_err(bad_gateway)?;
    let reply = reply.await.map_err(bad_gateway)?;
    String::from_utf8(reply).map_err(bad_gateway)
}

async fn greet(
    State(bridge): State<Arc<Bridge>>,
    Path(name): Path<String>,
) -> Result<String, Failed> {
    let request = HttpRequest::get(format!("/greet/{name}"));
    let answer = bridge
        .agent
        .send(&bridge.origin, request)
        .await
        .map_err(bad_gateway)?;
    String::from_utf8(answer.body).map_err(bad_gateway)
}

/// The axum service over `bridge`.
pub fn app(bridge: Arc<Bridge>) -> axum::Router {
    axum::Router::new()
        .route("/upper/{text}", axum::routing::get(upper))
        .route("/greet/{name}", axum::routing::get(greet))
        .with_state(bridge)
}

#[allow(dead_code)] // the test drives `app`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backends = backends()?;
    let bridge = Arc::new(Bridge::connect(&backends)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("http://{}/upper/hello and /greet/ark; Enter stops", listener.local_addr()?);
        let serve = axum::serve(listener, app(bridge));
        tokio::select! {
            result = serve => result,
            _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())) => Ok(()),
        }
    })?;
    Ok(())
}
