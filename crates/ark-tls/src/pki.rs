//! A throwaway public-key infrastructure made in memory (feature `generate`): one CA, a
//! server certificate for the names asked, and a client certificate for mTLS. For tests and
//! benchmarks; real deployments load their own files.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::config::{ClientTls, Identity, ServerTls, TrustRoots};
use crate::error::ConfigError;

/// A CA and the certificates it issued, all in PEM.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA's certificate: what both sides trust (arknet's `ca.pem`).
    pub ca_pem: String,
    /// The server's certificate (arknet's `server.pem`).
    pub server_cert_pem: String,
    /// The server's private key (arknet's `server-key.pem`).
    pub server_key_pem: String,
    /// A client certificate for mTLS.
    pub client_cert_pem: String,
    /// Its private key.
    pub client_key_pem: String,
}

/// Why certificates could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("generating certificates: {0}")]
pub struct GenerateError(#[from] rcgen::Error);

/// The validity of a generated leaf certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Validity {
    /// Valid from yesterday for a year (rcgen's default window is wider; either works).
    #[default]
    Current,
    /// Expired: valid only during 2020.
    Expired,
}

fn leaf(
    names: &[&str],
    common_name: &str,
    usage: ExtendedKeyUsagePurpose,
    validity: Validity,
) -> Result<CertificateParams, rcgen::Error> {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    if validity == Validity::Expired {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    }
    Ok(params)
}

impl Pki {
    /// A fresh CA, a server certificate valid for `server_names` (DNS names or IP addresses)
    /// and a client certificate, each with a new ECDSA P-256 key.
    ///
    /// # Errors
    /// [`GenerateError`] when rcgen fails (a name it cannot encode, say).
    pub fn generate(server_names: &[&str]) -> Result<Pki, GenerateError> {
        Pki::generate_with(server_names, Validity::Current)
    }

    /// As [`generate`](Self::generate), with the server certificate's validity chosen (an
    /// expired one, for tests).
    ///
    /// # Errors
    /// As [`generate`](Self::generate).
    pub fn generate_with(server_names: &[&str], validity: Validity) -> Result<Pki, GenerateError> {
        let ca_key = KeyPair::generate()?;
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        // A name of its own: two generated CAs must not pass for each other's issuer.
        let tag: String = ca_key
            .public_key_raw()
            .iter()
            .rev()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        ca.distinguished_name
            .push(DnType::CommonName, format!("ark throwaway CA {tag}"));
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca, ca_key);
        let server_key = KeyPair::generate()?;
        let server = leaf(
            server_names,
            "ark server",
            ExtendedKeyUsagePurpose::ServerAuth,
            validity,
        )?
        .signed_by(&server_key, &issuer)?;
        let client_key = KeyPair::generate()?;
        let client = leaf(
            &["client.ark"],
            "ark client",
            ExtendedKeyUsagePurpose::ClientAuth,
            Validity::Current,
        )?
        .signed_by(&client_key, &issuer)?;
        Ok(Pki {
            ca_pem: ca_cert.pem(),
            server_cert_pem: server.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
        })
    }

    /// The server's identity.
    ///
    /// # Errors
    /// Never for generated PEM; typed for files edited since.
    pub fn server_identity(&self) -> Result<Identity, ConfigError> {
        Identity::from_pem(
            self.server_cert_pem.as_bytes(),
            self.server_key_pem.as_bytes(),
        )
    }

    /// The client's identity (mTLS).
    ///
    /// # Errors
    /// As [`server_identity`](Self::server_identity).
    pub fn client_identity(&self) -> Result<Identity, ConfigError> {
        Identity::from_pem(
            self.client_cert_pem.as_bytes(),
            self.client_key_pem.as_bytes(),
        )
    }

    /// The roots trusting this CA.
    ///
    /// # Errors
    /// As [`server_identity`](Self::server_identity).
    pub fn roots(&self) -> Result<TrustRoots, ConfigError> {
        TrustRoots::from_pem(self.ca_pem.as_bytes())
    }

    /// A server config presenting the server certificate (defaults otherwise).
    ///
    /// # Errors
    /// As [`server_identity`](Self::server_identity).
    pub fn server_tls(&self) -> Result<ServerTls, ConfigError> {
        ServerTls::builder(self.server_identity()?).build()
    }

    /// A client config trusting the CA (defaults otherwise).
    ///
    /// # Errors
    /// As [`server_identity`](Self::server_identity).
    pub fn client_tls(&self) -> Result<ClientTls, ConfigError> {
        ClientTls::builder(self.roots()?).build()
    }

    /// Writes arknet's three-file layout into `dir`: `server.pem`, `server-key.pem`,
    /// `ca.pem` (and `client.pem`, `client-key.pem`).
    ///
    /// # Errors
    /// The first write that fails.
    pub fn write_dir(&self, dir: &std::path::Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (name, pem) in [
            ("server.pem", &self.server_cert_pem),
            ("server-key.pem", &self.server_key_pem),
            ("ca.pem", &self.ca_pem),
            ("client.pem", &self.client_cert_pem),
            ("client-key.pem", &self.client_key_pem),
        ] {
            std::fs::write(dir.join(name), pem)?;
        }
        Ok(())
    }
}
