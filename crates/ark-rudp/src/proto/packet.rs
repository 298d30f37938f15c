//! The wire format: one kind byte (kind in the high nibble, flags in the low one), then the
//! kind's fields, big-endian. Every parser is total: a short or malformed datagram is a
//! [`PacketError`], never a panic.
//!
//! ```text
//! HELLO     0x5E | version u8 | nonce u64 | cookie [20] | len u16 | handshake [len]
//!           | zero padding to HELLO_SIZE       (flag E: an encrypted session is asked for;
//!                                               handshake: the Noise message, see `crypto`)
//! COOKIE    0x60 | nonce u64 | cookie [20]
//! ACCEPT    0x7E | nonce u64 | handshake          (flag E: the Noise answer follows)
//! DATA      0x1F | pn u32 | seq u32 | lane u8 | lane seq u32 | ack block [16]
//!           | (FEC flag: group u32 | index u8) | fragment
//! ACK       0x2F | pn u32 | ack block [16]                     (flag PING: answer at once)
//! PARITY    0x30 | pn u32 | ack block [16] | group u32 | k u8 | m u8 | index u8 | shard
//! UNRELIABLE 0x40 | pn u32 | (SEQUENCED flag: lane u8 | lane seq u32) | message
//! CLOSE     0x8F | pn u32 | code u8                  (flag ANSWER: this answers the peer's CLOSE)
//! After the handshake (DATA, ACK, PARITY, UNRELIABLE, CLOSE) every datagram carries the low
//! 32 bits of its direction's packet number (one more per datagram sent, retransmissions
//! included; see `replay`). Encrypted (the default), everything after the packet number is
//! AEAD-protected and a 16-byte tag ends the datagram (see `crypto`); in plaintext it ends in
//! the 8-byte token of its direction (see `cookie::SessionTokens`). A datagram that does not
//! open, or lacks the token, is counted and dropped before it is parsed; one whose number was
//! seen is counted and dropped before it does anything.
//! seq numbers every fragment of the session (acknowledgements, loss and the receive window
//! count in it); lane seq numbers the lane's own fragments (reliable) or messages
//! (sequenced), which the receiver orders and reassembles by (see `recv`).
//! ack block: next expected seq u32 | bitmap u64 (bit i: seq next+1+i arrived)
//!            | window u16 (fragments the peer may send past next) | received u16 (datagrams
//!            of kind DATA or PARITY received so far, wrapping: the sender's loss measure)
//! ```

/// Protocol version in HELLO (2: datagrams after the handshake end in the session token; 3:
/// and carry a packet number; 4: encrypted sessions, the handshake's Noise messages; 5:
/// lanes).
pub(crate) const VERSION: u8 = 5;
/// A HELLO is padded to this size, so the server's answers (COOKIE, ACCEPT) are always
/// smaller than what the client sent: no amplification.
pub(crate) const HELLO_SIZE: usize = 1200;
/// Cookie bytes: a timestamp (u32 seconds) and a 16-byte MAC.
pub(crate) const COOKIE_LEN: usize = 20;
/// The session token that ends every datagram after the handshake.
pub(crate) const TOKEN_LEN: usize = 8;
/// Ack block bytes.
pub(crate) const ACK_BLOCK: usize = 16;
/// The packet number's bytes on the wire (its low 32 bits).
pub(crate) const PN_LEN: usize = 4;
/// What every datagram after the handshake starts with: the kind byte and the packet number.
pub(crate) const PREFIX: usize = 1 + PN_LEN;
/// A DATA or sequenced UNRELIABLE datagram's lane fields: lane u8, lane seq u32.
pub(crate) const LANE_FIELDS: usize = 5;
/// DATA header bytes without FEC fields.
pub(crate) const DATA_HEADER: usize = PREFIX + 4 + LANE_FIELDS + ACK_BLOCK;
/// FEC fields of a DATA packet.
pub(crate) const FEC_FIELDS: usize = 5;
/// PARITY header bytes.
pub(crate) const PARITY_HEADER: usize = PREFIX + ACK_BLOCK + 4 + 3;

