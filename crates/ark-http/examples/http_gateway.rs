//! An API gateway on ark-http: `GET /portfolio?` asks a price service for every holding at
//! once through an `HttpAgent` (connections reused, a 150 ms deadline per price), and answers
//! — later, from the agent's callbacks — with the total and which prices did not come in
//! time. The price service here is ark-http too; one of its symbols is slow.
//!
//! Run: `cargo run --release -p ark-http --example http_gateway`

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_http::{HttpAgent, HttpRequest, HttpServer, HttpServerHandle, Origin, Responder, Router};

const HOLDINGS: [(&str, u64); 4] = [("ARK", 10), ("RST", 5), ("TCP", 2), ("SLOW", 1)];

/// The price service: `GET /price/:symbol` answers cents as text; `SLOW` answers after 1 s.
fn price_service() -> std::io::Result<HttpServerHandle> {
    let router = Router::new().get("/price/:symbol", |req, res| {
        let symbol = req.param("symbol").unwrap_or("").to_string();
        let cents = 100 + symbol.bytes().map(u64::from).sum::<u64>();
        if symbol == "SLOW" {
            let responder = res.defer();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(1));
                responder.respond(|res| {
                    res.body(cents.to_string());
                });
            });
        } else {
            res.body(cents.to_string());
        }
    });
    HttpServer::builder().bind("127.0.0.1:0").start(router)
}

/// What one portfolio answer gathers as the prices come in.
struct Gathering {
    total_cents: u64,
    missing: Vec<String>,
    left: usize,
    responder: Option<Responder>,
}

impl Gathering {
    /// One price (or its absence) is in; the last one answers the portfolio request.
    fn settle(&mut self, symbol: &str, shares: u64, price: Option<u64>) {
        match price {
            Some(cents) => self.total_cents += cents * shares,
            None => self.missing.push(symbol.to_string()),
        }
        self.left -= 1;
        if self.left == 0
            && let Some(responder) = self.responder.take()
        {
            let body = format!(
                "total {}.{:02}; missing: {:?}",
                self.total_cents / 100,
                self.total_cents % 100,
                self.missing
            );
            responder.respond(|res| {
                res.header("content-type", "text/plain").body(body);
            });
        }
    }
}

/// The gateway: `GET /portfolio` fans out to the price service.
fn gateway(agent: Arc<HttpAgent>, prices: Origin) -> std::io::Result<HttpServerHandle> {
    let router = Router::new().get("/portfolio", move |_, res| {
        let gathering = Arc::new(Mutex::new(Gathering {
            total_cents: 0,
            missing: Vec::new(),
            left: HOLDINGS.len(),
            responder: Some(res.defer()),
        }));
        for (symbol, shares) in HOLDINGS {
            let request =
                HttpRequest::get(format!("/price/{symbol}")).timeout(Duration::from_millis(150));
            let gathering = gathering.clone();
            agent.send_with(&prices, request, move |answer| {
                let price = answer
                    .ok()
                    .filter(|a| a.status == 200)
                    .and_then(|a| String::from_utf8(a.body).ok()?.parse().ok());
                let mut gathering = gathering.lock().unwrap_or_else(|e| e.into_inner());
                gathering.settle(symbol, shares, price);
            });
        }
    });
    HttpServer::builder().bind("127.0.0.1:0").start(router)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let prices = price_service()?;
    let agent = Arc::new(HttpAgent::builder().max_connections_per_host(4).build()?);
    let gateway = gateway(agent.clone(), Origin::http(prices.local_addr()))?;

    // A client of the gateway: three portfolio requests on one kept-alive connection.
    let client = HttpAgent::builder().build()?;
    let origin = Origin::http(gateway.local_addr());
    for _ in 0..3 {
        let answer = client
            .send(&origin, HttpRequest::get("/portfolio"))
            .wait()?;
        println!(
            "{} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
    }
    println!(
        "gateway to price service: {} connection(s) open",
        agent.connections(&Origin::http(prices.local_addr()))
    );
    client.stop().wait()?;
    gateway.stop().wait()?;
    agent.stop().wait()?;
    prices.stop().wait()?;
    Ok(())
}
