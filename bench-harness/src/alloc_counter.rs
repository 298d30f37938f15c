//! A counting global allocator: allocation calls and live heap bytes, for "allocations per
//! message" and "bytes held" figures, and exact process CPU time (from `ark-testkit`). A binary opts in with
//! `#[global_allocator] static A: CountingAllocator = CountingAllocator;`.

pub use ark_testkit::{CountingAllocator, allocations, live_bytes, process_cpu_seconds};
