//! permessage-deflate (RFC 7692), sans-IO: the negotiation of its four parameters on both
//! sides ([`offer`] and [`confirm`] for a client, [`accept`] for a server: one parser of the
//! `sec-websocket-extensions` grammar for both), and each direction's engine — a
//! [`Deflater`] for the messages sent, an [`Inflater`] for those received — on flate2's
//! zlib-rs backend (raw deflate with window bits, no C).
//!
//! Memory (measured: tests/deflate.rs, docs/ws.md "Compression"): an engine is created on
//! first use, so a session that negotiated compression and never sends (or never receives) a
//! compressed message holds neither. Once used, with context takeover (the default) each is
//! kept for the session's life — both directions with 15-bit windows ~430 KiB a session,
//! most of it the compressor's hash tables (zlib's default memory level, which flate2 does
//! not let us lower). With no context takeover on a direction, its engine is dropped at the
//! end of each of the session's turns ([`Deflater::shrink_if_idle`],
//! [`Inflater::shrink_if_idle`]): a server with many connections should ask for
//! `server_no_context_takeover` and `client_no_context_takeover`. A message being inflated
//! holds at most twice `max_message` (the output grows by doubling and stops past it).

use bytes::BytesMut;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use crate::config::WsConfig;
use crate::proto::close::{BAD_UTF8, CloseCode};
use crate::proto::data::ReceivedData;
use crate::proto::inbound::check_utf8_from;

/// The bytes a sync flush ends with: taken off each compressed message sent, put back after
/// each one received (RFC 7692 7.2.1, 7.2.2).
const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

/// The extension's token in `sec-websocket-extensions`.
const NAME: &str = "permessage-deflate";

/// permessage-deflate's settings (RFC 7692), for [`WsConfig::deflate`](crate::WsConfig::deflate).
/// `Default` is context takeover both ways, 15-bit windows, level 1, messages of 64 bytes or
/// more compressed.
///
/// On a server, the `server_*` settings are what it does and the `client_*` ones what it asks
/// of clients (a client that offers no `client_max_window_bits` cannot be limited); on a
/// client, the `client_*` settings are what it does and the `server_*` ones what it asks of
/// the server (a server that does not grant them is refused: the connection fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeflateConfig {
    /// The server resets its compressor after each message (and, on a client, asks it to).
    pub server_no_context_takeover: bool,
    /// The client resets its compressor after each message (and, on a server, asks it to).
    pub client_no_context_takeover: bool,
    /// Largest LZ77 window the server compresses with, as bits (8 to 15).
    pub server_max_window_bits: u8,
    /// Largest LZ77 window the client compresses with, as bits (8 to 15).
    pub client_max_window_bits: u8,
    /// Compression level, 0 (stored) to 9 (smallest). Default 1 (fastest).
    pub level: u32,
    /// Messages shorter than this are sent uncompressed (each message says whether it is
    /// compressed). Default 64 bytes.
    pub min_size: usize,
}

impl Default for DeflateConfig {
    fn default() -> Self {
        DeflateConfig {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
            level: 1,
            min_size: 64,
        }
    }
}

impl DeflateConfig {
    /// Window bits are 8 to 15 and the level at most 9 (a builder refuses anything else).
    pub(crate) fn is_valid(&self) -> bool {
        let bits = 8..=15;
        bits.contains(&self.server_max_window_bits)
            && bits.contains(&self.client_max_window_bits)
            && self.level <= 9
    }
}

/// The parameters both ends agreed on (RFC 7692 7.1), whichever side this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Agreed {
    pub(crate) server_no_context_takeover: bool,
    pub(crate) client_no_context_takeover: bool,
    pub(crate) server_max_window_bits: u8,
    pub(crate) client_max_window_bits: u8,
}

/// One direction's engine settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Direction {
    /// Reset after each message.
    pub(crate) no_context_takeover: bool,
    /// LZ77 window, as bits.
    pub(crate) window_bits: u8,
}

impl Agreed {
    /// What this side's compressor does (`server`: this side is the server).
    pub(crate) fn outbound(&self, server: bool) -> Direction {
        self.direction(server)
    }

