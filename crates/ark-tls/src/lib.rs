//! # ark-tls
//!
//! TLS for ark's transports, on [rustls] with its `ring` provider, as a sans-IO byte
//! transform between a transport's driver and its session core: the driver feeds it what it
//! read and writes what it produces; the session core sees plaintext. `ark-tcp` uses it for
//! `tcps` sessions, `ark-ws` for `wss` and `ark-http` for https.
//!
//! * **Configs** — [`ServerTls`] and [`ClientTls`] from PEM files or buffers ([`Identity`],
//!   [`TrustRoots`]); verification is always on (webpki chain and host name); SNI (a client
//!   sends the name, a server can pick its certificate by it), ALPN, TLS 1.2 and 1.3, mTLS
//!   ([`ServerTlsBuilder::require_client_cert`]), session resumption, a handshake timeout.
//! * **Sessions** — [`TlsSession`]: ciphertext and time in ([`TlsSession::handle_input`],
//!   [`TlsSession::handle_timeout`]), plaintext out to a [`PlaintextSink`] with pause and
//!   resume (backpressure), ciphertext out ([`TlsSession::write_to`]), `close_notify` on a
//!   graceful close and [`TlsError::Truncated`] for a stream ended without one.
//! * **Errors** — every bad handshake has its own [`TlsError`] variant: malformed input, an
//!   unknown CA, a wrong host name, an expired certificate, a missing client certificate, an
//!   alert from the peer, a handshake timeout.
//! * **Throwaway certificates** — with the feature `generate`, `Pki::generate` makes a CA,
//!   a server and a client certificate in memory (rcgen), for tests and benchmarks.
//!
//! Two sessions talking through memory:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use ark_tls::{ClientTls, Identity, PlaintextSink, ServerTls, TlsInfo, TlsSession, TrustRoots};
//! # let key = rcgen::KeyPair::generate()?;
//! # let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])?.self_signed(&key)?;
//! # let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
//!
//! // A server certificate and key in PEM (here self-signed, so it is its own CA).
//! let server = ServerTls::builder(Identity::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?).build()?;
//! let client = ClientTls::builder(TrustRoots::from_pem(cert_pem.as_bytes())?).build()?;
//!
//! #[derive(Default)]
//! struct Collect { info: Option<Arc<TlsInfo>>, bytes: Vec<u8> }
//! impl PlaintextSink for Collect {
//!     fn established(&mut self, info: &Arc<TlsInfo>) { self.info = Some(info.clone()); }
//!     fn plaintext(&mut self, bytes: &[u8]) -> bool { self.bytes.extend_from_slice(bytes); true }
//! }
//!
//! let now = Instant::now();
//! let mut c = TlsSession::client(&client, ark_tls::server_name("localhost")?, now)?;
//! let mut s = TlsSession::server(&server, now)?;
//! let (mut at_client, mut at_server) = (Collect::default(), Collect::default());
//! while !(c.is_established() && s.is_established()) {
//!     let mut wire = Vec::new();
//!     c.write_to(&mut wire)?;
//!     s.handle_input(&wire, &mut at_server)?;
//!     wire.clear();
//!     s.write_to(&mut wire)?;
//!     c.handle_input(&wire, &mut at_client)?;
//! }
//! assert_eq!(c.write_plaintext(b"hello"), 5);
//! let mut wire = Vec::new();
//! c.write_to(&mut wire)?;
//! s.handle_input(&wire, &mut at_server)?;
//! assert_eq!(at_server.bytes, b"hello");
//! assert_eq!(at_client.info.unwrap().version, "TLSv1.3");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// docs.rs: every feature-gated item is marked with its feature.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod error;
#[cfg(feature = "generate")]
mod pki;
mod session;

pub use config::{
    ClientTls, ClientTlsBuilder, DEFAULT_HANDSHAKE_TIMEOUT, Identity, ServerTls, ServerTlsBuilder,
    TlsVersions, TrustRoots, server_name,
};
pub use error::{ConfigError, TlsError};
#[cfg(feature = "generate")]
pub use pki::{GenerateError, Pki, Validity};
pub use rustls;
pub use rustls::pki_types::{CertificateDer, ServerName};
pub use session::{Negotiated, OUTGOING_LIMIT, PlaintextSink, TlsInfo, TlsSession, describe};
