//! # ark-bench
//!
//! ark's loopback benchmark harness: the machinery that turns benchmark runs into committed
//! result sets. Records are one JSON object per line; [`metadata`] describes the machine and
//! the build; [`runner`] starts every case in a fresh process, repetition-major; [`matrix`]
//! holds the loopback matrices (built in or TOML); [`netns`] the network-namespace topology;
//! [`stats`] and [`chart`] the report helpers (medians with min–max, Markdown tables, SVG
//! charts). The `ark-bench` program (run, report, compare) is built on them; the framing
//! benchmark (`ark-framebench`) and the peers (`ark-peers`) use the library too.
//!
//! ```
//! use ark_bench::stats::Summary;
//!
//! let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
//! assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
//! ```

#![warn(missing_docs, missing_debug_implementations)]

pub mod chart;
pub mod matrix;
pub mod metadata;
pub mod netns;
pub mod result_set;
pub mod runner;
pub mod stats;