pub(crate) const KIND_DATA: u8 = 0x10;
pub(crate) const KIND_ACK: u8 = 0x20;
pub(crate) const KIND_PARITY: u8 = 0x30;
pub(crate) const KIND_UNRELIABLE: u8 = 0x40;
pub(crate) const KIND_HELLO: u8 = 0x50;
pub(crate) const KIND_COOKIE: u8 = 0x60;
pub(crate) const KIND_ACCEPT: u8 = 0x70;
pub(crate) const KIND_CLOSE: u8 = 0x80;

/// DATA: the first fragment of a message.
pub(crate) const FIRST: u8 = 0x1;
/// DATA: the last fragment of a message.
pub(crate) const LAST: u8 = 0x2;
/// DATA: deliver the message as soon as it is whole, not in order.
pub(crate) const UNORDERED: u8 = 0x4;
/// DATA: FEC fields follow the ack block.
pub(crate) const FEC: u8 = 0x8;
/// ACK: the peer wants an acknowledgement at once (keep-alive, window probe).
pub(crate) const PING: u8 = 0x1;
/// UNRELIABLE: lane fields follow the packet number (a sequenced lane's message).
pub(crate) const SEQUENCED: u8 = 0x1;
/// CLOSE: the answer to the peer's CLOSE (its acknowledgement).
pub(crate) const ANSWER: u8 = 0x1;
/// HELLO, ACCEPT: an encrypted session (the handshake's Noise message follows).
pub(crate) const ENCRYPTED: u8 = 0xE;
/// A HELLO's fixed fields before its handshake bytes.
const HELLO_FIXED: usize = 10 + COOKIE_LEN + 2;
/// The most handshake bytes a HELLO carries.
pub(crate) const MAX_HELLO_HANDSHAKE: usize = HELLO_SIZE - HELLO_FIXED;

/// Why a datagram was not understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PacketError {
    /// Shorter than its kind's fixed fields.
    #[error("datagram of {len} bytes is too short for its kind ({kind:#04x})")]
    Short {
        /// The kind byte.
        kind: u8,
        /// The datagram's length.
        len: usize,
    },
    /// An unknown kind byte (or none: an empty datagram).
    #[error("unknown packet kind {0:#04x}")]
    UnknownKind(u8),
    /// A HELLO of another version.
    #[error("unsupported protocol version {0}")]
    Version(u8),
    /// A datagram after the handshake without the session's token (forged, or from an
    /// earlier session): dropped before it is parsed.
    #[error("datagram without the session's token (kind {0:#04x})")]
    Unauthenticated(u8),
    /// An authenticated datagram whose packet number was accepted before, or is older than the
    /// replay window: a replay (or a duplicate the network made), dropped before it did
    /// anything.
    #[error("replayed datagram (kind {kind:#04x}, packet number {number})")]
    Replayed {
        /// The kind byte.
        kind: u8,
        /// Its packet number, widened.
        number: u64,
    },
    /// Fields that contradict each other (a FEC index outside its group, k or m of 0, ...).
    #[error("malformed {0} packet")]
    Malformed(&'static str),
}

/// What an ack block says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AckBlock {
    /// The next sequence expected in order (all before it arrived), as sent (32 bits).
    pub(crate) next: u32,
    /// Bit i: sequence `next + 1 + i` arrived.
    pub(crate) bitmap: u64,
    /// Fragments the sender may send past `next`.
    pub(crate) window: u16,
    /// DATA and PARITY datagrams received so far (wrapping).
    pub(crate) received: u16,
}

impl AckBlock {
    pub(crate) fn write(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.next.to_be_bytes());
        out[4..12].copy_from_slice(&self.bitmap.to_be_bytes());
        out[12..14].copy_from_slice(&self.window.to_be_bytes());
        out[14..16].copy_from_slice(&self.received.to_be_bytes());
    }

    fn read(b: &[u8]) -> AckBlock {
        AckBlock {
            next: be32(&b[0..4]),
            bitmap: u64::from_be_bytes(b[4..12].try_into().unwrap_or_default()),
            window: be16(&b[12..14]),
            received: be16(&b[14..16]),
        }
    }
}

