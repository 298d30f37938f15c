//! An echo server and a client over a Unix-domain socket: the same sessions as over TCP, on
//! a socket file (Unix only).
//!
//! Run: `cargo run -p ark-tcp --example unix_echo -- /tmp/ark-echo.sock`. It serves the path,
//! sends "hello" from a client, prints the echo and stops (the stop removes the socket file).

#[cfg(unix)]
fn main() -> std::io::Result<()> {
    use std::sync::mpsc;
    use std::time::Duration;

    use ark_tcp::{TcpClient, TcpHandler, TcpServer, TcpSession};

    struct Echo;
    impl TcpHandler for Echo {
        fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
            // A full queue means a peer that does not read: let it go.
            if session.send(message).is_err() {
                session.abort();
            }
        }
    }

    struct Hello(mpsc::Sender<Vec<u8>>);
    impl TcpHandler for Hello {
        fn on_open(&mut self, session: &mut TcpSession<'_>) {
            let _ = session.send(b"hello");
        }
        fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
            let _ = self.0.send(message.to_vec());
            session.close();
        }
    }

    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "/tmp/ark-echo.sock".into());
    let server = TcpServer::builder().start_unix(&path, |_| Echo)?;
    let (tx, rx) = mpsc::channel();
    let client = TcpClient::builder().connect_unix(&path, Hello(tx))?;
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(echo) => println!("{path}: {}", String::from_utf8_lossy(&echo)),
        Err(_) => eprintln!("{path}: no echo within 5 s"),
    }
    client.stop().wait()?;
    server.stop().wait()
}

#[cfg(not(unix))]
fn main() {
    eprintln!("Unix-domain sockets: Unix only");
}
