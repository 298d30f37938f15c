//! Encrypted sessions: the key exchange and packet protection, sans-IO (bytes in, bytes out).
//!
//! - **Handshake**: Noise `NK` (`Noise_NK_25519_AESGCM_SHA256`, through the `snow` crate): the
//!   client knows the server's static X25519 public key (pinned, as WireGuard pins its peers'),
//!   sends an ephemeral key and an `es` DH in the HELLO that carries the cookie, and the server
//!   answers with its own ephemeral key (`ee`) in the ACCEPT. Forward secrecy from `ee`; the
//!   server is authenticated because only the holder of the static secret can complete `es`.
//!   The prologue binds the protocol version, the handshake's nonce and the server's cookie.
//!   The client's first message may carry a connect token (encrypted to the server's key:
//!   nobody on the path reads it), which the server's application checks.
//! - **Packet protection** (QUIC's scheme, RFC 9001 §5.3, with Noise's split keys as the
//!   traffic secrets): each direction's 32-byte secret gives, by HKDF-Expand-SHA256, an
//!   AES-128-GCM key and a 12-byte IV; a datagram's nonce is the IV XOR its 64-bit packet
//!   number, its clear header (kind byte and the packet number's low 32 bits) is the
//!   associated data, the rest is encrypted and a 16-byte tag ends it.
//! - **Key updates** without a signal on the wire: the packet number says the key's epoch
//!   (`pn >> EPOCH_BITS`, 2^22 datagrams each, under AES-GCM's confidentiality limit of 2^23
//!   per key, RFC 9001 §6.6), and epoch `e + 1`'s secret is HKDF-Expand of epoch `e`'s, which
//!   is then forgotten (forward secrecy inside a session). A receiver keeps the keys of the
//!   epochs before and after its own, for datagrams reordered across a boundary.

use ring::aead::{self, AES_128_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::hkdf;

/// The Noise protocol of the handshake.
pub(crate) const NOISE_PARAMS: &str = "Noise_NK_25519_AESGCM_SHA256";
/// The AEAD tag that ends every protected datagram.
pub(crate) const TAG_LEN: usize = 16;
/// Datagrams per key epoch: 2^EPOCH_BITS.
pub(crate) const EPOCH_BITS: u32 = 22;
/// X25519 key bytes.
pub(crate) const KEY_LEN: usize = 32;
/// The client's first handshake message without a connect token: its ephemeral key and the
/// tag of its (empty) payload.
pub(crate) const FIRST_MESSAGE: usize = KEY_LEN + TAG_LEN;
/// The server's answer: its ephemeral key and the tag of its empty payload.
pub(crate) const SECOND_MESSAGE: usize = KEY_LEN + TAG_LEN;
/// Failed opens a session tolerates before it ends (AES-GCM's integrity limit is 2^52
/// forgeries per key, RFC 9001 §6.6; a session that meets this many is under attack or
/// broken, and ends well before the limit).
pub(crate) const MAX_FAILED_OPENS: u64 = 1 << 36;

const LABEL_KEY: &[u8] = b"ark-rudp v4 key";
const LABEL_IV: &[u8] = b"ark-rudp v4 iv";
const LABEL_UPDATE: &[u8] = b"ark-rudp v4 ku";

/// Why a handshake message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The message did not decrypt or verify: not made with the server's key (a client that
    /// pinned another key, an attacker), or changed on the way.
    #[error("the handshake message did not verify: {0}")]
    Verify(String),
    /// A key given was not 32 bytes.
    #[error("an X25519 key is 32 bytes, not {0}")]
    KeyLength(usize),
}

/// A server's static X25519 key pair: its public half is what clients pin
/// ([`RudpServerKey::public`]). Keep the secret ([`RudpServerKey::secret`]) as a server keeps
/// a TLS private key, and load it with [`RudpServerKey::from_secret`].
#[derive(Clone)]
pub struct RudpServerKey {
    secret: [u8; KEY_LEN],
    public: [u8; KEY_LEN],
}

impl std::fmt::Debug for RudpServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RudpServerKey")
            .field("public", &hex(&self.public))
            .finish_non_exhaustive()
    }
}

impl Drop for RudpServerKey {
    fn drop(&mut self) {
        wipe(&mut self.secret);
    }
}

impl RudpServerKey {
    /// A new key pair from the system's random generator.
    ///
    /// # Panics
    /// The system has no random generator (snow's, on ring's).
    pub fn generate() -> RudpServerKey {
        let builder = snow::Builder::new(params());
        let pair = builder
            .generate_keypair()
            .expect("the system's random generator gives a key");
        let mut key = RudpServerKey {
            secret: [0; KEY_LEN],
            public: [0; KEY_LEN],
        };
        key.secret.copy_from_slice(&pair.private);
        key.public.copy_from_slice(&pair.public);
        key
    }

