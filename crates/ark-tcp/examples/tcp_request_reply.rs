//! Request/reply over one TCP connection, awaited: a client whose `call` returns the reply to
//! come as an `Answer` (wait for it on a thread, or `.await` it in async code), matched to its
//! request by order through `Replies`. The server answers each request with it in upper case.
//!
//! Run: `cargo run --release -p ark-tcp --example tcp_request_reply` (server and client on
//! 127.0.0.1, a few calls, then both stop).

use std::sync::Arc;
use std::time::Duration;

use ark_tcp::{
    Answer, CloseReason, Replies, SendError, TcpClient, TcpClientHandle, TcpHandler, TcpServer,
    TcpServerHandle, TcpSession,
};

/// The server's side: answers every request with it in upper case, in order.
pub struct Upper;

impl TcpHandler for Upper {
    fn on_message(&mut self, session: &mut TcpSession<'_>, request: &[u8]) {
        let _ = session.send(&request.to_ascii_uppercase());
    }
}

/// Starts the server on an ephemeral port of 127.0.0.1.
pub fn serve() -> std::io::Result<TcpServerHandle> {
    TcpServer::builder().bind("127.0.0.1:0").start(|_| Upper)
}

/// The client's handler: every reply goes to the oldest request waiting; a close ends them
/// all (`AnswerDropped`).
struct Answers(Arc<Replies<Vec<u8>>>);

impl TcpHandler for Answers {
    fn on_message(&mut self, _: &mut TcpSession<'_>, reply: &[u8]) {
        self.0.reply(reply.to_vec());
    }

    fn on_close(&mut self, _: &CloseReason) {
        self.0.fail_all();
    }
}

/// A client of the service, usable from any thread or task.
pub struct UpperClient {
    connection: TcpClientHandle,
    replies: Arc<Replies<Vec<u8>>>,
}

impl UpperClient {
    /// Connects to `addr` (and waits up to 5 s for the connection).
    pub fn connect(addr: std::net::SocketAddr) -> std::io::Result<UpperClient> {
        let replies = Arc::new(Replies::default());
        let connection = TcpClient::builder().connect(addr, Answers(replies.clone()))?;
        if !connection.wait_connected(Duration::from_secs(5)) {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        Ok(UpperClient {
            connection,
            replies,
        })
    }

    /// Sends `text`; its reply comes to the returned answer.
    pub fn call(&self, text: &str) -> Result<Answer<Vec<u8>>, SendError> {
        self.replies
            .request(|| self.connection.send(text.as_bytes()))
    }

    /// Stops the connection.
    pub fn stop(self) -> std::io::Result<()> {
        self.connection.stop().wait()
    }
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = serve()?;
    let client = UpperClient::connect(server.local_addr())?;
    // Several calls in flight at once; each answer is its own request's.
    let answers: Vec<_> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|text| client.call(text))
        .collect::<Result<_, _>>()?;
    for answer in answers {
        println!("{}", String::from_utf8(answer.wait()?)?);
    }
    client.stop()?;
    server.stop().wait()?;
    Ok(())
}
