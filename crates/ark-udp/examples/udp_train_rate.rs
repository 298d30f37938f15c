//! What UDP GSO gives a bulk sender, measured: a client sends trains of 1,200-byte datagrams to
//! one peer (an ark-udp server on loopback, GRO on as by default) as fast as its queue takes
//! them, with GSO on and then off, alternating for `ROUNDS` rounds of `SECONDS` each in the same
//! run. Prints one JSON line per round: datagrams per second delivered to the receiver, and the
//! sender's datagrams per send syscall; then the median ratio on/off.
//!
//! ```text
//! cargo run --release -p ark-udp --example udp_train_rate [SECONDS] [ROUNDS]
//! ```
//!
//! Both rounds batch 64 messages per `sendmmsg` (without GSO a whole train per call, so the
//! ratio is what segmentation gives beyond batching). The rate is the receiver's (`datagrams_in`), not the sender's: on loopback a datagram the
//! receiver's buffer has no room for is dropped inside the sender's syscall, which would count
//! as sent. On the portable path (no GSO) both rounds send datagram by datagram.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ark_udp::{UdpClient, UdpHandler, UdpServer, UdpSession, UdpWaker};

/// Bytes per datagram.
const SEGMENT: usize = 1200;
/// Datagrams per train (the kernel's most).
const TRAIN: usize = 64;
/// Trains queued per turn before the sender wakes itself for the next.
const TRAINS_PER_TURN: usize = 8;

/// Receives and drops.
struct Sink;

impl UdpHandler for Sink {
    fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {}
}

/// Queues trains every turn until told to stop, waking itself for the next turn.
struct Blaster {
    train: Vec<u8>,
    waker: Arc<OnceLock<UdpWaker>>,
    stop: Arc<AtomicBool>,
}

impl Blaster {
    fn pump(&mut self, session: &mut UdpSession<'_>) {
        if self.stop.load(Ordering::Relaxed) {
            return;
        }
        for _ in 0..TRAINS_PER_TURN {
            // Full: the socket has not taken what is queued yet; the next turn adds more.
            if session.send_train(&self.train, SEGMENT).is_err() {
                break;
            }
        }
        if let Some(waker) = self.waker.get() {
            waker.wake();
        }
    }
}

impl UdpHandler for Blaster {
    fn on_open(&mut self, session: &mut UdpSession<'_>) {
        self.pump(session);
    }

    fn on_wake(&mut self, session: &mut UdpSession<'_>) {
        self.pump(session);
    }

    fn on_message(&mut self, _: &mut UdpSession<'_>, _: &[u8]) {}
}

/// One round: datagrams per second delivered, and datagrams per send syscall.
fn round(gso: bool, seconds: f64) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let server = UdpServer::builder()
        .bind("127.0.0.1:0")
        .socket_buffers(None, Some(8 << 20))
        .start(|_| Sink)?;
    let waker = Arc::new(OnceLock::new());
    let stop = Arc::new(AtomicBool::new(false));
    let blaster = Blaster {
        train: vec![7; SEGMENT * TRAIN],
        waker: waker.clone(),
        stop: stop.clone(),
    };
    let client = UdpClient::builder()
        .offload(gso, false)
        // 64 messages per `sendmmsg` in both rounds: without GSO, a whole train per call.
        .batching(true, TRAIN)
        .socket_buffers(Some(4 << 20), None)
        .connect(server.local_addr(), blaster)?;
    let _ = waker.set(client.waker());
    client.wake();
    std::thread::sleep(Duration::from_millis(500)); // warm-up
    let (start, before, sent_before) = (Instant::now(), server.stats(), client.stats());
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let (elapsed, after, sent_after) = (start.elapsed(), server.stats(), client.stats());
    stop.store(true, Ordering::Relaxed);
    client.stop().wait()?;
    server.stop().wait()?;
    let delivered = after.datagrams_in - before.datagrams_in;
    let sends = (sent_after.sends - sent_before.sends).max(1);
    let per_send = (sent_after.datagrams_sent - sent_before.datagrams_sent) as f64 / sends as f64;
    Ok((delivered as f64 / elapsed.as_secs_f64(), per_send))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(Ok(2.0), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |s| s.parse())?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut ratios = Vec::new();
    for r in 1..=rounds {
        let mut rates = [0.0; 2];
        for (i, gso) in [true, false].into_iter().enumerate() {
            let (rate, per_send) = round(gso, seconds)?;
            rates[i] = rate;
            println!(
                "{{\"round\":{r},\"gso\":{gso},\"segment\":{SEGMENT},\"train\":{TRAIN},\"seconds\":{seconds},\"datagrams_per_second\":{rate:.0},\"datagrams_per_send\":{per_send:.2},\"io_path\":\"{}\",\"kernel\":\"{}\"}}",
                ark_reactor::IO_PATH,
                kernel.trim()
            );
        }
        ratios.push(rates[0] / rates[1].max(1.0));
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{{\"median_ratio_gso_on_off\":{:.2},\"ratios\":{ratios:?}}}",
        ratios[ratios.len() / 2]
    );
    Ok(())
}
