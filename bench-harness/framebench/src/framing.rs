//! The framing benchmark: the same length-prefixed stream through three decoders.
//!
//! * `naive`: a `Vec<u8>` that appends each block, copies every message into a new `Vec` and
//!   drains it from the front (the shape of arknet's original implementation);
//! * `tokio-util`: `tokio_util::codec::LengthDelimitedCodec` on a `BytesMut`, as `FramedRead`
//!   drives it (8 KiB initial buffer);
//! * `ark`: `ark_frame::FrameReader` with a 4-byte big-endian `LengthPrefix`.
//!
//! Every message is validated (length, every body byte, a running checksum) inside the timing.

use std::time::{Duration, Instant};

use ark_frame::{FrameReader, LengthPrefix};
use bytes::BytesMut;
use serde::{Deserialize, Serialize};
use tokio_util::codec::{Decoder as _, LengthDelimitedCodec};

/// Length header bytes (4-byte big endian).
pub const HEADER_BYTES: usize = 4;
/// Largest body any decoder accepts.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
/// tokio-util's `FramedRead` initial buffer capacity.
pub const TOKIO_FRAMED_READ_CAPACITY: usize = 8 * 1024;
/// Default initial capacity of the ark and naive buffers (the seed's choice).
pub const DEFAULT_INITIAL_CAPACITY: usize = 4 * 1024;
/// Warm-up batches per case, as in the seed.
pub const DEFAULT_WARMUP_BATCHES: u64 = 10_000;

/// The decoders compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
pub enum DecoderKind {
    /// `Vec<u8>` buffer, a new `Vec` per message, drained from the front.
    #[serde(rename = "naive")]
    #[value(name = "naive")]
    Naive,
    /// `tokio_util::codec::LengthDelimitedCodec` on a `BytesMut`.
    #[serde(rename = "tokio-util")]
    #[value(name = "tokio-util")]
    TokioUtil,
    /// `ark_frame::FrameReader<LengthPrefix>`.
    #[serde(rename = "ark")]
    #[value(name = "ark")]
    Ark,
}

impl DecoderKind {
    /// All decoders, in report column order.
    pub const ALL: [DecoderKind; 3] =
        [DecoderKind::Naive, DecoderKind::TokioUtil, DecoderKind::Ark];

    /// The name used in records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            DecoderKind::Naive => "naive",
            DecoderKind::TokioUtil => "tokio-util",
            DecoderKind::Ark => "ark",
        }
    }

    /// The initial buffer capacity the decoder uses unless told otherwise.
    pub fn default_initial_capacity(self) -> usize {
        match self {
            DecoderKind::TokioUtil => TOKIO_FRAMED_READ_CAPACITY,
            DecoderKind::Naive | DecoderKind::Ark => DEFAULT_INITIAL_CAPACITY,
        }
    }
}

/// One configuration of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StreamShape {
    /// Body bytes per message.
    pub body: usize,
    /// Bytes per delivered block (one "socket read").
    pub block: usize,
    /// Messages written back to back per batch.
    pub batch: usize,
}

impl StreamShape {
    /// The seven rows of the seed table, in its order.
    pub const SEED_ROWS: [StreamShape; 7] = [
        StreamShape::new(64, 65_536, 1),
        StreamShape::new(1024, 65_536, 1),
        StreamShape::new(4096, 65_536, 1),
        StreamShape::new(1024, 64, 1),
        StreamShape::new(4096, 1, 1),
        StreamShape::new(1024, 64, 16),
        StreamShape::new(4096, 65_536, 16),
    ];

    /// The rows of the seed's initial-capacity table (each run with 4, 64 and 512 KiB).
    pub const CAPACITY_ROWS: [StreamShape; 2] = [
        StreamShape::new(1024, 64, 1),
        StreamShape::new(4096, 65_536, 16),
    ];

    /// Initial capacities of the capacity table.
    pub const CAPACITIES: [usize; 3] = [4 * 1024, 64 * 1024, 512 * 1024];

