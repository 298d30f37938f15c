//! QUIC's TLS: a throwaway CA and server certificate made in memory for the run
//! (`ark_tls::Pki`, rcgen), or arknet's three files from `--certs DIR` (what a server and
//! its clients in two processes must share), and rustls configs on the workspace's provider,
//! `ring` (QUIC is TLS 1.3 only; the clients verify the server as any client would).

use std::io;
use std::path::Path;
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::rustls;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The name the server's certificate is made for and the clients verify.
pub const SERVER_NAME: &str = "localhost";

/// The application protocol both ends offer.
const ALPN: &[u8] = b"ark-echo";

/// An error of certificate generation or of a rustls config, as an `io::Error`.
fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("QUIC TLS: {e}"))
}

/// The `ring` provider, TLS 1.3.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Both ends' crypto for one run (quinn's configs have no `Debug`).
pub struct Crypto {
    /// The server's.
    pub server: Arc<QuicServerConfig>,
    /// Every client's.
    pub client: Arc<QuicClientConfig>,
}

impl Crypto {
    /// The run's certificates (`certs`: a directory with `server.pem`, `server-key.pem` and
    /// `ca.pem`; otherwise generated) and both configs.
    ///
    /// # Errors
    /// Reading, generating or parsing the certificates failed, or rustls refused a config.
    pub fn of(certs: Option<&Path>) -> io::Result<Crypto> {
        let Some(dir) = certs else {
            let names = [SERVER_NAME, "127.0.0.1", "::1"];
            let pki = ark_tls::Pki::generate(&names).map_err(invalid)?;
            let (ca, cert, key) = (pki.ca_pem, pki.server_cert_pem, pki.server_key_pem);
            return Crypto::from_pem(ca.as_bytes(), cert.as_bytes(), key.as_bytes());
        };
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("--certs: {}: {e}", path.display())))
        };
        Crypto::from_pem(
            &read("ca.pem")?,
            &read("server.pem")?,
            &read("server-key.pem")?,
        )
    }

    /// Both configs from PEM: the CA the clients trust, the server's chain and key.
    fn from_pem(ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> io::Result<Crypto> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(invalid)?;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(invalid)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(invalid)?;
        server.alpn_protocols = vec![ALPN.to_vec()];

        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(ca.map_err(invalid)?).map_err(invalid)?;
        }
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(invalid)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![ALPN.to_vec()];

        Ok(Crypto {
            server: Arc::new(QuicServerConfig::try_from(server).map_err(invalid)?),
            client: Arc::new(QuicClientConfig::try_from(client).map_err(invalid)?),
        })
    }
}
