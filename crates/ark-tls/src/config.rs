//! Server and client configurations: certificates and keys from PEM files or buffers, trust
//! roots, client authentication (mTLS), SNI, ALPN, protocol versions, resumption and the
//! handshake timeout. Every config uses rustls's `ring` provider.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;

use crate::error::ConfigError;

/// The handshake timeout a config gets unless it sets its own.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The crypto provider every ark config uses: rustls's `ring`.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn pem_error(what: &'static str) -> impl Fn(rustls::pki_types::pem::Error) -> ConfigError {
    move |e| ConfigError::Pem {
        what,
        message: e.to_string(),
    }
}

/// A certificate chain and its private key: what a server (or an mTLS client) presents.
#[derive(Debug)]
pub struct Identity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Identity {
    /// From PEM buffers: the chain (leaf first) and the private key (PKCS#8, PKCS#1 or SEC1).
    ///
    /// # Errors
    /// [`ConfigError::Pem`] or [`ConfigError::Missing`] when either input holds no usable item.
    pub fn from_pem(chain: &[u8], key: &[u8]) -> Result<Self, ConfigError> {
        let chain = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(pem_error("certificate"))?;
        if chain.is_empty() {
            return Err(ConfigError::Missing("certificate"));
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(pem_error("private key"))?;
        Ok(Identity { chain, key })
    }

    /// From PEM files (arknet's `server.pem` and `server-key.pem`, say).
    ///
    /// # Errors
    /// [`ConfigError::Read`] when a file cannot be read, else as [`from_pem`](Self::from_pem).
    pub fn from_pem_files(
        chain: impl AsRef<Path>,
        key: impl AsRef<Path>,
    ) -> Result<Self, ConfigError> {
        Identity::from_pem(&read_file(chain.as_ref())?, &read_file(key.as_ref())?)
    }

    /// From DER: the chain (leaf first) and the key.
    pub fn from_der(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> Self {
        Identity { chain, key }
    }

    fn certified_key(&self, provider: &CryptoProvider) -> Result<CertifiedKey, ConfigError> {
        Ok(CertifiedKey::from_der(
            self.chain.clone(),
            self.key.clone_key(),
            provider,
        )?)
    }
}

/// The CA certificates a side trusts to verify its peer.
#[derive(Debug, Clone)]
pub struct TrustRoots {
    store: rustls::RootCertStore,
}

impl TrustRoots {
    /// No roots (add some before use: a verifier with none trusts nobody).
    pub fn empty() -> Self {
        TrustRoots {
            store: rustls::RootCertStore::empty(),
        }
    }

    /// The operating system's trusted CAs (on Linux the distribution's bundle, such as
    /// `/etc/ssl/certs/ca-certificates.crt`; `SSL_CERT_FILE` / `SSL_CERT_DIR` override),
    /// loaded by `rustls-native-certs`. Certificates webpki cannot use are skipped.
    ///
    /// # Errors
    /// [`ConfigError::Missing`] when no usable CA certificate was found.
    pub fn system() -> Result<Self, ConfigError> {
        let mut roots = TrustRoots::empty();
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add_der(cert);
        }
        if roots.is_empty() {
            return Err(ConfigError::Missing("system CA certificate"));
        }
        Ok(roots)
    }

    /// The CA certificates in a PEM buffer (arknet's `ca.pem`).
    ///
    /// # Errors
    /// [`ConfigError::Pem`], [`ConfigError::Missing`] (no certificate), [`ConfigError::BadCa`].
    pub fn from_pem(pem: &[u8]) -> Result<Self, ConfigError> {
        let mut roots = TrustRoots::empty();
        roots.add_pem(pem)?;
        Ok(roots)
    }

    /// The CA certificates in a PEM file.
    ///
    /// # Errors
    /// [`ConfigError::Read`], else as [`from_pem`](Self::from_pem).
    pub fn from_pem_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        TrustRoots::from_pem(&read_file(path.as_ref())?)
    }

    /// Adds the CA certificates in a PEM buffer.
    ///
    /// # Errors
    /// As [`from_pem`](Self::from_pem).
    pub fn add_pem(&mut self, pem: &[u8]) -> Result<&mut Self, ConfigError> {
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(pem_error("CA certificate"))?;
            self.add_der(cert)?;
            added += 1;
        }
        if added == 0 {
            return Err(ConfigError::Missing("CA certificate"));
        }
        Ok(self)
    }

    /// Adds one CA certificate in DER.
    ///
    /// # Errors
    /// [`ConfigError::BadCa`] when webpki cannot use it as a trust anchor.
    pub fn add_der(&mut self, cert: CertificateDer<'_>) -> Result<&mut Self, ConfigError> {
        self.store
            .add(cert.into_owned())
            .map_err(|e| ConfigError::BadCa(e.to_string()))?;
        Ok(self)
    }

    /// How many roots there are.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }
}

