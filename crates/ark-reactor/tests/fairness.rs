//! Fairness: a source that always has work cannot starve another.

mod util;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ark_reactor::{Context, Handler, Reactor, ReactorConfig, Ready, Turn};
use mio::net::UdpSocket;

/// Never drains: every turn it uses its whole budget and asks to run again.
struct Flood {
    socket: UdpSocket,
    turns: Arc<AtomicU64>,
}

impl Handler for Flood {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, _: &mut Context<'_>, _: Ready) -> Turn {
        self.turns.fetch_add(1, Ordering::SeqCst);
        Turn::Again
    }
}

/// Reads its one message and records the loop turn in which it did.
struct Quiet {
    socket: UdpSocket,
    served_in_turn: Arc<AtomicU64>,
}

impl Handler for Quiet {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        loop {
            match self.socket.recv_from(cx.scratch()) {
                Ok(_) => {
                    let turn = cx.counters().snapshot().turns;
                    self.served_in_turn.store(turn, Ordering::SeqCst);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Turn::Done,
                Err(e) => panic!("{e}"),
            }
        }
    }
}

#[test]
fn a_message_is_served_within_one_turn_despite_a_flooding_source() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let flood_turns = Arc::new(AtomicU64::new(0));
    let (flood_socket, flood_addr) = util::udp();
    reactor
        .insert(
            Box::new(Flood {
                socket: flood_socket,
                turns: flood_turns.clone(),
            }),
            mio::Interest::READABLE,
        )
        .unwrap();
    let served_in_turn = Arc::new(AtomicU64::new(0));
    let (quiet_socket, quiet_addr) = util::udp();
    reactor
        .insert(
            Box::new(Quiet {
                socket: quiet_socket,
                served_in_turn: served_in_turn.clone(),
            }),
            mio::Interest::READABLE,
        )
        .unwrap();

    // Start the flood, and let it run alone for a few turns.
    sender.send_to(b"go", flood_addr).unwrap();
    for _ in 0..5 {
        reactor.turn(Some(Duration::from_millis(100))).unwrap();
    }
    assert!(
        flood_turns.load(Ordering::SeqCst) >= 4,
        "the flood runs every turn"
    );

    // One message for the quiet source: it is served in the very next turn.
    sender.send_to(b"hello", quiet_addr).unwrap();
    let flood_before = flood_turns.load(Ordering::SeqCst);
    reactor.turn(Some(Duration::from_millis(100))).unwrap();
    let turn = reactor.stats().turns;
    assert_eq!(
        served_in_turn.load(Ordering::SeqCst),
        turn,
        "served in the turn that saw it"
    );
    assert_eq!(
        flood_turns.load(Ordering::SeqCst),
        flood_before + 1,
        "and the flood ran once too"
    );
}
