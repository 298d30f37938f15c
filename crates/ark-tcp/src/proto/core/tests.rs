//! The session core on a simulated pair and clock: no sockets, no sleeps; each test runs in
//! microseconds of real time.

use std::time::Duration;

use ark_frame::DecodeError;

use super::State;
use super::pair::{Pair, Scripted, Seen};
use crate::config::TcpConfig;
use crate::error::CloseReason;

fn frame(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|b| (i * 31 + b) as u8).collect()
}

fn frames(n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| frame(i, len)).collect()
}

fn echo() -> Scripted {
    Scripted {
        echo: true,
        ..Scripted::default()
    }
}

fn config() -> TcpConfig {
    TcpConfig {
        idle_timeout: None,
        stall_timeout: None,
        close_timeout: Duration::from_secs(2),
        ..TcpConfig::default()
    }
}

#[test]
fn frames_go_both_ways_in_order() {
    let client = Scripted {
        greet: frames(50, 1000),
        ..Scripted::default()
    };
    let pair = Pair::new(client, echo(), config());
    assert!(pair.server.messages() == frames(50, 1000));
    assert!(pair.client.messages() == frames(50, 1000));
    assert_eq!(pair.server.seen()[0], Seen::Opened);
}

#[test]
fn idle_timeout_closes_a_silent_session_gracefully() {
    let server_config = TcpConfig {
        idle_timeout: Some(Duration::from_secs(1)),
        ..config()
    };
    let client = Scripted {
        greet: vec![b"hi".to_vec()],
        ..Scripted::default()
    };
    let mut pair = Pair::with(client, config(), echo(), server_config, |_| {});
    pair.advance(Duration::from_millis(999));
    assert_eq!(pair.server.closed(), None, "not idle long enough");
    pair.advance(Duration::from_millis(1));
    // The server closed (FIN); the client saw the end of stream at a frame boundary and
    // closed its side, which completed the server's close.
    assert_eq!(
        pair.server.closed(),
        Some(CloseReason::IdleTimeout(Duration::from_secs(1)))
    );
    assert_eq!(pair.client.closed(), Some(CloseReason::PeerClosed));
    assert_eq!(pair.client.messages(), [b"hi".to_vec()]);
}

#[test]
fn on_idle_says_goodbye_before_the_idle_close() {
    let server_config = TcpConfig {
        idle_timeout: Some(Duration::from_secs(1)),
        ..config()
    };
    let server = Scripted {
        echo: true,
        idle_goodbye: Some(b"idle for 1 s: bye".to_vec()),
        ..Scripted::default()
    };
    let client = Scripted {
        greet: vec![b"hi".to_vec()],
        ..Scripted::default()
    };
    let mut pair = Pair::with(client, config(), server, server_config, |_| {});
    pair.advance(Duration::from_secs(1));
    assert_eq!(
        pair.client.messages(),
        [b"hi".to_vec(), b"idle for 1 s: bye".to_vec()]
    );
    assert_eq!(
        pair.server.closed(),
        Some(CloseReason::IdleTimeout(Duration::from_secs(1)))
    );
}

#[test]
fn a_close_completes_when_the_peer_reads_everything() {
    let server = Scripted {
        greet: frames(300, 4096),
        close_after_greeting: true,
        ..Scripted::default()
    };
    // A slow pipe: the close waits for the queue to drain.
    let mut pair = Pair::with(Scripted::default(), config(), server, config(), |p| {
        p.client.window = 16 * 1024;
    });
    pair.advance(Duration::from_millis(100));
    assert!(pair.client.messages() == frames(300, 4096));
    assert_eq!(pair.server.closed(), Some(CloseReason::Local));
    assert_eq!(pair.client.closed(), Some(CloseReason::PeerClosed));
}

