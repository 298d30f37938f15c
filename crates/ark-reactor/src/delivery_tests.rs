//! Deterministic tests of the reactor's delivery in both IO models: in the shared model the
//! test thread plays the other threads (it holds a lent handler for as long as it likes) and
//! injects wakes, timers and readiness while the handler is out. Nothing sleeps; every step is
//! an explicit reactor turn.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::ReactorConfig;
use crate::handler::{Budget, Context, Effect, Handler};
use crate::ids::{SourceId, TimerId};
use crate::reactor::Reactor;
use crate::source::{Ready, Turn};
use crate::turn::{Job, serve_job};

/// What a handler was given, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Ready(Ready),
    Timer(TimerId),
}

/// A source without a socket.
struct NoSocket;

impl mio::event::Source for NoSocket {
    fn register(
        &mut self,
        _: &mio::Registry,
        _: mio::Token,
        _: mio::Interest,
    ) -> std::io::Result<()> {
        Ok(())
    }
    fn reregister(
        &mut self,
        _: &mio::Registry,
        _: mio::Token,
        _: mio::Interest,
    ) -> std::io::Result<()> {
        Ok(())
    }
    fn deregister(&mut self, _: &mio::Registry) -> std::io::Result<()> {
        Ok(())
    }
}

/// Records every delivery; optionally cancels a timer during its next turn.
struct Recorder {
    socket: NoSocket,
    log: Arc<Mutex<Vec<Seen>>>,
    cancel: Arc<Mutex<Option<TimerId>>>,
    again: bool,
}

impl Recorder {
    fn turn(&mut self, cx: &mut Context<'_>, seen: Seen) -> Turn {
        self.log.lock().unwrap().push(seen);
        if let Some(timer) = self.cancel.lock().unwrap().take() {
            cx.cancel_timer(timer);
        }
        if self.again { Turn::Again } else { Turn::Done }
    }
}

impl Handler for Recorder {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, ready: Ready) -> Turn {
        self.turn(cx, Seen::Ready(ready))
    }
    fn on_timer(&mut self, cx: &mut Context<'_>, timer: TimerId) -> Turn {
        self.turn(cx, Seen::Timer(timer))
    }
}

/// How the reactor serves its sources.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// One thread: turns run inside the reactor.
    Inline,
    /// The shared model with several threads: every turn is lent, and the test runs it.
    Lent,
}

struct Harness {
    reactor: Reactor,
    scratch: Vec<u8>,
    effects: Vec<Effect>,
    log: Arc<Mutex<Vec<Seen>>>,
    cancel: Arc<Mutex<Option<TimerId>>>,
}

impl Harness {
    fn new(path: Path) -> Harness {
        let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
        if let Path::Lent = path {
            reactor.test_lend_every_turn();
        }
        Harness {
            reactor,
            scratch: vec![0; 1024],
            effects: Vec::new(),
            log: Arc::default(),
            cancel: Arc::default(),
        }
    }

    fn insert(&mut self, again: bool) -> SourceId {
        let handler = Recorder {
            socket: NoSocket,
            log: self.log.clone(),
            cancel: self.cancel.clone(),
            again,
        };
        self.reactor
            .insert(Box::new(handler), mio::Interest::READABLE)
            .unwrap()
    }

    /// One reactor turn; lent turns wait for the test to run them.
    fn turn(&mut self) {
        self.reactor.turn(Some(Duration::ZERO)).unwrap();
    }

    /// Makes the reactor lend `id` (through a due timer, `t0`); the test holds the job until it
    /// gives it back.
    fn lend(&mut self, id: SourceId) -> (Job, TimerId) {
        let t0 = self.reactor.test_source_timer(id);
        self.turn();
        let job = self.reactor.take_job().expect("the handler was lent");
        (job, t0)
    }

    /// Runs a held job as one of the shared model's threads would and gives the handler back.
    fn give_back(&mut self, job: Job) {
        let done = serve_job(
            job,
            &mut self.scratch,
            &mut self.effects,
            self.reactor.shared(),
            Budget::default(),
        );
        self.effects = self.reactor.give_back(done);
    }

    /// Turns the reactor, running every lent job at once, until nothing more happens.
    fn settle(&mut self) {
        for _ in 0..50 {
            self.turn();
            while let Some(job) = self.reactor.take_job() {
                self.give_back(job);
            }
        }
    }

    /// Inserts a [`Panicky`] source; its id and the close reasons it records.
    fn insert_panicky(&mut self) -> (SourceId, Arc<Mutex<Vec<crate::source::CloseReason>>>) {
        let closed = Arc::new(Mutex::new(Vec::new()));
        let handler = Panicky {
            socket: NoSocket,
            closed: closed.clone(),
        };
        let id = self
            .reactor
            .insert(Box::new(handler), mio::Interest::READABLE)
            .unwrap();
        (id, closed)
    }

