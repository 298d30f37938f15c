//! The echo server: one unconnected UDP socket, a KCP conversation per peer address, made by
//! the peer's first datagram (its `conv` taken from that datagram).

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use ark_loopback::servers::Echo;
use kcp::KCP_OVERHEAD;
use mio::net::UdpSocket;

use crate::link::{Counters, Link, Wire};
use crate::mode::Config;
use crate::worker::Scratch;

/// One peer's conversation.
struct Session {
    link: Link,
    /// Whether datagrams arrived for it in the current batch.
    touched: bool,
}

/// The echo server of one socket.
pub struct Server {
    socket: Rc<UdpSocket>,
    echo: Echo,
    config: Config,
    counters: Arc<Counters>,
    sessions: Vec<Session>,
    by_peer: HashMap<SocketAddr, usize>,
    /// Sessions with input in the current batch.
    touched: Vec<usize>,
}

impl Server {
    /// A server on `socket` (registered with the worker's poller).
    pub fn new(socket: UdpSocket, echo: Echo, config: Config, counters: Arc<Counters>) -> Server {
        Server {
            socket: Rc::new(socket),
            echo,
            config,
            counters,
            sessions: Vec::new(),
            by_peer: HashMap::new(),
            touched: Vec::new(),
        }
    }

    /// Drains the socket into the peers' conversations, then answers every message they
    /// completed and flushes each touched conversation once; returns the earliest timer due.
    pub fn on_readable(&mut self, now: u32, scratch: &mut Scratch) -> u32 {
        loop {
            match self.socket.recv_from(&mut scratch.datagram) {
                Ok((n, peer)) => self.input(now, peer, &scratch.datagram[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP error of an earlier send: that peer is gone; others are not.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(_) => break,
            }
        }
        let mut earliest = u32::MAX;
        for index in self.touched.drain(..) {
            let session = &mut self.sessions[index];
            session.touched = false;
            while let Some(n) = session.link.recv(&mut scratch.message) {
                let message = &scratch.message[..n];
                self.echo.before_echo(message);
                if !session.link.send(message) {
                    self.echo.rejected();
                }
            }
            earliest = earliest.min(session.link.finish(now));
        }
        earliest
    }

    /// Feeds one datagram from `peer` to its conversation, made if it is new (or if the peer
    /// started another conversation from the same address).
    fn input(&mut self, now: u32, peer: SocketAddr, datagram: &[u8]) {
        if datagram.len() < KCP_OVERHEAD {
            return;
        }
        let conv = kcp::get_conv(datagram);
        let index = match self.by_peer.get(&peer) {
            Some(&index) if self.sessions[index].link.conv() == conv => index,
            Some(&index) => {
                self.sessions[index].link = self.link(conv, peer, now);
                index
            }
            None => {
                let link = self.link(conv, peer, now);
                self.sessions.push(Session {
                    link,
                    touched: false,
                });
                self.by_peer.insert(peer, self.sessions.len() - 1);
                self.sessions.len() - 1
            }
        };
        let session = &mut self.sessions[index];
        if !session.touched {
            session.touched = true;
            session.link.begin(now);
            self.touched.push(index);
        }
        session.link.input(datagram);
    }

    /// A new conversation `conv` with `peer`.
    fn link(&self, conv: u32, peer: SocketAddr, now: u32) -> Link {
        let wire = Wire::new(self.socket.clone(), Some(peer), self.counters.clone());
        Link::new(conv, wire, &self.config, now)
    }

    /// Runs the conversations' timers due at `now`; returns the earliest one due next.
    pub fn on_timer(&mut self, now: u32) -> u32 {
        let due = self.sessions.iter_mut().map(|s| s.link.on_timer(now));
        due.min().unwrap_or(u32::MAX)
    }
}
