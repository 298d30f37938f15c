//! Typed errors, one enum per operation.

/// A configuration value was rejected when a buffer or codec was built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `RecvBuf` initial capacity of 0 (use at least 1 byte; the default is 4 KiB).
    #[error("receive buffer initial capacity must be at least 1 byte, got 0")]
    ZeroInitialCapacity,
    /// The initial capacity is larger than the maximum capacity.
    #[error(
        "receive buffer initial capacity ({initial} bytes) exceeds its maximum capacity ({max} bytes)"
    )]
    InitialAboveMax {
        /// Requested initial capacity in bytes.
        initial: usize,
        /// Configured maximum capacity in bytes.
        max: usize,
    },
    /// A `Delimiter` codec was given an empty delimiter.
    #[error("delimiter must be at least one byte long")]
    EmptyDelimiter,
    /// An `ExactSize` codec was given a frame size of 0.
    #[error("exact frame size must be at least 1 byte, got 0")]
    ZeroExactSize,
}

/// The receive buffer could not make room for bytes it was asked to keep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BufferError {
    /// Keeping the bytes would take the buffer past its maximum capacity
    /// (`RecvBuf::with_capacity`'s `max`).
    #[error("receive buffer needs {needed} bytes, over its maximum capacity of {max} bytes")]
    CapacityExceeded {
        /// Bytes the buffer would have to hold.
        needed: usize,
        /// Configured maximum capacity in bytes.
        max: usize,
    },
}

/// The byte stream is malformed or breaks a configured limit. The stream cannot be
/// resynchronised: the session that produced it should be closed. The one exception is
/// [`DecodeError::PausedFull`], which says what the caller must do and leaves the stream
/// intact ([`ends_stream`](Self::ends_stream) tells them apart).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A header announced a body longer than the codec's `max_frame_len`.
    #[error("frame body of {len} bytes exceeds the maximum frame length of {max} bytes")]
    TooLarge {
        /// Body length announced by the header.
        len: u64,
        /// The codec's `max_frame_len`.
        max: usize,
    },
    /// An `ArkDgram` header used a longer length form than its length needs.
    #[error(
        "non-minimal ArkDgram header: marker byte {marker} carries length {len}, which has a shorter encoding"
    )]
    NonMinimal {
        /// The marker byte (254 or 255).
        marker: u8,
        /// The length it carried.
        len: u64,
    },
    /// No delimiter was found within the codec's `max_frame_len` bytes.
    #[error("no delimiter found within the maximum frame length of {limit} bytes")]
    DelimiterNotFound {
        /// The codec's `max_frame_len`.
        limit: usize,
    },
    /// The receive buffer could not keep the bytes of a pending frame.
    #[error(transparent)]
    Buffer(#[from] BufferError),
    /// Not a stream error: the reader is paused ([`Feed::Paused`](crate::Feed::Paused)) and
    /// holding this input too would take it past its maximum capacity. The input was **not
    /// consumed** and the stream is intact: call `resume` until it returns `Feed::Drained`,
    /// then feed the same input again.
    #[error(
        "reader paused holding {held} bytes; {input} more would pass its {max}-byte limit: resume delivery until Feed::Drained, then feed the input again (it was not consumed)"
    )]
    PausedFull {
        /// Undelivered bytes the reader holds.
        held: usize,
        /// Length of the refused input.
        input: usize,
        /// The receive buffer's maximum capacity.
        max: usize,
    },
}

impl DecodeError {
    /// Whether the error ends the stream (every variant but [`DecodeError::PausedFull`]).
    pub fn ends_stream(&self) -> bool {
        !matches!(self, DecodeError::PausedFull { .. })
    }
}

/// A payload cannot be framed with the chosen codec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload is longer than the codec's `max_frame_len`.
    #[error("payload of {len} bytes exceeds the maximum frame length of {max} bytes")]
    TooLarge {
        /// Payload length in bytes.
        len: usize,
        /// The codec's `max_frame_len`.
        max: usize,
    },
    /// A `Delimiter` payload contains the delimiter, which would split the frame.
    #[error("payload contains the delimiter at byte offset {offset}")]
    DelimiterInPayload {
        /// Offset of the first delimiter occurrence.
        offset: usize,
    },
    /// An `ExactSize` payload is not exactly the frame size.
    #[error("payload of {len} bytes does not match the exact frame size of {expected} bytes")]
    SizeMismatch {
        /// Payload length in bytes.
        len: usize,
        /// The codec's frame size.
        expected: usize,
    },
    /// The destination buffer has no room for the encoded frame.
    #[error("destination has room for {remaining} bytes, the encoded frame needs {needed}")]
    DestinationFull {
        /// Encoded frame length.
        needed: usize,
        /// `BufMut::remaining_mut` of the destination.
        remaining: usize,
    },
}
