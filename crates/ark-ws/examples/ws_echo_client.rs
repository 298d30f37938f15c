//! Run with `cargo run --release -p ark-ws --example ws_echo_client -- ws://127.0.0.1:7880/ 100000`
//! (URL, messages; defaults as shown) against the matching `*_echo_server` example.
//!
//! Sends 1 KiB binary messages one at a time, checks each echo, closes with 1000 and prints
//! the rate.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use ark_ws::{CloseCode, Message, UpgradeRequest, WsClient, WsClose, WsHandler, WsSession};

struct Pump {
    total: u64,
    echoed: u64,
    payload: Vec<u8>,
    done: mpsc::Sender<Result<u64, String>>,
}

impl WsHandler for Pump {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &UpgradeRequest) {
        let _ = session.send_binary(&self.payload);
    }

    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        if message.into_data().as_ref() != self.payload.as_slice() {
            let _ = self.done.send(Err(format!("echo {} differs", self.echoed)));
            session.close(CloseCode::PROTOCOL_ERROR, "bad echo");
            return;
        }
        self.echoed += 1;
        if self.echoed == self.total {
            let _ = self.done.send(Ok(self.echoed));
            session.close(CloseCode::NORMAL, "done");
        } else if let Err(e) = session.send_binary(&self.payload) {
            let _ = self.done.send(Err(e.to_string()));
        }
    }

    fn on_close(&mut self, close: &WsClose) {
        let _ = self.done.send(Err(format!("closed: {close:?}")));
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().unwrap_or_else(|| "ws://127.0.0.1:7880/".into());
    let total: u64 = args.next().map_or(Ok(100_000), |s| s.parse())?;
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    let client = WsClient::builder().connect(
        &url,
        Pump {
            total,
            echoed: 0,
            payload: vec![0x61; 1024],
            done: tx,
        },
    )?;
    let outcome = rx.recv_timeout(Duration::from_secs(300))?;
    let elapsed = started.elapsed().as_secs_f64();
    let stats = client.tcp_stats();
    client.stop().wait()?;
    let echoed = outcome?;
    println!(
        "{echoed} echoes in {elapsed:.2} s = {:.0} msg/s; {:.3} writes per message",
        echoed as f64 / elapsed,
        stats.writes as f64 / echoed as f64
    );
    Ok(())
}