/// Which TLS versions a config allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsVersions {
    /// TLS 1.2 and 1.3 (negotiated: 1.3 when both sides have it).
    #[default]
    Tls12And13,
    /// TLS 1.3 only.
    Tls13Only,
    /// TLS 1.2 only.
    Tls12Only,
}

impl TlsVersions {
    fn rustls(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static BOTH: [&rustls::SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        static TLS13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        static TLS12: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        match self {
            TlsVersions::Tls12And13 => &BOTH,
            TlsVersions::Tls13Only => &TLS13,
            TlsVersions::Tls12Only => &TLS12,
        }
    }
}

/// What the settings shared by both sides hold.
#[derive(Debug, Clone)]
struct Common {
    alpn: Vec<Vec<u8>>,
    versions: TlsVersions,
    resumption: bool,
    handshake_timeout: Duration,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            alpn: Vec::new(),
            versions: TlsVersions::default(),
            resumption: true,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }
}

/// The settings both builders share.
macro_rules! tls_options {
    () => {
        /// The application protocols to offer (client) or accept (server) by ALPN, most
        /// preferred first; none by default. A server with a list refuses a client that
        /// offers only others.
        pub fn alpn<P: AsRef<[u8]>>(mut self, protocols: impl IntoIterator<Item = P>) -> Self {
            self.common.alpn = protocols.into_iter().map(|p| p.as_ref().to_vec()).collect();
            self
        }

        /// The TLS versions allowed (default: 1.2 and 1.3).
        pub fn versions(mut self, versions: TlsVersions) -> Self {
            self.common.versions = versions;
            self
        }

        /// Session resumption (tickets / session ids), on by default.
        pub fn resumption(mut self, on: bool) -> Self {
            self.common.resumption = on;
            self
        }

        /// How long a handshake may take before the session ends with
        /// [`TlsError::HandshakeTimeout`](crate::TlsError::HandshakeTimeout) (default 10 s).
        pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
            self.common.handshake_timeout = timeout;
            self
        }
    };
}

/// A server's TLS configuration, cheap to clone and share between sessions.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub(crate) config: Arc<rustls::ServerConfig>,
    pub(crate) handshake_timeout: Duration,
}

impl ServerTls {
    /// A builder presenting `identity` (and verifying no client certificate unless asked).
    pub fn builder(identity: Identity) -> ServerTlsBuilder {
        ServerTlsBuilder {
            identity,
            by_name: Vec::new(),
            client_auth: None,
            common: Common::default(),
        }
    }

    /// A server config from arknet's three-file layout in `dir`: `server.pem` and
    /// `server-key.pem` (no client authentication).
    ///
    /// # Errors
    /// As [`Identity::from_pem_files`].
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<ServerTls, ConfigError> {
        let dir = dir.as_ref();
        let identity =
            Identity::from_pem_files(dir.join("server.pem"), dir.join("server-key.pem"))?;
        ServerTls::builder(identity).build()
    }

    /// Wraps a rustls config built elsewhere (its own crypto provider, verifier, ...).
    pub fn from_rustls(config: Arc<rustls::ServerConfig>, handshake_timeout: Duration) -> Self {
        ServerTls {
            config,
            handshake_timeout,
        }
    }

    /// The rustls config.
    pub fn rustls_config(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }

    /// The handshake timeout.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }
}

/// Builds a [`ServerTls`].
#[derive(Debug)]
pub struct ServerTlsBuilder {
    identity: Identity,
    by_name: Vec<(String, Identity)>,
    client_auth: Option<(TrustRoots, bool)>,
    common: Common,
}

impl ServerTlsBuilder {
    tls_options!();

    /// Presents `identity` to clients that ask for `name` by SNI; the builder's identity
    /// answers every other name (and clients sending no SNI).
    pub fn sni_identity(mut self, name: impl Into<String>, identity: Identity) -> Self {
        self.by_name.push((name.into(), identity));
        self
    }

    /// mTLS: every client must present a certificate issued by one of `roots`; a client
    /// without one fails with [`TlsError::CertificateRequired`](crate::TlsError::CertificateRequired).
    pub fn require_client_cert(mut self, roots: TrustRoots) -> Self {
        self.client_auth = Some((roots, true));
        self
    }

    /// Verifies a client certificate when one is presented, and accepts clients without.
    pub fn optional_client_cert(mut self, roots: TrustRoots) -> Self {
        self.client_auth = Some((roots, false));
        self
    }

