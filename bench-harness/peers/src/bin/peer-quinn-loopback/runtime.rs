//! The tokio runtimes of a run, as the tokio peer lays them out for `--io-model` and
//! `--io-threads`: `shared 1` a current-thread runtime, `shared N` a multi-thread runtime
//! with N workers, `sharded N` N current-thread runtimes, `owned` a current-thread runtime
//! per endpoint. Each current-thread runtime runs on a thread of its own until stopped. IO
//! and timers enabled (QUIC needs both).

use std::future::Future;
use std::io;
use std::thread::JoinHandle;
use std::time::Duration;

use ark_loopback::args::IoModelArg;
use tokio::runtime::{Builder, Handle, Runtime};

/// How long setup steps (binding an endpoint, a handshake) and the stop may take.
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// A current-thread runtime's stop signal and thread.
type CurrentThread = (tokio::sync::oneshot::Sender<()>, JoinHandle<()>);

/// The run's runtimes.
#[derive(Debug)]
pub struct Runtimes {
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
    pub fn start(model: IoModelArg, threads: usize) -> io::Result<Runtimes> {
        let mut runtimes = Runtimes {
            multi: None,
            current: Vec::new(),
            handles: Vec::new(),
        };
        match (model, threads) {
            (IoModelArg::Owned, _) => {}
            (IoModelArg::Shared, 2..) => {
                let runtime = Builder::new_multi_thread()
                    .worker_threads(threads)
                    .thread_name("quinn-io")
                    .enable_io()
                    .enable_time()
                    .build()?;
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
        let runtime = Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("quinn-io-{}", self.current.len()))
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
                .map_err(|_| io::Error::other("a quinn IO thread panicked"))?;
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
