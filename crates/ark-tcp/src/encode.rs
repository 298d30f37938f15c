//! Framing outgoing messages into a session's send queue: [`EncodeInto`] (the codec behind a
//! `dyn`, one call per send), and the queueing that sends a frame back by its place in the
//! input when it is an unchanged echo.

use std::ops::Range;

use ark_frame::{EncodeError, Encoder, Header};

use crate::error::SendError;
use crate::proto::core::link::Link;

/// Object-safe framing of outgoing messages.
pub(crate) trait EncodeInto {
    /// The header and trailer that frame `payload` (computed once per message).
    fn frame(&self, payload: &[u8]) -> Result<(Header, &[u8]), EncodeError>;

    /// Frames `payload` and queues it on `link` ([`queue_frame`]): one call through the vtable
    /// per send, with the codec's header and the queueing compiled together. (Returning the
    /// header from [`frame`](Self::frame) and queueing after it moved a large `Result` through
    /// memory on every send.)
    fn send(&self, link: &mut Link, input: &[u8], payload: &[u8]) -> Result<(), SendError>;
}

impl<E: Encoder> EncodeInto for E {
    #[inline]
    fn frame(&self, payload: &[u8]) -> Result<(Header, &[u8]), EncodeError> {
        Ok((self.header(payload)?, self.trailer()))
    }

    fn send(&self, link: &mut Link, input: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let header = self.header(payload)?;
        queue_frame(link, input, [header.as_slice(), payload, self.trailer()])
    }
}

/// Queues one frame — `header`, `payload`, `trailer` — on `link`: by reference when it lies in
/// `input` just as it is to be sent (an echo), otherwise copied into the send queue.
#[inline]
fn queue_frame(link: &mut Link, input: &[u8], frame: [&[u8]; 3]) -> Result<(), SendError> {
    let [header, payload, trailer] = frame;
    let in_place = match frame_in(input, header, payload, trailer) {
        Some(range) => link.queue_in_place(range)?,
        None => false,
    };
    if !in_place {
        queue_parts(link, input, &frame)?;
    }
    link.count_frame_out();
    Ok(())
}

/// Queues `parts` one after the other on `link`, all or none (what is queued in place from
/// `input` is copied into the queue first); the bytes queued.
#[inline]
pub(crate) fn queue_parts<'l>(
    link: &'l mut Link,
    input: &[u8],
    parts: &[&[u8]],
) -> Result<&'l mut [u8], SendError> {
    link.settle_in_place(input);
    let queue = link.room_for(parts.iter().map(|p| p.len()).sum())?;
    let start = queue.len();
    append_parts(queue, parts);
    Ok(&mut queue[start..])
}

/// Where `payload` lies in `input` between `header` and `trailer`: a frame that arrived in
/// `input` and is sent back unchanged. Only addresses are compared; the framing bytes around
/// the payload are checked against the ones computed for the send.
#[inline]
fn frame_in(input: &[u8], header: &[u8], payload: &[u8], trailer: &[u8]) -> Option<Range<usize>> {
    let offset = (payload.as_ptr() as usize).checked_sub(input.as_ptr() as usize)?;
    let start = offset.checked_sub(header.len())?;
    let end = offset
        .checked_add(payload.len())?
        .checked_add(trailer.len())?;
    let frame = input.get(start..end)?;
    let before = &frame[..header.len()];
    let after = &frame[header.len() + payload.len()..];
    (same_short(before, header) && same_short(after, trailer)).then_some(start..end)
}

/// `a == b` for the few bytes of a frame's header or trailer, four at a time and without a
/// call to libc's `memcmp`: its masked vector load of the header just written stalled for 8 %
/// of all cycles of a 1 KiB echo, and a byte-at-a-time loop took a quarter of the queueing of
/// a 64 B echo (perf).
#[inline]
fn same_short(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let ((words_a, rest_a), (words_b, rest_b)) = (a.as_chunks::<4>(), b.as_chunks::<4>());
    let words = words_a.iter().zip(words_b);
    let diff = words.fold(0, |diff, (x, y)| {
        diff | (u32::from_ne_bytes(*x) ^ u32::from_ne_bytes(*y))
    });
    let rest = rest_a.iter().zip(rest_b);
    rest.fold(diff, |diff, (x, y)| diff | u32::from(x ^ y)) == 0
}

/// Appends `parts` to `out`, reserving their total once.
#[inline]
pub(crate) fn append_parts(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.reserve(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        out.extend_from_slice(part);
    }
}

#[cfg(test)]
mod tests {
    use super::{frame_in, same_short};

    #[test]
    fn same_short_compares_every_byte_of_any_length() {
        let bytes: Vec<u8> = (1..=11).collect();
        for len in 0..=bytes.len() {
            let a = &bytes[..len];
            let copy = a.to_vec();
            assert!(same_short(a, &copy));
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x80;
                assert!(!same_short(a, &b), "a difference at {at} of {len}");
            }
        }
        assert!(!same_short(&[1, 2], &[1, 2, 3]));
    }

    #[test]
    fn a_frame_is_in_the_input_only_with_its_own_header_and_trailer() {
        let input = [0, 0, 0, 3, b'a', b'b', b'c', b'\n', 0, 0, 0, 1, b'x'];
        let payload = &input[4..7];
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], payload, b"\n"), Some(0..8));
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], payload, b""), Some(0..7));
        assert_eq!(frame_in(&input, &[0, 0, 0, 4], payload, b"\n"), None);
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], payload, b"\r"), None);
        // A payload that is not in the input, or whose header would start before it.
        assert_eq!(frame_in(&input, &[0, 0, 0, 3], b"abc", b""), None);
        assert_eq!(frame_in(&input[4..], &[0, 0, 0, 3], payload, b""), None);
        // The trailer would run past the input's end.
        assert_eq!(frame_in(&input, &[0, 0, 0, 1], &input[12..], b"\n"), None);
    }
}
