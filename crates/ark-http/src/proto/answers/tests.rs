use super::*;
use std::collections::VecDeque;

/// Collects answers; the requests were HEAD where `heads` says so, and one is awaited per
/// entry of `heads`.
struct Collect {
    heads: VecDeque<bool>,
    answers: Vec<(u16, Vec<u8>)>,
}

impl Collect {
    fn awaiting(heads: &[bool]) -> Collect {
        Collect {
            heads: heads.iter().copied().collect(),
            answers: Vec::new(),
        }
    }
}

impl AnswerSink for Collect {
    fn awaited(&self) -> usize {
        self.heads.len()
    }
    fn head_request(&self) -> bool {
        self.heads.front().copied().unwrap_or(false)
    }
    fn answer(&mut self, response: &ClientResponse<'_>) {
        self.heads.pop_front();
        self.answers.push((response.status, response.body.to_vec()));
    }
}

/// The answers that came (status and body), and the verdict: an error, or whether the stream
/// ended between answers.
type Outcome = (Vec<(u16, Vec<u8>)>, Result<bool, AnswerError>);

/// Feeds `stream` in pieces of `piece` bytes, then the end of stream; what came out.
fn read(stream: &[u8], piece: usize, heads: &[bool], limits: Limits) -> Outcome {
    let mut reader = AnswerReader::new(limits);
    let mut sink = Collect::awaiting(heads);
    for chunk in stream.chunks(piece.max(1)) {
        if let Err(e) = reader.feed(chunk, &mut sink) {
            return (sink.answers, Err(e));
        }
    }
    let clean = reader.end_of_stream(&mut sink);
    (sink.answers, Ok(clean))
}

#[test]
fn answers_split_anywhere_across_reads_come_out_whole_and_in_order() {
    let big: Vec<u8> = (0..20_000).map(|i| (i % 251) as u8).collect();
    let mut stream = Vec::new();
    stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello");
    stream.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    stream.extend_from_slice(b"HTTP/1.1 201 Created\r\ncontent-length: 20000\r\n\r\n");
    stream.extend_from_slice(&big);
    stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n");
    stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
    stream.extend_from_slice(b"3;a=\"b\"\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n");
    stream.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
    stream.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
    stream.extend_from_slice(b"HTTP/1.0 200 OK\r\n\r\nto the close");
    let expected = vec![
        (200, b"hello".to_vec()),
        (201, big.clone()),
        (200, Vec::new()),
        (200, b"abcde".to_vec()),
        (204, Vec::new()),
        (200, Vec::new()),
        (200, b"to the close".to_vec()),
    ];
    // The third request was a HEAD: its answer's content-length has no body.
    let heads = [false, false, true, false, false, false, false];
    for piece in [1, 2, 5, 33, 100, 1000, 7000, 20_050, stream.len()] {
        let (answers, end) = read(&stream, piece, &heads, Limits::default());
        assert_eq!(answers, expected, "pieces of {piece} bytes");
        assert_eq!(end, Ok(true), "pieces of {piece} bytes");
    }
}

#[test]
fn a_close_delimited_body_is_delivered_only_at_the_close_and_bounded_by_max_body() {
    let mut reader = AnswerReader::new(Limits::default());
    let mut sink = Collect::awaiting(&[false]);
    reader
        .feed(
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\nsome",
            &mut sink,
        )
        .unwrap();
    reader.feed(b" more", &mut sink).unwrap();
    assert!(sink.answers.is_empty(), "not before the close");
    assert!(reader.under_way());
    assert!(reader.end_of_stream(&mut sink));
    assert_eq!(sink.answers, [(200, b"some more".to_vec())]);

    let limits = Limits {
        max_body: 4,
        ..Limits::default()
    };
    let (answers, end) = read(b"HTTP/1.0 200 OK\r\n\r\n12345", 3, &[false], limits);
    assert!(answers.is_empty());
    assert_eq!(
        end,
        Err(AnswerError::Malformed(HttpError::BodyTooLarge { limit: 4 }))
    );
}

#[test]
fn an_answer_cut_short_by_the_close_is_not_delivered() {
    for cut in [
        &b"HTTP/1.1 200 OK\r\nContent-Le"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    ] {
        let (answers, end) = read(cut, 7, &[false], Limits::default());
        assert!(answers.is_empty(), "{cut:?}");
        assert_eq!(end, Ok(false), "{cut:?}");
    }
}

