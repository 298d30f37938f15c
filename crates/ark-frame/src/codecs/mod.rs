//! The wire formats: each type both decodes and encodes its format.

mod ark_dgram;
mod delimiter;
mod exact;
mod length_prefix;
mod raw;

pub use ark_dgram::ArkDgram;
pub use delimiter::Delimiter;
pub use exact::ExactSize;
pub use length_prefix::{Endian, LengthPrefix, PrefixWidth};
pub use raw::Raw;

/// Default maximum frame (body) length of every codec: 16 MiB.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

use crate::error::DecodeError;

/// Checks a decoded body length against `max`, returning it as `usize`.
#[inline]
fn check_len(len: u64, max: usize) -> Result<usize, DecodeError> {
    match usize::try_from(len) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(DecodeError::TooLarge { len, max }),
    }
}
