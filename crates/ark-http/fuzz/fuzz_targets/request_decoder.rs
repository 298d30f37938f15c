//! The request decoder on arbitrary bytes, fed as the server feeds it (the unconsumed prefix
//! again with every new piece): it never panics, never consumes more than it was given, and
//! decodes the same requests (or the same refusal) whether the bytes come whole or in pieces.
#![no_main]

use ark_http::{Decoded, HeadFacts, Limits, RequestDecoder};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq, Eq)]
enum Event {
    Request(HeadFacts, Vec<u8>),
    Refused(u16),
}

fn decode_all(input: &[u8], step: usize) -> Vec<Event> {
    let limits = Limits {
        max_head: 512,
        max_headers: 16,
        max_body: 4096,
        max_chunk_extension: 64,
        bare_lf: false,
    };
    let mut decoder = RequestDecoder::new(limits);
    let (mut pending, mut events) = (Vec::new(), Vec::new());
    for piece in input.chunks(step) {
        pending.extend_from_slice(piece);
        loop {
            match decoder.decode(&pending) {
                Ok((Decoded::Request(facts), used)) => {
                    assert!(used <= pending.len() && used >= facts.len);
                    let body = match facts.body {
                        ark_http::BodyKind::Chunked => decoder.chunked_body().to_vec(),
                        _ => pending[facts.len..used].to_vec(),
                    };
                    events.push(Event::Request(facts, body));
                    pending.drain(..used);
                }
                Ok((Decoded::Continue | Decoded::Incomplete, used)) => {
                    assert_eq!(used, 0);
                    break;
                }
                Err(error) => {
                    events.push(Event::Refused(error.status()));
                    return events;
                }
            }
        }
    }
    events
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, input)) = data.split_first() else {
        return;
    };
    let whole = decode_all(input, input.len().max(1));
    let pieces = decode_all(input, usize::from(split).max(1));
    assert_eq!(whole, pieces);
});