    /// What the peer's compressor does, so what this side's decompressor must undo.
    pub(crate) fn inbound(&self, server: bool) -> Direction {
        self.direction(!server)
    }

    fn direction(&self, server: bool) -> Direction {
        if server {
            Direction {
                no_context_takeover: self.server_no_context_takeover,
                window_bits: self.server_max_window_bits,
            }
        } else {
            Direction {
                no_context_takeover: self.client_no_context_takeover,
                window_bits: self.client_max_window_bits,
            }
        }
    }
}

/// The parameters of one `permessage-deflate` offer or response, each at most once.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Params {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// `Some(None)`: present without a value (allowed in an offer only).
    client_max_window_bits: Option<Option<u8>>,
}

impl Params {
    /// Parses `name[=value]` items; any unknown, repeated or malformed one refuses all.
    fn parse<'a>(items: impl Iterator<Item = &'a str>) -> Result<Params, &'static str> {
        let mut params = Params::default();
        for item in items {
            let (name, value) = match item.split_once('=') {
                Some((name, value)) => (name.trim(), Some(unquote(value.trim())?)),
                None => (item.trim(), None),
            };
            match (name.to_ascii_lowercase().as_str(), value) {
                ("server_no_context_takeover", None) if !params.server_no_context_takeover => {
                    params.server_no_context_takeover = true;
                }
                ("client_no_context_takeover", None) if !params.client_no_context_takeover => {
                    params.client_no_context_takeover = true;
                }
                ("server_max_window_bits", Some(v)) if params.server_max_window_bits.is_none() => {
                    params.server_max_window_bits = Some(window_bits(v)?);
                }
                ("client_max_window_bits", v) if params.client_max_window_bits.is_none() => {
                    params.client_max_window_bits = Some(v.map(window_bits).transpose()?);
                }
                _ => return Err("an unknown, repeated or malformed permessage-deflate parameter"),
            }
        }
        Ok(params)
    }
}

/// A parameter value, without the quotes of a quoted-string (RFC 6455 9.1).
fn unquote(value: &str) -> Result<&str, &'static str> {
    match value.strip_prefix('"') {
        Some(rest) => rest
            .strip_suffix('"')
            .ok_or("an unterminated quoted parameter value"),
        None => Ok(value),
    }
}

/// A window size in bits: 8 to 15, decimal digits only, no leading zero.
fn window_bits(value: &str) -> Result<u8, &'static str> {
    let bad = "a window size that is not 8 to 15";
    if value.is_empty() || value.starts_with('0') || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad);
    }
    value
        .parse::<u8>()
        .ok()
        .filter(|bits| (8..=15).contains(bits))
        .ok_or(bad)
}

/// The extensions a `sec-websocket-extensions` value lists: each one's name and its
/// parameters (`;`-separated), in order. Values are tokens or quoted digits here, so a comma
/// always separates extensions.
fn extensions(value: &str) -> impl Iterator<Item = (&str, std::str::Split<'_, char>)> {
    value
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|extension| {
            let mut parts = extension.split(';');
            let name = parts.next().unwrap_or_default().trim();
            (name, parts)
        })
}

/// A client's offer for `config`: asks for what `config` sets on the server's side and always
/// says it can take a `client_max_window_bits` (with its own limit as the value when under 15).
pub(crate) fn offer(config: &DeflateConfig) -> String {
    let mut offer = String::from(NAME);
    if config.server_no_context_takeover {
        offer.push_str("; server_no_context_takeover");
    }
    if config.client_no_context_takeover {
        offer.push_str("; client_no_context_takeover");
    }
    if config.server_max_window_bits < 15 {
        offer.push_str(&format!(
            "; server_max_window_bits={}",
            config.server_max_window_bits
        ));
    }
    offer.push_str("; client_max_window_bits");
    if config.client_max_window_bits < 15 {
        offer.push_str(&format!("={}", config.client_max_window_bits));
    }
    offer
}

