//! `FrameReader`: a decoder and a `RecvBuf` that turn arbitrary chunks into whole frames.

use std::ops::{ControlFlow, Range};

use crate::codec::{Decoded, Decoder};
use crate::error::{ConfigError, DecodeError};
use crate::recv_buf::{DEFAULT_INITIAL_CAPACITY, RecvBuf};

/// Slack above a decoder's largest frame in the buffer's maximum capacity: room for the bytes
/// of one 64 KiB socket read that follow a frame when delivery is paused.
const READ_SLACK: usize = 64 * 1024;

/// Smallest step when appending to a buffered frame of unknown length (a delimiter not yet
/// seen); the step doubles with the bytes already buffered.
const MIN_APPEND_STEP: usize = 64;

/// What a frame handler wants next. Handlers may also return `()` (continue) or
/// `ControlFlow<()>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Deliver the next frame.
    Continue,
    /// Stop delivering; the reader keeps every byte not yet delivered.
    Pause,
}

impl From<()> for Flow {
    #[inline]
    fn from((): ()) -> Self {
        Flow::Continue
    }
}

impl From<ControlFlow<()>> for Flow {
    #[inline]
    fn from(flow: ControlFlow<()>) -> Self {
        match flow {
            ControlFlow::Continue(()) => Flow::Continue,
            ControlFlow::Break(()) => Flow::Pause,
        }
    }
}

/// Where a feed stands in its input.
#[derive(Debug, Default)]
struct Cursor {
    /// Input bytes taken (delivered, or appended to the buffer).
    pos: usize,
    /// Input bytes appended to the buffer since its last incomplete decode.
    appended: usize,
}

/// A whole frame [`FrameReader::next_frame`] found.
enum Found {
    /// In the buffer: its body, and the bytes to consume once it is delivered.
    Buffered { body: Range<usize>, total: usize },
    /// In the input: its body.
    Input(Range<usize>),
    /// None until more bytes arrive.
    Nothing,
}

/// How a [`FrameReader::feed`] call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feed {
    /// Every whole frame was delivered; at most one partial frame is buffered.
    Drained,
    /// The handler paused delivery. Undelivered bytes are held; call
    /// [`FrameReader::resume`] to go on. Feeding more input while paused delivers the held
    /// frames first and holds the new input as long as everything held fits in the buffer's
    /// maximum capacity; past it the feed returns [`DecodeError::PausedFull`] without
    /// consuming the input. A caller applying backpressure stops reading from its source
    /// until `resume` returns `Drained`.
    Paused,
}

/// A [`Decoder`] plus a [`RecvBuf`]: feed it chunks as they arrive, get whole frames back as
/// borrowed slices.
///
/// # Copies
///
/// While nothing is buffered, frames are decoded straight from the input and handed out
/// without copying; only a trailing partial frame is copied into the buffer. When a partial
/// frame is buffered, the next input first completes it (copying exactly the missing bytes
/// when its length is known), then decoding continues straight from the input.
///
/// # Errors
///
/// A [`DecodeError`] ends the stream: the buffer is cleared, and every later `feed` returns
/// the same error. Close the session that produced it. ([`DecodeError::PausedFull`] is the
/// exception: it refuses one input and leaves the stream as it was.)
///
/// # Memory
///
/// The buffer grows with the bytes that actually arrive (by doubling, from its initial
/// capacity), never with the length a header announces: a peer that announces a 16 MiB frame
/// and sends 5 bytes costs the initial capacity, not 16 MiB.
///
/// ```
/// use ark_frame::{Encoder, FrameReader, LengthPrefix};
///
/// let mut wire = Vec::new();
/// LengthPrefix::default().encode(b"hello", &mut wire)?;
/// LengthPrefix::default().encode(b"world", &mut wire)?;
///
/// let mut reader = FrameReader::new(LengthPrefix::default());
/// let mut got = Vec::new();
/// for chunk in wire.chunks(3) {
///     reader.feed(chunk, |frame: &[u8]| got.push(frame.to_vec()))?;
/// }
/// assert_eq!(got, [b"hello".to_vec(), b"world".to_vec()]);
/// assert_eq!(reader.buffered_len(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct FrameReader<D> {
    decoder: D,
    buf: RecvBuf,
    /// Bytes the buffer must hold before decoding it again (0: decode now).
    want: usize,
    failed: Option<DecodeError>,
    /// Delivery was paused with undelivered bytes held.
    paused: bool,
}

