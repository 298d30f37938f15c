//! TLS for `--protocol tcps|wss`: the certificates of a run (arknet's three files from
//! `--certs DIR`, or a throwaway CA generated in memory) and the rustls configs every
//! implementation uses, so ark and its peers run the same TLS with the same provider.

use std::io;
use std::path::Path;

use ark_tls::{ClientTls, Identity, ServerTls, TrustRoots};

use crate::args::Args;

/// The certificates of one run, in PEM.
#[derive(Debug, Clone)]
pub struct TlsMaterial {
    /// The CA clients trust.
    pub ca_pem: Vec<u8>,
    /// The server's certificate chain.
    pub cert_pem: Vec<u8>,
    /// The server's private key.
    pub key_pem: Vec<u8>,
    /// The name clients verify and send by SNI (`--server-name`).
    pub server_name: String,
    /// Where the certificates came from: `"generated"` or `"dir"`.
    pub source: &'static str,
    /// Session resumption on both sides (`--tls-resumption`).
    pub resumption: bool,
}

fn read(dir: &Path, name: &str) -> io::Result<Vec<u8>> {
    let path = dir.join(name);
    std::fs::read(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("--certs: {}: {e}", path.display())))
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("TLS: {e}"))
}

impl TlsMaterial {
    /// The run's certificates: `None` for a protocol without TLS.
    ///
    /// # Errors
    /// A file of `--certs` cannot be read, or generating certificates failed.
    pub fn for_args(args: &Args) -> io::Result<Option<TlsMaterial>> {
        if !args.protocol.is_tls() {
            return Ok(None);
        }
        let server_name = args.server_name.clone();
        let resumption = args.tls_resumption == crate::args::Switch::On;
        let material = match &args.certs {
            Some(dir) => TlsMaterial {
                ca_pem: read(dir, "ca.pem")?,
                cert_pem: read(dir, "server.pem")?,
                key_pem: read(dir, "server-key.pem")?,
                server_name,
                source: "dir",
                resumption,
            },
            None => {
                let names = [server_name.as_str(), "localhost", "127.0.0.1", "::1"];
                let pki = ark_tls::Pki::generate(&names).map_err(invalid)?;
                TlsMaterial {
                    ca_pem: pki.ca_pem.into_bytes(),
                    cert_pem: pki.server_cert_pem.into_bytes(),
                    key_pem: pki.server_key_pem.into_bytes(),
                    server_name,
                    source: "generated",
                    resumption,
                }
            }
        };
        Ok(Some(material))
    }

    /// The server's config (TLS 1.2 and 1.3, resumption per `--tls-resumption`).
    ///
    /// # Errors
    /// The PEM input is not a usable certificate and key.
    pub fn server_tls(&self) -> io::Result<ServerTls> {
        let identity = Identity::from_pem(&self.cert_pem, &self.key_pem).map_err(invalid)?;
        ServerTls::builder(identity)
            .resumption(self.resumption)
            .build()
            .map_err(invalid)
    }

    /// A client's config (verifying against the CA; resumption per `--tls-resumption`; its
    /// own session cache).
    ///
    /// # Errors
    /// The CA is not a usable certificate.
    pub fn client_tls(&self) -> io::Result<ClientTls> {
        let roots = TrustRoots::from_pem(&self.ca_pem).map_err(invalid)?;
        ClientTls::builder(roots)
            .resumption(self.resumption)
            .build()
            .map_err(invalid)
    }
}