/// FEC fields of a DATA packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FecTag {
    pub(crate) group: u32,
    pub(crate) index: u8,
}

/// A fragment's or sequenced message's lane and its number in the lane (as sent, 32 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LaneTag {
    pub(crate) lane: u8,
    pub(crate) seq: u32,
}

impl LaneTag {
    fn write(&self, out: &mut [u8]) {
        out[0] = self.lane;
        out[1..LANE_FIELDS].copy_from_slice(&self.seq.to_be_bytes());
    }

    fn read(b: &[u8]) -> LaneTag {
        LaneTag {
            lane: b[0],
            seq: be32(&b[1..LANE_FIELDS]),
        }
    }
}

/// A parsed datagram; slices borrow from it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Packet<'a> {
    Hello {
        nonce: u64,
        cookie: &'a [u8],
        /// An encrypted session is asked for.
        encrypted: bool,
        /// The client's Noise message (empty before the cookie, and in plaintext).
        handshake: &'a [u8],
    },
    Cookie {
        nonce: u64,
        cookie: &'a [u8],
    },
    Accept {
        nonce: u64,
        /// The server's Noise answer (empty in plaintext).
        handshake: &'a [u8],
    },
    Data {
        flags: u8,
        seq: u32,
        lane: LaneTag,
        ack: AckBlock,
        fec: Option<FecTag>,
        fragment: &'a [u8],
    },
    Ack {
        ping: bool,
        ack: AckBlock,
    },
    Parity {
        ack: AckBlock,
        group: u32,
        k: u8,
        m: u8,
        index: u8,
        shard: &'a [u8],
    },
    Unreliable {
        /// A sequenced lane's message: its lane and number.
        sequenced: Option<LaneTag>,
        message: &'a [u8],
    },
    Close {
        code: u8,
        /// This CLOSE answers ours.
        answer: bool,
    },
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap_or_default())
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes(b.try_into().unwrap_or_default())
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().unwrap_or_default())
}

/// Whether `kind` (a datagram's first byte) is one of the handshake's (HELLO, COOKIE,
/// ACCEPT), which carry the nonce instead of a session token.
pub(crate) fn is_handshake(first: u8) -> bool {
    matches!(first & 0xF0, KIND_HELLO | KIND_COOKIE | KIND_ACCEPT)
}

/// The wire packet number of a datagram after the handshake (its token removed), if it is
/// long enough to have one.
pub(crate) fn packet_number(d: &[u8]) -> Option<u32> {
    d.get(1..PREFIX).map(be32)
}

/// Appends `token` to the `len` bytes of `out`; returns the new length.
pub(crate) fn seal(out: &mut [u8], len: usize, token: &[u8; TOKEN_LEN]) -> usize {
    out[len..len + TOKEN_LEN].copy_from_slice(token);
    len + TOKEN_LEN
}

/// The datagram without its trailing token, if it ends in `token` (compared without an
/// early exit, so the time does not tell how much matched).
pub(crate) fn open<'a>(d: &'a [u8], token: &[u8; TOKEN_LEN]) -> Option<&'a [u8]> {
    let body = d.len().checked_sub(TOKEN_LEN)?;
    let tail: [u8; TOKEN_LEN] = d[body..].try_into().ok()?;
    // One 64-bit comparison: no byte-by-byte early exit.
    let diff = u64::from_ne_bytes(tail) ^ u64::from_ne_bytes(*token);
    (diff == 0 && body > 0).then(|| &d[..body])
}

