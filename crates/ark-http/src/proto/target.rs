//! Request targets (RFC 9112 §3.2) and authorities (RFC 3986 §3.2, the `Host` value): which
//! form a target has, where its path is, and whether an authority is valid.

use crate::proto::syntax::ByteClass;

/// A request target, by its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target<'a> {
    /// `/path?query`.
    Origin,
    /// `http://authority/path?query` (or `https`): the authority, and the path and query
    /// (empty when the URI has no path).
    Absolute { authority: &'a str, rest: &'a str },
    /// `host:port`, for `CONNECT` only.
    Authority,
    /// `*`, for `OPTIONS` only.
    Asterisk,
}

/// The form of `target` for `method`; `None` when it has none of the four forms (or the form
/// does not go with the method, or an absolute-form target's authority is not valid: empty,
/// with userinfo, a bad port).
pub(crate) fn target_form<'a>(method: &str, target: &'a str) -> Option<Target<'a>> {
    if target.starts_with('/') {
        return Some(Target::Origin);
    }
    if method == "CONNECT" {
        let (_, port) = target.rsplit_once(':')?;
        return (!port.is_empty() && valid_authority(target.as_bytes()))
            .then_some(Target::Authority);
    }
    if target == "*" {
        return (method == "OPTIONS").then_some(Target::Asterisk);
    }
    let (scheme, after) = target.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    let end = after.find(['/', '?']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    (!authority.is_empty() && valid_authority(authority.as_bytes()))
        .then_some(Target::Absolute { authority, rest })
}

/// Whether `value` is a valid authority without userinfo (RFC 3986 §3.2.2–3): `host [":"
/// port]`, where the host is an IP literal (`[` IPv6 `]`) or a reg-name (unreserved
/// characters, `%` and two hex digits, sub-delims; an IPv4 address is one), and the port 1 to
/// 5 digits up to 65535. An empty value is valid (RFC 9112 §3.2: the `Host` of a target with
/// no authority); a host may be empty only then.
pub(crate) fn valid_authority(value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    if let Some(valid) = plain_authority(value) {
        return valid;
    }
    if value.first() == Some(&b'[') {
        let Some(close) = value.iter().position(|&b| b == b']') else {
            return false;
        };
        let literal = std::str::from_utf8(&value[1..close]).ok();
        if literal
            .and_then(|l| l.parse::<std::net::Ipv6Addr>().ok())
            .is_none()
        {
            return false;
        }
        return match &value[close + 1..] {
            [] => true,
            [b':', port @ ..] => valid_port(port),
            _ => false,
        };
    }
    let (host, port) = match value.iter().position(|&b| b == b':') {
        Some(at) => (&value[..at], Some(&value[at + 1..])),
        None => (value, None),
    };
    !host.is_empty() && reg_name(host) && port.is_none_or(valid_port)
}

/// The common case in one pass: a host of unreserved characters and sub-delims (no `%`, not
/// an IP literal), then an optional port; `None` for anything else, which the full rules
/// decide.
#[inline]
fn plain_authority(value: &[u8]) -> Option<bool> {
    let mut colon = None;
    for (i, &b) in value.iter().enumerate() {
        if b == b':' {
            if colon.is_some() {
                return Some(false);
            }
            colon = Some(i);
        } else if !REG_NAME.has(b) || (colon.is_some() && !b.is_ascii_digit()) {
            return None;
        }
    }
    Some(match colon {
        None => true,
        Some(at) => at > 0 && valid_port(&value[at + 1..]),
    })
}

/// Unreserved characters and sub-delims (RFC 3986 §2.2–3).
const REG_NAME: ByteClass = ByteClass::alphanumeric_and(b"-._~!$&'()*+,;=");

/// `*( unreserved / pct-encoded / sub-delims )`.
fn reg_name(host: &[u8]) -> bool {
    let mut at = 0;
    while at < host.len() {
        match host[at] {
            b'%' => {
                let hex = host.get(at + 1..at + 3);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                at += 3;
            }
            b if REG_NAME.has(b) => at += 1,
            _ => return false,
        }
    }
    true
}

/// 1 to 5 digits, at most 65535.
fn valid_port(port: &[u8]) -> bool {
    (1..=5).contains(&port.len())
        && port.iter().all(u8::is_ascii_digit)
        && port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= 65535
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_follow_rfc_3986_without_userinfo() {
        for good in [
            &b""[..],
            b"a",
            b"a:80",
            b"a:0",
            b"a:65535",
            b"127.0.0.1",
            b"[::1]",
            b"[::1]:443",
            b"[2001:db8::7]:8080",
            b"%41b",
            b"a-b.c_d~!$&'()*+,;=",
        ] {
            assert!(valid_authority(good), "{:?}", String::from_utf8_lossy(good));
        }
        for bad in [
            &b"a b"[..],
            b"u@a",
            b"a:99999",
            b"a:65536",
            b"a:",
            b":80",
            b"a:8x",
            b"a:1:2",
            b"[::1",
            b"[zz]",
            b"[::1]x",
            b"[::1]:",
            b"a/b",
            b"a?b",
            b"%4",
            b"a%zz",
            b"\xc3\xa9",
        ] {
            assert!(!valid_authority(bad), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn targets_have_one_of_the_four_forms() {
        assert_eq!(target_form("GET", "/a?b"), Some(Target::Origin));
        assert_eq!(
            target_form("GET", "http://b/x?y"),
            Some(Target::Absolute {
                authority: "b",
                rest: "/x?y"
            })
        );
        assert_eq!(
            target_form("GET", "HTTPS://b:1?q"),
            Some(Target::Absolute {
                authority: "b:1",
                rest: "?q"
            })
        );
        assert_eq!(target_form("CONNECT", "b:443"), Some(Target::Authority));
        assert_eq!(target_form("OPTIONS", "*"), Some(Target::Asterisk));
        for (method, bad) in [
            ("GET", "*"),
            ("GET", "b:443"),
            ("CONNECT", "b"),
            ("GET", "a"),
            ("GET", "http://u@b/"),
            ("GET", "http:///x"),
            ("GET", "ftp://b/"),
            ("GET", "http:/b"),
        ] {
            assert_eq!(target_form(method, bad), None, "{method} {bad}");
        }
    }
}
