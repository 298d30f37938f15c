//! The client: pipelined requests against ark's server, answered in order; and against an
//! independent server, Python's `http.server` (HTTP/1.1, keep-alive): Content-Length and
//! chunked bodies, HEAD, all on one connection.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ark_http::{ClientResponse, ClientSession, HttpClient, HttpClientHandler, HttpServer, Router};

const TIMEOUT: Duration = Duration::from_secs(20);

/// Sends `total` POSTs keeping `window` in flight; reports the first mismatch or the count.
struct Pipeline {
    total: usize,
    window: usize,
    sent: usize,
    answered: usize,
    done: mpsc::Sender<Result<usize, String>>,
}

impl Pipeline {
    fn pump(&mut self, session: &mut ClientSession<'_, '_>) {
        while self.sent < self.total && session.in_flight() < self.window {
            let body = format!("message {}", self.sent);
            session
                .request("POST", "/echo", &[], body.as_bytes())
                .unwrap();
            self.sent += 1;
        }
    }
}

impl HttpClientHandler for Pipeline {
    fn on_open(&mut self, session: &mut ClientSession<'_, '_>) {
        self.pump(session);
    }
    fn on_response(&mut self, session: &mut ClientSession<'_, '_>, response: &ClientResponse<'_>) {
        let expected = format!("message {}", self.answered);
        if response.status != 200 || response.body != expected.as_bytes() {
            let _ = self.done.send(Err(format!(
                "{} {:?}",
                response.status,
                String::from_utf8_lossy(response.body)
            )));
            return;
        }
        self.answered += 1;
        if self.answered == self.total {
            let _ = self.done.send(Ok(self.answered));
            return;
        }
        self.pump(session);
    }
}

#[test]
fn pipelined_posts_are_answered_in_order() {
    let router = Router::new().post("/echo", |req, res| {
        res.body(req.body());
    });
    let server = HttpServer::builder()
        .bind("127.0.0.1:0")
        .start(router)
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = HttpClient::builder()
        .connect(
            server.local_addr(),
            Pipeline {
                total: 2000,
                window: 16,
                sent: 0,
                answered: 0,
                done: tx,
            },
        )
        .unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), Ok(2000));
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}

const PYTHON_SERVER: &str = r#"
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_GET(self):
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"chun", b"ked ", b"body"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            body = b"plain body"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "10")
        self.end_headers()
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.handle_request()
"#;

/// Sends GET /len, HEAD /len, GET /chunked pipelined; reports each answer's status and body.
struct Three(mpsc::Sender<(u16, String)>);

impl HttpClientHandler for Three {
    fn on_open(&mut self, session: &mut ClientSession<'_, '_>) {
        for (method, path) in [("GET", "/len"), ("HEAD", "/len"), ("GET", "/chunked")] {
            session.request(method, path, &[], b"").unwrap();
        }
    }
    fn on_response(&mut self, _: &mut ClientSession<'_, '_>, response: &ClientResponse<'_>) {
        let _ = self.0.send((
            response.status,
            String::from_utf8_lossy(response.body).into_owned(),
        ));
    }
}

#[test]
fn the_client_reads_python_http_server_answers_on_one_connection() {
    let mut python = Command::new("python3")
        .args(["-c", PYTHON_SERVER])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(python.stdout.as_mut().unwrap()),
        &mut port,
    )
    .unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", port.trim()).parse().unwrap();
    let (tx, rx) = mpsc::channel();
    let client = HttpClient::builder().connect(addr, Three(tx)).unwrap();
    let answers: Vec<(u16, String)> = (0..3).map(|_| rx.recv_timeout(TIMEOUT).unwrap()).collect();
    assert_eq!(
        answers,
        [
            (200, "plain body".to_string()),
            (200, String::new()),
            (200, "chunked body".to_string())
        ]
    );
    client.stop().wait().unwrap();
    let _ = python.kill();
    let _ = python.wait();
}
