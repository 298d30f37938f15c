//! arknet's message layout: `ANB`, phase, client id, sequence, patterned payload.

/// Warm-up phase byte.
pub const WARMUP: u8 = 0;
/// Measured phase byte.
pub const MEASURED: u8 = 1;
/// Header bytes before the pattern.
pub const HEADER: usize = 16;

/// Pattern byte `i` of message `seq` of client `id`.
#[inline]
fn pattern(seq: u64, i: usize, id: u32) -> u8 {
    (seq.wrapping_add(i as u64 * 17)
        .wrapping_add(u64::from(id) * 31)
        & 255) as u8
}

/// Writes message `seq` of client `id` in `phase` into `buf` (its length is the payload).
pub fn fill(buf: &mut [u8], phase: u8, id: u32, seq: u64) {
    buf[..3].copy_from_slice(b"ANB");
    buf[3] = phase;
    buf[4..8].copy_from_slice(&id.to_be_bytes());
    buf[8..16].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in buf.iter_mut().enumerate().skip(HEADER) {
        *b = pattern(seq, i, id);
    }
}

/// What an echo says about itself, if it is well formed for client `id` and `len` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// Phase byte.
    pub phase: u8,
    /// Sequence number.
    pub seq: u64,
}

/// Checks an echo's header, length and every pattern byte.
pub fn check(buf: &[u8], id: u32, len: usize) -> Option<Parsed> {
    if buf.len() != len || buf.len() < HEADER || &buf[..3] != b"ANB" || buf[3] > MEASURED {
        return None;
    }
    if u32::from_be_bytes(buf[4..8].try_into().ok()?) != id {
        return None;
    }
    let seq = u64::from_be_bytes(buf[8..16].try_into().ok()?);
    buf.iter()
        .enumerate()
        .skip(HEADER)
        .all(|(i, &b)| b == pattern(seq, i, id))
        .then_some(Parsed { phase: buf[3], seq })
}

/// The server's optional work per echo: `n` xorshift rounds seeded from the last byte + 1.
#[inline]
pub fn work(last: u8, n: u64) -> u64 {
    let mut x = u64::from(last) + 1;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let mut buf = vec![0u8; 64];
        fill(&mut buf, MEASURED, 7, 42);
        assert_eq!(
            check(&buf, 7, 64),
            Some(Parsed {
                phase: MEASURED,
                seq: 42
            })
        );
        assert_eq!(check(&buf, 8, 64), None, "wrong client");
        buf[40] ^= 1;
        assert_eq!(check(&buf, 7, 64), None, "corrupted byte");
        assert_ne!(work(1, 10), work(2, 10));
    }
}