    /// A shape.
    pub const fn new(body: usize, block: usize, batch: usize) -> Self {
        Self { body, block, batch }
    }

    /// body {64, 1024, 4096} × block {1, 64, 65536} × batch {1, 16}.
    pub fn full_matrix() -> Vec<StreamShape> {
        let mut shapes = Vec::new();
        for body in [64, 1024, 4096] {
            for block in [1, 64, 65_536] {
                for batch in [1, 16] {
                    shapes.push(StreamShape::new(body, block, batch));
                }
            }
        }
        shapes
    }
}

/// The bytes of one batch and the expected bodies, built once per case.
#[derive(Debug)]
pub struct Workload {
    shape: StreamShape,
    wire: Vec<u8>,
    expected: Vec<Vec<u8>>,
}

impl Workload {
    /// Builds the batch for `shape`: message `k` of the batch has body byte `j` equal to
    /// `(k * 131 + j) % 251`.
    pub fn new(shape: StreamShape) -> Workload {
        let expected: Vec<Vec<u8>> = (0..shape.batch)
            .map(|k| {
                (0..shape.body)
                    .map(|j| ((k * 131 + j) % 251) as u8)
                    .collect()
            })
            .collect();
        let mut wire = Vec::with_capacity(shape.batch * (HEADER_BYTES + shape.body));
        for body in &expected {
            wire.extend_from_slice(&(body.len() as u32).to_be_bytes());
            wire.extend_from_slice(body);
        }
        Workload {
            shape,
            wire,
            expected,
        }
    }

    /// The stream shape.
    pub fn shape(&self) -> StreamShape {
        self.shape
    }
}

/// Validates every delivered message and keeps a running checksum.
#[derive(Debug)]
pub struct Validator<'a> {
    expected: &'a [Vec<u8>],
    next: usize,
    /// Messages seen.
    pub messages: u64,
    /// Messages whose length or content was wrong.
    pub mismatches: u64,
    /// Running checksum over message lengths and sampled bytes, in delivery order.
    pub checksum: u64,
}

impl<'a> Validator<'a> {
    fn new(expected: &'a [Vec<u8>]) -> Self {
        Validator {
            expected,
            next: 0,
            messages: 0,
            mismatches: 0,
            checksum: 0xcbf2_9ce4_8422_2325,
        }
    }

    /// Checks one message against the expected body and folds it into the checksum.
    #[inline]
    pub fn check(&mut self, body: &[u8]) {
        if body != self.expected[self.next].as_slice() {
            self.mismatches += 1;
        }
        self.next += 1;
        if self.next == self.expected.len() {
            self.next = 0;
        }
        let first = u64::from(body.first().copied().unwrap_or(0));
        let last = u64::from(body.last().copied().unwrap_or(0));
        self.checksum = (self.checksum ^ body.len() as u64 ^ (first << 32) ^ (last << 48))
            .wrapping_mul(0x100_0000_01b3);
        self.messages += 1;
    }
}

