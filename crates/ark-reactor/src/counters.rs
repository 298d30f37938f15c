//! [`counters!`](crate::counters): the one way a transport keeps counters that its threads
//! add to and any thread reads.

/// Declares a set of live counters and the copy a reader gets of them: the mechanism every
/// ark transport (and the reactor itself) publishes its counters through.
///
/// Three types come out:
/// - the copy (`Stats` below): plain `u64` fields, `Copy`, with `merge` to add another copy.
///   A driver also uses it as its tally: it counts a turn's changes in a plain copy and adds
///   them once per turn, not once per message;
/// - the live counters (`Counters`): one set per thread ([`Striped`](crate::Striped)), so the
///   threads of a pool do not write one cache line. `add` adds a tally's *counts* (fields
///   that are not zero) to the calling thread's set, `local` gives that set to bump one field,
///   `snapshot` sums the sets;
/// - the per-thread set (`CounterSet`), with public atomic fields.
///
/// Fields under `gauges` are levels that go up and down (sessions open, bytes held): each
/// thread's copy is an `AtomicI64` moved by signed deltas through `local()`, which may go
/// below zero; the sum does not (a snapshot clamps it at zero). `add` leaves gauges alone.
///
/// ```
/// use std::sync::atomic::Ordering;
///
/// ark_reactor::counters! {
///     /// Live counters of an echo server.
///     pub struct EchoCounters(EchoCounterSet);
///     /// A copy of an echo server's counters.
///     pub struct EchoStats {
///         /// Messages received.
///         messages_in,
///         /// Bytes received.
///         bytes_in,
///     }
///     gauges {
///         /// Sessions open now.
///         sessions_open,
///     }
/// }
///
/// let live = EchoCounters::default();
/// live.add(&EchoStats { messages_in: 2, bytes_in: 128, ..EchoStats::default() });
/// live.local().sessions_open.fetch_add(1, Ordering::Relaxed);
/// let mut copy = live.snapshot();
/// assert_eq!((copy.messages_in, copy.bytes_in, copy.sessions_open), (2, 128, 1));
/// copy.merge(&live.snapshot());
/// assert_eq!(copy.bytes_in, 256);
/// ```
#[macro_export]
macro_rules! counters {
    (
        $(#[$live_doc:meta])*
        $live_vis:vis struct $Live:ident($Set:ident);
        $(#[$stats_doc:meta])*
        $stats_vis:vis struct $Stats:ident {
            $($(#[$doc:meta])* $name:ident),* $(,)?
        }
        $(gauges {
            $($(#[$gauge_doc:meta])* $gauge:ident),* $(,)?
        })?
    ) => {
        $(#[$stats_doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        $stats_vis struct $Stats {
            $($(#[$doc])* pub $name: u64,)*
            $($($(#[$gauge_doc])* pub $gauge: u64,)*)?
        }

        impl $Stats {
            /// Adds another copy's counters (and gauges) to this one.
            pub fn merge(&mut self, other: &$Stats) {
                $(self.$name += other.$name;)*
                $($(self.$gauge += other.$gauge;)*)?
            }
        }

        $(#[$live_doc])*
        #[derive(Debug, Default)]
        $live_vis struct $Live {
            threads: $crate::Striped<$Set>,
        }

        #[doc = concat!("One thread's [`", stringify!($Live), "`]: a gauge's copy may go below zero, the sum does not.")]
        #[derive(Debug, Default)]
        $live_vis struct $Set {
            $($(#[$doc])* pub $name: ::std::sync::atomic::AtomicU64,)*
            $($($(#[$gauge_doc])* pub $gauge: ::std::sync::atomic::AtomicI64,)*)?
        }

        #[allow(dead_code)]
        impl $Live {
            /// The calling thread's set, to bump one counter or move a gauge.
            #[inline]
            pub fn local(&self) -> &$Set {
                self.threads.local()
            }

            /// Adds a tally's counts (not its gauges) to the calling thread's set; fields that
            /// are zero cost a compare, not an atomic add.
            #[inline]
            pub fn add(&self, tally: &$Stats) {
                let local = self.threads.local();
                $(if tally.$name != 0 {
                    local.$name.fetch_add(tally.$name, ::std::sync::atomic::Ordering::Relaxed);
                })*
            }

            /// The sum of every thread's set (gauges clamped at zero).
            pub fn snapshot(&self) -> $Stats {
                use ::std::sync::atomic::Ordering::Relaxed;
                let mut stats = $Stats::default();
                $($(let mut $gauge = 0i64;)*)?
                for set in self.threads.iter() {
                    $(stats.$name += set.$name.load(Relaxed);)*
                    $($($gauge += set.$gauge.load(Relaxed);)*)?
                }
                $($(stats.$gauge = $gauge.max(0) as u64;)*)?
                stats
            }
        }
    };
}