#[test]
fn a_close_against_a_peer_that_does_not_read_ends_by_its_deadline() {
    let server = Scripted {
        greet: frames(300, 4096),
        close_after_greeting: true,
        ..Scripted::default()
    };
    let mut pair = Pair::with(Scripted::default(), config(), server, config(), |p| {
        p.client.reading = false;
        p.client.window = 64 * 1024;
    });
    assert!(matches!(pair.server.core().state(), State::Closing { .. }));
    pair.advance(Duration::from_millis(1999));
    assert_eq!(pair.server.closed(), None, "within the close timeout");
    pair.advance(Duration::from_millis(1));
    match pair.server.closed() {
        Some(CloseReason::Unflushed { cause, unsent }) => {
            assert_eq!(*cause, CloseReason::Local);
            assert!(unsent > 0);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pair.server.core().queued(), 0, "the queue was freed");
    // The connection was reset: the client's next read fails.
    pair.client.reading = true;
    pair.run();
    assert_eq!(pair.client.closed(), Some(CloseReason::Reset));
}

#[test]
fn a_peer_closing_mid_frame_is_reported_after_every_whole_frame() {
    let mut partial = Vec::new();
    partial.extend_from_slice(&100u32.to_be_bytes());
    partial.extend_from_slice(&[7; 10]);
    let client = Scripted {
        greet: frames(3, 10),
        greet_raw: partial,
        close_after_greeting: true,
        ..Scripted::default()
    };
    let mut pair = Pair::new(client, echo(), config());
    pair.advance(Duration::from_millis(10));
    assert_eq!(pair.server.messages(), frames(3, 10));
    assert_eq!(
        pair.server.closed(),
        Some(CloseReason::EofMidFrame { buffered: 14 })
    );
    // Every whole frame's echo reached the client before the server's FIN.
    assert_eq!(pair.client.messages(), frames(3, 10));
    assert_eq!(pair.client.closed(), Some(CloseReason::Local));
}

#[test]
fn a_half_close_still_gets_every_echo_before_the_fin() {
    // The client sends 7,000 frames, shuts down writing at once, and reads until the end of
    // stream: every echo must arrive, and the stream must end at a frame boundary.
    let client = Scripted {
        greet: frames(7000, 1024),
        close_after_greeting: true,
        ..Scripted::default()
    };
    let mut pair = Pair::new(client, echo(), config());
    pair.advance(Duration::from_millis(10));
    assert_eq!(pair.server.messages().len(), 7000);
    assert!(
        pair.client.messages() == frames(7000, 1024),
        "every echo, in order"
    );
    assert_eq!(pair.server.closed(), Some(CloseReason::PeerClosed));
    assert_eq!(pair.client.closed(), Some(CloseReason::Local));
}

#[test]
fn backpressure_pauses_reading_and_resumes_with_nothing_lost() {
    let config = TcpConfig {
        send_limit: 128 * 1024,
        high_watermark: 64 * 1024,
        low_watermark: 16 * 1024,
        ..config()
    };
    let mut pair = Pair::new(Scripted::default(), echo(), config);
    // The client sends while it does not read: the server's echoes back up.
    pair.client.reading = false;
    pair.client.window = 32 * 1024;
    let mut sent = 0;
    while sent < 1000 && pair.client_send(&frame(sent, 1024)).is_ok() {
        sent += 1;
        pair.run();
    }
    pair.run();
    assert!(
        !pair.server.core().wants_read(),
        "the server paused reading at its high watermark"
    );
    assert!(pair.server.messages().len() < sent, "delivery paused too");
    // The client reads again: the server resumes; the rest follows.
    pair.client.reading = true;
    pair.run();
    for _ in 0..100_000 {
        if sent == 1000 {
            break;
        }
        if pair.client_send(&frame(sent, 1024)).is_ok() {
            sent += 1;
        }
        pair.run();
    }

    assert!(
        pair.server.messages() == frames(1000, 1024),
        "every frame once, in order"
    );
    assert!(
        pair.client.messages() == frames(1000, 1024),
        "every echo once, in order"
    );
    assert!(pair.server.core().wants_read());
}

#[test]
fn an_oversized_frame_resets_only_that_session() {
    let mut header = Vec::new();
    header.extend_from_slice(&(2 * 1024 * 1024u32).to_be_bytes());
    let client = Scripted {
        greet_raw: header,
        ..Scripted::default()
    };
    let mut pair = Pair::new(client, echo(), config());
    pair.run();
    assert_eq!(
        pair.server.closed(),
        Some(CloseReason::Frame(DecodeError::TooLarge {
            len: 2 * 1024 * 1024,
            max: 1024 * 1024
        }))
    );
    assert_eq!(pair.client.closed(), Some(CloseReason::Reset));
}

#[test]
fn a_stalled_frame_closes_after_the_stall_timeout() {
    let config = TcpConfig {
        stall_timeout: Some(Duration::from_millis(500)),
        ..config()
    };
    let client = Scripted {
        greet_raw: vec![0, 0, 1],
        ..Scripted::default()
    };
    let mut pair = Pair::new(client, echo(), config);
    pair.advance(Duration::from_millis(499));
    assert_eq!(pair.server.closed(), None);
    pair.advance(Duration::from_millis(1));
    assert_eq!(
        pair.server.closed(),
        Some(CloseReason::FrameStalled {
            buffered: 3,
            after: Duration::from_millis(500)
        })
    );
}

#[test]
fn stop_lets_the_handler_say_goodbye_then_closes_gracefully() {
    let server = Scripted {
        echo: true,
        goodbye: Some(b"bye".to_vec()),
        ..Scripted::default()
    };
    let mut pair = Pair::new(Scripted::default(), server, config());
    pair.server_stop();
    assert_eq!(pair.client.messages(), [b"bye".to_vec()]);
    assert_eq!(pair.server.closed(), Some(CloseReason::Stopped));
    assert_eq!(pair.client.closed(), Some(CloseReason::PeerClosed));
    assert!(pair.server.seen().contains(&Seen::Stopping));
}

#[test]
fn a_drain_tells_the_handler_once_and_the_session_goes_on_until_its_peer_closes() {
    let server = Scripted {
        echo: true,
        ..Scripted::default()
    };
    let mut pair = Pair::new(Scripted::default(), server, config());
    pair.server_drain();
    pair.server_drain();
    pair.client_send(b"after the drain").unwrap();
    pair.run();
    assert_eq!(pair.client.messages(), [b"after the drain".to_vec()]);
    assert_eq!(pair.server.closed(), None);
    pair.client.sim.with_session(|_, s| s.close());
    pair.run();
    assert_eq!(pair.server.closed(), Some(CloseReason::PeerClosed));
    let drains = pair
        .server
        .seen()
        .iter()
        .filter(|s| **s == Seen::Draining)
        .count();
    assert_eq!(drains, 1);
    assert!(!pair.server.seen().contains(&Seen::Stopping));
}

#[test]
fn sends_after_close_are_refused_and_abort_drops_the_queue() {
    let mut pair = Pair::new(Scripted::default(), Scripted::default(), config());
    pair.client.reading = false;
    pair.client.window = 0;
    for i in 0..10 {
        pair.server_send(&frame(i, 100));
    }
    assert_eq!(pair.server.core().queued(), 10 * 104);
    pair.server_abort();
    assert_eq!(pair.server.core().queued(), 0);
    pair.run();
    assert_eq!(pair.server.closed(), Some(CloseReason::Aborted));
}

#[test]
fn a_connect_that_never_completes_times_out() {
    use std::sync::Arc;
    use std::time::Instant;

    use super::SessionCore;
    use crate::handler::SessionInfo;

    let handler = Scripted::default();
    let log = handler.log.clone();
    let addr = "127.0.0.1:9".parse().unwrap();
    let start = Instant::now();
    let info = SessionInfo::without_socket(addr);
    let mut core = SessionCore::new(
        handler,
        ark_frame::LengthPrefix::default(),
        Arc::new(config()),
        info,
        start,
        Some(Duration::from_secs(3)),
        (None, ark_reactor::Pace::default()),
    );
    assert_eq!(core.poll_timeout(), Some(start + Duration::from_secs(3)));
    core.handle_timeout(start + Duration::from_secs(3));
    let reason = core.report_close(CloseReason::Stopped);
    assert_eq!(reason, CloseReason::ConnectTimeout(Duration::from_secs(3)));
    assert_eq!(*log.lock().unwrap(), [Seen::Closed(reason)]);
}

#[test]
fn handler_timers_fire_in_deadline_order_and_cancelled_ones_never() {
    let mut pair = Pair::new(Scripted::default(), Scripted::default(), config());
    let late = pair.server_timer(Duration::from_millis(300));
    let early = pair.server_timer(Duration::from_millis(100));
    let cancelled = pair.server_timer(Duration::from_millis(200));
    assert!(pair.server_cancel(cancelled));
    assert!(!pair.server_cancel(cancelled));
    pair.advance(Duration::from_millis(99));
    assert!(
        !pair
            .server
            .seen()
            .iter()
            .any(|s| matches!(s, Seen::Timer(_)))
    );
    pair.advance(Duration::from_millis(300));
    let fired: Vec<Seen> = pair
        .server
        .seen()
        .into_iter()
        .filter(|s| matches!(s, Seen::Timer(_)))
        .collect();
    assert_eq!(fired, [Seen::Timer(early), Seen::Timer(late)]);
}

#[test]
fn a_peer_that_stops_reading_is_reset_after_the_write_stall_timeout() {
    let config = TcpConfig {
        write_stall_timeout: Some(Duration::from_secs(3)),
        ..config()
    };
    let server = Scripted {
        greet: frames(100, 4096),
        ..Scripted::default()
    };
    let mut pair = Pair::with(Scripted::default(), config.clone(), server, config, |p| {
        p.client.reading = false;
        p.client.window = 64 * 1024;
    });
    assert!(pair.server.core().queued() > 0);
    pair.advance(Duration::from_millis(2999));
    assert_eq!(pair.server.closed(), None);
    pair.advance(Duration::from_millis(1));
    match pair.server.closed() {
        Some(CloseReason::WriteStalled { unsent, after }) => {
            assert!(unsent > 0);
            assert_eq!(after, Duration::from_secs(3));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pair.server.core().queued(), 0);
}

/// Frames sent back unchanged from a read are written from the read's bytes.
mod in_place {
    use std::sync::Arc;
    use std::time::Instant;

    use ark_frame::LengthPrefix;

    use std::io::{self, IoSlice, Write};

    use super::super::SessionCore;
    use crate::config::TcpConfig;
    use crate::error::CloseReason;
    use crate::handler::{SessionInfo, TcpHandler, TcpSession};
    use crate::proto::machine::SessionMachine;
    use crate::proto::sim::Within;

    /// Echoes every message; after each echo sends `extra` too (copied), and aborts after the
    /// first echo if asked.
    #[derive(Default)]
    struct Echoer {
        extra: Option<Vec<u8>>,
        abort: bool,
    }

    impl TcpHandler for Echoer {
        fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
            session.send(message).expect("room for the echo");
            if let Some(extra) = &self.extra {
                session.send(extra).expect("room for the extra");
            }
            if self.abort {
                session.abort();
            }
        }
    }

    fn open<H: TcpHandler>(handler: H) -> SessionCore<LengthPrefix, H> {
        let info = SessionInfo::without_socket(std::net::SocketAddr::from(([127, 0, 0, 1], 1)));
        let config = Arc::new(TcpConfig::default().normalized());
        let now = Instant::now();
        let codec = LengthPrefix::default();
        let pace = ark_reactor::Pace::default();
        let mut core = SessionCore::new(
            handler,
            codec,
            config,
            info.clone(),
            now,
            None,
            (None, pace),
        );
        core.handle_connected(now, info);
        core
    }

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            out.extend_from_slice(&(p.len() as u32).to_be_bytes());
            out.extend_from_slice(p);
        }
        out
    }

    /// A socket that takes up to `room` bytes, recording what it took and, per write, the
    /// non-empty slices' addresses and lengths.
    struct Recorder {
        wrote: Vec<u8>,
        calls: Vec<Vec<(usize, usize)>>,
        room: usize,
    }

    impl Write for Recorder {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let slices = bufs.iter().filter(|b| !b.is_empty());
            self.calls
                .push(slices.map(|b| (b.as_ptr() as usize, b.len())).collect());
            let room = self.room - self.wrote.len().min(self.room);
            let mut within = Within {
                out: &mut self.wrote,
                room,
            };
            within.write_vectored(bufs)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Hands `input` to `machine` as a read into the driver's scratch; it writes what it
    /// sends in place at once, to a socket that takes up to `room` bytes. Returns what was
    /// written and, per write, the non-empty slices' addresses and lengths.
    fn read(
        machine: &mut SessionMachine<LengthPrefix, Echoer>,
        input: &mut [u8],
        room: usize,
    ) -> (Vec<u8>, Vec<Vec<(usize, usize)>>) {
        let mut socket = Recorder {
            wrote: Vec::new(),
            calls: Vec::new(),
            room,
        };
        let n = input.len();
        let more = machine.handle_read(Instant::now(), input, Ok(n), &mut socket);
        assert!(more, "reading goes on");
        (socket.wrote, socket.calls)
    }

    #[test]
    fn an_echo_is_written_once_from_the_input_and_nothing_is_queued() {
        let mut machine = SessionMachine::plain(open(Echoer::default()));
        let mut input = framed(&[b"one", b"two", b"three"]);
        let (wrote, calls) = read(&mut machine, &mut input, usize::MAX);
        assert_eq!(wrote, input);
        assert_eq!(calls, [vec![(input.as_ptr() as usize, input.len())]]);
        assert_eq!(machine.core.queued(), 0);
        assert!(machine.core.transmit().is_empty());
        let tally = machine.core.take_tally();
        assert_eq!((tally.writes, tally.bytes_out), (1, input.len() as u64));
    }

    #[test]
    fn what_the_socket_refuses_is_queued_in_order() {
        let mut machine = SessionMachine::plain(open(Echoer::default()));
        let mut input = framed(&[b"one", b"two", b"three"]);
        let (wrote, _) = read(&mut machine, &mut input, 5);
        assert_eq!(wrote, input[..5]);
        assert_eq!(machine.core.transmit(), &input[5..]);
        // The next read's echoes follow what is queued, in one vectored write.
        let mut more = framed(&[b"four"]);
        let (wrote, calls) = read(&mut machine, &mut more, usize::MAX);
        assert_eq!(calls[0].len(), 2, "queue then frames");
        assert_eq!(wrote, [&input[5..], &more[..]].concat());
        assert!(machine.core.transmit().is_empty());
    }

    #[test]
    fn a_copied_send_between_echoes_keeps_the_order() {
        let mut machine = SessionMachine::plain(open(Echoer {
            extra: Some(b"x".to_vec()),
            ..Echoer::default()
        }));
        let mut input = framed(&[b"one", b"two"]);
        let (_, calls) = read(&mut machine, &mut input, usize::MAX);
        // Each copied send settled the echo before it into the queue: all of it is queued,
        // in the order sent, for the turn's write.
        assert!(calls.is_empty());
        assert_eq!(
            machine.core.transmit(),
            framed(&[b"one", b"x", b"two", b"x"])
        );
    }

    #[test]
    fn an_abort_drops_what_was_queued_in_place() {
        let mut machine = SessionMachine::plain(open(Echoer {
            abort: true,
            ..Echoer::default()
        }));
        let mut input = framed(&[b"one", b"two"]);
        let (wrote, calls) = read(&mut machine, &mut input, usize::MAX);
        assert!(wrote.is_empty() && calls.is_empty());
        assert_eq!(machine.core.close_reason(), Some(&CloseReason::Aborted));
        assert_eq!(machine.core.take_tally().aborted_send_bytes, 7);
    }

    #[test]
    fn a_write_error_the_driver_reports_ends_the_session_and_counts_what_is_dropped() {
        let mut core = open(Echoer::default());
        let mut input = framed(&[b"one"]);
        core.handle_read_lending(Instant::now(), &mut input);
        assert!(core.transmit_in_place(&input).is_some());
        core.handle_error(CloseReason::Reset);
        assert_eq!(core.close_reason(), Some(&CloseReason::Reset));
        assert_eq!(core.take_tally().aborted_send_bytes, input.len() as u64);
    }

    #[test]
    fn a_full_socket_queues_everything() {
        let mut core = open(Echoer::default());
        let mut input = framed(&[b"one", b"two"]);
        let now = Instant::now();
        core.handle_read_lending(now, &mut input);
        core.handle_written_in_place(now, &input, 0);
        assert_eq!(core.transmit(), input);
        assert_eq!(core.close_reason(), None);
    }

    /// Decodes in place: upper-cases each message where it is lent, then sends it back.
    #[derive(Default)]
    struct Shouter {
        lent_mutably: usize,
        lent_shared: usize,
    }

    impl TcpHandler for Shouter {
        fn on_message(&mut self, session: &mut TcpSession<'_>, message: &[u8]) {
            self.lent_shared += 1;
            session.send(message).expect("room");
        }
        fn on_message_mut(&mut self, session: &mut TcpSession<'_>, message: &mut [u8]) {
            self.lent_mutably += 1;
            message.make_ascii_uppercase();
            session.send(message).expect("room");
        }
        fn decodes_in_place(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_handler_that_decodes_in_place_gets_every_frame_mutably_however_the_bytes_are_cut() {
        let words: [&[u8]; 4] = [b"one", b"two", b"", b"three"];
        let input = framed(&words);
        let expected = framed(&[b"ONE", b"TWO", b"", b"THREE"]);
        for cut in 1..=input.len() {
            let mut core = open(Shouter::default());
            for piece in input.chunks(cut) {
                let mut piece = piece.to_vec();
                core.handle_read_lending(Instant::now(), &mut piece);
                assert!(
                    core.transmit_in_place(&piece).is_none(),
                    "nothing is written from a buffer lent mutably"
                );
            }
            assert_eq!(
                core.transmit(),
                expected,
                "cut {cut}: copied into the queue"
            );
            let handler = &core.handler;
            assert_eq!(
                (handler.lent_mutably, handler.lent_shared),
                (4, 0),
                "cut {cut}"
            );
        }
        // TLS plaintext (`handle_read`) is lent shared.
        let mut core = open(Shouter::default());
        core.handle_read(Instant::now(), &input);
        assert_eq!(core.transmit(), input);
        assert_eq!(
            (core.handler.lent_mutably, core.handler.lent_shared),
            (0, 4)
        );
    }
}
