//! The echo servers: every message goes back as it came, after the optional work.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::message::work;

/// Server-side counters.
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Echoes the transport refused.
    pub send_rejections: AtomicU64,
    /// rudp `--rudp-bulk`: bulk message bytes taken.
    pub bulk_bytes: AtomicU64,
}

/// Echo handler for every transport.
#[derive(Debug, Clone)]
pub struct Echo {
    /// xorshift iterations per echo.
    pub work: u64,
    /// Shared counters.
    pub counters: Arc<ServerCounters>,
    /// `--reconnect-every`: close a connection after echoing this many messages (0: never).
    pub close_after: u64,
    /// Messages this session echoed (each session has its own clone of the handler).
    pub echoed: u64,
    /// The body of the HTTP server's `GET /static`: `--payload` bytes, made once per run.
    pub static_body: Arc<[u8]>,
    /// rudp `--rudp-bulk`: the bulk messages' size, taken and not echoed (0: none).
    pub bulk: usize,
}

impl Echo {
    /// The echo handler of a run (`--work`, `--reconnect-every`).
    pub fn new(args: &crate::args::Args, counters: Arc<ServerCounters>) -> Echo {
        Echo {
            work: args.work,
            counters,
            close_after: args.reconnect_every,
            echoed: 0,
            static_body: static_body(args.payload as usize).into(),
            bulk: args.rudp_bulk as usize,
        }
    }

    /// The optional work before echoing `message` (`--work` xorshift rounds).
    pub fn before_echo(&self, message: &[u8]) {
        if self.work > 0 {
            work(message.last().copied().unwrap_or(0), self.work);
        }
    }

    /// Counts an echo; whether the session should now close (`--reconnect-every`).
    pub fn echoed_one(&mut self) -> bool {
        self.echoed += 1;
        self.close_after > 0 && self.echoed >= self.close_after
    }

    /// Counts an echo the transport refused.
    pub fn rejected(&self) {
        self.counters
            .send_rejections
            .fetch_add(1, Ordering::Relaxed);
    }
}

impl ark_tcp::TcpHandler for Echo {
    fn on_message(&mut self, session: &mut ark_tcp::TcpSession<'_>, message: &[u8]) {
        self.before_echo(message);
        if session.send(message).is_err() {
            self.rejected();
        }
        if self.echoed_one() {
            // Graceful: the echo (and TLS close_notify) go out before the FIN.
            session.close();
        }
    }
}

impl ark_udp::UdpHandler for Echo {
    fn on_message(&mut self, session: &mut ark_udp::UdpSession<'_>, datagram: &[u8]) {
        self.before_echo(datagram);
        if session.send(datagram).is_err() {
            self.rejected();
        }
    }
}

impl ark_rudp::RudpHandler for Echo {
    fn on_message(&mut self, session: &mut ark_rudp::RudpSession<'_>, message: &[u8]) {
        if self.bulk > 0 && message.len() == self.bulk {
            let bytes = &self.counters.bulk_bytes;
            bytes.fetch_add(message.len() as u64, Ordering::Relaxed);
            return;
        }
        self.before_echo(message);
        if session.send(message).is_err() {
            self.rejected();
        }
    }
}

impl ark_ws::WsHandler for Echo {
    fn on_message(&mut self, _: &mut ark_ws::WsSession<'_>, _: ark_ws::Message) {}

    fn on_data(&mut self, session: &mut ark_ws::WsSession<'_>, data: ark_ws::ReceivedData<'_>) {
        if data.is_text() {
            return;
        }
        self.before_echo(data.bytes());
        // Read where it was received and framed back with one copy, as the tokio program
        // echoes from its receive buffer.
        if session.send_binary(data.bytes()).is_err() {
            self.rejected();
        }
    }
}

/// The static page of `payload` bytes the HTTP servers answer `GET /static` with (the load of
/// an independent generator such as wrk): printable, the same in every implementation.
pub fn static_body(payload: usize) -> Vec<u8> {
    (0..payload).map(|i| b'a' + (i % 26) as u8).collect()
}

impl Echo {
    /// The HTTP echo server's router: `POST /echo` answers with the request's body, `GET
    /// /static` with [`static_body`].
    pub fn router(self) -> ark_http::Router {
        let page = self.static_body.clone();
        ark_http::Router::new()
            .post("/echo", move |request, response| {
                self.before_echo(request.body());
                response.body(request.body());
            })
            .get("/static", move |_, response| {
                response.body(&page);
            })
    }
}