/// A server's choice among a client's offers (`offers`: every `sec-websocket-extensions`
/// value, comma-joined): the first `permessage-deflate` offer that parses, as agreed
/// parameters and the response header's value; `None` declines (no compression). An offer
/// with an unknown or repeated parameter is declined, not an error (RFC 7692 5).
pub(crate) fn accept(config: &DeflateConfig, offers: &str) -> Option<(Agreed, String)> {
    extensions(offers)
        .filter(|(name, _)| name.eq_ignore_ascii_case(NAME))
        .find_map(|(_, items)| Params::parse(items).ok())
        .map(|asked| {
            let agreed = Agreed {
                server_no_context_takeover: config.server_no_context_takeover
                    || asked.server_no_context_takeover,
                client_no_context_takeover: config.client_no_context_takeover
                    || asked.client_no_context_takeover,
                server_max_window_bits: asked
                    .server_max_window_bits
                    .map_or(config.server_max_window_bits, |bits| {
                        bits.min(config.server_max_window_bits)
                    }),
                client_max_window_bits: match asked.client_max_window_bits {
                    Some(offered) => offered.unwrap_or(15).min(config.client_max_window_bits),
                    None => 15, // the client did not say it can be limited
                },
            };
            let response = response(&agreed, &asked);
            (agreed, response)
        })
}

/// The response header's value for `agreed`, answering `asked`.
fn response(agreed: &Agreed, asked: &Params) -> String {
    let mut response = String::from(NAME);
    if agreed.server_no_context_takeover {
        response.push_str("; server_no_context_takeover");
    }
    if agreed.client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }
    if asked.server_max_window_bits.is_some() || agreed.server_max_window_bits < 15 {
        response.push_str(&format!(
            "; server_max_window_bits={}",
            agreed.server_max_window_bits
        ));
    }
    if asked.client_max_window_bits.is_some() && agreed.client_max_window_bits < 15 {
        response.push_str(&format!(
            "; client_max_window_bits={}",
            agreed.client_max_window_bits
        ));
    }
    response
}

/// A client's check of the server's answer to [`offer`] (`response`: every
/// `sec-websocket-extensions` value, comma-joined; `None` if there was none): `Ok(None)` when
/// the server declined (no compression), the agreed parameters when it accepted.
///
/// # Errors
/// Why the response cannot be accepted (RFC 7692 5, 7.1: an extension not offered, more than
/// one, a parameter the client did not ask for or with a bad value, a request the server did
/// not grant); the client then fails the connection.
pub(crate) fn confirm(
    config: &DeflateConfig,
    response: Option<&str>,
) -> Result<Option<Agreed>, &'static str> {
    let mut chosen = extensions(response.unwrap_or_default());
    let Some((name, items)) = chosen.next() else {
        return Ok(None);
    };
    if !name.eq_ignore_ascii_case(NAME) || chosen.next().is_some() {
        return Err("the server chose an extension that was not offered");
    }
    let granted = Params::parse(items)?;
    let server_bits = granted.server_max_window_bits.unwrap_or(15);
    if config.server_no_context_takeover && !granted.server_no_context_takeover {
        return Err("the server did not grant server_no_context_takeover");
    }
    if config.server_max_window_bits < 15
        && (granted.server_max_window_bits.is_none() || server_bits > config.server_max_window_bits)
    {
        return Err("the server did not grant the server_max_window_bits asked for");
    }
    let client_bits = match granted.client_max_window_bits {
        Some(Some(bits)) => bits.min(config.client_max_window_bits),
        Some(None) => return Err("client_max_window_bits without a value in a response"),
        None => config.client_max_window_bits,
    };
    Ok(Some(Agreed {
        server_no_context_takeover: granted.server_no_context_takeover,
        client_no_context_takeover: granted.client_no_context_takeover
            || config.client_no_context_takeover,
        server_max_window_bits: server_bits,
        client_max_window_bits: client_bits,
    }))
}

/// Compresses the messages one side sends.
#[derive(Debug)]
pub(crate) struct Deflater {
    direction: Direction,
    level: u32,
    min_size: usize,
    /// Created on the first compressed message.
    engine: Option<Box<Compress>>,
    /// The last compressed message (reused).
    out: Vec<u8>,
    /// Messages compressed since the last [`shrink_if_idle`](Self::shrink_if_idle).
    used: bool,
}