    /// The key pair of a stored secret (its public half computed from it).
    pub fn from_secret(secret: [u8; KEY_LEN]) -> RudpServerKey {
        use snow::resolvers::CryptoResolver;
        let mut dh = snow::resolvers::DefaultResolver
            .resolve_dh(&snow::params::DHChoice::Curve25519)
            .expect("snow's default resolver has X25519");
        dh.set(&secret);
        let mut public = [0; KEY_LEN];
        public.copy_from_slice(dh.pubkey());
        RudpServerKey { secret, public }
    }

    /// The secret half, to store (treat as a TLS private key).
    pub fn secret(&self) -> [u8; KEY_LEN] {
        self.secret
    }

    /// The public half, which clients pin ([`RudpPublicKey`]).
    pub fn public(&self) -> RudpPublicKey {
        RudpPublicKey(self.public)
    }
}

/// A server's public key, as a client pins it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RudpPublicKey(pub [u8; KEY_LEN]);

impl std::fmt::Debug for RudpPublicKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RudpPublicKey({})", hex(&self.0))
    }
}

impl std::fmt::Display for RudpPublicKey {
    /// Lower-case hex, 64 digits (what [`RudpPublicKey::from_hex`] reads).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl RudpPublicKey {
    /// A key from 64 hex digits (as [`Display`](std::fmt::Display) writes it).
    ///
    /// # Errors
    /// Not 64 hex digits.
    pub fn from_hex(text: &str) -> Result<RudpPublicKey, HandshakeError> {
        let text = text.trim();
        if text.len() != 2 * KEY_LEN || !text.is_ascii() {
            return Err(HandshakeError::KeyLength(text.len() / 2));
        }
        let mut key = [0u8; KEY_LEN];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
                .map_err(|e| HandshakeError::Verify(format!("not hex: {e}")))?;
        }
        Ok(RudpPublicKey(key))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Overwrites a secret with zeros in a way the compiler keeps (the `zeroize` crate).
fn wipe(bytes: &mut [u8]) {
    zeroize::Zeroize::zeroize(bytes);
}

fn params() -> snow::params::NoiseParams {
    NOISE_PARAMS
        .parse()
        .expect("NOISE_PARAMS names a protocol snow has")
}

/// The handshake's prologue: the version, the nonce and the cookie (both ends know them; a
/// handshake under another cookie or nonce does not verify).
fn prologue(nonce: u64, cookie: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + cookie.len());
    p.extend_from_slice(b"ark-rudp v4 NK ");
    p.extend_from_slice(&nonce.to_be_bytes());
    p.extend_from_slice(cookie);
    p
}

fn verify(e: snow::Error) -> HandshakeError {
    HandshakeError::Verify(e.to_string())
}

/// A client's side of the handshake: its first message (sent in every HELLO that carries the
/// cookie, the same bytes each time) and the server's answer.
pub(crate) struct ClientHandshake {
    state: snow::HandshakeState,
    first: Vec<u8>,
}

impl std::fmt::Debug for ClientHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientHandshake")
            .field("first", &self.first.len())
            .finish_non_exhaustive()
    }
}

impl ClientHandshake {
    /// Begins the handshake with the server whose key is `server`, for the handshake's
    /// `nonce` and `cookie`; `token` (a connect token, possibly empty) is encrypted to the
    /// server's key in the first message.
    pub(crate) fn new(
        server: &RudpPublicKey,
        nonce: u64,
        cookie: &[u8],
        token: &[u8],
    ) -> Result<ClientHandshake, HandshakeError> {
        let prologue = prologue(nonce, cookie);
        let mut state = snow::Builder::new(params())
            .prologue(&prologue)
            .and_then(|b| b.remote_public_key(&server.0))
            .and_then(snow::Builder::build_initiator)
            .map_err(verify)?;
        let mut first = vec![0u8; FIRST_MESSAGE + token.len()];
        let n = state.write_message(token, &mut first).map_err(verify)?;
        first.truncate(n);
        Ok(ClientHandshake { state, first })
    }

    /// The first message (in the HELLO after the cookie).
    pub(crate) fn first_message(&self) -> &[u8] {
        &self.first
    }

