//! arknet's message layout: `ANB`, phase, client id, sequence, patterned payload.

/// Warm-up phase byte.
pub const WARMUP: u8 = 0;
/// Measured phase byte.
pub const MEASURED: u8 = 1;
/// Header bytes before the pattern.
pub const HEADER: usize = 16;

/// Pattern byte `i` of message `seq` of client `id`: `(seq + 17 i + 31 id) mod 256`.
#[cfg(test)]
fn pattern(seq: u64, i: usize, id: u32) -> u8 {
    start(seq, id).wrapping_add((i as u8).wrapping_mul(17))
}

/// The pattern's constant term, `(seq + 31 id) mod 256`; byte `i` adds `17 i` (mod 256).
#[inline]
fn start(seq: u64, id: u32) -> u8 {
    (seq as u8).wrapping_add((id as u8).wrapping_mul(31))
}

/// Writes message `seq` of client `id` in `phase` into `buf` (its length is the payload).
pub fn fill(buf: &mut [u8], phase: u8, id: u32, seq: u64) {
    buf[..3].copy_from_slice(b"ANB");
    buf[3] = phase;
    buf[4..8].copy_from_slice(&id.to_be_bytes());
    buf[8..16].copy_from_slice(&seq.to_be_bytes());
    // Byte arithmetic (mod 256) without early exits, so the compiler vectorises it.
    let c = start(seq, id);
    for (i, b) in buf.iter_mut().enumerate().skip(HEADER) {
        *b = c.wrapping_add((i as u8).wrapping_mul(17));
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
    // Every byte is compared (no early exit), so the loop vectorises.
    let c = start(seq, id);
    let diff = buf
        .iter()
        .enumerate()
        .skip(HEADER)
        .fold(0u8, |acc, (i, &b)| {
            acc | (b ^ c.wrapping_add((i as u8).wrapping_mul(17)))
        });
    (diff == 0).then_some(Parsed { phase: buf[3], seq })
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

    #[test]
    fn pattern_is_arknets_formula() {
        for (seq, i, id) in [
            (0u64, 16usize, 0u32),
            (42, 1000, 7),
            (u64::MAX, 65_506, 1023),
        ] {
            let arknet = (seq
                .wrapping_add(i as u64 * 17)
                .wrapping_add(u64::from(id) * 31)
                & 255) as u8;
            assert_eq!(pattern(seq, i, id), arknet);
        }
        let mut buf = vec![0u8; 300];
        fill(&mut buf, WARMUP, 9, 1234);
        for (i, &b) in buf.iter().enumerate().skip(HEADER) {
            assert_eq!(b, pattern(1234, i, 9));
        }
    }
}
