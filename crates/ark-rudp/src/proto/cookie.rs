//! Stateless handshake cookies: `timestamp | HMAC-SHA256(key, timestamp | peer | nonce)[..16]`.
//! The server keeps nothing per client until a HELLO comes back with a valid cookie, which
//! proves the client receives at its address.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac};

use crate::proto::packet::{COOKIE_LEN, TOKEN_LEN};

/// The tokens that end every datagram of one session after the handshake, one per direction,
/// derived from what only the two ends know: the client's random nonce and the server's
/// cookie (a MAC under the server's secret key, sent only to the client's address). An
/// off-path attacker, who can spoof the client's address but sees no traffic, must guess 64
/// bits to be believed; an on-path one, who sees the handshake, is not kept out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct SessionTokens {
    /// Ends the client's datagrams.
    pub(crate) client: [u8; TOKEN_LEN],
    /// Ends the server's datagrams.
    pub(crate) server: [u8; TOKEN_LEN],
}

impl std::fmt::Debug for SessionTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionTokens(..)")
    }
}

impl SessionTokens {
    /// The tokens of the handshake with `nonce` and `cookie`.
    pub(crate) fn derive(nonce: u64, cookie: &[u8; COOKIE_LEN]) -> SessionTokens {
        let token = |label: &[u8]| {
            let mut ctx = digest::Context::new(&digest::SHA256);
            ctx.update(b"ark-rudp session token v1 ");
            ctx.update(label);
            ctx.update(&nonce.to_be_bytes());
            ctx.update(cookie);
            let mut t = [0u8; TOKEN_LEN];
            t.copy_from_slice(&ctx.finish().as_ref()[..TOKEN_LEN]);
            t
        };
        SessionTokens {
            client: token(b"client"),
            server: token(b"server"),
        }
    }
}

/// Makes and checks cookies with a random key of its own.
pub(crate) struct CookieJar {
    key: hmac::Key,
    lifetime: Duration,
}

impl std::fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieJar")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

/// A random 64-bit value (nonces), from the system's generator.
pub(crate) fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // The system generator failing leaves zeros; nonces then still differ by address.
    let _ = SystemRandom::new().fill(&mut b);
    u64::from_be_bytes(b)
}

fn unix_seconds(now: SystemTime) -> u32 {
    now.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

impl CookieJar {
    /// A jar whose cookies are good for `lifetime`.
    pub(crate) fn new(lifetime: Duration) -> CookieJar {
        let mut secret = [0u8; 32];
        let _ = SystemRandom::new().fill(&mut secret);
        CookieJar {
            key: hmac::Key::new(hmac::HMAC_SHA256, &secret),
            lifetime,
        }
    }

    fn mac(&self, stamp: u32, peer: SocketAddr, nonce: u64) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(&stamp.to_be_bytes());
        match peer {
            SocketAddr::V4(a) => ctx.update(&a.ip().octets()),
            SocketAddr::V6(a) => ctx.update(&a.ip().octets()),
        }
        ctx.update(&peer.port().to_be_bytes());
        ctx.update(&nonce.to_be_bytes());
        ctx.sign()
    }

    /// The cookie for `peer`'s hello with `nonce`, made at `now`.
    pub(crate) fn make(&self, now: SystemTime, peer: SocketAddr, nonce: u64) -> [u8; COOKIE_LEN] {
        let stamp = unix_seconds(now);
        let mut cookie = [0u8; COOKIE_LEN];
        cookie[..4].copy_from_slice(&stamp.to_be_bytes());
        cookie[4..].copy_from_slice(&self.mac(stamp, peer, nonce).as_ref()[..COOKIE_LEN - 4]);
        cookie
    }

    /// Whether `cookie` was made by this jar for `peer` and `nonce`, and is still fresh.
    pub(crate) fn check(
        &self,
        now: SystemTime,
        peer: SocketAddr,
        nonce: u64,
        cookie: &[u8],
    ) -> bool {
        if cookie.len() != COOKIE_LEN {
            return false;
        }
        let stamp = u32::from_be_bytes([cookie[0], cookie[1], cookie[2], cookie[3]]);
        let age = unix_seconds(now).wrapping_sub(stamp);
        if u64::from(age) > self.lifetime.as_secs() {
            return false;
        }
        let expected = self.mac(stamp, peer, nonce);
        // Every byte compared, no early exit: the time does not tell how much matched.
        let diff = expected.as_ref()[..COOKIE_LEN - 4]
            .iter()
            .zip(&cookie[4..])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        diff == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ_by_direction_nonce_and_cookie() {
        let t = SessionTokens::derive(7, &[1; COOKIE_LEN]);
        assert_ne!(t.client, t.server);
        assert_ne!(t, SessionTokens::derive(8, &[1; COOKIE_LEN]));
        let mut c = [1; COOKIE_LEN];
        c[19] = 2;
        assert_ne!(t, SessionTokens::derive(7, &c));
        assert_eq!(t, SessionTokens::derive(7, &[1; COOKIE_LEN]));
    }

    #[test]
    fn a_cookie_binds_address_nonce_and_time() {
        let jar = CookieJar::new(Duration::from_secs(10));
        let now = SystemTime::now();
        let peer: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let cookie = jar.make(now, peer, 7);
        assert!(jar.check(now, peer, 7, &cookie));
        assert!(!jar.check(now, "127.0.0.1:4001".parse().unwrap(), 7, &cookie));
        assert!(!jar.check(now, peer, 8, &cookie));
        assert!(!jar.check(now + Duration::from_secs(30), peer, 7, &cookie));
        let mut forged = cookie;
        forged[10] ^= 1;
        assert!(!jar.check(now, peer, 7, &forged));
        let other = CookieJar::new(Duration::from_secs(10));
        assert!(!other.check(now, peer, 7, &cookie), "another server's key");
    }
}