    fn log(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

#[test]
fn a_wake_while_the_handler_is_lent_reaches_it_when_given_back() {
    let mut h = Harness::new(Path::Lent);
    let id = h.insert(false);
    let (job, t0) = h.lend(id);
    assert!(h.reactor.wake(id));
    h.turn(); // the wake arrives while the handler is lent
    h.give_back(job);
    h.settle();
    let log = h.log();
    assert_eq!(log.len(), 2, "the wake was not delivered: {log:?}");
    assert_eq!(log[0], Seen::Timer(t0));
    assert!(matches!(log[1], Seen::Ready(_)), "{log:?}");
}

#[test]
fn timers_and_readiness_while_the_handler_is_lent_all_reach_it_in_order() {
    let mut h = Harness::new(Path::Lent);
    let id = h.insert(false);
    let (job, t0) = h.lend(id);
    let t1 = h.reactor.test_source_timer(id);
    let t2 = h.reactor.test_source_timer(id);
    h.reactor.test_inject(id, Ready::READABLE);
    h.turn(); // two timers and a readiness event park while the handler is lent
    h.give_back(job);
    h.settle();
    assert_eq!(
        h.log(),
        [
            Seen::Timer(t0),
            Seen::Timer(t1),
            Seen::Timer(t2),
            Seen::Ready(Ready::READABLE)
        ]
    );
}

#[test]
fn a_timer_cancelled_while_parked_does_not_hold_back_readiness() {
    let mut h = Harness::new(Path::Lent);
    let id = h.insert(false);
    let (job, t0) = h.lend(id);
    let t1 = h.reactor.test_source_timer(id);
    h.reactor.test_inject(id, Ready::READABLE);
    h.turn(); // t1 and the readiness park
    // The handler's lent turn cancels t1, which has fired but is not delivered.
    *h.cancel.lock().unwrap() = Some(t1);
    h.give_back(job);
    h.settle();
    assert_eq!(
        h.log(),
        [Seen::Timer(t0), Seen::Ready(Ready::READABLE)],
        "a cancelled parked timer must not hold back the readiness behind it"
    );
}

#[test]
fn a_source_over_budget_with_new_edges_runs_once_per_turn() {
    // One thread, one loop. The source always uses its budget (Turn::Again) and gets a new
    // readiness edge every turn; it must still run once per loop turn, not once more per turn.
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let handler = Recorder {
        socket: NoSocket,
        log: log.clone(),
        cancel: Arc::default(),
        again: true,
    };
    let id = reactor
        .insert(Box::new(handler), mio::Interest::READABLE)
        .unwrap();
    let mut runs_per_turn = Vec::new();
    for _ in 0..50 {
        reactor.test_inject(id, Ready::READABLE);
        let before = log.lock().unwrap().len();
        reactor.turn(Some(Duration::ZERO)).unwrap();
        runs_per_turn.push(log.lock().unwrap().len() - before);
    }
    assert!(
        runs_per_turn.iter().all(|&n| n == 1),
        "runs per loop turn: {runs_per_turn:?}"
    );
}

#[test]
fn a_wake_is_its_own_flag_and_merges_with_readiness_into_one_turn() {
    let mut h = Harness::new(Path::Inline);
    let id = h.insert(false);
    h.reactor.test_inject(id, Ready::READABLE);
    assert!(h.reactor.wake(id));
    assert!(h.reactor.wake(id));
    h.turn();
    assert_eq!(h.log(), [Seen::Ready(Ready::READABLE | Ready::WAKE)]);
    assert!(Ready::WAKE.is_wake() && !Ready::WAKE.is_readable());
}

/// Inserts a `Recorder` from its first turn and wakes it by the id `insert` returned.
struct Spawner {
    socket: NoSocket,
    log: Arc<Mutex<Vec<Seen>>>,
}

impl Handler for Spawner {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        let child = Recorder {
            socket: NoSocket,
            log: self.log.clone(),
            cancel: Arc::default(),
            again: false,
        };
        let id = cx
            .insert(Box::new(child), mio::Interest::READABLE)
            .expect("room in the source table");
        cx.wake(id);
        Turn::Done
    }
}

#[test]
fn an_id_returned_by_insert_inside_a_turn_reaches_the_new_source() {
    let mut reactor = Reactor::new(ReactorConfig::default()).unwrap();
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let spawner = Spawner {
        socket: NoSocket,
        log: log.clone(),
    };
    let id = reactor
        .insert(Box::new(spawner), mio::Interest::READABLE)
        .unwrap();
    reactor.wake(id);
    for _ in 0..3 {
        reactor.turn(Some(Duration::ZERO)).unwrap();
    }
    assert_eq!(*log.lock().unwrap(), [Seen::Ready(Ready::WAKE)]);
    assert_eq!(reactor.source_count(), 2);
}

#[test]
fn a_wake_from_another_thread_reaches_the_source() {
    let mut h = Harness::new(Path::Inline);
    let id = h.insert(false);
    let handle = h.reactor.handle();
    std::thread::spawn(move || assert!(handle.wake(id)))
        .join()
        .unwrap();
    h.turn();
    assert_eq!(h.log(), [Seen::Ready(Ready::WAKE)]);
}

/// Panics on its first readiness.
struct Panicky {
    socket: NoSocket,
    closed: Arc<Mutex<Vec<crate::source::CloseReason>>>,
}

impl Handler for Panicky {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, _: &mut Context<'_>, _: Ready) -> Turn {
        panic!("a bug in one handler");
    }
    fn on_close(&mut self, reason: crate::source::CloseReason) {
        self.closed.lock().unwrap().push(reason);
    }
}