/// Parses one datagram.
pub(crate) fn parse(d: &[u8]) -> Result<Packet<'_>, PacketError> {
    let Some(&first) = d.first() else {
        return Err(PacketError::UnknownKind(0));
    };
    let (kind, flags) = (first & 0xF0, first & 0x0F);
    let need = |n: usize| {
        if d.len() < n {
            Err(PacketError::Short {
                kind: first,
                len: d.len(),
            })
        } else {
            Ok(())
        }
    };
    match kind {
        KIND_DATA => {
            let fec_len = if flags & FEC != 0 { FEC_FIELDS } else { 0 };
            need(DATA_HEADER + fec_len)?;
            let fec = (flags & FEC != 0).then(|| FecTag {
                group: be32(&d[DATA_HEADER..DATA_HEADER + 4]),
                index: d[DATA_HEADER + 4],
            });
            let lane_at = PREFIX + 4;
            Ok(Packet::Data {
                flags,
                seq: be32(&d[PREFIX..lane_at]),
                lane: LaneTag::read(&d[lane_at..lane_at + LANE_FIELDS]),
                ack: AckBlock::read(&d[lane_at + LANE_FIELDS..DATA_HEADER]),
                fec,
                fragment: &d[DATA_HEADER + fec_len..],
            })
        }
        KIND_ACK => {
            need(PREFIX + ACK_BLOCK)?;
            Ok(Packet::Ack {
                ping: flags & PING != 0,
                ack: AckBlock::read(&d[PREFIX..PREFIX + ACK_BLOCK]),
            })
        }
        KIND_PARITY => parse_parity(d, first),
        KIND_UNRELIABLE => match flags {
            0 => need(PREFIX).map(|()| Packet::Unreliable {
                sequenced: None,
                message: &d[PREFIX..],
            }),
            SEQUENCED => {
                need(PREFIX + LANE_FIELDS)?;
                Ok(Packet::Unreliable {
                    sequenced: Some(LaneTag::read(&d[PREFIX..PREFIX + LANE_FIELDS])),
                    message: &d[PREFIX + LANE_FIELDS..],
                })
            }
            _ => Err(PacketError::Malformed("unreliable")),
        },
        KIND_HELLO => parse_hello(d, first),
        KIND_COOKIE => {
            need(9 + COOKIE_LEN)?;
            Ok(Packet::Cookie {
                nonce: be64(&d[1..9]),
                cookie: &d[9..9 + COOKIE_LEN],
            })
        }
        KIND_ACCEPT => {
            need(9)?;
            Ok(Packet::Accept {
                nonce: be64(&d[1..9]),
                handshake: &d[9..],
            })
        }
        KIND_CLOSE => {
            need(PREFIX + 1)?;
            Ok(Packet::Close {
                code: d[PREFIX],
                answer: flags & ANSWER != 0,
            })
        }
        _ => Err(PacketError::UnknownKind(first)),
    }
}

fn parse_hello(d: &[u8], first: u8) -> Result<Packet<'_>, PacketError> {
    if d.len() < HELLO_SIZE {
        return Err(PacketError::Short {
            kind: first,
            len: d.len(),
        });
    }
    if d[1] != VERSION {
        return Err(PacketError::Version(d[1]));
    }
    let encrypted = match first & 0x0F {
        0 => false,
        ENCRYPTED => true,
        _ => return Err(PacketError::Malformed("hello")),
    };
    let len = usize::from(be16(&d[HELLO_FIXED - 2..HELLO_FIXED]));
    if len > MAX_HELLO_HANDSHAKE || (len > 0 && !encrypted) {
        return Err(PacketError::Malformed("hello"));
    }
    Ok(Packet::Hello {
        nonce: be64(&d[2..10]),
        cookie: &d[10..10 + COOKIE_LEN],
        encrypted,
        handshake: &d[HELLO_FIXED..HELLO_FIXED + len],
    })
}

fn parse_parity(d: &[u8], first: u8) -> Result<Packet<'_>, PacketError> {
    if d.len() < PARITY_HEADER + 2 {
        return Err(PacketError::Short {
            kind: first,
            len: d.len(),
        });
    }
    let at = PREFIX + ACK_BLOCK;
    let (k, m, index) = (d[at + 4], d[at + 5], d[at + 6]);
    let shard = &d[PARITY_HEADER..];
    if k == 0 || m == 0 || index >= m || !shard.len().is_multiple_of(2) {
        return Err(PacketError::Malformed("parity"));
    }
    Ok(Packet::Parity {
        ack: AckBlock::read(&d[PREFIX..at]),
        group: be32(&d[at..at + 4]),
        k,
        m,
        index,
        shard,
    })
}

