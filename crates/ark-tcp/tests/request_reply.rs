//! The request/reply example: calls from several threads at once and from async tasks, each
//! answered with its own request's reply; a closed connection ends the calls still waiting.

#[path = "../examples/tcp_request_reply.rs"]
mod request_reply;

use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_tcp::AnswerDropped;
use request_reply::{UpperClient, serve};

#[test]
fn calls_from_threads_get_their_own_replies() {
    let server = serve().unwrap();
    let client = Arc::new(UpperClient::connect(server.local_addr()).unwrap());
    let callers: Vec<_> = (0..4)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    let text = format!("thread {t} call {i}");
                    let reply = client.call(&text).unwrap().wait().unwrap();
                    assert_eq!(reply, text.to_uppercase().into_bytes());
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    Arc::try_unwrap(client).ok().unwrap().stop().unwrap();
    server.stop().wait().unwrap();
}

#[test]
fn calls_are_awaited_in_tasks() {
    let server = serve().unwrap();
    let client = UpperClient::connect(server.local_addr()).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(async {
        let first = client.call("one").unwrap();
        let second = client.call("two").unwrap();
        assert_eq!(second.await.unwrap(), b"TWO");
        assert_eq!(first.await.unwrap(), b"ONE");
    });
    client.stop().unwrap();
    server.stop().wait().unwrap();
}

/// A server that reads requests and never answers.
struct Silent;

impl ark_tcp::TcpHandler for Silent {
    fn on_message(&mut self, _: &mut ark_tcp::TcpSession<'_>, _: &[u8]) {}
}

#[test]
fn calls_waiting_when_the_connection_closes_end_with_answer_dropped() {
    let server = ark_tcp::TcpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Silent)
        .unwrap();
    let client = UpperClient::connect(server.local_addr()).unwrap();
    let mut waiting: Vec<_> = (0..10).map(|_| client.call("hello?").unwrap()).collect();
    server.stop().wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut ended = 0;
    while ended < waiting.len() && Instant::now() < deadline {
        ended += waiting
            .iter_mut()
            .filter_map(|answer| answer.try_take())
            .inspect(|result| assert_eq!(*result, Err(AnswerDropped)))
            .count();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(ended, 10, "every call ended when the connection closed");
    client.stop().unwrap();
}
