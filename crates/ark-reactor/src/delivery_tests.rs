//! Deterministic tests of the reactor's delivery in the shared IO model: the test thread plays
//! the worker (it holds a lent handler for as long as it likes) and injects wakes, timers and
//! readiness while the handler is out. Nothing sleeps; every step is an explicit reactor turn.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::config::ReactorConfig;
use crate::context::{Budget, Context, Effect};
use crate::reactor::Reactor;
use crate::source::{Handler, Ready, SourceId, Turn};
use crate::timer::TimerId;
use crate::worker::{Done, Job, serve_job};

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

/// A source that does nothing.
struct Filler(NoSocket);

impl Handler for Filler {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        &mut self.0
    }
    fn on_ready(&mut self, _: &mut Context<'_>, _: Ready) -> Turn {
        Turn::Done
    }
}

/// How a handler coming back from a worker is served next.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// Its turns are costly: it goes back to a worker.
    Worker,
    /// Its turns are cheap: the polling thread serves it inline.
    Inline,
}

struct Harness {
    reactor: Reactor,
    jobs: Receiver<Job>,
    done: Sender<Done>,
    scratch: Vec<u8>,
    effects: Vec<Effect>,
    path: Path,
    log: Arc<Mutex<Vec<Seen>>>,
    cancel: Arc<Mutex<Option<TimerId>>>,
}

impl Harness {
    fn new(path: Path) -> Harness {
        let config = ReactorConfig {
            inline_below: Duration::from_millis(100),
            ..ReactorConfig::default()
        };
        let mut reactor = Reactor::new(config).unwrap();
        let (jobs, done) = reactor.test_manual_workers();
        Harness {
            reactor,
            jobs,
            done,
            scratch: vec![0; 1024],
            effects: Vec::new(),
            path,
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

    fn turn(&mut self) {
        self.reactor.turn(Some(Duration::ZERO)).unwrap();
    }

    /// Makes the reactor lend `id` to the test's worker (through a due timer, `t0`); the test
    /// holds the job until it gives it back. (A second source is ready in the same turn, so
    /// `id` is not the turn's last, which the polling thread serves itself.)
    fn lend(&mut self, id: SourceId) -> (Job, TimerId) {
        self.reactor
            .test_set_last_turn(id, Duration::from_secs(3600));
        let t0 = self.reactor.test_source_timer(id);
        let filler = self
            .reactor
            .insert(Box::new(Filler(NoSocket)), mio::Interest::READABLE)
            .unwrap();
        self.reactor.test_source_timer(filler); // fires after t0
        self.turn();
        let job = self
            .jobs
            .try_recv()
            .expect("the handler was lent to a worker");
        (job, t0)
    }

    /// Runs a held job as a worker would and hands the handler back; how long the turn
    /// "took" decides the path of its next turn.
    fn give_back(&mut self, job: Job) {
        let mut done = serve_job(
            job,
            &mut self.scratch,
            &mut self.effects,
            self.reactor.shared(),
            Budget::default(),
        );
        done.took = match self.path {
            Path::Worker => Duration::from_secs(3600),
            Path::Inline => Duration::ZERO,
        };
        self.done.send(done).unwrap();
    }

    /// Turns the reactor, serving every lent job at once, until nothing more happens.
    fn settle(&mut self) {
        for _ in 0..50 {
            self.turn();
            while let Ok(job) = self.jobs.try_recv() {
                self.give_back(job);
            }
        }
    }

    fn log(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

fn wake_while_lent(path: Path) {
    let mut h = Harness::new(path);
    let id = h.insert(false);
    let (job, t0) = h.lend(id);
    assert!(h.reactor.wake(id));
    h.turn(); // the wake arrives while the worker holds the handler
    h.give_back(job);
    h.settle();
    let log = h.log();
    assert_eq!(
        log.len(),
        2,
        "{path:?}: the wake was not delivered: {log:?}"
    );
    assert_eq!(log[0], Seen::Timer(t0));
    assert!(matches!(log[1], Seen::Ready(_)), "{path:?}: {log:?}");
}

#[test]
fn a_wake_while_a_worker_holds_the_handler_reaches_it_back_on_a_worker() {
    wake_while_lent(Path::Worker);
}

#[test]
fn a_wake_while_a_worker_holds_the_handler_reaches_it_served_inline() {
    wake_while_lent(Path::Inline);
}

fn timers_and_readiness_while_lent(path: Path) {
    let mut h = Harness::new(path);
    let id = h.insert(false);
    let (job, t0) = h.lend(id);
    let t1 = h.reactor.test_source_timer(id);
    let t2 = h.reactor.test_source_timer(id);
    h.reactor.test_inject(id, Ready::READABLE);
    h.turn(); // two timers and a readiness event park while the worker holds the handler
    h.give_back(job);
    h.settle();
    assert_eq!(
        h.log(),
        [
            Seen::Timer(t0),
            Seen::Timer(t1),
            Seen::Timer(t2),
            Seen::Ready(Ready::READABLE)
        ],
        "{path:?}"
    );
}

#[test]
fn timers_and_readiness_while_a_worker_holds_the_handler_all_reach_it_back_on_a_worker() {
    timers_and_readiness_while_lent(Path::Worker);
}

#[test]
fn timers_and_readiness_while_a_worker_holds_the_handler_all_reach_it_served_inline() {
    timers_and_readiness_while_lent(Path::Inline);
}

fn cancelled_parked_timer(path: Path) {
    let mut h = Harness::new(path);
    let id = h.insert(false);
    let (job, t0) = h.lend(id);
    let t1 = h.reactor.test_source_timer(id);
    h.reactor.test_inject(id, Ready::READABLE);
    h.turn(); // t1 and the readiness park
    // The handler's turn on the worker cancels t1, which has fired but is not delivered.
    *h.cancel.lock().unwrap() = Some(t1);
    h.give_back(job);
    h.settle();
    assert_eq!(
        h.log(),
        [Seen::Timer(t0), Seen::Ready(Ready::READABLE)],
        "{path:?}: a cancelled parked timer must not hold back the readiness behind it"
    );
}

#[test]
fn a_timer_cancelled_while_parked_does_not_hold_back_readiness_on_a_worker() {
    cancelled_parked_timer(Path::Worker);
}

#[test]
fn a_timer_cancelled_while_parked_does_not_hold_back_readiness_served_inline() {
    cancelled_parked_timer(Path::Inline);
}

#[test]
fn a_source_over_budget_with_new_edges_runs_once_per_turn() {
    // No workers: one loop. The source always uses its budget (Turn::Again) and gets a new
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
    let closed = Arc::new(Mutex::new(Vec::new()));
    let bad = h
        .reactor
        .insert(
            Box::new(Panicky {
                socket: NoSocket,
                closed: closed.clone(),
            }),
            mio::Interest::READABLE,
        )
        .unwrap();
    let good = h.insert(false);
    if let Path::Worker = path {
        // Lent to the test's worker, which runs it as a worker thread would.
        h.reactor.test_set_last_turn(bad, Duration::from_secs(3600));
    }
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
fn a_panicking_handler_closes_only_its_source_on_a_worker() {
    panic_is_contained(Path::Worker);
}