/// Writes a HELLO into `out` (at least [`HELLO_SIZE`] bytes): `encrypted` asks for an
/// encrypted session, `handshake` (at most [`MAX_HELLO_HANDSHAKE`] bytes, empty in
/// plaintext) is the client's Noise message; returns its length.
pub(crate) fn write_hello(
    out: &mut [u8],
    nonce: u64,
    cookie: &[u8; COOKIE_LEN],
    (encrypted, handshake): (bool, &[u8]),
) -> usize {
    out[..HELLO_SIZE].fill(0);
    out[0] = KIND_HELLO | if encrypted { ENCRYPTED } else { 0 };
    out[1] = VERSION;
    out[2..10].copy_from_slice(&nonce.to_be_bytes());
    out[10..10 + COOKIE_LEN].copy_from_slice(cookie);
    let len = handshake.len().min(MAX_HELLO_HANDSHAKE);
    out[HELLO_FIXED - 2..HELLO_FIXED].copy_from_slice(&(len as u16).to_be_bytes());
    out[HELLO_FIXED..HELLO_FIXED + len].copy_from_slice(&handshake[..len]);
    HELLO_SIZE
}

/// Writes a COOKIE; returns its length.
pub(crate) fn write_cookie(out: &mut [u8], nonce: u64, cookie: &[u8; COOKIE_LEN]) -> usize {
    out[0] = KIND_COOKIE;
    out[1..9].copy_from_slice(&nonce.to_be_bytes());
    out[9..9 + COOKIE_LEN].copy_from_slice(cookie);
    9 + COOKIE_LEN
}

/// Writes an ACCEPT with the server's Noise answer (`handshake`, empty in plaintext);
/// returns its length.
pub(crate) fn write_accept(out: &mut [u8], nonce: u64, handshake: &[u8]) -> usize {
    out[0] = KIND_ACCEPT | if handshake.is_empty() { 0 } else { ENCRYPTED };
    out[1..9].copy_from_slice(&nonce.to_be_bytes());
    out[9..9 + handshake.len()].copy_from_slice(handshake);
    9 + handshake.len()
}

/// Writes the kind byte and the packet number `pn` (its low 32 bits) of a datagram after the
/// handshake; returns their length.
pub(crate) fn write_prefix(out: &mut [u8], first: u8, pn: u64) -> usize {
    out[0] = first;
    out[1..PREFIX].copy_from_slice(&(pn as u32).to_be_bytes());
    PREFIX
}

/// Writes an ACK; returns its length.
pub(crate) fn write_ack(out: &mut [u8], pn: u64, ack: &AckBlock, ping: bool) -> usize {
    write_prefix(out, KIND_ACK | if ping { PING } else { 0 }, pn);
    ack.write(&mut out[PREFIX..PREFIX + ACK_BLOCK]);
    PREFIX + ACK_BLOCK
}

/// Writes a CLOSE (`answer`: the answer to the peer's); returns its length.
pub(crate) fn write_close(out: &mut [u8], pn: u64, code: u8, answer: bool) -> usize {
    write_prefix(out, KIND_CLOSE | if answer { ANSWER } else { 0 }, pn);
    out[PREFIX] = code;
    PREFIX + 1
}

/// Writes an UNRELIABLE datagram (`sequenced`: a sequenced lane's, with its lane fields);
/// returns its length.
pub(crate) fn write_unreliable(
    out: &mut [u8],
    pn: u64,
    sequenced: Option<LaneTag>,
    message: &[u8],
) -> usize {
    let mut at = match sequenced {
        Some(tag) => {
            write_prefix(out, KIND_UNRELIABLE | SEQUENCED, pn);
            tag.write(&mut out[PREFIX..PREFIX + LANE_FIELDS]);
            PREFIX + LANE_FIELDS
        }
        None => write_prefix(out, KIND_UNRELIABLE, pn),
    };
    out[at..at + message.len()].copy_from_slice(message);
    at += message.len();
    at
}

