//! Packet numbers and the replay window.
//!
//! Every datagram after the handshake (DATA, ACK, PARITY, UNRELIABLE, CLOSE) carries its
//! direction's packet number: a 64-bit counter, one more for every datagram sent (a
//! retransmission gets a new one), never reused. The wire carries its low 32 bits; the
//! receiver widens them to the 64-bit number nearest the largest it has accepted (exact while
//! the sender's numbers move less than 2^31 between two accepted datagrams, which one per
//! datagram sent guarantees).
//!
//! The receiver keeps a sliding window of the numbers it accepted ([`ReplayWindow`], RFC 6479's
//! bitmap as WireGuard keeps it): a number seen before, or older than the window, is a replay
//! and is dropped before the datagram does anything. The check runs after the datagram was
//! authenticated and parsed, and the number is marked only then, so a forged or malformed
//! datagram cannot spend a number.

use crate::proto::packet::widen;

/// Bits in the window: numbers up to this far behind the largest accepted are still judged
/// one by one (reordering deeper than this drops the late datagram, which ARQ repairs).
pub(crate) const WINDOW_BITS: u64 = 2048;
const WORDS: usize = (WINDOW_BITS / 64) as usize;

/// The packet numbers one end sends: 0, 1, 2, ... (see the module's documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct PacketNumbers {
    next: u64,
}

impl PacketNumbers {
    /// The number of the next datagram sent (each call takes a new one).
    pub(crate) fn take(&mut self) -> u64 {
        let pn = self.next;
        self.next += 1;
        pn
    }

    /// The number [`take`](Self::take) gave last (0 before any).
    pub(crate) fn last(&self) -> u64 {
        self.next.saturating_sub(1)
    }
}

/// The packet numbers accepted lately: a ring of [`WINDOW_BITS`] bits ending at the largest.
#[derive(Debug, Clone)]
pub(crate) struct ReplayWindow {
    /// The largest number accepted (`None`: none yet).
    largest: Option<u64>,
    /// Bit `n % WINDOW_BITS` is set when `n` (within the window) was accepted.
    bits: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            largest: None,
            bits: [0; WORDS],
        }
    }
}

/// Where number `n`'s bit is: word and mask.
fn slot(n: u64) -> (usize, u64) {
    let bit = n % WINDOW_BITS;
    ((bit / 64) as usize, 1 << (bit % 64))
}

impl ReplayWindow {
    /// The 64-bit number a wire number stands for (the one nearest the largest accepted).
    pub(crate) fn widen(&self, wire: u32) -> u64 {
        widen(wire, self.largest.unwrap_or(0))
    }

    /// The largest number accepted so far.
    pub(crate) fn largest(&self) -> Option<u64> {
        self.largest
    }

    /// Whether `n` may be accepted: not seen, and not older than the window.
    pub(crate) fn is_fresh(&self, n: u64) -> bool {
        let Some(largest) = self.largest else {
            return true;
        };
        if n > largest {
            return true;
        }
        if largest - n >= WINDOW_BITS {
            return false;
        }
        let (word, mask) = slot(n);
        self.bits[word] & mask == 0
    }

    /// Records `n` as accepted (call after [`is_fresh`](Self::is_fresh) said yes).
    pub(crate) fn mark(&mut self, n: u64) {
        match self.largest {
            Some(largest) if n <= largest => {}
            Some(largest) => {
                // Clear the bits of the numbers the window slides over.
                let gap = n - largest;
                if gap >= WINDOW_BITS {
                    self.bits = [0; WORDS];
                } else {
                    for skipped in largest + 1..=n {
                        let (word, mask) = slot(skipped);
                        self.bits[word] &= !mask;
                    }
                }
                self.largest = Some(n);
            }
            None => {
                self.bits = [0; WORDS];
                self.largest = Some(n);
            }
        }
        let (word, mask) = slot(n);
        self.bits[word] |= mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_and_numbers_older_than_the_window_are_refused() {
        let mut w = ReplayWindow::default();
        for n in [5, 3, 7, 4] {
            assert!(w.is_fresh(n), "{n}");
            w.mark(n);
        }
        for n in [3, 4, 5, 7] {
            assert!(!w.is_fresh(n), "{n} again");
        }
        assert!(w.is_fresh(6) && w.is_fresh(0) && w.is_fresh(8));
        w.mark(7 + WINDOW_BITS);
        assert!(!w.is_fresh(7), "older than the window");
        assert!(!w.is_fresh(6));
        assert!(w.is_fresh(8), "just inside the window, never seen");
        assert!(!w.is_fresh(7 + WINDOW_BITS));
        w.mark(100 * WINDOW_BITS);
        assert!(w.is_fresh(100 * WINDOW_BITS - 1));
        assert!(!w.is_fresh(7 + WINDOW_BITS), "slid far past");
    }

    #[test]
    fn bits_of_slid_over_numbers_are_cleared() {
        let mut w = ReplayWindow::default();
        for n in 0..WINDOW_BITS {
            w.mark(n);
        }
        // Slide by 10: numbers WINDOW_BITS..WINDOW_BITS+10 reuse the bits of 0..10.
        w.mark(WINDOW_BITS + 10);
        for n in WINDOW_BITS..WINDOW_BITS + 10 {
            assert!(w.is_fresh(n), "{n} never seen");
        }
        assert!(!w.is_fresh(11) && !w.is_fresh(WINDOW_BITS - 1));
    }

    #[test]
    fn wire_numbers_widen_around_the_largest() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.widen(9), 9);
        w.mark(u64::from(u32::MAX) - 1);
        assert_eq!(w.widen(3), (1 << 32) + 3);
        assert_eq!(w.widen(u32::MAX - 5), u64::from(u32::MAX) - 5);
        let mut numbers = PacketNumbers::default();
        assert_eq!((numbers.take(), numbers.take()), (0, 1));
    }
}