    /// The server's answer (in its ACCEPT): the session's keys once it verifies.
    ///
    /// # Errors
    /// The answer does not verify: not from the server holding the pinned key, or changed.
    pub(crate) fn finish(&mut self, second: &[u8]) -> Result<SessionKeys, HandshakeError> {
        let mut payload = [0u8; 64];
        self.state
            .read_message(second, &mut payload)
            .map_err(verify)?;
        if !self.state.is_handshake_finished() {
            return Err(HandshakeError::Verify(
                "the handshake is not finished".into(),
            ));
        }
        let (to_server, to_client) = self.state.dangerously_get_raw_split();
        Ok(SessionKeys::new(to_server, to_client))
    }
}

/// What the server made of a client's first message.
pub(crate) struct Accepted {
    /// The session's keys, the server's way round.
    pub(crate) keys: SessionKeys,
    /// The client's connect token (empty if it sent none).
    pub(crate) token: Vec<u8>,
    /// The answer to send in the ACCEPT (the same bytes each time it is sent).
    pub(crate) second: Vec<u8>,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("token", &self.token.len())
            .finish_non_exhaustive()
    }
}

/// The server's side: the client's `first` message for the handshake's `nonce` and `cookie`
/// under the server's `key`.
///
/// # Errors
/// The message does not verify (made for another key, another cookie, or changed).
pub(crate) fn accept(
    key: &RudpServerKey,
    nonce: u64,
    cookie: &[u8],
    first: &[u8],
) -> Result<Accepted, HandshakeError> {
    let prologue = prologue(nonce, cookie);
    let mut state = snow::Builder::new(params())
        .prologue(&prologue)
        .and_then(|b| b.local_private_key(&key.secret))
        .and_then(snow::Builder::build_responder)
        .map_err(verify)?;
    let mut token = vec![0u8; first.len()];
    let n = state.read_message(first, &mut token).map_err(verify)?;
    token.truncate(n);
    let mut second = vec![0u8; SECOND_MESSAGE];
    let n = state.write_message(&[], &mut second).map_err(verify)?;
    second.truncate(n);
    let (to_server, to_client) = state.dangerously_get_raw_split();
    Ok(Accepted {
        keys: SessionKeys::new(to_client, to_server),
        token,
        second,
    })
}

/// HKDF-Expand-SHA256 of `secret` with `label` into `out` (the secret is a Noise split key
/// or an epoch's secret: uniformly random, so it is the PRK as it is).
fn expand(secret: &[u8; KEY_LEN], label: &[u8], out: &mut [u8]) {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
    let info = [label];
    let okm = prk
        .expand(&info, Len(out.len()))
        .expect("at most 255 hash lengths");
    okm.fill(out).expect("the length asked for");
}

/// One epoch's AEAD key and IV.
struct PacketKey {
    key: LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
}

impl PacketKey {
    fn new(secret: &[u8; KEY_LEN]) -> PacketKey {
        let mut key = [0u8; 16];
        let mut iv = [0u8; aead::NONCE_LEN];
        expand(secret, LABEL_KEY, &mut key);
        expand(secret, LABEL_IV, &mut iv);
        let unbound = UnboundKey::new(&AES_128_GCM, &key).expect("a 16-byte AES-128 key");
        wipe(&mut key);
        PacketKey {
            key: LessSafeKey::new(unbound),
            iv,
        }
    }

    fn nonce(&self, pn: u64) -> Nonce {
        let mut n = self.iv;
        for (b, p) in n[4..].iter_mut().zip(pn.to_be_bytes()) {
            *b ^= p;
        }
        Nonce::assume_unique_for_key(n)
    }

    /// Encrypts `body` in place; returns the tag.
    fn seal(&self, pn: u64, header: &[u8], body: &mut [u8]) -> [u8; TAG_LEN] {
        let tag = self
            .key
            .seal_in_place_separate_tag(self.nonce(pn), Aad::from(header), body)
            .expect("a datagram is far below AES-GCM's message limit");
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// Decrypts `body_and_tag` in place; the plaintext's length, or `None`.
    fn open(&self, pn: u64, header: &[u8], body_and_tag: &mut [u8]) -> Option<usize> {
        self.key
            .open_in_place(self.nonce(pn), Aad::from(header), body_and_tag)
            .ok()
            .map(|plain| plain.len())
    }
}

/// The next epoch's secret.
fn next_secret(secret: &[u8; KEY_LEN]) -> [u8; KEY_LEN] {
    let mut next = [0u8; KEY_LEN];
    expand(secret, LABEL_UPDATE, &mut next);
    next
}

fn epoch_of(pn: u64) -> u64 {
    pn >> EPOCH_BITS
}

/// The sending direction: the current epoch's key, the next epoch derived when a packet
/// number reaches it (the old secret forgotten).
struct SendKeys {
    epoch: u64,
    secret: [u8; KEY_LEN],
    key: PacketKey,
}

impl SendKeys {
    fn new(secret: [u8; KEY_LEN]) -> SendKeys {
        SendKeys {
            epoch: 0,
            key: PacketKey::new(&secret),
            secret,
        }
    }

