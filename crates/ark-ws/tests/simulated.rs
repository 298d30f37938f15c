//! A WebSocket client and server with no socket: the sessions the real ones run (ark-ws's
//! handlers on ark-tcp's session core) on two `ark_tcp::Simulator`s talking in memory —
//! upgrade, messages both ways, the close handshake; over TLS too (wss, with the `tls`
//! feature), on the same TLS layer of the core the sockets use.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ark_tcp::{Raw, Simulator, TcpHandler};
use ark_ws::{CloseCode, Message, UpgradeRequest, WsClose, WsConfig, WsHandler, WsSession};

/// What a session saw, as lines.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// The server: echoes every message.
struct Echo(Seen);

impl WsHandler for Echo {
    fn on_open(&mut self, _: &mut WsSession<'_>, request: &UpgradeRequest) {
        self.0.push(format!("open {}", request.uri().path()));
    }
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        session.send(message).unwrap();
    }
    fn on_close(&mut self, close: &WsClose) {
        self.0.push(format!("close {close:?}"));
    }
}

/// The client: sends a text and a binary message at open, records what comes back, and
/// closes with 1000 once both are back.
struct Talk(Seen);

impl WsHandler for Talk {
    fn on_open(&mut self, session: &mut WsSession<'_>, _: &UpgradeRequest) {
        session.send_text("hello").unwrap();
        session.send_binary(&vec![7; 70_000]).unwrap();
    }
    fn on_message(&mut self, session: &mut WsSession<'_>, message: Message) {
        match message {
            Message::Text(text) => self.0.push(format!("text {text}")),
            other => {
                self.0.push(format!("binary {}", other.into_data().len()));
                session.close(CloseCode::NORMAL, "done");
            }
        }
    }
    fn on_close(&mut self, close: &WsClose) {
        self.0.push(format!("close {close:?}"));
    }
}

/// Runs `client` against `server` until neither has more to say; checks what each saw.
fn talk<A: TcpHandler, B: TcpHandler>(
    client: &mut Simulator<Raw, A>,
    server: &mut Simulator<Raw, B>,
    (at_client, at_server): (&Seen, &Seen),
) {
    assert!(client.exchange(server, 100) < 100, "the exchange settles");
    let closed = |by: &str| {
        format!("close Closed {{ by: {by}, code: Some(CloseCode(1000)), reason: \"done\" }}")
    };
    assert_eq!(at_server.lines(), ["open /".to_string(), closed("Peer")]);
    assert_eq!(
        at_client.lines(),
        [
            "text hello".to_string(),
            "binary 70000".into(),
            closed("Local")
        ]
    );
    assert!(client.ended_stream() && server.ended_stream());
}

#[test]
fn a_client_and_a_server_talk_and_close_in_memory() {
    let (at_client, at_server) = (Seen::default(), Seen::default());
    let (server, server_tcp) =
        ark_ws::fuzzing::server(WsConfig::default(), Echo(at_server.clone()));
    let url = "ws://localhost/";
    let (client, client_tcp) =
        ark_ws::fuzzing::client(WsConfig::default(), url, Talk(at_client.clone())).unwrap();
    let now = Instant::now();
    let mut server = Simulator::starting_at(server, Raw::new(), server_tcp, now);
    let mut client = Simulator::starting_at(client, Raw::new(), client_tcp, now);
    talk(&mut client, &mut server, (&at_client, &at_server));
}

#[cfg(feature = "tls")]
#[test]
fn wss_runs_in_memory_on_the_cores_tls() {
    use ark_tls::{Pki, TlsSession};
    let pki = Pki::generate(&["localhost"]).unwrap();
    let (at_client, at_server) = (Seen::default(), Seen::default());
    let (server, server_tcp) =
        ark_ws::fuzzing::server(WsConfig::default(), Echo(at_server.clone()));
    let url = "wss://localhost/";
    let (client, client_tcp) =
        ark_ws::fuzzing::client(WsConfig::default(), url, Talk(at_client.clone())).unwrap();
    let now = Instant::now();
    let server_tls = TlsSession::server(&pki.server_tls().unwrap(), now).unwrap();
    let name = ark_tls::server_name("localhost").unwrap();
    let client_tls = TlsSession::client(&pki.client_tls().unwrap(), name, now).unwrap();
    let mut server = Simulator::with_tls(server, Raw::new(), server_tcp, server_tls, now);
    let mut client = Simulator::with_tls(client, Raw::new(), client_tcp, client_tls, now);
    talk(&mut client, &mut server, (&at_client, &at_server));
}
