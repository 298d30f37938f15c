//! IO models and the pool that runs them.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crate::config::ReactorConfig;
use crate::handler::{Handler, ReactorHandle};
use crate::ids::SourceId;
use crate::reactor::Reactor;
use crate::shared::SharedLoop;
use crate::stats::Stats;

/// How IO is spread over threads (as in arknet's benchmarks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoModel {
    /// One readiness loop. With `threads == 1` it is a plain single-threaded loop; with more,
    /// the threads take turns polling and every thread runs ready sources' handlers, the
    /// poller included (leader/followers). A source is never served by two threads at once
    /// and its events keep their order.
    Shared {
        /// Threads that poll and run handlers (0 is treated as 1).
        threads: usize,
    },
    /// Independent reactors, one thread and one `Poll` each; sources are spread over them.
    Sharded {
        /// Number of reactors (0 is treated as 1).
        reactors: usize,
    },
}

/// Where a server's or client's sources run: a pool of its own, or one shared with others.
#[derive(Debug, Clone)]
pub enum Runtime {
    /// A pool of its own with this IO model, stopped with its owner.
    Own(IoModel),
    /// A pool shared with others; it outlives its users.
    Shared(Arc<ReactorPool>),
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::Own(IoModel::Shared { threads: 1 })
    }
}

/// The builder methods that choose where a server's or client's sources run, the same on
/// every ark builder: `io_model` (a pool of its own), `pool` (a shared one), `runtime`
/// (either, as one value) and `reactor_config` (an own pool's reactors).
///
/// `runtime_options!()` sets the builder's fields `runtime: Runtime` and
/// `reactor_config: ReactorConfig`; `runtime_options!(via field)` passes the four on to the
/// builder in `self.field` that this one wraps (ark-http's wraps ark-tcp's, ark-rudp's
/// ark-udp's), so no crate restates them.
#[macro_export]
#[doc(hidden)]
macro_rules! runtime_options {
    () => {
        /// Runs on a pool of its own with this IO model (default: one thread).
        pub fn io_model(mut self, model: $crate::IoModel) -> Self {
            self.runtime = $crate::Runtime::Own(model);
            self
        }

        /// Runs on a shared pool, which outlives this server or client.
        pub fn pool(mut self, pool: ::std::sync::Arc<$crate::ReactorPool>) -> Self {
            self.runtime = $crate::Runtime::Shared(pool);
            self
        }

        /// Where it runs, as one value (an `ark_reactor::Runtime`).
        pub fn runtime(mut self, runtime: $crate::Runtime) -> Self {
            self.runtime = runtime;
            self
        }

        /// Settings of an own pool's reactors.
        pub fn reactor_config(mut self, config: $crate::ReactorConfig) -> Self {
            self.reactor_config = config;
            self
        }
    };
    (via $inner:ident) => {
        /// Runs on a pool of its own with this IO model (default: one thread).
        pub fn io_model(mut self, model: $crate::IoModel) -> Self {
            self.$inner = self.$inner.io_model(model);
            self
        }

        /// Runs on a shared pool, which outlives this server or client.
        pub fn pool(mut self, pool: ::std::sync::Arc<$crate::ReactorPool>) -> Self {
            self.$inner = self.$inner.pool(pool);
            self
        }

        /// Where it runs, as one value (an `ark_reactor::Runtime`).
        pub fn runtime(mut self, runtime: $crate::Runtime) -> Self {
            self.$inner = self.$inner.runtime(runtime);
            self
        }

        /// Settings of an own pool's reactors.
        pub fn reactor_config(mut self, config: $crate::ReactorConfig) -> Self {
            self.$inner = self.$inner.reactor_config(config);
            self
        }
    };
}

impl Runtime {
    /// The pool to use (started here for [`Runtime::Own`]) and whether it is owned.
    ///
    /// # Errors
    /// An own pool could not start.
    pub fn pool(self, config: ReactorConfig) -> io::Result<(Arc<ReactorPool>, bool)> {
        match self {
            Runtime::Own(model) => Ok((Arc::new(ReactorPool::start(model, config)?), true)),
            Runtime::Shared(pool) => Ok((pool, false)),
        }
    }
}

/// Stops a pool obtained from [`Runtime::pool`] if it is owned and no one else holds it.
///
/// # Errors
/// Stopping the pool failed.
pub fn release_pool(pool: Arc<ReactorPool>, owned: bool) -> io::Result<()> {
    match Arc::try_unwrap(pool) {
        Ok(pool) if owned => pool.stop(),
        // Shared, or still held elsewhere: it stops when its last holder drops it.
        _ => Ok(()),
    }
}

/// Where a source lives: its reactor and its id. Cheap to clone, `Send` and `Sync`: wake or
/// remove the source from any thread.
#[derive(Debug, Clone)]
pub struct SourceRef {
    reactor: ReactorHandle,
    id: SourceId,
}

impl SourceRef {
    /// A reference to source `id` of `reactor`.
    pub fn new(reactor: ReactorHandle, id: SourceId) -> Self {
        SourceRef { reactor, id }
    }

    /// The source's id within its reactor.
    pub fn id(&self) -> SourceId {
        self.id
    }

    /// The reactor the source is registered with.
    pub fn reactor(&self) -> &ReactorHandle {
        &self.reactor
    }