    fn key_for(&mut self, pn: u64) -> &PacketKey {
        while self.epoch < epoch_of(pn) {
            let next = next_secret(&self.secret);
            wipe(&mut self.secret);
            self.secret = next;
            self.key = PacketKey::new(&self.secret);
            self.epoch += 1;
        }
        &self.key
    }
}

impl Drop for SendKeys {
    fn drop(&mut self) {
        wipe(&mut self.secret);
    }
}

/// The receiving direction: the keys of the epochs before, at and after the current one.
struct RecvKeys {
    epoch: u64,
    previous: Option<PacketKey>,
    current: PacketKey,
    next: PacketKey,
    /// The next epoch's secret (the one after it is derived from it on advancing).
    next_secret: [u8; KEY_LEN],
}

impl RecvKeys {
    fn new(mut secret: [u8; KEY_LEN]) -> RecvKeys {
        let next_secret = next_secret(&secret);
        let current = PacketKey::new(&secret);
        wipe(&mut secret);
        RecvKeys {
            epoch: 0,
            previous: None,
            current,
            next: PacketKey::new(&next_secret),
            next_secret,
        }
    }

    fn open(&mut self, pn: u64, header: &[u8], body_and_tag: &mut [u8]) -> Option<usize> {
        let epoch = epoch_of(pn);
        if epoch + 1 == self.epoch {
            return self.previous.as_ref()?.open(pn, header, body_and_tag);
        }
        if epoch == self.epoch {
            return self.current.open(pn, header, body_and_tag);
        }
        if epoch != self.epoch + 1 {
            return None;
        }
        let n = self.next.open(pn, header, body_and_tag)?;
        // Authenticated under the next epoch: it becomes the current one.
        let after = next_secret(&self.next_secret);
        wipe(&mut self.next_secret);
        self.next_secret = after;
        let next = PacketKey::new(&self.next_secret);
        let current = std::mem::replace(&mut self.next, next);
        self.previous = Some(std::mem::replace(&mut self.current, current));
        self.epoch += 1;
        Some(n)
    }
}

impl Drop for RecvKeys {
    fn drop(&mut self) {
        wipe(&mut self.next_secret);
    }
}

/// A session's packet protection, both ways.
pub(crate) struct SessionKeys {
    tx: SendKeys,
    rx: RecvKeys,
    /// Datagrams that failed to open (see [`MAX_FAILED_OPENS`]).
    failed_opens: u64,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("tx_epoch", &self.tx.epoch)
            .field("rx_epoch", &self.rx.epoch)
            .field("failed_opens", &self.failed_opens)
            .finish_non_exhaustive()
    }
}

impl SessionKeys {
    /// Keys from this end's sending and receiving secrets.
    pub(crate) fn new(tx: [u8; KEY_LEN], rx: [u8; KEY_LEN]) -> SessionKeys {
        SessionKeys {
            tx: SendKeys::new(tx),
            rx: RecvKeys::new(rx),
            failed_opens: 0,
        }
    }

    /// Protects the datagram of `len` bytes in `out` (its first `header` bytes stay clear and
    /// are authenticated) with packet number `pn`; returns the protected length (`len` +
    /// [`TAG_LEN`]). `out` must have room for the tag.
    pub(crate) fn seal(&mut self, pn: u64, out: &mut [u8], header: usize, len: usize) -> usize {
        let (head, body) = out[..len].split_at_mut(header);
        let tag = self.tx.key_for(pn).seal(pn, head, body);
        out[len..len + TAG_LEN].copy_from_slice(&tag);
        len + TAG_LEN
    }

    /// Opens the protected datagram in `buf` (its first `header` bytes clear) with packet
    /// number `pn`, in place; the plaintext datagram's length (header included), or `None`
    /// when it does not verify (counted: [`failed_opens`](Self::failed_opens)).
    pub(crate) fn open(&mut self, pn: u64, buf: &mut [u8], header: usize) -> Option<usize> {
        if buf.len() < header + TAG_LEN {
            self.failed_opens += 1;
            return None;
        }
        let (head, rest) = buf.split_at_mut(header);
        match self.rx.open(pn, head, rest) {
            Some(n) => Some(header + n),
            None => {
                self.failed_opens += 1;
                None
            }
        }
    }

    /// Datagrams that failed to open so far.
    pub(crate) fn failed_opens(&self) -> u64 {
        self.failed_opens
    }
}

#[cfg(test)]
mod tests;
