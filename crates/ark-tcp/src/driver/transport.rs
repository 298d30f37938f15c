//! How a session's bytes cross its socket: [`Transport`], with plain TCP ([`Plain`], here) and
//! TLS (`tls::TlsLayer`) as its two implementations. The driver (`conn::Conn<C, H, T>`) is
//! written once against the trait; the read loop ([`read_loop`]) is shared by both.

use std::io::{self, IoSlice};
use std::time::Instant;

use ark_reactor::{Context, Ready};

use crate::driver::stream::SessionStream;
use crate::error::CloseReason;
use crate::handler::{SessionInfo, TcpHandler};
use crate::proto::core::{Framing, SessionCore};

/// What a driver needs of the layer between its socket and its [`SessionCore`].
pub(crate) trait Transport<C: Framing, H: TcpHandler>: Send + 'static {
    /// The TCP connection is established. Plain TCP opens the session now (`true`); TLS
    /// keeps `info` until its handshake completes (`false`, then [`take_opened`]).
    ///
    /// [`take_opened`]: Transport::take_opened
    fn connected(&mut self, core: &mut SessionCore<C, H>, now: Instant, info: SessionInfo) -> bool;

    /// Whether the session opened during the last input (a handshake completed).
    fn take_opened(&mut self) -> bool {
        false
    }

    /// The TCP connection is up but the session waits for this layer (a handshake).
    fn handshaking(&self) -> bool {
        false
    }

    /// Whether to read the socket now.
    fn wants_read(&self, core: &SessionCore<C, H>) -> bool;

    /// One read from `stream`: its result, and how many bytes it asked for.
    fn read_from<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
    ) -> (io::Result<usize>, usize);

    /// `n` bytes were read; `false` ends the turn's reading (input is held back). What the
    /// delivery sends may be written to `stream` at once.
    fn received<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        n: usize,
    ) -> bool;

    /// The peer ended its stream.
    fn end_of_stream(&mut self, core: &mut SessionCore<C, H>, now: Instant);

    /// Reads and feeds the core within the turn's budget; whether input may still be
    /// waiting (the budget ran out).
    fn read<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        ready: Ready,
    ) -> bool
    where
        Self: Sized,
    {
        read_loop(stream, self, core, cx, ready)
    }

    /// One write of what the core offers. Returns (the socket is full, reading resumed).
    fn write<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        now: Instant,
    ) -> (bool, bool);

    /// Shuts writing down once a graceful close has written everything (ours included).
    fn shutdown_when_done<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
    );

    /// Bytes of this layer's own wait for the socket.
    fn wants_write(&self) -> bool {
        false
    }

    /// This layer's own deadline (a handshake's).
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// This layer's deadline passed.
    fn handle_timeout(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        let _ = (core, now);
    }
}

/// Whether a failed read or write only means "not now".
pub(crate) fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// What a failed write means: the socket is full (`true`), try again (`false`), or, for any
/// other error, the session ends (`true`: write no more this turn).
pub(crate) fn write_failed<C: Framing, H: TcpHandler>(
    e: &io::Error,
    core: &mut SessionCore<C, H>,
) -> bool {
    match e.kind() {
        io::ErrorKind::WouldBlock => true,
        io::ErrorKind::Interrupted => false,
        _ => {
            core.handle_error(CloseReason::io(e));
            true
        }
    }
}

/// Plain TCP: reads go to the reactor's scratch buffer, or straight into the receive buffer
/// for a large pending frame; frames sent back unchanged are written from the scratch buffer.
#[derive(Default)]
pub(crate) struct Plain {
    /// The last read went into the receive buffer.
    direct: bool,
}

impl<C: Framing, H: TcpHandler> Transport<C, H> for Plain {
    fn connected(&mut self, core: &mut SessionCore<C, H>, now: Instant, info: SessionInfo) -> bool {
        core.handle_connected(now, info);
        core.was_opened()
    }

    fn wants_read(&self, core: &SessionCore<C, H>) -> bool {
        core.wants_read()
    }