impl<D: Decoder> FrameReader<D> {
    /// A reader with the default 4 KiB initial buffer capacity and a maximum capacity of the
    /// decoder's largest frame plus 64 KiB. Allocates nothing.
    pub fn new(decoder: D) -> Self {
        Self::with_initial_capacity(decoder, DEFAULT_INITIAL_CAPACITY)
            .expect("the default initial capacity is valid")
    }

    /// A reader whose buffer starts at `initial` bytes once it is needed.
    ///
    /// # Errors
    /// [`ConfigError::ZeroInitialCapacity`] for 0, [`ConfigError::InitialAboveMax`] when
    /// `initial` exceeds the decoder's largest frame plus 64 KiB.
    pub fn with_initial_capacity(decoder: D, initial: usize) -> Result<Self, ConfigError> {
        let max = decoder.max_encoded_len().saturating_add(READ_SLACK);
        Ok(Self::with_buffer(
            decoder,
            RecvBuf::with_capacity(initial, max)?,
        ))
    }

    /// A reader over a buffer configured by the caller.
    pub fn with_buffer(decoder: D, buf: RecvBuf) -> Self {
        Self {
            decoder,
            buf,
            want: 0,
            failed: None,
            paused: false,
        }
    }

    /// Delivers every whole frame in the buffered bytes followed by `input` to `on_frame`,
    /// in order, and keeps what is left (a partial frame, or everything after a pause).
    ///
    /// `on_frame` gets each frame's body and returns `()` or a [`Flow`]
    /// (or `ControlFlow<()>`); [`Flow::Pause`] stops delivery with the rest kept.
    ///
    /// # Errors
    /// A [`DecodeError`] for malformed input or a broken limit; see the type docs.
    #[inline]
    pub fn feed<F, R>(&mut self, input: &[u8], mut on_frame: F) -> Result<Feed, DecodeError>
    where
        F: FnMut(&[u8]) -> R,
        R: Into<Flow>,
    {
        let mut on_frame = |frame: &[u8]| on_frame(frame).into();
        if let Some(done) = self.before_feed(input, |reader| reader.feed_inner(&[], &mut on_frame))
        {
            return done;
        }
        let result = self.feed_inner(input, on_frame);
        self.after_feed(result)
    }

    /// As [`feed`](Self::feed), with every frame lent mutably: for a protocol layer that
    /// decodes in place where the bytes are (unmasking, decryption). Only the lent frames'
    /// bodies may change; the reader keeps a trailing partial frame as `feed` does.
    ///
    /// # Errors
    /// As [`feed`](Self::feed).
    #[inline]
    pub fn feed_mut<F, R>(&mut self, input: &mut [u8], mut on_frame: F) -> Result<Feed, DecodeError>
    where
        F: FnMut(&mut [u8]) -> R,
        R: Into<Flow>,
    {
        let mut on_frame = |frame: &mut [u8]| on_frame(frame).into();
        if let Some(done) = self.before_feed(input, |reader| {
            reader.feed_inner_mut(&mut [], &mut on_frame)
        }) {
            return done;
        }
        let result = self.feed_inner_mut(input, on_frame);
        self.after_feed(result)
    }

    /// What a feed does before decoding `input`: `Some` with the feed's result when it is
    /// over already — the stream failed, a paused reader had to hold the input, or the input
    /// only adds to a buffered frame. `deliver_held` delivers a paused reader's frames.
    #[inline]
    fn before_feed(
        &mut self,
        input: &[u8],
        deliver_held: impl FnOnce(&mut Self) -> Result<Feed, DecodeError>,
    ) -> Option<Result<Feed, DecodeError>> {
        if let Some(error) = &self.failed {
            return Some(Err(error.clone()));
        }
        if self.paused && !input.is_empty() {
            // The held frames go first; if delivery pauses again, the input is held too.
            match deliver_held(self) {
                Ok(Feed::Drained) => self.paused = false,
                Ok(Feed::Paused) => return Some(self.hold(input)),
                Err(error) => return Some(Err(self.fail(error))),
            }
        }
        // Fast path for small reads: all of `input` belongs to the buffered frame and does
        // not complete it.
        let buffered = self.buf.len();
        if buffered != 0 && self.want > buffered + input.len() {
            return Some(match self.buf.extend_from_slice(input) {
                Ok(()) => Ok(Feed::Drained),
                Err(error) => Err(self.fail(error.into())),
            });
        }
        None
    }

