//! Run with `cargo run --release -p ark-ws --example ws_echo_server -- 127.0.0.1:7880 30`
//! (address, seconds to run; defaults as shown). Pair it with the `ws_echo_client` example, or
//! any WebSocket client (`ws://127.0.0.1:7880/`).
//!
//! Echoes text and binary messages; stops by itself after the given time.

use std::net::SocketAddr;
use std::time::Duration;

use ark_ws::{CloseCode, Message, WsClose, WsHandler, WsServer, WsSession};

struct Echo;

impl WsHandler for Echo {
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        let sent = match message {
            Message::Text(text) => session.send_text(&text),
            Message::Binary(data) => session.send_binary(&data),
            _ => Ok(()),
        };
        if let Err(e) = sent {
            eprintln!("session {}: {e}; closing", session.id());
            session.close(CloseCode::INTERNAL_ERROR, "cannot echo");
        }
    }

    fn on_close(&mut self, close: &WsClose) {
        if close.code() != Some(CloseCode::NORMAL) {
            eprintln!("session closed: {close:?}");
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:7880".into())
        .parse()?;
    let seconds: u64 = args.next().map_or(Ok(30), |s| s.parse())?;
    let server = WsServer::builder().bind(addr).start(|_peer| Echo)?;
    println!(
        "WebSocket echo on ws://{}/ for {seconds} s",
        server.local_addr()
    );
    std::thread::sleep(Duration::from_secs(seconds));
    let (ws, tcp) = (server.stats(), server.tcp_stats());
    server.stop().wait()?;
    println!(
        "sessions {}, messages in {}, out {}; bytes in {}, bytes out {}, reads {}, writes {}",
        ws.sessions_opened,
        ws.messages_in,
        ws.messages_out,
        tcp.bytes_in,
        tcp.bytes_out,
        tcp.reads,
        tcp.writes
    );
    Ok(())
}
