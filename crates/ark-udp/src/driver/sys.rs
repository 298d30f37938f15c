//! The datagram syscalls: they fill the core's receive slots ([`RecvBatch`]) and drain its
//! send queue ([`SendBatch`]), keeping only their own scratch space ([`RecvScratch`],
//! [`SendScratch`]: message headers on Linux). On Linux ([`linux`]) they take batches with
//! `recvmmsg`/`sendmmsg`, detect truncation with `MSG_TRUNC` and carry the `SO_REUSEPORT`
//! steering program (the only `unsafe` of the crate); the portable path ([`portable`]: macOS,
//! Windows, the BSDs, and Linux built with `--cfg ark_portable`) moves one datagram per
//! `recv_from`/`send_to` through mio.
//!
//! Offloads (Linux, probed per socket, [`enable_offload`]): a train of the send queue goes
//! as one message with `UDP_SEGMENT` (GSO); with `UDP_GRO` the kernel hands over several
//! datagrams of one peer as one buffer, and the segment size it reports splits it.

#[cfg(all(target_os = "linux", not(ark_portable)))]
mod linux;
#[cfg(all(target_os = "linux", not(ark_portable)))]
use linux as imp;
#[cfg(not(all(target_os = "linux", not(ark_portable))))]
mod portable;
#[cfg(not(all(target_os = "linux", not(ark_portable))))]
use portable as imp;

pub(crate) use imp::{BATCHED, RecvScratch, SendScratch, enable_offload, steer_by_source_port};

#[cfg(any(test, doc))]
use crate::proto::batch::SendBatch;
#[cfg(any(all(test, target_os = "linux", not(ark_portable)), doc))]
use crate::proto::batch::{MAX_TRAIN_SEGMENTS, RecvBatch};

#[cfg(test)]
mod tests {
    use super::*;
    use mio::net::UdpSocket;

    /// A sender (mio, connected) and a plain receiver (5 s read timeout) on loopback.
    fn connected_pair() -> (UdpSocket, std::net::UdpSocket) {
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let sender = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        sender.connect(peer.local_addr().unwrap()).unwrap();
        (sender, peer)
    }

    /// Sends up to `max` queued datagrams, in as many calls as the path needs; how many went.
    fn send_up_to(
        (out, scratch): (&mut SendBatch, &mut SendScratch),
        socket: &UdpSocket,
        max: usize,
        received: &[u8],
    ) -> usize {
        let mut sent = 0;
        while sent < max && !out.is_empty() {
            sent += scratch
                .send_batch(out, socket, max - sent, received)
                .unwrap();
        }
        sent
    }

