//! HTTP and WebSocket on one port: an ark-http router serves `GET /api/stats` (JSON-ish text)
//! beside `GET /ws`, a WebSocket echo that the route upgrades to (`ark_ws::upgrade`). Over
//! https the same code serves wss.
//!
//! Run: `cargo run --release -p ark-ws --features http --example http_and_ws -- 127.0.0.1:8080`,
//! then `curl http://127.0.0.1:8080/api/stats` and open `ws://127.0.0.1:8080/ws`; Enter stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ark_http::{HttpServer, HttpServerBuilder, HttpServerHandle, Router};
use ark_ws::{CloseCode, Message, ReceivedData, WsClose, WsConfig, WsHandler, WsSession};

/// What the WebSocket sessions did, for the HTTP side to report.
#[derive(Debug, Default)]
pub struct Stats {
    /// Messages echoed.
    pub echoed: AtomicU64,
    /// Sessions closed, with the code of the close they ended with.
    pub closed: std::sync::Mutex<Vec<u16>>,
}

/// A WebSocket echo session that counts. It echoes text and binary messages only, where they
/// were received (`on_data`: no copy until the send): a pong is not echoed (pings are
/// answered by ark-ws), or two such peers would bounce pongs forever.
struct Echo(Arc<Stats>);

impl WsHandler for Echo {
    fn on_data(&mut self, session: &mut WsSession<'_>, data: ReceivedData<'_>) {
        let sent = match data.text() {
            Some(text) => session.send_text(text),
            None => session.send_binary(data.bytes()),
        };
        if sent.is_ok() {
            self.0.echoed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Only pongs (replies to pings this side sent) arrive here: `on_data` takes the rest.
    fn on_message(&mut self, _: &mut WsSession<'_>, _: Message) {}

    fn on_close(&mut self, close: &WsClose) {
        let code = close.code().map_or(1006, CloseCode::get);
        self.0.closed.lock().unwrap().push(code);
    }
}

/// The routes: the API and the WebSocket endpoint, on one router.
pub fn router(stats: Arc<Stats>) -> Router {
    let api = stats.clone();
    Router::new()
        .get("/api/stats", move |_, res| {
            let echoed = api.echoed.load(Ordering::Relaxed);
            res.header("content-type", "application/json")
                .body(format!("{{\"echoed\":{echoed}}}"));
        })
        .get("/ws", move |req, res| {
            let config = WsConfig::default();
            let _ = ark_ws::upgrade(req, res, config, Echo(stats.clone()));
        })
}

/// Serves both on `server`'s address (plain, or https with its `tls`).
pub fn serve(server: HttpServerBuilder, stats: Arc<Stats>) -> std::io::Result<HttpServerHandle> {
    server.start(router(stats))
}

#[allow(dead_code)] // the test uses `serve`
fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let server = serve(HttpServer::builder().bind(addr), Arc::default())?;
    println!(
        "http://{0}/api/stats and ws://{0}/ws; Enter stops",
        server.local_addr()
    );
    std::io::stdin().read_line(&mut String::new())?;
    server.stop().wait()
}