impl Deflater {
    pub(crate) fn new(direction: Direction, config: &DeflateConfig) -> Self {
        Deflater {
            direction,
            level: config.level,
            min_size: config.min_size,
            engine: None,
            out: Vec::new(),
            used: false,
        }
    }

    /// `payload` compressed as one message (without the sync flush's tail), or `None` to send
    /// it as it is (shorter than the threshold: it never reaches the compressor, so both
    /// ends' windows stay the same).
    pub(crate) fn compress(&mut self, payload: &[u8]) -> Option<&[u8]> {
        if payload.len() < self.min_size {
            return None;
        }
        let direction = self.direction;
        let level = self.level;
        let engine = self.engine.get_or_insert_with(|| {
            // zlib cannot compress with an 8-bit window; stored blocks (level 0) refer to
            // nothing before them, so they honour any window the peer set.
            let (level, bits) = match direction.window_bits {
                8 => (0, 9),
                bits => (level.min(9), bits.clamp(9, 15)),
            };
            Box::new(Compress::new_with_window_bits(
                Compression::new(level),
                false,
                bits,
            ))
        });
        self.used = true;
        self.out.clear();
        self.out.reserve(payload.len() / 2 + 64);
        let start = engine.total_in();
        loop {
            let taken = (engine.total_in() - start) as usize;
            let flushed = engine
                .compress_vec(&payload[taken..], &mut self.out, FlushCompress::Sync)
                .ok()?;
            let done = (engine.total_in() - start) as usize == payload.len();
            // The flush is complete once a call left room in the output (a repeated sync
            // flush with nothing new gives nothing: `BufError`).
            if done && (self.out.len() < self.out.capacity() || flushed == Status::BufError) {
                break;
            }
            self.out.reserve(self.out.capacity().max(64));
        }
        debug_assert!(self.out.ends_with(&TAIL));
        self.out.truncate(self.out.len().saturating_sub(TAIL.len()));
        if self.direction.no_context_takeover {
            engine.reset();
        }
        Some(&self.out)
    }

    /// Called at the end of each of its session's turns: a compressor that keeps no context
    /// between messages is let go (made again for the next turn that compresses: the
    /// messages of one turn share it), and with no message compressed in the turn, an output
    /// buffer past `keep` bytes. An idle session holds neither.
    pub(crate) fn shrink_if_idle(&mut self, keep: usize) {
        if self.direction.no_context_takeover {
            self.engine = None;
        }
        if !std::mem::take(&mut self.used) && self.out.capacity() > keep {
            self.out = Vec::new();
        }
    }
}

/// Decompresses the messages one side receives, as their frames arrive, bounded.
#[derive(Debug)]
pub(crate) struct Inflater {
    direction: Direction,
    /// Created on the first compressed message.
    engine: Option<Box<Decompress>>,
    /// The message being inflated.
    out: Vec<u8>,
    /// A text message's bytes checked as UTF-8 so far (a sequence cut at the end waits).
    checked: usize,
    /// Storage a lent message is copied into if its handler keeps it.
    spare: BytesMut,
    /// Messages inflated since the last [`shrink_if_idle`](Self::shrink_if_idle).
    used: bool,
}

