//! Without the `deflate` feature nothing is compressed: no offer is made, every offer is
//! declined, and a server that answers with an extension anyway is refused. The engines'
//! types have no values, so the code that would use them compiles and never runs.

use crate::config::WsConfig;
use crate::proto::close::CloseCode;
use crate::proto::data::ReceivedData;

/// Agreed parameters: none can exist without the feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agreed {}

/// A compressor: none can exist without the feature.
#[derive(Debug)]
pub(crate) enum Deflater {}

/// A decompressor: none can exist without the feature.
#[derive(Debug)]
pub(crate) enum Inflater {}

impl Deflater {
    pub(crate) fn compress(&mut self, _: &[u8]) -> Option<&[u8]> {
        match *self {}
    }

    pub(crate) fn shrink_if_idle(&mut self, _: usize) {
        match *self {}
    }
}

impl Inflater {
    pub(crate) fn inflate(
        &mut self,
        _: &[u8],
        _: bool,
        _: (usize, bool),
    ) -> Result<(), (CloseCode, &'static str)> {
        match *self {}
    }

    pub(crate) fn lend(&mut self, _: bool) -> ReceivedData<'_> {
        match *self {}
    }

    pub(crate) fn clear(&mut self) {
        match *self {}
    }

    pub(crate) fn shrink_if_idle(&mut self, _: usize) {
        match *self {}
    }
}

/// Declines every offer.
pub(crate) fn server_accept<'a>(
    _: &WsConfig,
    _: impl Iterator<Item = &'a str>,
) -> Option<(Agreed, String)> {
    None
}

/// Offers nothing.
pub(crate) fn client_offer(_: &WsConfig) -> Option<String> {
    None
}

/// Nothing was offered: any extension in the answer is refused.
pub(crate) fn client_confirm<'a>(
    _: &WsConfig,
    mut response: impl Iterator<Item = &'a str>,
) -> Result<Option<Agreed>, &'static str> {
    match response.any(|value| !value.trim().is_empty()) {
        true => Err("the server chose an extension that was not offered"),
        false => Ok(None),
    }
}

/// No engines: nothing can have been agreed.
pub(crate) fn engines(
    _: &WsConfig,
    agreed: Option<Agreed>,
    _: bool,
) -> Option<(Deflater, Inflater)> {
    agreed.map(|agreed| match agreed {})
}
