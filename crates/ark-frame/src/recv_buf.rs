//! `RecvBuf`: the contiguous receive buffer behind every `FrameReader`.

use crate::error::{BufferError, ConfigError};

/// Default initial capacity: 4 KiB, the seed's measured choice.
pub const DEFAULT_INITIAL_CAPACITY: usize = 4 * 1024;

/// Default maximum capacity: a 16 MiB frame plus 64 KiB for its header and the bytes of one
/// socket read that may follow it.
pub const DEFAULT_MAX_CAPACITY: usize = 16 * 1024 * 1024 + 64 * 1024;

/// A contiguous byte buffer with read and write cursors, sized for framing.
///
/// # Memory behaviour
///
/// * **Lazy.** A new `RecvBuf` owns no memory: [`held_bytes`](Self::held_bytes) is 0 until
///   bytes must be kept.
/// * **Growth.** The first allocation is the initial capacity (default 4 KiB). When more room
///   is needed the capacity doubles, just enough times to fit the bytes being assembled, and
///   never past the maximum capacity; a request beyond it is
///   [`BufferError::CapacityExceeded`].
/// * **Compaction.** When the unread bytes plus the request fit in the current capacity, the
///   unread tail is moved to the front instead of growing.
/// * **Release.** When the buffer becomes empty while holding more than its initial capacity
///   and its contents never reached half of that capacity since it was last empty, the excess
///   is released (back to the initial capacity). A buffer that keeps filling more than half of
///   a grown capacity keeps it, so a steady stream of large frames allocates nothing per frame.
///   [`release`](Self::release) frees everything of an empty buffer: transports call it when a
///   session goes idle, so idle sessions hold 0 bytes.
///
/// ```
/// use ark_frame::RecvBuf;
///
/// let mut buf = RecvBuf::new();
/// assert_eq!(buf.held_bytes(), 0); // nothing allocated yet
/// buf.extend_from_slice(b"partial")?;
/// assert_eq!(buf.held_bytes(), 4096); // the initial capacity
/// buf.consume(7);
/// assert!(buf.is_empty());
/// assert_eq!(buf.release(), 4096);
/// assert_eq!(buf.held_bytes(), 0);
/// # Ok::<(), ark_frame::BufferError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RecvBuf {
    /// Always fully initialised: `storage.len()` is the capacity in use.
    storage: Vec<u8>,
    read: usize,
    write: usize,
    /// Largest number of unread bytes since the buffer was last empty.
    peak: usize,
    initial: usize,
    max: usize,
}

impl Default for RecvBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl RecvBuf {
    /// A buffer with the default initial (4 KiB) and maximum (16 MiB + 64 KiB) capacities.
    /// Allocates nothing.
    pub const fn new() -> Self {
        Self {
            storage: Vec::new(),
            read: 0,
            write: 0,
            peak: 0,
            initial: DEFAULT_INITIAL_CAPACITY,
            max: DEFAULT_MAX_CAPACITY,
        }
    }

    /// A buffer with the given initial and maximum capacities. Allocates nothing.
    ///
    /// # Errors
    /// [`ConfigError::ZeroInitialCapacity`] for an initial capacity of 0 and
    /// [`ConfigError::InitialAboveMax`] when `initial > max`.
    pub fn with_capacity(initial: usize, max: usize) -> Result<Self, ConfigError> {
        if initial == 0 {
            return Err(ConfigError::ZeroInitialCapacity);
        }
        if initial > max {
            return Err(ConfigError::InitialAboveMax { initial, max });
        }
        Ok(Self {
            initial,
            max,
            ..Self::new()
        })
    }

