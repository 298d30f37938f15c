//! KCP's servers and clients for `ark_loopback::run::measure`, on IO threads of their own
//! ([`crate::worker`]).

use std::io;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ark_loopback::args::{Args, IoModelArg, Protocol};
use ark_loopback::clients::Core;
use ark_loopback::servers::Echo;
use ark_loopback::stack::Stack;
use ark_peers::peer_net::{buffers, udp_socket, unspecified_like};

use crate::link::Counters;
use crate::mode::{Config, Mode};
use crate::worker::{Command, WorkerHandle};

/// How long the IO threads may take to stop.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// KCP's servers and clients in mode `M`.
pub struct KcpStack<M: Mode> {
    model: IoModelArg,
    config: Config,
    counters: Arc<Counters>,
    /// The run's IO threads (owned: one per endpoint started so far).
    workers: Vec<WorkerHandle>,
    /// Clients started so far.
    clients: usize,
    udp_server_buffers: Option<ark_udp::SocketBuffers>,
    mode: PhantomData<M>,
}

impl<M: Mode> KcpStack<M> {
    /// Starts one more IO thread; returns its index.
    fn add_worker(&mut self) -> io::Result<usize> {
        let index = self.workers.len();
        let counters = self.counters.clone();
        self.workers
            .push(WorkerHandle::spawn(index, self.config, counters)?);
        Ok(index)
    }

    /// The IO thread of the next client: round-robin, or (owned) a new one.
    fn client_worker(&mut self) -> io::Result<usize> {
        match self.model {
            IoModelArg::Owned => self.add_worker(),
            _ => Ok(self.clients % self.workers.len()),
        }
    }

    /// The IO threads the server runs on: (sharded) each with a socket of its own,
    /// `SO_REUSEPORT`, the kernel spreading the peers as ark-udp does; otherwise one.
    fn server_workers(&mut self) -> io::Result<Vec<usize>> {
        match self.model {
            IoModelArg::Owned => Ok(vec![self.add_worker()?]),
            IoModelArg::Sharded => Ok((0..self.workers.len()).collect()),
            IoModelArg::Shared => Ok(vec![0]),
        }
    }
}

impl<M: Mode> Stack for KcpStack<M> {
    const NAME: &'static str = M::NAME;

    fn start(args: &Args) -> io::Result<Self> {
        if args.protocol != Protocol::Rudp {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "peer-kcp-loopback runs --protocol rudp only (KCP is reliable UDP)",
            ));
        }
        if args.payload as usize > crate::mode::MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "--payload {} is over KCP's largest message, {} bytes: in message mode KCP's send refuses 128 segments or more",
                    args.payload,
                    crate::mode::MAX_MESSAGE
                ),
            ));
        }
        let mut endpoints = KcpStack {
            model: args.io_model,
            config: Config::of::<M>(args),
            counters: Arc::new(Counters::default()),
            workers: Vec::new(),
            clients: 0,
            udp_server_buffers: None,
            mode: PhantomData,
        };
        if args.io_model != IoModelArg::Owned {
            for _ in 0..args.io_threads {
                endpoints.add_worker()?;
            }
        }
        Ok(endpoints)
    }

    fn start_server(&mut self, args: &Args, echo: Echo) -> io::Result<SocketAddr> {
        let workers = self.server_workers()?;
        let reuse_port = workers.len() > 1;
        let mut bind = args.server_addr();
        for index in workers {
            let (send, receive) = (args.udp_send_buffer, args.udp_server_receive_buffer);
            let socket = udp_socket(bind, send, receive, reuse_port)?;
            self.udp_server_buffers = Some(buffers(&socket)?);
            bind = socket.local_addr()?;
            self.workers[index].send(Command::Server(socket, echo.clone()))?;
        }
        Ok(bind)
    }

    fn start_client(
        &mut self,
        args: &Args,
        server: SocketAddr,
        core: Core,
    ) -> io::Result<Option<ark_udp::SocketBuffers>> {
        let index = self.client_worker()?;
        let (send, receive) = (args.udp_send_buffer, args.udp_receive_buffer);
        let socket = udp_socket(unspecified_like(server), send, receive, false)?;
        socket.connect(server)?;
        let sizes = buffers(&socket)?;
        self.clients += 1;
        let conv = self.clients as u32;
        self.workers[index].send(Command::Client(socket, conv, Box::new(core)))?;
        Ok(Some(sizes))
    }

    fn syscalls(&self) -> Option<u64> {
        None
    }

    fn udp_server_buffers(&self) -> Option<ark_udp::SocketBuffers> {
        self.udp_server_buffers
    }

    fn udp_batched(&self, _: &Args) -> bool {
        false
    }

    fn rudp_stats(&self) -> Option<serde_json::Value> {
        let get = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        Some(serde_json::json!({
            "mode": self.config.mode,
            "fec": null,
            "retransmissions": get(&self.counters.retransmissions),
            "datagrams_refused": get(&self.counters.refused),
            "kcp": self.config.json(),
        }))
    }

    fn stop(self) -> io::Result<()> {
        // Each thread ends by dropping its endpoints; a client's round trips are counted as
        // it drops. A thread that already ended is joined all the same.
        for worker in &self.workers {
            let _ = worker.send(Command::Stop);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        for worker in self.workers {
            worker.join(deadline)?;
        }
        Ok(())
    }
}
