//! ark-ws under the Autobahn|Testsuite (scripts/autobahn/run.sh runs it in CI): the echo
//! servers its fuzzing client tests, and the client its fuzzing server tests, each with
//! permessage-deflate on (offered by the client, accepted by the servers when offered).
//!
//! - `autobahn servers PORT`: echoes on PORT (messages kept: `on_message`), PORT+1 (lent:
//!   `on_data`) and PORT+2 (a WebSocket route of an ark-http server at `/`), until stdin
//!   closes.
//! - `autobahn client URL AGENT`: runs every case the fuzzing server at URL has, as AGENT, an
//!   echo client per case, then asks it to write its reports.
//!
//! Needs the `http` and `deflate` features.

use std::sync::mpsc;
use std::time::Duration;

use ark_http::{HttpServer, Router};
use ark_ws::{
    DeflateConfig, Message, ReceivedData, WsClient, WsClose, WsConfig, WsHandler, WsServer,
    WsSession,
};

/// Autobahn's largest message (case 9.1.6/9.2.6: 16 MiB) and then some.
const MAX_MESSAGE: usize = 20 * 1024 * 1024;

/// Echoes text and binary messages as the handler gets them (`on_message`: owned); pongs
/// and the rest are not echoed.
struct Owned;

impl WsHandler for Owned {
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        if message.is_text() || message.is_binary() {
            let _ = session.send(message);
        }
    }
}

/// Echoes text and binary messages where they were received (`on_data`: lent); tells
/// `done` how its session ended.
struct Lent(Option<mpsc::Sender<WsClose>>);

impl WsHandler for Lent {
    fn on_message(&mut self, _: &mut WsSession<'_>, _: Message) {}

    fn on_data(&mut self, session: &mut WsSession<'_>, data: ReceivedData<'_>) {
        let _ = match data.text() {
            Some(text) => session.send_text(text),
            None => session.send_binary(data.bytes()),
        };
    }

    fn on_close(&mut self, close: &WsClose) {
        if let Some(done) = self.0.take() {
            let _ = done.send(close.clone());
        }
    }
}

fn config() -> WsConfig {
    WsConfig {
        max_message: MAX_MESSAGE,
        max_frame: MAX_MESSAGE,
        deflate: Some(DeflateConfig::default()),
        ..WsConfig::default()
    }
}

fn servers(port: u16) -> std::io::Result<()> {
    let limits = |b: ark_ws::WsServerBuilder| {
        b.max_message(MAX_MESSAGE)
            .max_frame(MAX_MESSAGE)
            .deflate(DeflateConfig::default())
    };
    let owned = limits(WsServer::builder().bind(("127.0.0.1", port))).start(|_| Owned)?;
    let lent = limits(WsServer::builder().bind(("127.0.0.1", port + 1))).start(|_| Lent(None))?;
    let router = Router::new().get("/", |req, res| {
        let _ = ark_ws::upgrade(req, res, config(), Owned);
    });
    let http = HttpServer::builder()
        .bind(("127.0.0.1", port + 2))
        .start(router)?;
    println!("ready");
    std::io::stdin().read_line(&mut String::new())?;
    owned.stop().wait()?;
    lent.stop().wait()?;
    http.stop().wait()
}

/// One connection of the client to `url`: an echo, or (with `first`) the first text message
/// received; how it ended. Bounded: a case that runs past a minute is given up.
fn connect(url: &str, keep_first: bool) -> std::io::Result<Option<String>> {
    let (done, ended) = mpsc::channel();
    let (first_tx, first_rx) = mpsc::channel();
    struct First(mpsc::Sender<String>, Lent);
    impl WsHandler for First {
        fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
            if let Message::Text(text) = message {
                let _ = self.0.send(text.to_string());
            }
        }
        fn on_close(&mut self, close: &WsClose) {
            self.1.on_close(close);
        }
    }
    let builder = WsClient::builder()
        .max_message(MAX_MESSAGE)
        .max_frame(MAX_MESSAGE)
        .deflate(DeflateConfig::default());
    let client = match keep_first {
        true => builder.connect(url, First(first_tx, Lent(Some(done))))?,
        false => builder.connect(url, Lent(Some(done)))?,
    };
    let ended = ended.recv_timeout(Duration::from_secs(60));
    client.stop_timeout(Duration::from_secs(5))?;
    if let Err(e) = ended {
        eprintln!("{url}: no end within 60 s ({e})");
    }
    Ok(first_rx.try_recv().ok())
}

fn client(url: &str, agent: &str) -> std::io::Result<()> {
    let count = connect(&format!("{url}/getCaseCount"), true)?
        .and_then(|count| count.parse::<u32>().ok())
        .ok_or_else(|| std::io::Error::other("no case count from the fuzzing server"))?;
    for case in 1..=count {
        connect(&format!("{url}/runCase?case={case}&agent={agent}"), false)?;
    }
    connect(&format!("{url}/updateReports?agent={agent}"), false)?;
    println!("{count} cases run");
    Ok(())
}

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["servers", port] => servers(port.parse().map_err(std::io::Error::other)?),
        ["client", url, agent] => client(url, agent),
        _ => Err(std::io::Error::other(
            "usage: autobahn servers PORT | autobahn client URL AGENT",
        )),
    }
}