/// Why an inflated message is refused: the close code and reason.
pub(crate) type Refusal = (CloseCode, &'static str);

impl Inflater {
    pub(crate) fn new(direction: Direction) -> Self {
        Inflater {
            direction,
            engine: None,
            out: Vec::new(),
            checked: 0,
            spare: BytesMut::new(),
            used: false,
        }
    }

    /// Inflates one frame's payload of the current message (`last`: its final frame, after
    /// which the tail goes in too); a message past `max` bytes is refused with 1009 as soon
    /// as it passes it, a text message with bad UTF-8 with 1007 at the first bad byte.
    pub(crate) fn inflate(
        &mut self,
        payload: &[u8],
        last: bool,
        (max, text): (usize, bool),
    ) -> Result<(), Refusal> {
        self.used = true;
        self.run(payload, max, text)?;
        if last {
            self.run(&TAIL, max, text)?;
            if text && self.checked != self.out.len() {
                return Err(BAD_UTF8);
            }
            if self.direction.no_context_takeover
                && let Some(engine) = &mut self.engine
            {
                engine.reset(false);
            }
        }
        Ok(())
    }

    /// Feeds `input` to the decompressor until it is all taken and nothing more comes out.
    fn run(&mut self, input: &[u8], max: usize, text: bool) -> Result<(), Refusal> {
        let bits = self.direction.window_bits.clamp(9, 15);
        let engine = self
            .engine
            .get_or_insert_with(|| Box::new(Decompress::new_with_window_bits(false, bits)));
        let start = engine.total_in();
        loop {
            let taken = (engine.total_in() - start) as usize;
            // Room for at most one byte past `max` (a bomb stops there), the buffer growing
            // as Vec does (doubling): at most twice `max` is ever held.
            let room = max
                .saturating_add(1)
                .saturating_sub(self.out.len())
                .min(4096);
            self.out.reserve(room);
            let spare = self.out.capacity() - self.out.len();
            let status = engine
                .decompress_vec(&input[taken..], &mut self.out, FlushDecompress::Sync)
                .map_err(|_| (CloseCode::INVALID_DATA, "bad deflate data"))?;
            if self.out.len() > max {
                return Err((CloseCode::TOO_BIG, "message too big"));
            }
            if text {
                check_utf8_from(&self.out, &mut self.checked)?;
            }
            let all_in = (engine.total_in() - start) as usize == input.len();
            let filled = self.out.capacity() - self.out.len() == 0 && spare > 0;
            match status {
                Status::StreamEnd => {
                    // A final block ends the stream: a fresh one follows.
                    engine.reset(false);
                    return Ok(());
                }
                _ if all_in && !filled => return Ok(()),
                Status::BufError if !filled => return Ok(()),
                _ => {}
            }
        }
    }

    /// Lends the message inflated (text: valid UTF-8); copied into `spare`'s storage if kept.
    pub(crate) fn lend(&mut self, text: bool) -> ReceivedData<'_> {
        ReceivedData::read(&self.out, &mut self.spare, text)
    }

    /// The message delivered: ready for the next one.
    pub(crate) fn clear(&mut self) {
        self.out.clear();
        self.checked = 0;
    }

    /// As [`Deflater::shrink_if_idle`], for the decompressor and its buffers, between
    /// messages (a message under way keeps them).
    pub(crate) fn shrink_if_idle(&mut self, keep: usize) {
        if !self.out.is_empty() {
            return;
        }
        if self.direction.no_context_takeover {
            self.engine = None;
        }
        if !std::mem::take(&mut self.used) {
            if self.out.capacity() > keep {
                self.out = Vec::new();
            }
            if self.spare.capacity() > keep {
                self.spare = BytesMut::new();
            }
        }
    }
}

/// A server's answer to a client's offers (`offers`: every `sec-websocket-extensions`
/// value) under `config`: the agreed parameters and the response header's value, or `None`
/// (compression off in `config`, or no offer it can take).
pub(crate) fn server_accept<'a>(
    config: &WsConfig,
    offers: impl Iterator<Item = &'a str>,
) -> Option<(Agreed, String)> {
    let deflate = config.deflate.as_ref()?;
    accept(deflate, &offers.collect::<Vec<_>>().join(","))
}

/// A client's `sec-websocket-extensions` offer under `config`, if compression is on.
pub(crate) fn client_offer(config: &WsConfig) -> Option<String> {
    config.deflate.as_ref().map(offer)
}

/// A client's check of the server's `sec-websocket-extensions` answer (every value) under
/// `config`: the agreed parameters, `None` if compression is off or the server declined.
///
/// # Errors
/// As [`confirm`].
pub(crate) fn client_confirm<'a>(
    config: &WsConfig,
    response: impl Iterator<Item = &'a str>,
) -> Result<Option<Agreed>, &'static str> {
    let values: Vec<&str> = response.collect();
    match &config.deflate {
        Some(deflate) => confirm(
            deflate,
            (!values.is_empty()).then(|| values.join(",")).as_deref(),
        ),
        None if values.is_empty() => Ok(None),
        None => Err("the server chose an extension that was not offered"),
    }
}