#[test]
fn bytes_no_request_asked_for_are_refused_and_never_delivered() {
    let two = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb";
    for piece in [1, 7, two.len()] {
        let (answers, end) = read(two, piece, &[false], Limits::default());
        assert_eq!(answers, [(200, b"a".to_vec())], "pieces of {piece}");
        assert!(
            matches!(end, Err(AnswerError::Unsolicited { .. })),
            "pieces of {piece}: {end:?}"
        );
    }
    // Nothing awaited: the first byte is refused (a CRLF too).
    let (answers, end) = read(b"\r\n", 1, &[], Limits::default());
    assert!(answers.is_empty());
    assert_eq!(end, Err(AnswerError::Unsolicited { bytes: 1 }));
    // After an answer that ends the connection, even with requests pipelined behind it.
    let closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb";
    let (answers, end) = read(closing, closing.len(), &[false, false], Limits::default());
    assert_eq!(answers, [(200, b"a".to_vec())]);
    assert_eq!(end, Err(AnswerError::Unsolicited { bytes: 39 }));
}

/// An answer delivered in a read makes room for a request the sink sends at once; the bytes
/// already read are not that request's answer.
#[test]
fn a_request_sent_while_a_read_is_delivered_is_not_answered_by_that_read() {
    struct SendsAgain(Collect);
    impl AnswerSink for SendsAgain {
        fn awaited(&self) -> usize {
            self.0.awaited()
        }
        fn head_request(&self) -> bool {
            false
        }
        fn answer(&mut self, response: &ClientResponse<'_>) {
            self.0.answer(response);
            self.0.heads.push_back(false);
        }
    }
    let mut reader = AnswerReader::new(Limits::default());
    let mut sink = SendsAgain(Collect::awaiting(&[false]));
    let read = reader.feed(
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
        &mut sink,
    );
    assert_eq!(sink.0.answers, [(200, b"a".to_vec())]);
    assert!(
        matches!(read, Err(AnswerError::Unsolicited { .. })),
        "{read:?}"
    );
}

#[test]
fn framing_a_client_must_refuse_is_refused_with_the_servers_rules() {
    let cases: [(&[u8], AnswerError); 10] = [
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 11\r\n\r\nhello world",
            HttpError::BadContentLength.into(),
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            HttpError::BadContentLength.into(),
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 11\r\n\r\n",
            HttpError::BadContentLength.into(),
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
            HttpError::BadContentLength.into(),
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 5\r\n\r\nhello",
            HttpError::BadRequest("the head mixes CRLF and bare LF line endings").into(),
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
            AnswerError::Switching,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            HttpError::LengthAndChunked.into(),
        ),
        (
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            HttpError::BadRequest("Transfer-Encoding in HTTP/1.0").into(),
        ),
        (
            b"HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n",
            HttpError::BadRequest("malformed header field").into(),
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\nhi\r\n0\r\n\r\n",
            HttpError::BadChunk("a chunk extension that breaks its syntax").into(),
        ),
    ];
    for (stream, expected) in cases {
        for piece in [1, 9, stream.len()] {
            let (answers, end) = read(stream, piece, &[false], Limits::default());
            assert!(answers.is_empty(), "{:?}", String::from_utf8_lossy(stream));
            assert_eq!(
                end,
                Err(expected.clone()),
                "{:?}",
                String::from_utf8_lossy(stream)
            );
        }
    }
}

#[test]
fn no_body_for_head_204_304_whatever_their_length_says_and_a_later_1x_is_11() {
    let stream = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\nHTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let (answers, end) = read(stream, 5, &[true, false, false], Limits::default());
    assert_eq!(
        answers,
        [(200, Vec::new()), (304, Vec::new()), (200, b"ok".to_vec())]
    );
    assert_eq!(end, Ok(true));
}

