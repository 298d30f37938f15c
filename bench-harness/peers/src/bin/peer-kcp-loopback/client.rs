//! A closed-loop client: a connected UDP socket, one KCP conversation (conv = client id + 1),
//! and `Core`, which fills, checks and times every message as ark's clients do.

use std::io;
use std::rc::Rc;
use std::sync::Arc;

use ark_loopback::clients::Core;
use mio::net::UdpSocket;

use crate::link::{Counters, Link, Wire};
use crate::mode::Config;
use crate::worker::Scratch;

/// One client.
pub struct Client {
    socket: Rc<UdpSocket>,
    link: Link,
    core: Core,
}

impl Client {
    /// A client of conversation `conv` on `socket` (connected, registered with the worker's
    /// poller); sends its first window at `now`.
    pub fn start(
        socket: UdpSocket,
        conv: u32,
        mut core: Core,
        (config, counters): (&Config, Arc<Counters>),
        now: u32,
    ) -> Client {
        let socket = Rc::new(socket);
        let wire = Wire::new(socket.clone(), None, counters);
        let mut link = Link::new(conv, wire, config, now);
        core.pump(|m| link.send(m));
        link.finish(now);
        Client { socket, link, core }
    }

    /// Drains the socket into KCP, answers every echo it completed with the next message,
    /// and flushes once; returns when the timer is next due.
    pub fn on_readable(&mut self, now: u32, scratch: &mut Scratch) -> u32 {
        self.link.begin(now);
        loop {
            match self.socket.recv(&mut scratch.datagram) {
                Ok(n) => self.link.input(&scratch.datagram[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP error of an earlier send (no server yet, or a lost path): KCP
                // sends again, and gives up on its own (`is_dead`).
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(_) => break,
            }
        }
        while let Some(n) = self.link.recv(&mut scratch.message) {
            let link = &mut self.link;
            self.core.on_echo(&scratch.message[..n], |m| link.send(m));
        }
        self.link.finish(now)
    }

    /// Runs the timer if due; returns when it is next due, or `None` once KCP gave up on
    /// the conversation (counted as a disconnect).
    pub fn on_timer(&mut self, now: u32) -> Option<u32> {
        let due = self.link.on_timer(now);
        if self.link.is_dead() {
            self.core.on_disconnect();
            return None;
        }
        Some(due)
    }
}
