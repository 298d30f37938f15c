//! # ark-framebench
//!
//! The framing benchmark's measurements ([`framing`]): the same length-prefixed stream through
//! ark-frame's decoder, tokio-util's `LengthDelimitedCodec` and a naive baseline, and the idle
//! memory of many sessions' receive buffers. The `ark-framebench` program runs them as fresh
//! processes and writes result sets with `ark-bench`'s library.

#![warn(missing_docs, missing_debug_implementations)]

pub mod framing;
