//! # bench-harness
//!
//! ark's benchmark programs and the machinery that turns their runs into committed result
//! sets: records (one JSON object per line), machine and build metadata, a runner that starts
//! every case in a fresh process, repetition-major, and report helpers (medians with min–max,
//! Markdown tables, SVG charts).
//!
//! The framing benchmark (`ark-framebench`) lives in [`framing`]; the loopback harness
//! (`ark-bench`) adds [`matrix`]; both use [`metadata`], [`result_set`], [`runner`], [`stats`] and
//! [`chart`].
//!
//! ```
//! use bench_harness::stats::Summary;
//!
//! let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
//! assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
//! ```

#![warn(missing_docs, missing_debug_implementations)]

pub mod alloc_counter;
pub mod chart;
pub mod framing;
pub mod matrix;
pub mod metadata;
pub mod netns;
pub mod peer_io;
pub mod peer_net;
pub mod peer_ws;
pub mod result_set;
pub mod runner;
pub mod stats;
