//! # ark-loopback
//!
//! The loopback echo benchmark of the ark networking library, as a library so the binary
//! stays small and tests can reach its parts: [`args`] (arknet's flags), [`message`] (arknet's
//! message layout and the server's optional work), [`clients`] (closed-loop clients that check
//! and time every echo), [`servers`] (the echo servers), [`record`] (the JSON record),
//! [`stack`] (the implementation under test: ark's, or a peer's), [`tls`] (the certificates
//! and configs of the TLS runs), [`link`] (the `--link-*` relay and its part of the record),
//! [`signals`] (SIGINT and SIGTERM end a run gracefully) and [`run`] (one run of any
//! implementation).
//!
//! ```
//! use ark_loopback::message::{check, fill, MEASURED};
//!
//! let mut message = vec![0u8; 64];
//! fill(&mut message, MEASURED, 3, 42);
//! assert_eq!(check(&message, 3, 64).map(|p| p.seq), Some(42));
//! ```

#![warn(missing_docs, missing_debug_implementations)]
// docs.rs: every feature-gated item is marked with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod args;
pub mod clients;
pub mod link;
pub mod message;
pub mod record;
pub mod run;
pub mod servers;
pub mod signals;
pub mod stack;
pub mod tls;