/// The two engines of a session whose handshake agreed on `agreed`, if it did (`server`:
/// this side is the server).
pub(crate) fn engines(
    config: &WsConfig,
    agreed: Option<Agreed>,
    server: bool,
) -> Option<(Deflater, Inflater)> {
    let deflate = config.deflate.unwrap_or_default();
    agreed.map(|agreed| {
        (
            Deflater::new(agreed.outbound(server), &deflate),
            Inflater::new(agreed.inbound(server)),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOTH: Agreed = Agreed {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
    };

    #[test]
    fn a_server_takes_the_first_offer_it_can_parse_and_answers_what_it_grants() {
        let config = DeflateConfig::default();
        let (agreed, response) = accept(
            &config,
            "x-webkit-deflate-frame, permessage-deflate; foo=1, permessage-deflate; client_max_window_bits; server_max_window_bits=10",
        )
        .unwrap();
        assert_eq!(agreed.server_max_window_bits, 10);
        assert_eq!(agreed.client_max_window_bits, 15);
        assert_eq!(response, "permessage-deflate; server_max_window_bits=10");
        let small = DeflateConfig {
            server_no_context_takeover: true,
            client_max_window_bits: 9,
            ..config
        };
        let (agreed, response) =
            accept(&small, "permessage-deflate; client_max_window_bits").unwrap();
        assert_eq!(
            response,
            "permessage-deflate; server_no_context_takeover; client_max_window_bits=9"
        );
        assert!(agreed.inbound(true).window_bits == 9 && agreed.outbound(true).no_context_takeover);
        let (agreed, _) = accept(&small, "permessage-deflate").unwrap();
        assert_eq!(
            agreed.client_max_window_bits, 15,
            "a client that cannot be limited"
        );
        for declined in [
            "",
            "permessage-deflate; server_max_window_bits",
            "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; server_max_window_bits=010",
            "permessage-deflate; client_max_window_bits=7",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; mystery",
        ] {
            assert_eq!(accept(&config, declined), None, "{declined}");
        }
        assert!(accept(&config, "permessage-deflate; server_max_window_bits=\"12\"").is_some());
    }

    #[test]
    fn a_client_refuses_a_response_it_did_not_ask_for() {
        let config = DeflateConfig {
            server_no_context_takeover: true,
            server_max_window_bits: 12,
            client_max_window_bits: 11,
            ..DeflateConfig::default()
        };
        assert_eq!(
            offer(&config),
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=12; client_max_window_bits=11"
        );
        let (agreed, response) = accept(&DeflateConfig::default(), &offer(&config)).unwrap();
        assert_eq!(confirm(&config, Some(&response)), Ok(Some(agreed)));
        assert_eq!(confirm(&config, None), Ok(None));
        for refused in [
            "x-other",
            "permessage-deflate, permessage-deflate",
            "permessage-deflate; server_max_window_bits=12",
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=13",
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=12; client_max_window_bits",
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=12; x=1",
        ] {
            assert!(confirm(&config, Some(refused)).is_err(), "{refused}");
        }
        let plain = DeflateConfig::default();
        let agreed = confirm(
            &plain,
            Some("permessage-deflate; client_max_window_bits=10"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(agreed.outbound(false).window_bits, 10);
    }

    fn pair(agreed: Agreed) -> (Deflater, Inflater) {
        let config = DeflateConfig {
            min_size: 0,
            level: 9,
            ..DeflateConfig::default()
        };
        (
            Deflater::new(agreed.outbound(true), &config),
            Inflater::new(agreed.inbound(false)),
        )
    }

    #[test]
    fn messages_go_through_at_every_window_with_and_without_context_takeover() {
        let text: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("message {} of the test ", i % 97).into_bytes())
            .take(50_000)
            .collect();
        for bits in 8..=15 {
            for no_context_takeover in [false, true] {
                let agreed = Agreed {
                    server_no_context_takeover: no_context_takeover,
                    server_max_window_bits: bits,
                    ..BOTH
                };
                let (mut deflater, mut inflater) = pair(agreed);
                for round in 0..3 {
                    let message = &text[round * 7..];
                    let compressed = deflater.compress(message).unwrap().to_vec();
                    // An 8-bit window is sent as stored blocks (zlib cannot do 8).
                    assert!(
                        bits == 8 || compressed.len() < message.len() / 4,
                        "bits {bits}"
                    );
                    let (first, second) = compressed.split_at(compressed.len() / 3);
                    inflater.inflate(first, false, (usize::MAX, true)).unwrap();
                    inflater.inflate(second, true, (usize::MAX, true)).unwrap();
                    assert_eq!(inflater.out, message, "bits {bits} round {round}");
                    inflater.clear();
                }
            }
        }
    }

    #[test]
    fn a_bomb_is_refused_as_it_passes_the_limit() {
        let (mut deflater, mut inflater) = pair(BOTH);
        let zeros = vec![0u8; 8 << 20];
        let bomb = deflater.compress(&zeros).unwrap().to_vec();
        assert!(bomb.len() < 20_000, "{} bytes", bomb.len());
        let refused = inflater.inflate(&bomb, true, (1 << 20, false));
        assert_eq!(refused, Err((CloseCode::TOO_BIG, "message too big")));
        // Refused in the call that passed the limit: never more than twice it held.
        assert!(inflater.out.len() > 1 << 20);
        assert!(
            inflater.out.capacity() <= 2 << 20,
            "{}",
            inflater.out.capacity()
        );
    }

    #[test]
    fn bad_text_is_refused_at_its_first_bad_byte_and_bad_data_as_bad_data() {
        let (mut deflater, mut inflater) = pair(BOTH);
        let mut message = b"good text, then ".repeat(100);
        message.extend_from_slice(&[0xff, 0xfe]);
        message.extend(b"more".repeat(100));
        let compressed = deflater.compress(&message).unwrap().to_vec();
        let refused = inflater.inflate(&compressed, false, (usize::MAX, true));
        assert_eq!(refused, Err(BAD_UTF8));

        let mut short = "é".repeat(100).into_bytes();
        short.pop(); // valid text but for its last character, cut in two by the end
        let (mut deflater, mut inflater) = pair(BOTH);
        let compressed = deflater.compress(&short).unwrap().to_vec();
        assert_eq!(
            inflater.inflate(&compressed, false, (usize::MAX, true)),
            Ok(())
        );
        assert_eq!(
            inflater.inflate(&[], true, (usize::MAX, true)),
            Err(BAD_UTF8)
        );
        let mut garbage = Inflater::new(BOTH.inbound(false));
        assert_eq!(
            garbage.inflate(&[0xff; 32], true, (usize::MAX, false)),
            Err((CloseCode::INVALID_DATA, "bad deflate data"))
        );
    }

    #[test]
    fn short_messages_are_not_compressed_and_idle_engines_without_context_go() {
        let config = DeflateConfig::default();
        let agreed = Agreed {
            server_no_context_takeover: true,
            ..BOTH
        };
        let mut deflater = Deflater::new(agreed.outbound(true), &config);
        assert_eq!(deflater.compress(b"short"), None);
        assert!(
            deflater.engine.is_none(),
            "nothing made for an unused direction"
        );
        assert!(deflater.compress(&[7; 1000]).is_some());
        assert!(deflater.compress(&[8; 1000]).is_some());
        assert!(deflater.engine.is_some(), "the messages of a turn share it");
        deflater.shrink_if_idle(4096);
        assert!(deflater.engine.is_none(), "the end of the turn lets it go");
        let mut kept = Deflater::new(BOTH.outbound(true), &config);
        assert!(kept.compress(&[7; 1000]).is_some());
        kept.shrink_if_idle(4096);
        kept.shrink_if_idle(4096);
        assert!(kept.engine.is_some(), "context takeover keeps the window");
    }
}
