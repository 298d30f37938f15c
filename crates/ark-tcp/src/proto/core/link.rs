//! A session's link to its handler: the phase ([`State`]), the send queue and this turn's
//! counts, which the handler's [`TcpSession`](crate::TcpSession) view changes. Kept apart
//! from the frame reader, which is busy delivering while handlers run.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ark_frame::Flow;
use ark_reactor::{Deadlines, TimerId};

use crate::config::TcpConfig;
use crate::error::{CloseReason, SendError};
use crate::stats::TcpStats;

use super::rate::SessionRate;

/// The phase of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    /// Not yet established (a client's connect under way, or an accepted connection before its
    /// first turn). A client's connect must finish by `deadline`.
    Connecting {
        since: Instant,
        deadline: Option<Instant>,
    },
    /// Established; `on_open` has run.
    Open,
    /// Closing gracefully: no more sends; what is queued is being written, then writing is
    /// shut down. `peer_done`: the peer's end of stream has arrived already.
    Closing {
        reason: CloseReason,
        deadline: Instant,
        peer_done: bool,
    },
    /// Writing is shut down; reading until the peer's end of stream.
    ShutdownSent {
        reason: CloseReason,
        deadline: Instant,
    },
    /// Ended.
    Closed(CloseReason),
}

/// The outgoing byte queue of a session: frames are appended contiguously and written with
/// one `write` per turn; the storage is reused, so steady-state sends allocate nothing.
#[derive(Debug, Default)]
pub(crate) struct SendQueue {
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
}

impl SendQueue {
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    pub(super) fn consume(&mut self, n: usize) {
        self.pos += n.min(self.len());
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// The storage to append to, the unsent tail moved to the front first when the sent head
    /// dominates.
    #[inline]
    pub(super) fn tail(&mut self) -> &mut Vec<u8> {
        if self.pos > 0 && self.pos >= self.buf.len() / 2 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        &mut self.buf
    }

    pub(super) fn clear(&mut self) -> usize {
        let dropped = self.len();
        self.buf.clear();
        self.pos = 0;
        dropped
    }

    /// Appends all of `bytes` and leaves it empty; when nothing is queued the buffers are
    /// swapped instead of copied.
    pub(super) fn append(&mut self, bytes: &mut Vec<u8>) {
        if self.len() == 0 {
            self.clear();
            std::mem::swap(&mut self.buf, bytes);
        } else {
            self.tail().append(bytes);
        }
    }
}

/// The part of a session a handler's [`TcpSession`](crate::TcpSession) view changes: the phase, the send queue and
/// this turn's counts. Kept apart from the frame reader, which is busy delivering while
/// handlers run.
#[derive(Debug)]
pub(crate) struct Link {
    pub(super) state: State,
    pub(super) queue: SendQueue,
    pub(super) config: Arc<TcpConfig>,
    /// The time of the input being handled.
    pub(super) now: Instant,
    /// A send was refused (or reading paused): call `on_writable` once the queue drains.
    pub(super) wants_writable: bool,
    /// When queued bytes last left (or the queue last became non-empty).
    pub(super) last_tx: Instant,
    /// The handler's timers.
    pub(super) timers: Deadlines,
    pub(super) tally: TcpStats,
    /// Frames sent back unchanged from the input being delivered (echoes), queued by
    /// reference after `queue`: this range of the input. Only ever set while a driver's read
    /// is delivered ([`SessionCore::handle_read_lending`](super::SessionCore::handle_read_lending)); the driver writes it and
    /// [`SessionCore::handle_written_in_place`](super::SessionCore::handle_written_in_place) copies what is left into `queue` before the
    /// input goes.
    pub(super) in_place: Option<Range<usize>>,
    /// Rate limits and the rates measured (see [`SessionRate`]).
    pub(super) rate: SessionRate,
}

impl Link {
    /// New rate limits of the session's own, from now.
    pub(crate) fn set_rate_limits(&mut self, limits: ark_reactor::RateLimits) {
        self.rate.set_limits(limits, self.now);
    }

    /// Bytes queued: the queue's and those queued in place.
    #[inline]
    pub(crate) fn queued(&self) -> usize {
        self.queue.len() + self.in_place.as_ref().map_or(0, Range::len)
    }

    /// Queues the frame at `frame` of the input being delivered by reference, when it
    /// continues the frames already queued that way and stays under the high watermark;
    /// `Ok(false)` when it must be copied instead.
    #[inline]
    pub(crate) fn queue_in_place(&mut self, frame: Range<usize>) -> Result<bool, SendError> {
        let continues = self
            .in_place
            .as_ref()
            .is_none_or(|run| run.end == frame.start);
        if !continues || self.queued() + frame.len() >= self.config.high_watermark {
            return Ok(false);
        }
        self.admit(frame.len())?;
        match &mut self.in_place {
            Some(run) => run.end = frame.end,
            None => self.in_place = Some(frame),
        }
        Ok(true)
    }