    /// Unread bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.write - self.read
    }

    /// Whether there are no unread bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.write == self.read
    }

    /// The unread bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        &self.storage[self.read..self.write]
    }

    /// The unread bytes, mutably (to decode a frame in place before it is consumed).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.read..self.write]
    }

    /// Bytes of heap memory this buffer holds (its current capacity), for accounting.
    #[inline]
    pub fn held_bytes(&self) -> usize {
        self.storage.len()
    }

    /// The configured initial capacity.
    pub fn initial_capacity(&self) -> usize {
        self.initial
    }

    /// The configured maximum capacity.
    pub fn max_capacity(&self) -> usize {
        self.max
    }

    /// Makes room for at least `additional` more bytes after the unread ones, compacting first
    /// and growing (by doubling from the initial capacity) only when compaction is not enough.
    ///
    /// # Errors
    /// [`BufferError::CapacityExceeded`] when the unread bytes plus `additional` exceed the
    /// maximum capacity. The buffer is unchanged then.
    #[inline]
    pub fn reserve(&mut self, additional: usize) -> Result<(), BufferError> {
        if self.storage.len() - self.write >= additional {
            return Ok(());
        }
        self.make_room(additional)
    }

    /// Compacts or grows so that `additional` bytes fit after the unread ones.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, additional: usize) -> Result<(), BufferError> {
        let len = self.len();
        let needed = len
            .checked_add(additional)
            .ok_or(BufferError::CapacityExceeded {
                needed: usize::MAX,
                max: self.max,
            })?;
        if needed > self.max {
            return Err(BufferError::CapacityExceeded {
                needed,
                max: self.max,
            });
        }
        if needed <= self.storage.len() {
            // Compaction suffices.
            self.storage.copy_within(self.read..self.write, 0);
        } else {
            let mut capacity = self.storage.len().max(self.initial);
            while capacity < needed {
                capacity = capacity.saturating_mul(2);
            }
            let mut grown = vec![0u8; capacity.min(self.max)];
            grown[..len].copy_from_slice(self.data());
            self.storage = grown;
        }
        self.read = 0;
        self.write = len;
        Ok(())
    }

    /// Appends `src` after the unread bytes, reserving room first.
    ///
    /// # Errors
    /// As [`reserve`](Self::reserve); nothing is appended then.
    #[inline]
    pub fn extend_from_slice(&mut self, src: &[u8]) -> Result<(), BufferError> {
        self.reserve(src.len())?;
        self.storage[self.write..self.write + src.len()].copy_from_slice(src);
        self.commit(src.len());
        Ok(())
    }

    /// The writable region after the unread bytes, for reading from a socket directly into the
    /// buffer. Call [`reserve`](Self::reserve) first to size it, then [`commit`](Self::commit)
    /// the bytes written.
    #[inline]
    pub fn spare_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.write..]
    }

    /// Marks `n` bytes written into [`spare_mut`](Self::spare_mut) as unread data.
    ///
    /// # Panics
    /// If `n` is larger than the spare region: that is a bug in the caller, not bad input.
    #[inline]
    pub fn commit(&mut self, n: usize) {
        assert!(
            n <= self.storage.len() - self.write,
            "RecvBuf::commit({n}) past the spare region of {} bytes",
            self.storage.len() - self.write
        );
        self.write += n;
        self.peak = self.peak.max(self.len());
    }

    /// Marks `n` unread bytes as read. When that empties the buffer, the cursors return to the
    /// front and the excess-release policy applies (see the type docs).
    ///
    /// # Panics
    /// If `n` is larger than [`len`](Self::len): a bug in the caller.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        assert!(
            n <= self.len(),
            "RecvBuf::consume({n}) past {} unread bytes",
            self.len()
        );
        self.read += n;
        if self.read == self.write {
            self.read = 0;
            self.write = 0;
            if self.storage.len() > self.initial && self.peak <= self.storage.len() / 2 {
                self.storage.truncate(self.initial);
                self.storage.shrink_to_fit();
            }
            self.peak = 0;
        }
    }

    /// Drops unread bytes past the first `len` (gives back bytes appended too eagerly).
    pub(crate) fn truncate(&mut self, len: usize) {
        if len < self.len() {
            self.write = self.read + len;
        }
    }

    /// Discards all unread bytes, keeping the allocation as the release policy allows.
    pub fn clear(&mut self) {
        let len = self.len();
        self.consume(len);
    }

    /// Frees all memory if the buffer is empty, returning the bytes freed (0 if it held unread
    /// bytes or nothing at all).
    pub fn release(&mut self) -> usize {
        if !self.is_empty() {
            return 0;
        }
        let freed = self.storage.len();
        self.storage = Vec::new();
        self.peak = 0;
        freed
    }
}
