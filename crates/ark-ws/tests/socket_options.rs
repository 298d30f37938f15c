//! The socket options a WebSocket builder sets reach the sockets it serves and connects
//! (read back from the kernel; Linux).
#![cfg(target_os = "linux")]

mod util;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ark_testkit::{SocketOptionsSeen, socket_options_of};
use ark_ws::{Keepalive, Message, WsClient, WsHandler, WsServer, WsSession};

const KEEPALIVE: Keepalive = Keepalive {
    idle: Duration::from_secs(61),
    interval: Duration::from_secs(7),
    probes: 4,
};

/// Keeps the peer address of its session once open.
#[derive(Clone, Default)]
struct Peer(Arc<Mutex<Option<SocketAddr>>>);

impl WsHandler for Peer {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &ark_ws::UpgradeRequest) {
        *self.0.lock().unwrap() = Some(session.peer_addr());
    }
    fn on_message(&mut self, _: &mut WsSession<'_>, _: Message) {}
}

fn seen(local: SocketAddr, peer: SocketAddr) -> SocketOptionsSeen {
    let mut found = None;
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        found = socket_options_of(local, peer);
        found.is_some()
    }));
    found.unwrap()
}

#[test]
fn server_and_client_settings_reach_their_sockets() {
    let server_peer = Peer::default();
    let p = server_peer.clone();
    let server = WsServer::builder()
        .bind("127.0.0.1:0")
        .nodelay(false)
        .keepalive(Some(KEEPALIVE))
        .socket_buffers(Some(96 * 1024), Some(160 * 1024))
        .start(move |_| p.clone())
        .unwrap();
    let client_peer = Peer::default();
    let client = WsClient::builder()
        .keepalive(Some(KEEPALIVE))
        .socket_buffers(Some(80 * 1024), None)
        .connect(
            &format!("ws://{}/", server.local_addr()),
            client_peer.clone(),
        )
        .unwrap();
    assert!(ark_testkit::wait_until(Duration::from_secs(10), || {
        server_peer.0.lock().unwrap().is_some() && client_peer.0.lock().unwrap().is_some()
    }));
    let client_addr = server_peer.0.lock().unwrap().unwrap();
    let served = seen(server.local_addr(), client_addr);
    assert!(!served.nodelay, "{served:?}");
    assert_eq!(served.keepalive, Some((61, 7, 4)), "{served:?}");
    assert!(
        served.send_buffer >= 96 * 1024 && served.recv_buffer >= 160 * 1024,
        "{served:?}"
    );
    let connected = seen(client_addr, server.local_addr());
    assert!(connected.nodelay, "the default: {connected:?}");
    assert_eq!(connected.keepalive, Some((61, 7, 4)), "{connected:?}");
    assert!(connected.send_buffer >= 80 * 1024, "{connected:?}");
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn by_default_nodelay_is_on_and_keepalive_off() {
    let (server, _) = util::echo_server(1024);
    let client = util::blocking_client(server.local_addr());
    let tcp = client.get_ref();
    let served = seen(server.local_addr(), tcp.local_addr().unwrap());
    assert!(served.nodelay && served.keepalive.is_none(), "{served:?}");
    drop(client);
    server.stop().wait().unwrap();
}