/// A decoder under test: takes one block, validates every whole message in it.
pub trait BenchDecoder {
    /// Feeds one block of the stream.
    ///
    /// # Errors
    /// The decoder's error, as text.
    fn feed(&mut self, block: &[u8], validator: &mut Validator<'_>) -> Result<(), String>;
}

/// The naive baseline: append, copy out a `Vec` per message, drain from the front.
#[derive(Debug)]
pub struct Naive {
    buf: Vec<u8>,
}

impl Naive {
    /// A decoder whose buffer starts with `initial_capacity` bytes.
    pub fn new(initial_capacity: usize) -> Self {
        Naive {
            buf: Vec::with_capacity(initial_capacity),
        }
    }
}

impl BenchDecoder for Naive {
    fn feed(&mut self, block: &[u8], validator: &mut Validator<'_>) -> Result<(), String> {
        self.buf.extend_from_slice(block);
        while self.buf.len() >= HEADER_BYTES {
            let len =
                u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
            if len > MAX_FRAME {
                return Err(format!(
                    "frame of {len} bytes over the {MAX_FRAME}-byte maximum"
                ));
            }
            if self.buf.len() < HEADER_BYTES + len {
                break;
            }
            let message: Vec<u8> = self.buf[HEADER_BYTES..HEADER_BYTES + len].to_vec();
            self.buf.drain(..HEADER_BYTES + len);
            validator.check(&message);
        }
        Ok(())
    }
}

/// tokio-util's `LengthDelimitedCodec` on a `BytesMut`, as `FramedRead` uses it.
#[derive(Debug)]
pub struct TokioUtil {
    codec: LengthDelimitedCodec,
    buf: BytesMut,
}

impl TokioUtil {
    /// A decoder whose `BytesMut` starts with `initial_capacity` bytes (`FramedRead`: 8 KiB).
    pub fn new(initial_capacity: usize) -> Self {
        TokioUtil {
            codec: LengthDelimitedCodec::builder()
                .length_field_length(HEADER_BYTES)
                .big_endian()
                .max_frame_length(MAX_FRAME)
                .new_codec(),
            buf: BytesMut::with_capacity(initial_capacity),
        }
    }
}

impl BenchDecoder for TokioUtil {
    fn feed(&mut self, block: &[u8], validator: &mut Validator<'_>) -> Result<(), String> {
        self.buf.extend_from_slice(block);
        while let Some(frame) = self
            .codec
            .decode(&mut self.buf)
            .map_err(|e| e.to_string())?
        {
            validator.check(&frame);
        }
        Ok(())
    }
}

/// ark-frame's `FrameReader` with a 4-byte big-endian length prefix.
#[derive(Debug)]
pub struct Ark {
    reader: FrameReader<LengthPrefix>,
}

impl Ark {
    /// A reader whose buffer starts at `initial_capacity` bytes once needed.
    ///
    /// # Errors
    /// ark-frame's configuration error (an initial capacity of 0).
    pub fn new(initial_capacity: usize) -> Result<Self, String> {
        let codec = LengthPrefix::default().with_max_frame_len(MAX_FRAME);
        Ok(Ark {
            reader: FrameReader::with_initial_capacity(codec, initial_capacity)
                .map_err(|e| e.to_string())?,
        })
    }
}

impl BenchDecoder for Ark {
    #[inline]
    fn feed(&mut self, block: &[u8], validator: &mut Validator<'_>) -> Result<(), String> {
        self.reader
            .feed(block, |frame: &[u8]| validator.check(frame))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// How long the measured phase runs.
#[derive(Debug, Clone, Copy)]
pub enum Phase {
    /// Whole batches until this much wall time has passed.
    Timed(Duration),
    /// Exactly this many batches (smoke tests: comparable checksums).
    Batches(u64),
}

/// The measured phase of one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Messages decoded and validated.
    pub messages: u64,
    /// Wall seconds.
    pub seconds: f64,
    /// Allocation calls.
    pub allocations: u64,
    /// CPU seconds of the process, when the OS reports them.
    pub cpu_seconds: Option<f64>,
    /// Running checksum after the phase (warm-up included).
    pub checksum: u64,
}

impl Measurement {
    /// Messages per second.
    pub fn msg_per_s(&self) -> f64 {
        self.messages as f64 / self.seconds
    }
}

fn feed_batches<D: BenchDecoder>(
    decoder: &mut D,
    workload: &Workload,
    validator: &mut Validator<'_>,
    batches: u64,
) -> Result<(), String> {
    for _ in 0..batches {
        for block in workload.wire.chunks(workload.shape.block) {
            decoder.feed(block, validator)?;
        }
    }
    Ok(())
}

/// Runs `warmup_batches` then the measured phase through `decoder`, checking that every
/// message arrived intact.
///
/// # Errors
/// A decoder error, a corrupted message, or a message count that does not match the batches.
pub fn measure<D: BenchDecoder>(
    decoder: &mut D,
    workload: &Workload,
    warmup_batches: u64,
    phase: Phase,
) -> Result<Measurement, String> {
    let mut validator = Validator::new(&workload.expected);
    let warm_start = Instant::now();
    feed_batches(decoder, workload, &mut validator, warmup_batches)?;
    let warm_secs = warm_start.elapsed().as_secs_f64();

    let (target, step) = match phase {
        Phase::Batches(n) => (None, n),
        Phase::Timed(duration) => {
            // Check the clock about every millisecond of work.
            let per_batch = warm_secs / warmup_batches.max(1) as f64;
            let step = if per_batch > 0.0 {
                (1e-3 / per_batch).clamp(1.0, 100_000.0) as u64
            } else {
                1
            };
            (Some(duration), step)
        }
    };
    let messages_before = validator.messages;
    let cpu_start = ark_testkit::process_cpu_seconds();
    let allocs_start = ark_testkit::allocations();
    let start = Instant::now();
    let mut batches = 0u64;
    loop {
        feed_batches(decoder, workload, &mut validator, step)?;
        batches += step;
        match target {
            Some(duration) if start.elapsed() < duration => continue,
            _ => break,
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let allocations = ark_testkit::allocations() - allocs_start;
    let cpu_seconds = match (cpu_start, ark_testkit::process_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let messages = validator.messages - messages_before;
    if validator.mismatches > 0 {
        return Err(format!(
            "{} messages did not match their expected bodies",
            validator.mismatches
        ));
    }
    let expected = batches * workload.shape.batch as u64;
    if messages != expected {
        return Err(format!("decoded {messages} messages, expected {expected}"));
    }
    Ok(Measurement {
        messages,
        seconds,
        allocations,
        cpu_seconds,
        checksum: validator.checksum,
    })
}

/// Builds `kind` with `initial_capacity` and measures it on `workload`.
///
/// # Errors
/// As [`measure`], plus a decoder that cannot be built.
pub fn measure_kind(
    kind: DecoderKind,
    initial_capacity: usize,
    workload: &Workload,
    warmup_batches: u64,
    phase: Phase,
) -> Result<Measurement, String> {
    match kind {
        DecoderKind::Naive => measure(
            &mut Naive::new(initial_capacity),
            workload,
            warmup_batches,
            phase,
        ),
        DecoderKind::TokioUtil => measure(
            &mut TokioUtil::new(initial_capacity),
            workload,
            warmup_batches,
            phase,
        ),
        DecoderKind::Ark => measure(
            &mut Ark::new(initial_capacity)?,
            workload,
            warmup_batches,
            phase,
        ),
    }
}

/// One line of `framing.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FramingRecord {
    /// `main` (the seed table), `capacity` (the initial-capacity table) or `full` (the matrix).
    pub table: String,
    /// Decoder name.
    pub decoder: DecoderKind,
    /// Body bytes per message.
    pub body_bytes: usize,
    /// Bytes per delivered block.
    pub block_bytes: usize,
    /// Messages per batch.
    pub batch: usize,
    /// Initial receive-buffer capacity.
    pub initial_capacity_bytes: usize,
    /// Repetition number, from 1.
    pub repetition: u32,
    /// Whether the case completed and validated.
    pub ok: bool,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Warm-up batches before the timed phase.
    pub warmup_batches: u64,
    /// Messages in the timed phase.
    pub messages: u64,
    /// Wall seconds of the timed phase.
    pub seconds: f64,
    /// Messages per second.
    pub msg_per_s: f64,
    /// Body MiB per second (headers not counted).
    pub mib_per_s: f64,
    /// Allocation calls per message in the timed phase.
    pub allocations_per_message: f64,
    /// Process CPU time over wall time, percent of one logical CPU (NaN if unknown).
    pub cpu_percent: Option<f64>,
    /// Running checksum, hex.
    pub checksum: String,
}

impl FramingRecord {
    /// A record of a case that has not produced a measurement (yet): `ok` is false.
    fn unmeasured(
        table: &str,
        kind: DecoderKind,
        shape: StreamShape,
        initial_capacity: usize,
        repetition: u32,
        warmup_batches: u64,
    ) -> Self {
        FramingRecord {
            table: table.to_string(),
            decoder: kind,
            body_bytes: shape.body,
            block_bytes: shape.block,
            batch: shape.batch,
            initial_capacity_bytes: initial_capacity,
            repetition,
            ok: false,
            error: None,
            warmup_batches,
            messages: 0,
            seconds: 0.0,
            msg_per_s: 0.0,
            mib_per_s: 0.0,
            allocations_per_message: 0.0,
            cpu_percent: None,
            checksum: String::new(),
        }
    }

    /// A record from a measurement.
    pub fn from_measurement(
        table: &str,
        kind: DecoderKind,
        shape: StreamShape,
        initial_capacity: usize,
        repetition: u32,
        warmup_batches: u64,
        m: &Measurement,
    ) -> Self {
        FramingRecord {
            ok: true,
            messages: m.messages,
            seconds: m.seconds,
            msg_per_s: m.msg_per_s(),
            mib_per_s: m.msg_per_s() * shape.body as f64 / (1024.0 * 1024.0),
            allocations_per_message: m.allocations as f64 / m.messages.max(1) as f64,
            cpu_percent: m.cpu_seconds.map(|c| c / m.seconds * 100.0),
            checksum: format!("{:016x}", m.checksum),
            ..Self::unmeasured(
                table,
                kind,
                shape,
                initial_capacity,
                repetition,
                warmup_batches,
            )
        }
    }

    /// A record for a case that failed.
    pub fn failed(
        table: &str,
        kind: DecoderKind,
        shape: StreamShape,
        initial_capacity: usize,
        repetition: u32,
        warmup_batches: u64,
        error: String,
    ) -> Self {
        FramingRecord {
            error: Some(error),
            ..Self::unmeasured(
                table,
                kind,
                shape,
                initial_capacity,
                repetition,
                warmup_batches,
            )
        }
    }

    /// The record's stream shape.
    pub fn shape(&self) -> StreamShape {
        StreamShape::new(self.body_bytes, self.block_bytes, self.batch)
    }
}

/// Receive-buffer memory of many idle decoder states, measured by the counting allocator.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionsRecord {
    /// Decoder name.
    pub decoder: DecoderKind,
    /// `fresh`, `after_whole_message` or `partial_message`.
    pub state: String,
    /// Number of decoder states.
    pub sessions: usize,
    /// Body bytes of the message each received.
    pub body_bytes: usize,
    /// Initial capacity the decoder was built with.
    pub initial_capacity_bytes: usize,
    /// Heap bytes held by all states together.
    pub bytes: i64,
    /// The same in MiB.
    pub mib: f64,
}

/// Builds `count` states of `kind`, and reports the heap bytes they hold fresh, after each
/// received one whole message of `body` bytes, and while each holds half a message.
/// `live_bytes` reads the process's live heap bytes (the counting allocator's).
///
/// # Errors
/// A decoder error (the message is valid, so none is expected).
pub fn idle_memory(
    kind: DecoderKind,
    count: usize,
    body: usize,
    live_bytes: fn() -> i64,
) -> Result<Vec<SessionsRecord>, String> {
    let workload = Workload::new(StreamShape::new(body, usize::MAX, 1));
    let message = &workload.wire;
    let half = &message[..message.len() / 2];
    let initial = kind.default_initial_capacity();
    let record = |state: &str, bytes: i64| SessionsRecord {
        decoder: kind,
        state: state.to_string(),
        sessions: count,
        body_bytes: body,
        initial_capacity_bytes: initial,
        bytes,
        mib: bytes as f64 / (1024.0 * 1024.0),
    };

    let [fresh, after_whole, partial] = match kind {
        DecoderKind::Naive => held_bytes(
            count,
            || Ok(Naive::new(initial)),
            &workload,
            message,
            half,
            live_bytes,
        )?,
        DecoderKind::TokioUtil => held_bytes(
            count,
            || Ok(TokioUtil::new(initial)),
            &workload,
            message,
            half,
            live_bytes,
        )?,
        DecoderKind::Ark => held_bytes(
            count,
            || Ark::new(initial),
            &workload,
            message,
            half,
            live_bytes,
        )?,
    };
    Ok(vec![
        record("fresh", fresh),
        record("after_whole_message", after_whole),
        record("partial_message", partial),
    ])
}

/// The heap bytes `count` states made by `make` hold (`live_bytes` over its value before
/// them): fresh, after each received the `whole` message, and while each holds `half` a
/// message more; every message validated against `workload`.
fn held_bytes<D: BenchDecoder>(
    count: usize,
    make: impl Fn() -> Result<D, String>,
    workload: &Workload,
    whole: &[u8],
    half: &[u8],
    live_bytes: fn() -> i64,
) -> Result<[i64; 3], String> {
    let mut all: Vec<D> = Vec::with_capacity(count);
    let base = live_bytes();
    for _ in 0..count {
        all.push(make()?);
    }
    let fresh = live_bytes() - base;
    let mut validator = Validator::new(&workload.expected);
    for d in &mut all {
        d.feed(whole, &mut validator)?;
    }
    let after_whole = live_bytes() - base;
    for d in &mut all {
        d.feed(half, &mut validator)?;
    }
    let partial = live_bytes() - base;
    if validator.messages != count as u64 || validator.mismatches != 0 {
        return Err("idle-memory messages did not validate".to_string());
    }
    Ok([fresh, after_whole, partial])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every decoder decodes every configuration to the same checksum (the CI smoke test of
    /// the benchmark: a few batches each).
    #[test]
    fn all_decoders_agree_on_every_configuration() {
        let mut shapes = StreamShape::full_matrix();
        shapes.extend(StreamShape::SEED_ROWS);
        for shape in shapes {
            let workload = Workload::new(shape);
            let batches = if shape.block == 1 { 3 } else { 40 };
            let mut checksums = Vec::new();
            for kind in DecoderKind::ALL {
                let m = measure_kind(
                    kind,
                    kind.default_initial_capacity(),
                    &workload,
                    2,
                    Phase::Batches(batches),
                )
                .unwrap_or_else(|e| panic!("{} on {shape:?}: {e}", kind.name()));
                assert_eq!(m.messages, batches * shape.batch as u64);
                checksums.push(m.checksum);
            }
            assert!(
                checksums.windows(2).all(|w| w[0] == w[1]),
                "{shape:?}: {checksums:x?}"
            );
        }
        // The capacity table's capacities work too.
        for capacity in StreamShape::CAPACITIES {
            for shape in StreamShape::CAPACITY_ROWS {
                measure_kind(
                    DecoderKind::Ark,
                    capacity,
                    &Workload::new(shape),
                    1,
                    Phase::Batches(5),
                )
                .unwrap();
            }
        }
    }

    #[test]
    fn a_timed_phase_runs_whole_batches_for_its_duration() {
        let workload = Workload::new(StreamShape::new(64, 65_536, 16));
        let m = measure_kind(
            DecoderKind::Ark,
            4096,
            &workload,
            10,
            Phase::Timed(Duration::from_millis(5)),
        )
        .unwrap();
        assert!(m.seconds >= 0.005);
        assert_eq!(m.messages % 16, 0);
    }

    #[test]
    fn corrupted_input_is_reported_not_counted() {
        let mut workload = Workload::new(StreamShape::new(64, 65_536, 1));
        workload.wire[10] ^= 0xff;
        for kind in DecoderKind::ALL {
            let err = measure_kind(kind, 4096, &workload, 0, Phase::Batches(2)).unwrap_err();
            assert!(err.contains("did not match"), "{}: {err}", kind.name());
        }
    }
}