/// Writes a DATA header (`fec`: its tag); returns the header's length.
pub(crate) fn write_data_header(
    out: &mut [u8],
    (pn, flags): (u64, u8),
    (seq, lane): (u32, LaneTag),
    ack: &AckBlock,
    fec: Option<FecTag>,
) -> usize {
    write_prefix(
        out,
        KIND_DATA | flags | if fec.is_some() { FEC } else { 0 },
        pn,
    );
    let lane_at = PREFIX + 4;
    out[PREFIX..lane_at].copy_from_slice(&seq.to_be_bytes());
    lane.write(&mut out[lane_at..lane_at + LANE_FIELDS]);
    ack.write(&mut out[lane_at + LANE_FIELDS..DATA_HEADER]);
    match fec {
        Some(tag) => {
            out[DATA_HEADER..DATA_HEADER + 4].copy_from_slice(&tag.group.to_be_bytes());
            out[DATA_HEADER + 4] = tag.index;
            DATA_HEADER + FEC_FIELDS
        }
        None => DATA_HEADER,
    }
}

/// Writes a PARITY header; returns its length.
pub(crate) fn write_parity_header(
    out: &mut [u8],
    (pn, ack): (u64, &AckBlock),
    group: u32,
    (k, m, index): (u8, u8, u8),
) -> usize {
    write_prefix(out, KIND_PARITY, pn);
    ack.write(&mut out[PREFIX..PREFIX + ACK_BLOCK]);
    let at = PREFIX + ACK_BLOCK;
    out[at..at + 4].copy_from_slice(&group.to_be_bytes());
    out[at + 4] = k;
    out[at + 5] = m;
    out[at + 6] = index;
    PARITY_HEADER
}