    /// Records how a feed's decoding ended.
    #[inline]
    fn after_feed(&mut self, result: Result<Feed, DecodeError>) -> Result<Feed, DecodeError> {
        self.paused = result == Ok(Feed::Paused);
        result.map_err(|error| self.fail(error))
    }

    /// Holds `input` behind the undelivered bytes of a paused reader, within the buffer's
    /// maximum capacity.
    #[cold]
    fn hold(&mut self, input: &[u8]) -> Result<Feed, DecodeError> {
        let (held, max) = (self.buf.len(), self.buf.max_capacity());
        if held.saturating_add(input.len()) > max {
            return Err(DecodeError::PausedFull {
                held,
                input: input.len(),
                max,
            });
        }
        self.buf
            .extend_from_slice(input)
            .map_err(|e| self.fail(e.into()))?;
        Ok(Feed::Paused)
    }

    /// Ends the stream with `error`: every later `feed` returns it until `reset`.
    #[cold]
    fn fail(&mut self, error: DecodeError) -> DecodeError {
        self.paused = false;
        self.failed = Some(error.clone());
        self.buf.clear();
        self.decoder.reset();
        self.want = 0;
        error
    }

    /// Delivers frames already buffered (after a [`Feed::Paused`]). Same as `feed(&[], ..)`.
    ///
    /// # Errors
    /// As [`feed`](Self::feed).
    pub fn resume<F, R>(&mut self, on_frame: F) -> Result<Feed, DecodeError>
    where
        F: FnMut(&[u8]) -> R,
        R: Into<Flow>,
    {
        self.feed(&[], on_frame)
    }

    /// As [`resume`](Self::resume), with the frames lent mutably ([`feed_mut`](Self::feed_mut)).
    ///
    /// # Errors
    /// As [`feed`](Self::feed).
    pub fn resume_mut<F, R>(&mut self, on_frame: F) -> Result<Feed, DecodeError>
    where
        F: FnMut(&mut [u8]) -> R,
        R: Into<Flow>,
    {
        self.feed_mut(&mut [], on_frame)
    }

    #[inline(never)]
    fn feed_inner(
        &mut self,
        input: &[u8],
        mut on_frame: impl FnMut(&[u8]) -> Flow,
    ) -> Result<Feed, DecodeError> {
        let mut at = Cursor::default();
        loop {
            let flow = match self.next_frame(input, &mut at)? {
                Found::Buffered { body, total } => {
                    let flow = on_frame(&self.buf.data()[body]);
                    self.buf.consume(total);
                    flow
                }
                Found::Input(body) => on_frame(&input[body]),
                Found::Nothing => return Ok(Feed::Drained),
            };
            if flow == Flow::Pause {
                return self.pause(&input[at.pos..]);
            }
        }
    }

    /// [`feed_inner`](Self::feed_inner) lending frames mutably.
    #[inline(never)]
    fn feed_inner_mut(
        &mut self,
        input: &mut [u8],
        mut on_frame: impl FnMut(&mut [u8]) -> Flow,
    ) -> Result<Feed, DecodeError> {
        let mut at = Cursor::default();
        loop {
            let flow = match self.next_frame(input, &mut at)? {
                Found::Buffered { body, total } => {
                    let flow = on_frame(&mut self.buf.data_mut()[body]);
                    self.buf.consume(total);
                    flow
                }
                Found::Input(body) => on_frame(&mut input[body]),
                Found::Nothing => return Ok(Feed::Drained),
            };
            if flow == Flow::Pause {
                return self.pause(&input[at.pos..]);
            }
        }
    }