    fn read_from<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
    ) -> (io::Result<usize>, usize) {
        // No more than the read budget of the session's rate limits.
        let cap = core.read_allowance();
        let buf = match core.direct_read_buf() {
            Some(buf) => {
                self.direct = true;
                buf
            }
            None => {
                self.direct = false;
                cx.scratch()
            }
        };
        let len = cap.min(buf.len());
        let buf = &mut buf[..len];
        (stream.read(buf), len)
    }

    fn received<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        n: usize,
    ) -> bool {
        let now = cx.now();
        if self.direct {
            core.handle_read_direct(now, n);
            return true;
        }
        // Echoed frames are written from the scratch buffer before the next read reuses it.
        let input = &mut cx.scratch()[..n];
        core.handle_read_lending(now, input);
        let Some(bufs) = core.transmit_in_place(input) else {
            return true;
        };
        let result = match bufs {
            [[], frames] => stream.write(frames),
            [queued, frames] => {
                stream.write_vectored(&[IoSlice::new(queued), IoSlice::new(frames)])
            }
        };
        core.count_write();
        match result {
            Ok(written) => core.handle_written_in_place(now, input, written),
            Err(e) if would_block(&e) => core.handle_written_in_place(now, input, 0),
            Err(e) => core.handle_error(CloseReason::io(&e)),
        }
        cx.counters().add_writes(1);
        true
    }

    fn end_of_stream(&mut self, core: &mut SessionCore<C, H>, now: Instant) {
        core.handle_eof(now);
    }

    fn write<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
        cx: &mut Context<'_>,
        now: Instant,
    ) -> (bool, bool) {
        let bytes = core.transmit();
        if bytes.is_empty() {
            return (false, false);
        }
        let len = bytes.len();
        let result = stream.write(bytes);
        cx.counters().add_writes(1);
        core.count_write();
        match result {
            // A partial write filled the socket: on Linux its next writable edge will come;
            // elsewhere only a `WouldBlock` promises one, so the turn runs again and writes
            // until it sees one (`SHORT_IO_DRAINS`).
            Ok(n) => (
                ark_reactor::SHORT_IO_DRAINS && n < len,
                core.handle_written(now, n),
            ),
            Err(e) => (write_failed(&e, core), false),
        }
    }

    fn shutdown_when_done<S: SessionStream>(
        &mut self,
        stream: &mut S,
        core: &mut SessionCore<C, H>,
    ) {
        if core.poll_shutdown() {
            let _ = stream.shutdown_write();
        }
    }
}

/// Reads and feeds `transport` within the turn's budget. Returns whether input may still be
/// waiting (the budget ran out).
pub(crate) fn read_loop<C: Framing, H: TcpHandler, S: SessionStream>(
    stream: &mut S,
    transport: &mut impl Transport<C, H>,
    core: &mut SessionCore<C, H>,
    cx: &mut Context<'_>,
    ready: Ready,
) -> bool {
    let budget = cx.budget();
    let (mut reads, mut bytes) = (0u32, 0usize);
    while transport.wants_read(core) {
        if reads == budget.operations || bytes >= budget.bytes {
            return true;
        }
        let (result, asked) = transport.read_from(stream, core, cx);
        reads += 1;
        cx.counters().add_reads(1);
        core.count_read();
        match result {
            Ok(0) => {
                transport.end_of_stream(core, cx.now());
                return false;
            }
            Ok(n) => {
                bytes += n;
                if !transport.received(stream, core, cx, n) {
                    return false;
                }
                // A short read drained the socket (where it does: `SHORT_IO_DRAINS`), unless
                // the peer's end of stream came with this edge: then read on until it shows.
                // Elsewhere the next read's `WouldBlock` ends the loop.
                if ark_reactor::SHORT_IO_DRAINS && n < asked && !ready.contains(Ready::READ_CLOSED)
                {
                    core.release_idle_buffers();
                    return false;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                core.release_idle_buffers();
                return false;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                core.handle_error(CloseReason::io(&e));
                return false;
            }
        }
    }
    false
}
