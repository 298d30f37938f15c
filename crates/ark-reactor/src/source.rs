//! What a registered source receives and reports: the readiness of a turn, the turn's end, the
//! reason for its close. (Its id is in `ids`, its handler contract in `context`.)

use std::fmt;

/// Readiness delivered to a handler: the union of the events seen since its last turn.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready(u8);

impl Ready {
    /// Nothing (a handler re-run after a timer turn that used its budget sees this).
    pub const EMPTY: Ready = Ready(0);
    /// The source may be read.
    pub const READABLE: Ready = Ready(1);
    /// The source may be written.
    pub const WRITABLE: Ready = Ready(2);
    /// The peer closed its writing half (reads will reach end of stream).
    pub const READ_CLOSED: Ready = Ready(4);
    /// The writing half is closed.
    pub const WRITE_CLOSED: Ready = Ready(8);
    /// The source reported an error (read it with `take_error` on the socket).
    pub const ERROR: Ready = Ready(16);
    /// The source was woken ([`Reactor::wake`](crate::Reactor::wake),
    /// [`ReactorHandle::wake`](crate::ReactorHandle::wake)): work reached it other than
    /// through its socket. Not a readiness of the socket.
    pub const WAKE: Ready = Ready(32);

    pub(crate) fn from_event(event: &mio::event::Event) -> Ready {
        let mut r = 0;
        if event.is_readable() {
            r |= Self::READABLE.0;
        }
        if event.is_writable() {
            r |= Self::WRITABLE.0;
        }
        if event.is_read_closed() {
            r |= Self::READ_CLOSED.0;
        }
        if event.is_write_closed() {
            r |= Self::WRITE_CLOSED.0;
        }
        if event.is_error() {
            r |= Self::ERROR.0;
        }
        Ready(r)
    }

    /// Whether every flag of `other` is set.
    #[inline]
    pub fn contains(self, other: Ready) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// Whether no flag is set.
    #[inline]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Readable or read-closed: a read will not block.
    #[inline]
    pub fn is_readable(self) -> bool {
        self.0 & (Self::READABLE.0 | Self::READ_CLOSED.0 | Self::ERROR.0) != 0
    }

    /// Writable or write-closed: a write will not block.
    #[inline]
    pub fn is_writable(self) -> bool {
        self.0 & (Self::WRITABLE.0 | Self::WRITE_CLOSED.0 | Self::ERROR.0) != 0
    }

    /// Woken: work reached the source other than through its socket.
    #[inline]
    pub fn is_wake(self) -> bool {
        self.0 & Self::WAKE.0 != 0
    }
}

impl std::ops::BitOr for Ready {
    type Output = Ready;
    fn bitor(self, rhs: Ready) -> Ready {
        Ready(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Ready {
    fn bitor_assign(&mut self, rhs: Ready) {
        self.0 |= rhs.0;
    }
}

impl fmt::Debug for Ready {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::READABLE, "READABLE"),
            (Self::WRITABLE, "WRITABLE"),
            (Self::READ_CLOSED, "READ_CLOSED"),
            (Self::WRITE_CLOSED, "WRITE_CLOSED"),
            (Self::ERROR, "ERROR"),
            (Self::WAKE, "WAKE"),
        ];
        let set: Vec<&str> = names
            .iter()
            .filter(|(flag, _)| self.contains(*flag))
            .map(|(_, name)| *name)
            .collect();
        write!(f, "Ready({})", set.join(" | "))
    }
}

/// What a handler reports at the end of its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Drained: the last operation returned `WouldBlock` (or there was nothing to do). The
    /// source waits for its next readiness event.
    Done,
    /// Stopped because the fairness budget ran out while work remained. The reactor calls
    /// `on_ready` again (with the same readiness) before it next sleeps, after serving the
    /// other ready sources.
    Again,
}

/// Why a source was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The handler asked for it ([`Context::close`](crate::Context::close)) or the owner removed it.
    Closed,
    /// The reactor is stopping.
    Stopped,
    /// Registering the source with the poll instance failed (a source inserted through
    /// [`Context::insert`](crate::Context::insert)).
    RegistrationFailed(std::io::ErrorKind),
    /// The handler panicked in a callback: the source was closed, the reactor and every other
    /// source go on. (`on_close` is called with this reason; a panic there is caught too.)
    Panicked,
}
