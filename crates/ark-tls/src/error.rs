//! Typed errors: what went wrong in a handshake or a TLS stream, and in building a config.

use std::time::Duration;

/// Why a TLS session failed. Each bad handshake has its own variant, so a handler (and a test)
/// can tell an unknown CA from a wrong host name or a missing client certificate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The peer's bytes are not TLS (garbage instead of a ClientHello, say) or break the
    /// record layer.
    #[error("not TLS or a malformed TLS record: {0}")]
    Malformed(String),
    /// The peer's certificate chain does not lead to a trusted CA.
    #[error("the peer's certificate is issued by an unknown CA")]
    UnknownIssuer,
    /// The peer's certificate is not valid for the name connected to.
    #[error("the peer's certificate is not valid for the name: {0}")]
    WrongHostName(String),
    /// The peer's certificate has expired (or is not valid yet).
    #[error("the peer's certificate is outside its validity period: {0}")]
    Expired(String),
    /// Another problem with the peer's certificate (bad encoding, wrong usage, revoked, ...).
    #[error("the peer's certificate was rejected: {0}")]
    BadCertificate(String),
    /// The server requires a client certificate and the client sent none.
    #[error("the peer sent no certificate and one is required")]
    CertificateRequired,
    /// The peer refused the handshake or the stream with an alert (it rejected our
    /// certificate, say).
    #[error("the peer sent the alert {0}")]
    AlertReceived(String),
    /// The two sides share no protocol version, cipher suite or application protocol.
    #[error("no common parameters with the peer: {0}")]
    Incompatible(String),
    /// The handshake did not finish within the handshake timeout.
    #[error("the handshake did not finish within {0:?}")]
    HandshakeTimeout(Duration),
    /// The peer ended the TCP stream without a TLS `close_notify`: what arrived may be
    /// truncated.
    #[error("the peer closed the stream without a TLS close_notify (truncated)")]
    Truncated,
    /// Any other protocol failure, with rustls's description.
    #[error("TLS protocol error: {0}")]
    Protocol(String),
}

impl TlsError {
    /// Whether the failure happened in the handshake's certificate checks (either side).
    pub fn is_certificate_error(&self) -> bool {
        matches!(
            self,
            TlsError::UnknownIssuer
                | TlsError::WrongHostName(_)
                | TlsError::Expired(_)
                | TlsError::BadCertificate(_)
                | TlsError::CertificateRequired
        )
    }
}

impl From<rustls::Error> for TlsError {
    fn from(error: rustls::Error) -> Self {
        use rustls::{CertificateError as C, Error as E};
        match error {
            E::InvalidMessage(_) | E::InappropriateMessage { .. } | E::PeerSentOversizedRecord => {
                TlsError::Malformed(error.to_string())
            }
            E::InvalidCertificate(C::UnknownIssuer) => TlsError::UnknownIssuer,
            E::InvalidCertificate(
                ref cause @ (C::NotValidForName | C::NotValidForNameContext { .. }),
            ) => TlsError::WrongHostName(cause_text(cause)),
            E::InvalidCertificate(
                ref cause @ (C::Expired
                | C::ExpiredContext { .. }
                | C::NotValidYet
                | C::NotValidYetContext { .. }),
            ) => TlsError::Expired(cause_text(cause)),
            E::InvalidCertificate(cause) => TlsError::BadCertificate(cause_text(&cause)),
            E::NoCertificatesPresented => TlsError::CertificateRequired,
            E::AlertReceived(alert) => TlsError::AlertReceived(format!("{alert:?}")),
            E::PeerIncompatible(_) | E::NoApplicationProtocol => {
                TlsError::Incompatible(error.to_string())
            }
            other => TlsError::Protocol(other.to_string()),
        }
    }
}

fn cause_text(cause: &rustls::CertificateError) -> String {
    rustls::Error::InvalidCertificate(cause.clone()).to_string()
}

/// Why a TLS config could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A PEM file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// PEM input held no item of the kind needed.
    #[error("no {0} found in the PEM input")]
    Missing(&'static str),
    /// PEM input could not be parsed.
    #[error("bad PEM input ({what}): {message}")]
    Pem {
        /// What was being read (certificate, private key).
        what: &'static str,
        /// The parser's message.
        message: String,
    },
    /// A CA certificate could not be added to the trust store.
    #[error("bad CA certificate: {0}")]
    BadCa(String),
    /// rustls refused the configuration (a key that does not match its certificate, say).
    #[error("rustls refused the configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built.
    #[error("building the client-certificate verifier: {0}")]
    Verifier(String),
    /// The name to connect to is not a valid DNS name or IP address.
    #[error("not a valid server name: {0:?}")]
    ServerName(String),
}