/// Widens a 32-bit wire sequence to the 64-bit one nearest `expected`.
pub(crate) fn widen(wire: u32, expected: u64) -> u64 {
    const SPAN: u64 = 1 << 32;
    let candidate = (expected & !(SPAN - 1)) | u64::from(wire);
    if candidate + SPAN / 2 <= expected {
        candidate + SPAN
    } else if candidate > expected + SPAN / 2 && candidate >= SPAN {
        candidate - SPAN
    } else {
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips() {
        let ack = AckBlock {
            next: 7,
            bitmap: 0b101,
            window: 512,
            received: 65_535,
        };
        let mut b = [0u8; 1500];
        let lane = LaneTag {
            lane: 3,
            seq: 0xDEAD_BEEF,
        };
        let n = write_data_header(
            &mut b,
            (1 << 40 | 6, FIRST | LAST),
            (u32::MAX, lane),
            &ack,
            None,
        );
        assert_eq!(packet_number(&b[..n]), Some(6), "the low 32 bits");
        b[n..n + 3].copy_from_slice(b"abc");
        assert_eq!(
            parse(&b[..n + 3]),
            Ok(Packet::Data {
                flags: FIRST | LAST,
                seq: u32::MAX,
                lane,
                ack,
                fec: None,
                fragment: b"abc"
            })
        );
        let tag = FecTag { group: 9, index: 3 };
        let n = write_data_header(&mut b, (0, FIRST), (1, lane), &ack, Some(tag));
        assert!(
            matches!(parse(&b[..n]), Ok(Packet::Data { fec: Some(t), flags, .. }) if t == tag && flags == FIRST | FEC)
        );
        let n = write_ack(&mut b, 2, &ack, true);
        assert_eq!(parse(&b[..n]), Ok(Packet::Ack { ping: true, ack }));
        for (encrypted, handshake) in [(false, &[][..]), (true, &[5; 48][..])] {
            let n = write_hello(&mut b, 42, &[1; COOKIE_LEN], (encrypted, handshake));
            assert_eq!(n, HELLO_SIZE);
            assert_eq!(
                parse(&b[..n]),
                Ok(Packet::Hello {
                    nonce: 42,
                    cookie: &[1; COOKIE_LEN],
                    encrypted,
                    handshake,
                })
            );
        }
        let n = write_accept(&mut b, 42, &[6; 48]);
        assert!(n < HELLO_SIZE, "an accept is smaller than the hello");
        assert_eq!(
            parse(&b[..n]),
            Ok(Packet::Accept {
                nonce: 42,
                handshake: &[6; 48],
            })
        );
        let n = write_cookie(&mut b, 42, &[2; COOKIE_LEN]);
        assert!(n < HELLO_SIZE, "a cookie answer is smaller than the hello");
        let n = write_parity_header(&mut b, (3, &ack), 5, (8, 2, 1));
        b[n..n + 4].fill(9);
        assert!(matches!(
            parse(&b[..n + 4]),
            Ok(Packet::Parity {
                group: 5,
                k: 8,
                m: 2,
                index: 1,
                ..
            })
        ));
        let n = write_close(&mut b, 4, 3, false);
        assert_eq!(
            parse(&b[..n]),
            Ok(Packet::Close {
                code: 3,
                answer: false
            })
        );
        let n = write_close(&mut b, 5, 0, true);
        assert_eq!(
            parse(&b[..n]),
            Ok(Packet::Close {
                code: 0,
                answer: true
            })
        );
        let n = write_unreliable(&mut b, 6, None, b"xy");
        assert_eq!(
            parse(&b[..n]),
            Ok(Packet::Unreliable {
                sequenced: None,
                message: b"xy"
            })
        );
        assert_eq!(packet_number(&b[..n]), Some(6));
        let n = write_unreliable(&mut b, 7, Some(lane), b"z");
        assert_eq!(
            parse(&b[..n]),
            Ok(Packet::Unreliable {
                sequenced: Some(lane),
                message: b"z"
            })
        );
        b[0] = KIND_UNRELIABLE | 0x2;
        assert_eq!(parse(&b[..n]), Err(PacketError::Malformed("unreliable")));
    }

    #[test]
    fn truncated_and_garbage_datagrams_are_errors() {
        let mut b = [0u8; 1500];
        let n = write_data_header(
            &mut b,
            (0, FIRST),
            (1, LaneTag::default()),
            &AckBlock::default(),
            None,
        );
        for len in 0..n {
            assert!(parse(&b[..len]).is_err(), "{len} bytes");
        }
        assert_eq!(parse(&[0xF3]), Err(PacketError::UnknownKind(0xF3)));
        assert!(parse(&[KIND_HELLO, VERSION, 0]).is_err());
        for short in [
            &[KIND_UNRELIABLE, 0, 0][..],
            &[KIND_UNRELIABLE | SEQUENCED, 0, 0, 0, 0, 1, 0, 0, 0],
            &[KIND_CLOSE, 0, 0, 0, 0],
        ] {
            assert!(parse(short).is_err(), "{short:?}: no packet number or code");
        }
        let n = write_parity_header(&mut b, (0, &AckBlock::default()), 1, (8, 2, 2));
        assert_eq!(
            parse(&b[..n + 2]),
            Err(PacketError::Malformed("parity")),
            "index past m"
        );
        let n = write_hello(&mut b, 1, &[0; COOKIE_LEN], (true, &[1; 48]));
        b[HELLO_FIXED - 2..HELLO_FIXED]
            .copy_from_slice(&(MAX_HELLO_HANDSHAKE as u16 + 1).to_be_bytes());
        assert_eq!(
            parse(&b[..n]),
            Err(PacketError::Malformed("hello")),
            "past its end"
        );
        let n = write_hello(&mut b, 1, &[0; COOKIE_LEN], (true, &[1; 48]));
        b[0] = KIND_HELLO;
        assert_eq!(
            parse(&b[..n]),
            Err(PacketError::Malformed("hello")),
            "bytes in plaintext"
        );
        b[1] = 9;
        assert_eq!(parse(&b[..n]), Err(PacketError::Version(9)));
    }

    #[test]
    fn sequences_widen_across_the_wrap() {
        assert_eq!(widen(5, 3), 5);
        assert_eq!(widen(u32::MAX, 1 << 32), u64::from(u32::MAX));
        assert_eq!(widen(2, u64::from(u32::MAX) - 1), (1 << 32) + 2);
        assert_eq!(widen(u32::MAX - 1, (1 << 32) + 3), u64::from(u32::MAX) - 1);
        assert_eq!(widen(0, 0), 0);
    }
}
