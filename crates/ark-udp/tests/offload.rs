//! UDP GSO and GRO through the public API: a train sent with `send_train` (and an echo of
//! same-size datagrams, which forms trains on its own) arrives as its datagrams, in order,
//! whatever the receiver's offloads; the counters say what the kernel did.

mod util;

use std::sync::mpsc;
use std::time::Duration;

use ark_udp::{UdpClient, UdpHandler, UdpServer, UdpSession};
use util::Echo;

const TIMEOUT: Duration = Duration::from_secs(20);
const SEGMENT: usize = 1200;

/// The test train: 40 datagrams of `SEGMENT` bytes and a short last one of 300, each filled
/// with its index.
fn train() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..40u8 {
        bytes.extend(std::iter::repeat_n(i, SEGMENT));
    }
    bytes.extend(std::iter::repeat_n(40u8, 300));
    bytes
}

/// Sends the train once the socket opens, and reports every datagram that comes back.
struct Trainer(mpsc::Sender<Vec<u8>>);

impl UdpHandler for Trainer {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        session.send_train(&train(), SEGMENT).unwrap();
    }

    fn on_message(&mut self, _: &mut UdpSession<'_>, datagram: &[u8]) {
        let _ = self.0.send(datagram.to_vec());
    }
}

/// Sends the train from a client with `client_offload` to an echo server with
/// `server_offload` ((gso, gro) each) and checks the echoes: every datagram, whole and in
/// order. Returns the client's and the server's counters.
fn round_trip(
    client_offload: (bool, bool),
    server_offload: (bool, bool),
) -> [ark_udp::UdpStats; 2] {
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .offload(server_offload.0, server_offload.1)
        .socket_buffers(None, Some(4 << 20))
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = UdpClient::builder()
        .offload(client_offload.0, client_offload.1)
        .socket_buffers(None, Some(4 << 20))
        .connect(server.local_addr(), Trainer(tx))
        .unwrap();
    let expected: Vec<Vec<u8>> = train().chunks(SEGMENT).map(<[u8]>::to_vec).collect();
    for (i, want) in expected.iter().enumerate() {
        let got = rx.recv_timeout(TIMEOUT).unwrap_or_else(|e| {
            panic!(
                "datagram {i} of {}: {e} ({client_offload:?} → {server_offload:?})",
                expected.len()
            )
        });
        assert_eq!(
            &got, want,
            "datagram {i} ({client_offload:?} → {server_offload:?})"
        );
    }
    let count = expected.len() as u64;
    assert!(ark_testkit::wait_until(TIMEOUT, || client
        .stats()
        .datagrams_in
        == count));
    assert!(ark_testkit::wait_until(TIMEOUT, || server
        .stats()
        .datagrams_sent
        == count));
    let stats = [client.stats(), server.stats()];
    let offloads = (client.offload(), server.offload());
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
    let linux = cfg!(all(target_os = "linux", not(ark_portable)));
    assert_eq!(offloads.0.gso, linux && client_offload.0);
    assert_eq!(offloads.1.gro, linux && server_offload.1);
    stats
}

#[test]
fn a_train_arrives_as_its_datagrams_with_and_without_offloads() {
    let linux = cfg!(all(target_os = "linux", not(ark_portable)));
    // Both ends with GSO and GRO: the client's train leaves in one message (41 datagrams),
    // reaches the server as one buffer, and the echoes form a train again.
    let [client, server] = round_trip((true, true), (true, true));
    if linux {
        assert_eq!((client.trains_sent, client.sends), (1, 1), "{client:?}");
        assert!(server.coalesced_receives >= 1, "{server:?}");
        assert!(server.trains_sent >= 1, "{server:?}");
        assert!(client.coalesced_receives >= 1, "{client:?}");
    }
    assert_eq!(client.gso_fallbacks + server.gso_fallbacks, 0);
    // A receiver without GRO gets the kernel's segments one by one.
    let [client, server] = round_trip((true, true), (false, false));
    assert_eq!(server.coalesced_receives, 0);
    assert_eq!(server.trains_sent, 0);
    assert_eq!(client.trains_sent, u64::from(linux));
    // No offload at all: datagram by datagram both ways.
    let [client, server] = round_trip((false, false), (false, false));
    assert_eq!(client.trains_sent + server.trains_sent, 0);
    assert_eq!(client.coalesced_receives + server.coalesced_receives, 0);
    assert_eq!(server.datagrams_in, 41);
}

#[test]
fn a_train_with_a_zero_or_oversized_segment_is_refused() {
    struct Probe(mpsc::Sender<[bool; 3]>);
    impl UdpHandler for Probe {
        fn on_open(&mut self, session: &mut UdpSession<'_>) {
            let zero = session.send_train(b"abc", 0).is_err();
            let huge = session.send_train(b"abc", 70_000).is_err();
            let ok = session.send_train(b"", 10).is_ok();
            let _ = self.0.send([zero, huge, ok]);
        }
        fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {}
    }
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .start(|_| Echo::default())
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let client = UdpClient::builder()
        .connect(server.local_addr(), Probe(tx))
        .unwrap();
    assert_eq!(rx.recv_timeout(TIMEOUT).unwrap(), [true, true, true]);
    client.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