/// 1-byte chunks with 4,000-byte extensions: the raw bytes are dropped as they are decoded
/// (before, every one was kept), and the answer fails past the bound on its bytes on the wire.
#[test]
fn a_chunk_extension_bomb_holds_a_few_bytes_and_fails_past_the_wire_bound() {
    let limits = Limits {
        max_body: 64 * 1024,
        ..Limits::default()
    };
    let bound = limits.message_bound();
    assert_eq!(bound, 8192 + 65_536 + 65_536);
    let mut chunk = b"1;".to_vec();
    chunk.extend(std::iter::repeat_n(b'e', 3999));
    chunk.extend_from_slice(b"\r\nx\r\n");
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut reader = AnswerReader::new(limits);
    let mut sink = Collect::awaiting(&[false]);
    reader.feed(head, &mut sink).unwrap();
    let (mut wire, mut peak) = (head.len() as u64, 0);
    let read = chunk.repeat(16);
    let error = loop {
        match reader.feed(&read, &mut sink) {
            Ok(()) => wire += read.len() as u64,
            Err(e) => break e,
        }
        peak = peak.max(reader.held());
        assert!(wire <= bound + read.len() as u64, "no error past the bound");
    };
    assert_eq!(error, AnswerError::TooLarge { limit: bound });
    assert!(wire + read.len() as u64 > bound, "{wire}");
    // The head and a few dozen decoded bytes, not the ~140 KB that came.
    assert!(peak > 0 && peak < 1024, "held at most {peak} bytes");
    assert_eq!(reader.held(), 0, "nothing held after the error");
    assert!(sink.answers.is_empty());
}

/// A body's buffer grows by doubling but never past the body limit.
#[test]
fn a_body_buffer_never_grows_past_its_limit() {
    let limits = Limits {
        max_body: 100_000,
        ..Limits::default()
    };
    let mut reader = AnswerReader::new(limits);
    let mut sink = Collect::awaiting(&[false, false]);
    reader
        .feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",
            &mut sink,
        )
        .unwrap();
    for _ in 0..100 {
        reader.feed(&[b'a'; 1000], &mut sink).unwrap();
        assert!(reader.held() <= 100_000 + 8192, "{}", reader.held());
    }
    assert_eq!(sink.answers, [(200, vec![b'a'; 100_000])]);
    assert_eq!(reader.held(), 0);
}

/// Every stream gives the same answers and the same verdict whole and in pieces.
#[test]
fn whole_and_in_pieces_agree() {
    let streams: [&[u8]; 6] = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;a\r\nx\r\n0\r\nA: b\r\n\r\nHTTP/1.1 204 X\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nGET / HTTP/1.1\r\n\r\n",
        b"HTTP/1.1 103 Early\r\nLink: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ny",
        b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
        b"HTTP/1.1 200 OK\r\n\r\nrest",
    ];
    for stream in streams {
        let whole = read(stream, stream.len(), &[false, false], Limits::default());
        for piece in 1..stream.len() {
            let pieces = read(stream, piece, &[false, false], Limits::default());
            assert_eq!(
                pieces,
                whole,
                "{:?} in pieces of {piece}",
                String::from_utf8_lossy(stream)
            );
        }
    }
}

/// A fuzz-style check without a fuzzer: streams mutated at random (bytes replaced, inserted,
/// removed, from the alphabet of heads and chunks) read whole and in random pieces give the
/// same answers and verdict (an `Unsolicited` error's byte count depends on the reads, so only
/// its kind is compared), and never panic.
#[test]
fn mutated_streams_read_alike_whole_and_in_pieces() {
    let seeds: [&[u8]; 4] = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;a=\"b\"\r\nabc\r\n0\r\nX: y\r\n\r\nHTTP/1.1 204 No\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbody",
        b"HTTP/1.0 200 OK\r\nX-A: b\r\n\r\nuntil the close",
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ];
    let alphabet = b"HTP/1.0 2\r\n:;=\"\\aCotent-LghTrsfr-Encdichunked,+5";
    let limits = Limits {
        max_head: 96,
        max_headers: 4,
        max_body: 64,
        max_chunk_extension: 16,
        bare_lf: false,
    };
    let kind = |outcome: Outcome| match outcome {
        (answers, Err(AnswerError::Unsolicited { .. })) => (answers, Err(None)),
        (answers, Err(e)) => (answers, Err(Some(e))),
        (answers, Ok(clean)) => (answers, Ok(clean)),
    };
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    for round in 0..4000 {
        let mut stream = seeds[round % seeds.len()].to_vec();
        for _ in 0..1 + next(4) {
            let at = next(stream.len() + 1);
            let byte = alphabet[next(alphabet.len())];
            match next(3) {
                0 if at < stream.len() => stream[at] = byte,
                1 => stream.insert(at, byte),
                _ if at < stream.len() => drop(stream.remove(at)),
                _ => {}
            }
        }
        let whole = read(&stream, stream.len(), &[false, false], limits);
        let piece = 1 + next(stream.len().max(1));
        let pieces = read(&stream, piece, &[false, false], limits);
        assert_eq!(
            kind(pieces),
            kind(whole),
            "{:?} in pieces of {piece}",
            String::from_utf8_lossy(&stream)
        );
    }
}