    /// Copies what is queued in place (a range of `input`) into the queue: something is to
    /// follow it there, or the input is about to go.
    #[inline]
    pub(crate) fn settle_in_place(&mut self, input: &[u8]) {
        if let Some(run) = self.in_place.take() {
            self.queue.tail().extend_from_slice(&input[run]);
        }
    }

    /// The queue to append `needed` bytes to, if the session takes sends and the limit allows
    /// (what is queued in place must have been settled first).
    #[inline]
    pub(crate) fn room_for(&mut self, needed: usize) -> Result<&mut Vec<u8>, SendError> {
        debug_assert!(self.in_place.is_none(), "settle_in_place first");
        self.admit(needed)?;
        Ok(self.queue.tail())
    }

    /// Whether `needed` more bytes may be queued: the session takes sends and the limit
    /// allows. An empty queue always takes one frame, so a frame larger than the limit (up to
    /// the codec's maximum) can still be sent.
    #[inline]
    pub(super) fn admit(&mut self, needed: usize) -> Result<(), SendError> {
        if !matches!(self.state, State::Open | State::Connecting { .. }) {
            return Err(SendError::Closed);
        }
        let queued = self.queued();
        let limit = self.config.send_limit;
        if queued > 0 && queued + needed > limit {
            self.wants_writable = true;
            return Err(SendError::Full {
                queued,
                needed,
                limit,
            });
        }
        if queued == 0 {
            self.last_tx = self.now;
        }
        Ok(())
    }

    /// Starts a handler timer due `after` from now.
    /// Takes the idle, stall, write-stall and close timeouts of `config` from now on.
    pub(crate) fn set_timeouts(&mut self, config: &TcpConfig) {
        let own = Arc::make_mut(&mut self.config);
        own.idle_timeout = config.idle_timeout;
        own.stall_timeout = config.stall_timeout;
        own.write_stall_timeout = config.write_stall_timeout;
        own.close_timeout = config.close_timeout;
    }

    pub(crate) fn set_timer(&mut self, after: Duration) -> TimerId {
        self.timers.insert(self.now + after)
    }

    /// Cancels a handler timer; `true` if it was pending.
    pub(crate) fn cancel_timer(&mut self, timer: TimerId) -> bool {
        self.timers.cancel(timer)
    }

    /// Appends all of `bytes` (swapping buffers when nothing is queued) and empties it.
    pub(crate) fn append(&mut self, bytes: &mut Vec<u8>) -> Result<(), SendError> {
        self.room_for(bytes.len())?;
        self.queue.append(bytes);
        Ok(())
    }

    #[inline]
    pub(crate) fn count_frame_out(&mut self) {
        self.tally.frames_out += 1;
    }

    /// A received frame is about to be delivered; the bytes queued before its handling.
    #[inline]
    pub(super) fn begin_message(&mut self) -> usize {
        self.tally.frames_in += 1;
        self.queued()
    }

    /// A received frame was handled (`queued` bytes were queued before): whether to deliver
    /// the next one. Delivery pauses once the session closed, and while answers pile up faster
    /// than the peer reads them (TCP flow control then pushes back on it). A queue filled by
    /// sends that do not answer messages does not pause reading: a peer that sends and reads
    /// at once must not deadlock with us.
    #[inline]
    pub(super) fn end_message(&mut self, queued: usize, high_watermark: usize) -> Flow {
        if matches!(self.state, State::Closed(_)) {
            return Flow::Pause;
        }
        if self.queued() >= high_watermark && self.queued() > queued {
            self.wants_writable = true;
            return Flow::Pause;
        }
        Flow::Continue
    }

    /// Starts a graceful close for `reason` (no effect once closing or closed).
    pub(crate) fn begin_close(&mut self, reason: CloseReason) {
        match self.state {
            State::Open => {
                self.state = State::Closing {
                    reason,
                    deadline: self.now + self.config.close_timeout,
                    peer_done: false,
                };
            }
            // Nothing was exchanged yet: nothing to flush.
            State::Connecting { .. } => self.finish(reason),
            _ => {}
        }
    }

    /// Ends the session now: what is queued is dropped.
    pub(crate) fn abort(&mut self) {
        self.finish(CloseReason::Aborted);
    }

    /// Ends the session with `reason` (the first reason wins), dropping the queue.
    pub(super) fn finish(&mut self, reason: CloseReason) {
        if matches!(self.state, State::Closed(_)) {
            return;
        }
        let in_place = self.in_place.take().map_or(0, |run| run.len());
        self.tally.aborted_send_bytes += (self.queue.clear() + in_place) as u64;
        self.state = State::Closed(reason);
    }
}