    /// The config.
    ///
    /// # Errors
    /// [`ConfigError::Rustls`] (a key that does not match its certificate, no usable cipher
    /// suite), [`ConfigError::Verifier`] (no client CA roots).
    pub fn build(self) -> Result<ServerTls, ConfigError> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(self.common.versions.rustls())?;
        let builder = match self.client_auth {
            None => builder.with_no_client_auth(),
            Some((roots, required)) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots.store),
                    provider.clone(),
                );
                let verifier = if required {
                    verifier
                } else {
                    verifier.allow_unauthenticated()
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| ConfigError::Verifier(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let resolver = SniResolver {
            default: Arc::new(self.identity.certified_key(&provider)?),
            by_name: self
                .by_name
                .iter()
                .map(|(name, id)| {
                    Ok((
                        name.to_ascii_lowercase(),
                        Arc::new(id.certified_key(&provider)?),
                    ))
                })
                .collect::<Result<_, ConfigError>>()?,
        };
        let mut config = builder.with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = self.common.alpn;
        if !self.common.resumption {
            config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
            config.send_tls13_tickets = 0;
        }
        Ok(ServerTls {
            config: Arc::new(config),
            handshake_timeout: self.common.handshake_timeout,
        })
    }
}

/// Picks the certificate by the client's SNI name, else the default.
#[derive(Debug)]
struct SniResolver {
    default: Arc<CertifiedKey>,
    by_name: Vec<(String, Arc<CertifiedKey>)>,
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let chosen = hello.server_name().and_then(|name| {
            self.by_name
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, key)| key.clone())
        });
        Some(chosen.unwrap_or_else(|| self.default.clone()))
    }
}

/// A client's TLS configuration, cheap to clone and share between connections.
#[derive(Debug, Clone)]
pub struct ClientTls {
    pub(crate) config: Arc<rustls::ClientConfig>,
    pub(crate) handshake_timeout: Duration,
}

impl ClientTls {
    /// A builder verifying servers against `roots` (chain and host name: verification is
    /// always on).
    pub fn builder(roots: TrustRoots) -> ClientTlsBuilder {
        ClientTlsBuilder {
            roots,
            identity: None,
            sni: true,
            common: Common::default(),
        }
    }

    /// A client config trusting the CA certificates in the PEM file `ca` (arknet's `ca.pem`).
    ///
    /// # Errors
    /// As [`TrustRoots::from_pem_file`].
    pub fn from_ca_file(ca: impl AsRef<Path>) -> Result<ClientTls, ConfigError> {
        ClientTls::builder(TrustRoots::from_pem_file(ca)?).build()
    }

    /// Wraps a rustls config built elsewhere.
    pub fn from_rustls(config: Arc<rustls::ClientConfig>, handshake_timeout: Duration) -> Self {
        ClientTls {
            config,
            handshake_timeout,
        }
    }

    /// The rustls config.
    pub fn rustls_config(&self) -> &Arc<rustls::ClientConfig> {
        &self.config
    }

    /// The handshake timeout.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }
}

/// Checks that `name` can be connected to: a DNS name or an IP address.
///
/// # Errors
/// [`ConfigError::ServerName`].
pub fn server_name(name: &str) -> Result<ServerName<'static>, ConfigError> {
    ServerName::try_from(name.to_string()).map_err(|_| ConfigError::ServerName(name.to_string()))
}

/// Builds a [`ClientTls`].
#[derive(Debug)]
pub struct ClientTlsBuilder {
    roots: TrustRoots,
    identity: Option<Identity>,
    sni: bool,
    common: Common,
}

impl ClientTlsBuilder {
    tls_options!();

    /// mTLS: presents `identity` when the server asks for a client certificate.
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Whether to send the server name by SNI (on by default; never sent for IP addresses).
    pub fn sni(mut self, on: bool) -> Self {
        self.sni = on;
        self
    }

    /// The config.
    ///
    /// # Errors
    /// [`ConfigError::Rustls`] (a client key that does not match its certificate, say).
    pub fn build(self) -> Result<ClientTls, ConfigError> {
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(self.common.versions.rustls())?
            .with_root_certificates(self.roots.store);
        let mut config = match self.identity {
            Some(identity) => builder.with_client_auth_cert(identity.chain, identity.key)?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = self.common.alpn;
        config.enable_sni = self.sni;
        if !self.common.resumption {
            config.resumption = rustls::client::Resumption::disabled();
        }
        Ok(ClientTls {
            config: Arc::new(config),
            handshake_timeout: self.common.handshake_timeout,
        })
    }
}