    /// Gives the source a turn soon (see [`ReactorHandle::wake`]); `false` if the reactor
    /// has stopped.
    pub fn wake(&self) -> bool {
        self.reactor.wake(self.id)
    }

    /// Removes the source on its reactor's thread (`on_close(CloseReason::Closed)`); `false`
    /// if the reactor has stopped.
    pub fn remove(&self) -> bool {
        let id = self.id;
        self.reactor.post(move |reactor| {
            reactor.remove(id);
        })
    }
}

/// Which reactor a new source goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// Each reactor in turn.
    #[default]
    RoundRobin,
    /// The reactor with the fewest registered sources.
    LeastLoaded,
}

/// Runs an [`IoModel`]: starts its threads, places new sources on its reactors, stops and
/// joins everything. Dropping the pool stops it too.
#[derive(Debug)]
pub struct ReactorPool {
    handles: Vec<ReactorHandle>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    next: AtomicUsize,
    placement: Placement,
    model: IoModel,
}

impl ReactorPool {
    /// Starts the threads of `model`, each reactor configured by `config`.
    ///
    /// # Errors
    /// A reactor could not be created or a thread could not be spawned; whatever had started
    /// is stopped again.
    pub fn start(model: IoModel, config: ReactorConfig) -> io::Result<ReactorPool> {
        let mut pool = ReactorPool {
            handles: Vec::new(),
            threads: Vec::new(),
            next: AtomicUsize::new(0),
            placement: Placement::RoundRobin,
            model,
        };
        let result = match model {
            IoModel::Sharded { reactors } => {
                (0..reactors.max(1)).try_for_each(|i| pool.spawn_reactor(i, config))
            }
            IoModel::Shared { threads } if threads > 1 => pool.spawn_shared(config, threads),
            IoModel::Shared { .. } => pool.spawn_reactor(0, config),
        };
        match result {
            Ok(()) => Ok(pool),
            Err(e) => {
                // The start error is the one worth reporting.
                let _ = pool.shutdown();
                Err(e)
            }
        }
    }

    /// Sets how new sources are placed (default round-robin).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// One reactor on a thread of its own.
    fn spawn_reactor(&mut self, index: usize, config: ReactorConfig) -> io::Result<()> {
        let mut reactor = Reactor::new(config)?;
        self.handles.push(reactor.handle());
        let thread = std::thread::Builder::new()
            .name(format!("ark-reactor-{index}"))
            .spawn(move || reactor.run())?;
        self.threads.push(thread);
        Ok(())
    }

    /// One reactor served by `threads` threads in turn.
    fn spawn_shared(&mut self, config: ReactorConfig, threads: usize) -> io::Result<()> {
        let reactor = Reactor::new(config)?;
        self.handles.push(reactor.handle());
        let core = Arc::new(SharedLoop::new(reactor)?);
        for t in 0..threads {
            core.add_thread();
            let thread_core = core.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("ark-shared-{t}"))
                .spawn(move || thread_core.run_thread());
            match spawned {
                Ok(thread) => self.threads.push(thread),
                Err(e) => {
                    core.remove_thread();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The model the pool runs.
    pub fn model(&self) -> IoModel {
        self.model
    }

    /// Handles of every reactor.
    pub fn handles(&self) -> &[ReactorHandle] {
        &self.handles
    }

    /// The reactor for a new source, by the pool's placement.
    pub fn next(&self) -> &ReactorHandle {
        let index = match self.placement {
            Placement::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len(),
            Placement::LeastLoaded => (0..self.handles.len())
                .min_by_key(|&i| self.handles[i].source_count())
                .unwrap_or(0),
        };
        &self.handles[index]
    }

    /// Registers `handler` on the next reactor (by placement) and returns where it lives,
    /// at once (the registration itself happens on the reactor's thread). `None` if the
    /// reactor has stopped or its source table is full. Registration errors reach the
    /// handler as `on_close(RegistrationFailed(kind))`.
    pub fn insert(&self, handler: Box<dyn Handler>, interest: mio::Interest) -> Option<SourceRef> {
        let reactor = self.next();
        let id = reactor.insert(handler, interest)?;
        Some(SourceRef {
            reactor: reactor.clone(),
            id,
        })
    }

    /// Counters of all reactors added up.
    pub fn stats(&self) -> Stats {
        let mut total = Stats::default();
        for handle in &self.handles {
            total.merge(&handle.stats());
        }
        total
    }

    /// Stops every reactor and joins every thread.
    ///
    /// # Errors
    /// The first error a reactor's loop returned, or a panic in a pool thread.
    pub fn stop(mut self) -> io::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<()> {
        for handle in &self.handles {
            handle.stop();
        }
        let mut result = Ok(());
        for thread in self.threads.drain(..) {
            let outcome = thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("a reactor pool thread panicked")));
            if result.is_ok() {
                result = outcome;
            }
        }
        result
    }
}

impl Drop for ReactorPool {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Resolves `addr` to its first socket address: an address (`"127.0.0.1:9000"`,
/// `"[::1]:9000"`) or a host name and port (`"localhost:9000"`, resolved by the system's
/// resolver, blocking). Every ark builder's `bind` and `connect` take addresses this way.
///
/// # Errors
/// The name could not be resolved, or resolved to no address.
pub fn resolve(addr: impl std::net::ToSocketAddrs) -> io::Result<std::net::SocketAddr> {
    addr.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to nothing",
        )
    })
}
