//! A chat server on ark-tcp alone: every message a member sends goes to every other member;
//! joins and leaves are announced; a stop says goodbye to everyone (and announces no leaves).
//!
//! Run: `cargo run --release -p ark-tcp --example tcp_chat_server -- 127.0.0.1:7000`, then
//! connect clients that speak 4-byte big-endian length-prefixed frames; Enter stops it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ark_tcp::{CloseReason, TcpHandler, TcpServer, TcpServerHandle, TcpSession, TcpSessionHandle};

/// The members present, by session id: anyone can send to anyone through their handles.
pub type Members = Arc<Mutex<HashMap<u64, TcpSessionHandle>>>;

/// One member's session; a member is known by its address.
pub struct Member {
    members: Members,
    id: u64,
    addr: SocketAddr,
}

/// Sends `text` to every member but `from`.
fn broadcast(members: &Members, from: u64, text: &str) {
    for (id, handle) in members.lock().unwrap().iter() {
        if *id != from {
            // A member whose queue is full misses this line (its own problem).
            let _ = handle.send(text.as_bytes());
        }
    }
}

impl TcpHandler for Member {
    fn on_open(&mut self, session: &mut TcpSession<'_>) {
        (self.id, self.addr) = (session.id(), session.peer_addr());
        broadcast(&self.members, self.id, &format!("* {} joined", self.addr));
        let handle = session.handle();
        self.members.lock().unwrap().insert(self.id, handle);
    }

    fn on_message(&mut self, _: &mut TcpSession<'_>, message: &[u8]) {
        let text = format!("{}: {}", self.addr, String::from_utf8_lossy(message));
        broadcast(&self.members, self.id, &text);
    }

    fn on_stopping(&mut self, session: &mut TcpSession<'_>) {
        let _ = session.send(b"* the server is stopping: goodbye");
    }

    fn on_close(&mut self, reason: &CloseReason) {
        self.members.lock().unwrap().remove(&self.id);
        // When the server stops, everyone goes: a "left" then is noise, and it could reach a
        // member whose goodbye has not gone out yet (its session stops a moment later).
        if !matches!(reason, CloseReason::Stopped) {
            broadcast(&self.members, self.id, &format!("* {} left", self.addr));
        }
    }
}

/// Starts the chat server on `addr`.
pub fn start(addr: &str) -> std::io::Result<TcpServerHandle> {
    let members = Members::default();
    TcpServer::builder().bind(addr).start(move |addr| Member {
        members: members.clone(),
        id: u64::MAX,
        addr,
    })
}

#[allow(dead_code)] // the tests use `start` only
fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:7000".into());
    let server = start(&addr)?;
    println!("chat server on {}; Enter stops it", server.local_addr());
    std::io::stdin().read_line(&mut String::new())?;
    server.stop().wait()
}