    #[test]
    fn queued_datagrams_reach_the_peer_whole_and_in_order_to_their_destinations() {
        let (sender, peer) = connected_pair();
        let (mut out, mut scratch) = (SendBatch::default(), SendScratch::new());
        out.push_with(None, 64, |buf| {
            buf[..5].copy_from_slice(b"hello");
            5
        });
        out.push(None, b"after");
        assert_eq!(send_up_to((&mut out, &mut scratch), &sender, 2, &[]), 2);
        let mut buf = [0u8; 64];
        for want in [&b"hello"[..], b"after"] {
            let n = peer.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], want);
        }
        // An unconnected socket sends to each datagram's own destination, singly or batched.
        let other = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        other
            .set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let unconnected = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let (to_peer, to_other) = (peer.local_addr().unwrap(), other.local_addr().unwrap());
        out.push(Some(to_other), b"one");
        out.push(Some(to_peer), b"two");
        out.push(Some(to_other), b"three");
        assert_eq!(scratch.send_one(&mut out, &unconnected, &[]).unwrap(), 1);
        assert_eq!(
            send_up_to((&mut out, &mut scratch), &unconnected, 2, &[]),
            2
        );
        for (socket, want) in [(&other, &b"one"[..]), (&peer, b"two"), (&other, b"three")] {
            let (n, from) = socket.recv_from(&mut buf).unwrap();
            assert_eq!((&buf[..n], from), (want, unconnected.local_addr().unwrap()));
        }
    }

    #[test]
    fn datagrams_queued_by_their_place_are_sent_from_it_or_copied_in_order() {
        let (sender, peer) = connected_pair();
        let mut received = b"..echo..".to_vec();
        let (mut out, mut scratch) = (SendBatch::default(), SendScratch::new());
        out.push(None, b"first");
        out.push_received(None, 2, 4);
        out.push(None, b"last");
        assert_eq!((out.bytes(), out.refers_to_received()), (13, true));
        assert_eq!(
            send_up_to((&mut out, &mut scratch), &sender, 2, &received),
            2
        );
        // The receive buffer is about to be reused: what is left is copied in.
        out.push_received(None, 0, 2);
        out.settle(&received);
        assert!(!out.refers_to_received());
        received.fill(b'x');
        assert_eq!(
            send_up_to((&mut out, &mut scratch), &sender, 8, &received),
            2
        );
        assert!(out.is_empty());
        let mut buf = [0u8; 16];
        for expected in [&b"first"[..], b"echo", b"last", b".."] {
            let n = peer.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], expected);
        }
    }

    /// A queue with GSO on, and a connected sender and a plain receiver on loopback.
    #[cfg(all(target_os = "linux", not(ark_portable)))]
    fn gso_pair() -> ((SendBatch, SendScratch), UdpSocket, std::net::UdpSocket) {
        let (sender, peer) = connected_pair();
        let offload = enable_offload(&sender, &crate::UdpConfig::default());
        assert!(offload.gso, "the kernel here (Linux ≥ 4.18) has UDP GSO");
        let mut out = SendBatch::default();
        out.set_max_segments(MAX_TRAIN_SEGMENTS);
        ((out, SendScratch::new()), sender, peer)
    }

    /// Datagram `i` of a test train: `len` bytes of `i`.
    #[cfg(all(target_os = "linux", not(ark_portable)))]
    fn datagram(i: usize, len: usize) -> Vec<u8> {
        vec![i as u8; len]
    }

    /// Receives `sizes.len()` datagrams on `peer` and checks each one's size and bytes.
    #[cfg(all(target_os = "linux", not(ark_portable)))]
    fn expect_datagrams(peer: &std::net::UdpSocket, sizes: &[usize]) {
        let mut buf = vec![0u8; 65_536];
        for (i, &len) in sizes.iter().enumerate() {
            let n = peer.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &datagram(i, len)[..], "datagram {i}");
        }
    }

    #[test]
    #[cfg(all(target_os = "linux", not(ark_portable)))]
    fn a_train_with_a_short_last_segment_reaches_a_receiver_without_gro_as_its_datagrams() {
        let ((mut out, mut scratch), sender, peer) = gso_pair();
        let sizes = [1200, 1200, 1200, 1200, 1200, 500];
        for (i, &len) in sizes.iter().enumerate() {
            out.push(None, &datagram(i, len));
        }
        assert_eq!(out.queued(), 1, "one train");
        assert_eq!(send_up_to((&mut out, &mut scratch), &sender, 64, &[]), 6);
        assert_eq!(out.trains_sent, 1);
        expect_datagrams(&peer, &sizes);
    }

    #[test]
    #[cfg(all(target_os = "linux", not(ark_portable)))]
    fn a_train_the_kernel_refuses_goes_datagram_by_datagram() {
        // EINVAL (segments over the path MTU): that train is split, later trains still form.
        let ((mut out, mut scratch), sender, peer) = gso_pair();
        let sizes = [1000, 1000, 1000, 300];
        for (i, &len) in sizes.iter().enumerate() {
            out.push(None, &datagram(i, len));
        }
        scratch.fail_next_train = Some(libc::EINVAL);
        assert_eq!(send_up_to((&mut out, &mut scratch), &sender, 64, &[]), 4);
        assert_eq!((out.gso_fallbacks, out.trains_sent), (1, 0));
        expect_datagrams(&peer, &sizes);
        out.push(None, &datagram(0, 10));
        out.push(None, &datagram(0, 10));
        assert_eq!(out.queued(), 1, "GSO stays on after EINVAL");
        assert_eq!(send_up_to((&mut out, &mut scratch), &sender, 64, &[]), 2);
        expect_datagrams(&peer, &[10]);
        expect_datagrams(&peer, &[10]);
        // EIO (a device without checksum offload): GSO is off for the socket from then on.
        out.push(None, &datagram(0, 700));
        out.push(None, &datagram(1, 700));
        scratch.fail_next_train = Some(libc::EIO);
        assert_eq!(send_up_to((&mut out, &mut scratch), &sender, 64, &[]), 2);
        expect_datagrams(&peer, &[700, 700]);
        out.push(None, &datagram(0, 10));
        out.push(None, &datagram(1, 10));
        assert_eq!(out.queued(), 2, "no train forms after EIO");
        assert_eq!(out.gso_fallbacks, 2);
    }

    #[test]
    #[cfg(all(target_os = "linux", not(ark_portable)))]
    fn a_coalesced_receive_is_split_into_its_datagrams() {
        let ((mut out, mut scratch), sender, _) = gso_pair();
        let receiver = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let offload = enable_offload(&receiver, &crate::UdpConfig::default());
        assert!(offload.gro, "the kernel here (Linux ≥ 5.0) has UDP GRO");
        sender.connect(receiver.local_addr().unwrap()).unwrap();
        let sizes = [1200, 1200, 1200, 1200, 77];
        for (i, &len) in sizes.iter().enumerate() {
            out.push(None, &datagram(i, len));
        }
        assert_eq!(
            send_up_to((&mut out, &mut scratch), &sender, 64, &[]),
            sizes.len()
        );
        let mut batch = RecvBatch::new(4, crate::GRO_MIN_DATAGRAM);
        batch.set_gro(true);
        let mut recv_scratch = RecvScratch::new(batch.slots());
        let mut got = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < sizes.len() && std::time::Instant::now() < deadline {
            match recv_scratch.recv_batch(&mut batch, &receiver, usize::MAX) {
                Ok(_) => got.extend((0..batch.received.len()).map(|i| batch.datagram(i).to_vec())),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
        }
        let expected: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| datagram(i, n))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(batch.coalesced, 1, "loopback hands the train over whole");
    }
}