fn panic_is_contained(path: Path) {
    let mut h = Harness::new(path);
    let (bad, closed) = h.insert_panicky();
    let good = h.insert(false);
    h.reactor.test_inject(bad, Ready::READABLE);
    h.reactor.test_inject(good, Ready::READABLE);
    h.settle();
    assert_eq!(
        *closed.lock().unwrap(),
        [crate::source::CloseReason::Panicked],
        "{path:?}"
    );
    assert_eq!(
        h.log(),
        [Seen::Ready(Ready::READABLE)],
        "{path:?}: the other source ran"
    );
    assert_eq!(h.reactor.source_count(), 1);
    // The reactor goes on.
    h.reactor.test_inject(good, Ready::READABLE);
    h.settle();
    assert_eq!(h.log().len(), 2);
}

#[test]
fn a_panicking_handler_closes_only_its_source_served_inline() {
    panic_is_contained(Path::Inline);
}

#[test]
fn a_panicking_handler_closes_only_its_source_when_lent() {
    panic_is_contained(Path::Lent);
}

/// Wakes its partner on every turn: work that makes more work without any poll.
struct Pinger {
    socket: NoSocket,
    partner: Arc<Mutex<Option<SourceId>>>,
}

impl Handler for Pinger {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.socket
    }
    fn on_ready(&mut self, cx: &mut Context<'_>, _: Ready) -> Turn {
        if let Some(partner) = *self.partner.lock().unwrap() {
            cx.wake(partner);
        }
        Turn::Done
    }
}

#[test]
fn sources_waking_each_other_do_not_keep_the_shared_model_from_polling() {
    let mut h = Harness::new(Path::Lent);
    let (to_b, to_a) = (Arc::default(), Arc::default());
    let pinger = |partner: &Arc<Mutex<Option<SourceId>>>| {
        Box::new(Pinger {
            socket: NoSocket,
            partner: partner.clone(),
        })
    };
    let a = h
        .reactor
        .insert(pinger(&to_b), mio::Interest::READABLE)
        .unwrap();
    let b = h
        .reactor
        .insert(pinger(&to_a), mio::Interest::READABLE)
        .unwrap();
    *to_b.lock().unwrap() = Some(b);
    *to_a.lock().unwrap() = Some(a);
    h.reactor.wake(a);
    h.turn();
    // Each turn given back lends the partner's at once; after the limit a thread must poll.
    let mut taken = 0;
    while !h.reactor.poll_overdue() {
        let job = h
            .reactor
            .take_job()
            .expect("the pair keeps waking each other");
        h.give_back(job);
        taken += 1;
        assert!(taken <= crate::lending::TURNS_PER_POLL, "never overdue");
    }
    assert_eq!(taken, crate::lending::TURNS_PER_POLL);
    h.turn();
    assert!(!h.reactor.poll_overdue(), "a poll resets the count");
}

#[test]
fn a_turn_still_waiting_for_a_thread_at_shutdown_is_closed_as_stopped() {
    let mut h = Harness::new(Path::Lent);
    let (id, closed) = h.insert_panicky();
    h.reactor.test_inject(id, Ready::READABLE);
    h.turn(); // lent; no thread takes it
    h.reactor.shutdown();
    assert_eq!(
        *closed.lock().unwrap(),
        [crate::source::CloseReason::Stopped]
    );
    assert_eq!(h.reactor.source_count(), 0);
}

#[test]
fn a_source_whose_last_turn_was_long_is_lent_as_long() {
    let mut h = Harness::new(Path::Lent);
    let id = h.insert(false);
    let (job, _) = h.lend(id);
    assert!(!job.long, "a first turn is not known to be long");
    h.give_back(job);
    h.reactor.test_set_last_turn(id, crate::lending::LONG_TURN);
    let (job, _) = h.lend(id);
    assert!(
        job.long,
        "the thread taking it should hand the polling over"
    );
    h.give_back(job);
    // Given back after a short turn: short again.
    let (job, _) = h.lend(id);
    assert!(!job.long);
    h.give_back(job);
}
