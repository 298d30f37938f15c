//! The tokio runtimes of a peer's run, laid out for `--io-model` and `--io-threads`:
//! `shared 1` a current-thread runtime, `shared N` a multi-thread runtime with N workers,
//! `sharded N` N current-thread runtimes, `owned` a current-thread runtime per endpoint. Each
//! current-thread runtime runs on a thread of its own until stopped. The tokio peer and the
//! QUIC peer (which also needs timers) share them, and the way a client's setup is started.

use std::future::Future;
use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use ark_loopback::args::IoModelArg;
use tokio::runtime::{Builder, Handle, Runtime};

/// How long setup steps (binding an endpoint, a connect, a handshake) and the stop may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A current-thread runtime's stop signal and thread.
type CurrentThread = (tokio::sync::oneshot::Sender<()>, JoinHandle<()>);

/// What the runtimes are for: their threads' name and whether they drive timers.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeKind {
    /// The threads' name (`<name>` for a multi-thread runtime's workers, `<name>-<i>` for the
    /// i-th current-thread runtime).
    pub name: &'static str,
    /// Whether tokio's timer driver is on (IO always is).
    pub timers: bool,
}

/// The run's runtimes.
#[derive(Debug)]
pub struct Runtimes {
    kind: RuntimeKind,
    /// The multi-thread runtime (`shared` with more than one thread).
    multi: Option<Runtime>,
    /// Current-thread runtimes, each driven by a thread of its own until its stop signal.
    current: Vec<CurrentThread>,
    /// Where endpoints go: one handle per runtime made at the start (owned: none).
    pub handles: Vec<Handle>,
}

impl Runtimes {
    /// The runtimes of `model` with `threads` threads (owned: none yet; see [`Runtimes::add`]).
    ///
    /// # Errors
    /// A runtime or its thread could not start.
    pub fn start(model: IoModelArg, threads: usize, kind: RuntimeKind) -> io::Result<Runtimes> {
        let mut runtimes = Runtimes {
            kind,
            multi: None,
            current: Vec::new(),
            handles: Vec::new(),
        };
        match (model, threads) {
            (IoModelArg::Owned, _) => {}
            (IoModelArg::Shared, 2..) => {
                let mut builder = Builder::new_multi_thread();
                builder
                    .worker_threads(threads)
                    .thread_name(kind.name)
                    .enable_io();
                if kind.timers {
                    builder.enable_time();
                }
                let runtime = builder.build()?;
                runtimes.handles.push(runtime.handle().clone());
                runtimes.multi = Some(runtime);
            }
            _ => {
                for _ in 0..threads {
                    let handle = runtimes.add()?;
                    runtimes.handles.push(handle);
                }
            }
        }
        Ok(runtimes)
    }

    /// Starts one more current-thread runtime on a thread of its own; returns its handle.
    ///
    /// # Errors
    /// The runtime or its thread could not start.
    pub fn add(&mut self) -> io::Result<Handle> {
        let mut builder = Builder::new_current_thread();
        builder.enable_io();
        if self.kind.timers {
            builder.enable_time();
        }
        let runtime = builder.build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("{}-{}", self.kind.name, self.current.len()))
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        self.current.push((stop, thread));
        Ok(handle)
    }

    /// Shuts every runtime down, dropping its tasks (endpoints, connections, clients).
    ///
    /// # Errors
    /// A runtime's thread panicked.
    pub fn stop(self) -> io::Result<()> {
        if let Some(runtime) = self.multi {
            runtime.shutdown_timeout(SETUP_TIMEOUT);
        }
        for (stop, thread) in self.current {
            let _ = stop.send(());
            thread
                .join()
                .map_err(|_| io::Error::other(format!("a {} thread panicked", self.kind.name)))?;
        }
        Ok(())
    }
}

/// Runs `future` on `handle` and waits (bounded) for its result.
///
/// # Errors
/// The future's error, or a timeout.
pub fn run_on<T: Send + 'static>(
    handle: &Handle,
    future: impl Future<Output = io::Result<T>> + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(future.await);
    });
    rx.recv_timeout(SETUP_TIMEOUT).map_err(|_| {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("setup did not finish within {SETUP_TIMEOUT:?}"),
        )
    })?
}

/// Runs client `index`: `setup` connects (and makes the handshakes), its output runs the
/// client. One by one (up to ark-loopback's connect batch), the setup is waited for here, so
/// the server sees the clients in order and a failure is the run's error; past that the whole
/// client is one task, so that a connection does not wait for a turn of a runtime busy with
/// every client before it (a failed setup is then reported on stderr).
///
/// # Errors
/// One by one: the setup's error or its timeout.
pub fn start_task<T>(
    handle: &Handle,
    one_by_one: bool,
    index: usize,
    setup: impl Future<Output = io::Result<T>> + Send + 'static,
) -> io::Result<()>
where
    T: Future<Output = ()> + Send + 'static,
{
    if one_by_one {
        handle.spawn(run_on(handle, setup)?);
        return Ok(());
    }
    handle.spawn(async move {
        match setup.await {
            Ok(client) => client.await,
            Err(e) => eprintln!("client {index}: {e}"),
        }
    });
    Ok(())
}