    /// The next whole frame of the buffered bytes followed by `input[at.pos..]`, advancing
    /// `at` past it. A buffered partial frame is completed first (with exactly its missing
    /// bytes when its length is known); then frames are found straight in the input, and a
    /// trailing partial one is copied into the buffer. A buffered frame must be consumed
    /// (`total` bytes) before the next call.
    #[inline(always)]
    fn next_frame(&mut self, input: &[u8], at: &mut Cursor) -> Result<Found, DecodeError> {
        // Finish what is buffered first.
        while !self.buf.is_empty() {
            if self.want > self.buf.len() {
                let take = (self.want - self.buf.len()).min(input.len() - at.pos);
                self.buf.extend_from_slice(&input[at.pos..at.pos + take])?;
                at.pos += take;
                at.appended += take;
                if self.buf.len() < self.want {
                    return Ok(Found::Nothing);
                }
            }
            match self.decoder.decode(self.buf.data())? {
                Decoded::Frame(span) => {
                    let total = span.total();
                    // Bytes past the frame that were appended from `input` go back to it, so
                    // the frames after this one are decoded from `input` without copying.
                    let back = (self.buf.len() - total).min(at.appended);
                    self.buf.truncate(self.buf.len() - back);
                    at.pos -= back;
                    at.appended = 0;
                    self.want = 0;
                    let body = span.header..span.header + span.body;
                    return Ok(Found::Buffered { body, total });
                }
                Decoded::Incomplete { needed } => {
                    let have = self.buf.len();
                    if at.pos == input.len() {
                        self.want = needed.unwrap_or(0);
                        return Ok(Found::Nothing);
                    }
                    match needed {
                        // A decoder must ask for more than it has; guard against one that
                        // does not, so the loop always progresses. Room is made as bytes
                        // arrive, not for the announced length.
                        Some(needed) => {
                            self.want = needed.max(have + 1);
                        }
                        None => {
                            let take = have.max(MIN_APPEND_STEP).min(input.len() - at.pos);
                            self.buf.extend_from_slice(&input[at.pos..at.pos + take])?;
                            at.pos += take;
                            at.appended += take;
                        }
                    }
                }
            }
        }

        // Nothing buffered: decode straight from the input.
        let start = at.pos;
        let Some(rest) = input.get(start..).filter(|rest| !rest.is_empty()) else {
            return Ok(Found::Nothing);
        };
        match self.decoder.decode(rest)? {
            Decoded::Frame(span) => {
                at.pos += span.total();
                let body = start + span.header..start + span.header + span.body;
                Ok(Found::Input(body))
            }
            Decoded::Incomplete { needed } => {
                // Keep what arrived; the buffer grows with later bytes, not with the
                // announced length.
                self.buf.extend_from_slice(rest)?;
                self.want = needed.unwrap_or(0);
                Ok(Found::Nothing)
            }
        }
    }

    /// Keeps the undelivered `rest` of the input after a pause.
    fn pause(&mut self, rest: &[u8]) -> Result<Feed, DecodeError> {
        self.buf.extend_from_slice(rest)?;
        self.want = 0;
        Ok(Feed::Paused)
    }

    /// Bytes still missing from a buffered frame whose length is known (0 if none). A
    /// transport reads a large pending frame directly into [`spare_mut`](Self::spare_mut).
    pub fn pending_remaining(&self) -> usize {
        self.want.saturating_sub(self.buf.len())
    }

    /// Room for more of the pending frame's missing bytes, for reading from a socket directly
    /// into the buffer; follow with [`commit`](Self::commit) and a `feed(&[], ..)`. The room
    /// grows with what has arrived (by at most the bytes already buffered, or the initial
    /// capacity, and only once less than half of that is left), never with the announced
    /// length alone.
    ///
    /// # Errors
    /// A [`DecodeError::Buffer`] if the buffer cannot grow.
    pub fn spare_mut(&mut self) -> Result<&mut [u8], DecodeError> {
        let step = self
            .pending_remaining()
            .min(self.buf.len().max(self.buf.initial_capacity()));
        // Grow (doubling) only once the room left is under half a step.
        if self.buf.spare_mut().len() < step / 2 {
            self.buf.reserve(step)?;
        }
        Ok(self.buf.spare_mut())
    }

    /// Marks `n` bytes written into [`spare_mut`](Self::spare_mut) as received.
    ///
    /// # Panics
    /// If `n` exceeds the spare region (a caller bug).
    pub fn commit(&mut self, n: usize) {
        self.buf.commit(n);
    }

    /// Whether delivery is paused ([`Feed::Paused`]) with frames held.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Bytes received but not yet delivered.
    pub fn buffered_len(&self) -> usize {
        self.buf.len()
    }

    /// Heap bytes the receive buffer holds.
    pub fn held_bytes(&self) -> usize {
        self.buf.held_bytes()
    }

    /// Frees the receive buffer if nothing is buffered; returns the bytes freed. Transports
    /// call it when a session goes idle so that idle sessions hold no receive memory.
    pub fn release(&mut self) -> usize {
        self.buf.release()
    }

    /// Discards buffered bytes and any error, starting a fresh stream.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.decoder.reset();
        self.want = 0;
        self.failed = None;
        self.paused = false;
    }

    /// The decoder.
    pub fn decoder(&self) -> &D {
        &self.decoder
    }

    /// The receive buffer (read-only: its cursors belong to the reader).
    pub fn recv_buf(&self) -> &RecvBuf {
        &self.buf
    }
}
