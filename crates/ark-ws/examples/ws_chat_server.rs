//! A WebSocket chat server: every text a member sends goes to every other member; joins and
//! leaves are announced; a ping every 20 s keeps idle members alive; a stop says goodbye and
//! closes with 1001.
//!
//! Run: `cargo run --release -p ark-ws --example ws_chat_server -- 127.0.0.1:8080`, then open
//! `ws://127.0.0.1:8080/` from any WebSocket client; Enter stops it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_ws::{
    Message, TimerId, UpgradeRequest, WsClose, WsHandler, WsServer, WsServerHandle, WsSession,
    WsSessionHandle,
};

/// The members present, by session id.
pub type Members = Arc<Mutex<HashMap<u64, WsSessionHandle>>>;

const HEARTBEAT: Duration = Duration::from_secs(20);

/// One member's session.
pub struct Member {
    members: Members,
    id: u64,
    addr: SocketAddr,
}

/// Sends `text` to every member but `from`.
fn broadcast(members: &Members, from: u64, text: &str) {
    for (id, handle) in members.lock().unwrap().iter() {
        if *id != from {
            let _ = handle.send_text(text);
        }
    }
}

impl WsHandler for Member {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &UpgradeRequest) {
        self.id = session.id();
        broadcast(&self.members, self.id, &format!("* {} joined", self.addr));
        let handle = session.handle();
        self.members.lock().unwrap().insert(self.id, handle);
        session.set_timer(HEARTBEAT);
    }

    fn on_message(&mut self, _: &mut WsSession<'_>, message: Message) {
        if let Message::Text(text) = message {
            broadcast(&self.members, self.id, &format!("{}: {text}", self.addr));
        }
    }

    fn on_timer(&mut self, session: &mut WsSession<'_>, _: TimerId) {
        let _ = session.ping(b"heartbeat");
        session.set_timer(HEARTBEAT);
    }

    fn on_stopping(&mut self, session: &mut WsSession<'_>) {
        // Out of the room at once: members stopping one after another announce no leaves
        // (a close handshake can end before another member has heard its goodbye).
        self.members.lock().unwrap().remove(&self.id);
        let _ = session.send_text("* the server is stopping: goodbye");
    }

    fn on_close(&mut self, close: &WsClose) {
        if self.members.lock().unwrap().remove(&self.id).is_some() {
            let text = format!("* {} left ({close:?})", self.addr);
            broadcast(&self.members, self.id, &text);
        }
    }
}

/// Starts the chat server on `addr`.
pub fn start(addr: &str) -> std::io::Result<WsServerHandle> {
    let members = Members::default();
    WsServer::builder().bind(addr).start(move |addr| Member {
        members: members.clone(),
        id: u64::MAX,
        addr,
    })
}

#[allow(dead_code)] // the tests use `start` only
fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let server = start(&addr)?;
    println!("chat on ws://{}/; Enter stops it", server.local_addr());
    std::io::stdin().read_line(&mut String::new())?;
    server.stop().wait()
}
