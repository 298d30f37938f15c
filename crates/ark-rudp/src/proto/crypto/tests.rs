//! Known answers for the key schedule and packet protection (computed apart, with Python's
//! `cryptography`: HKDF-Expand-SHA256 and AES-128-GCM), the handshake against the Noise
//! protocol's published vectors (cacophony's `Noise_NK_25519_AESGCM_SHA256`, the vector file
//! snow's own tests use), and the handshake's refusals.

use super::*;

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

fn secret(text: &str) -> [u8; KEY_LEN] {
    unhex(text).try_into().unwrap()
}

const SECRET0: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

#[test]
fn the_key_schedule_gives_the_known_key_iv_and_next_secret() {
    let s = secret(SECRET0);
    let (mut key, mut iv) = ([0u8; 16], [0u8; 12]);
    expand(&s, LABEL_KEY, &mut key);
    expand(&s, LABEL_IV, &mut iv);
    assert_eq!(key.to_vec(), unhex("2b539eb6c338bb22d042cccb8d654073"));
    assert_eq!(iv.to_vec(), unhex("1cf6f2b3a0c6afb964c74109"));
    assert_eq!(
        next_secret(&s).to_vec(),
        unhex("125735d6846672f5cf85501d8ae46c97d7c2dfafa2eb57517854c8515bbaf7f3")
    );
}

/// `body` sealed by a session whose sending secret is `SECRET0`, at packet number `pn`.
fn sealed(keys: &mut SessionKeys, kind: u8, pn: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; 5 + body.len() + TAG_LEN];
    out[0] = kind;
    out[1..5].copy_from_slice(&(pn as u32).to_be_bytes());
    out[5..5 + body.len()].copy_from_slice(body);
    let n = keys.seal(pn, &mut out, 5, 5 + body.len());
    out.truncate(n);
    out
}

#[test]
fn packets_seal_to_the_known_bytes_in_epoch_0_and_after_a_key_update() {
    let mut keys = SessionKeys::new(secret(SECRET0), secret(SECRET0));
    let d = sealed(&mut keys, 0x1F, 5, b"hello, ark-rudp");
    assert_eq!(d[..5], [0x1F, 0, 0, 0, 5]);
    assert_eq!(
        d[5..].to_vec(),
        unhex("bfecb765ff8356257f767adc5251b2165249a77e87978f1d4a42d71bd83c76")
    );
    let pn = (1 << EPOCH_BITS) + 7;
    let d = sealed(&mut keys, 0x40, pn, b"next epoch");
    assert_eq!(
        d[5..].to_vec(),
        unhex("e29462ac827e89a3f7008bdba2c7b1f16370b8dc848ece4c5d9d")
    );
}

#[test]
fn a_receiver_opens_across_epochs_and_refuses_what_was_changed() {
    let mut tx = SessionKeys::new(secret(SECRET0), [9; KEY_LEN]);
    let mut rx = SessionKeys::new([9; KEY_LEN], secret(SECRET0));
    let epoch = 1u64 << EPOCH_BITS;
    // Sealed in order (a sender's numbers only grow), delivered reordered across the epoch
    // boundaries: epoch - 2 after epoch 1 began, epoch + 3 after epoch 2 began (the epoch
    // before the current one is still kept).
    let numbers = [1, epoch - 2, epoch - 1, epoch + 2, epoch + 3, 2 * epoch + 1];
    let mut datagrams: Vec<(u64, Vec<u8>)> = numbers
        .iter()
        .map(|&pn| (pn, sealed(&mut tx, 0x10, pn, b"payload")))
        .collect();
    for i in [0usize, 2, 3, 1, 5, 4] {
        let (pn, d) = &mut datagrams[i];
        assert_eq!(rx.open(*pn, d, 5), Some(5 + 7), "pn {pn}");
        assert_eq!(&d[5..12], b"payload");
    }
    // Two epochs back: the key is gone.
    let mut tx_old = SessionKeys::new(secret(SECRET0), [9; KEY_LEN]);
    let mut d = sealed(&mut tx_old, 0x10, 3, b"payload");
    assert_eq!(rx.open(3, &mut d, 5), None);
    // A changed header, body or tag, or another packet number: refused and counted.
    for flip in [0usize, 3, 7, 20] {
        let mut d = sealed(&mut tx, 0x10, 2 * epoch + 9, b"payload");
        d[flip] ^= 1;
        assert_eq!(rx.open(2 * epoch + 9, &mut d, 5), None, "byte {flip}");
    }
    let mut d = sealed(&mut tx, 0x10, 2 * epoch + 10, b"payload");
    assert_eq!(rx.open(2 * epoch + 11, &mut d, 5), None);
    assert_eq!(rx.open(1, &mut [0u8; 10], 5), None, "shorter than a tag");
    assert_eq!(rx.failed_opens(), 7);
}

#[test]
fn the_handshake_matches_the_noise_protocol_vectors() {
    // cacophony.txt, Noise_NK_25519_AESGCM_SHA256.
    let prologue = unhex("4a6f686e2047616c74");
    let resp_static = unhex("4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893");
    let server = RudpServerKey::from_secret(resp_static.clone().try_into().unwrap());
    assert_eq!(
        server.public().0.to_vec(),
        unhex("31e0303fd6418d2f8c0e78b91f22e8caed0fbe48656dcf4767e4834f701b8f62"),
        "the public key computed from the secret"
    );
    let init_e = unhex("893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a");
    let resp_e = unhex("bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b");
    let mut init = snow::Builder::new(params())
        .prologue(&prologue)
        .unwrap()
        .remote_public_key(&server.public().0)
        .unwrap()
        .fixed_ephemeral_key_for_testing_only(&init_e)
        .build_initiator()
        .unwrap();
    let mut resp = snow::Builder::new(params())
        .prologue(&prologue)
        .unwrap()
        .local_private_key(&resp_static)
        .unwrap()
        .fixed_ephemeral_key_for_testing_only(&resp_e)
        .build_responder()
        .unwrap();
    let (mut buf, mut payload) = ([0u8; 256], [0u8; 256]);
    let n = init
        .write_message(&unhex("4c756477696720766f6e204d69736573"), &mut buf)
        .unwrap();
    assert_eq!(
        buf[..n].to_vec(),
        unhex(
            "ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c794475ab4d66d222457dd414bc5f296bc7b4078cc7d72af5192628b68bca7d28844b"
        )
    );
    resp.read_message(&buf[..n], &mut payload).unwrap();
    let n = resp
        .write_message(&unhex("4d757272617920526f746862617264"), &mut buf)
        .unwrap();
    assert_eq!(
        buf[..n].to_vec(),
        unhex(
            "95ebc60d2b1fa672c1f46a8aa265ef51bfe38e7ccb39ec5be34069f14480884303c7d89310502baa8299520ba451624c3c0492e2698f8d457c32400b91fd8a"
        )
    );
    init.read_message(&buf[..n], &mut payload).unwrap();
    assert_eq!(
        init.get_handshake_hash().to_vec(),
        unhex("f8a87aa8add4fea6e33365b89637486c2f6564546ce29d1df9ce9abf78c507d7")
    );
    // The split keys, in the order ark takes them (the first for the initiator's sends),
    // encrypt the vectors' first transport message each way (Noise's AESGCM: AES-256, nonce
    // 0 as 4 zero bytes and a big-endian counter, no associated data).
    let (to_server, to_client) = init.dangerously_get_raw_split();
    assert_eq!(resp.dangerously_get_raw_split(), (to_server, to_client));
    let noise_seal = |key: &[u8; 32], payload: &str| {
        let key = LessSafeKey::new(UnboundKey::new(&aead::AES_256_GCM, key).unwrap());
        let mut data = unhex(payload);
        let nonce = Nonce::assume_unique_for_key([0; 12]);
        key.seal_in_place_append_tag(nonce, Aad::empty(), &mut data)
            .unwrap();
        data
    };
    assert_eq!(
        noise_seal(&to_server, "462e20412e20486179656b"),
        unhex("304f70c37c93573099228016d54cb15213af94eb598d1b17df1153")
    );
    assert_eq!(
        noise_seal(&to_client, "4361726c204d656e676572"),
        unhex("a1bf6c954529f29b31d8ae9f67d2c18dbd332aa1a0918690c6d80b")
    );
}

#[test]
fn a_handshake_gives_both_ends_the_same_keys_and_the_token_to_the_server() {
    let server = RudpServerKey::generate();
    let cookie = [7u8; 20];
    let mut client = ClientHandshake::new(&server.public(), 42, &cookie, b"ticket").unwrap();
    let accepted = accept(&server, 42, &cookie, client.first_message()).unwrap();
    assert_eq!(accepted.token, b"ticket");
    assert_eq!(accepted.second.len(), SECOND_MESSAGE);
    let mut client_keys = client.finish(&accepted.second).unwrap();
    let mut server_keys = accepted.keys;
    let mut d = sealed(&mut client_keys, 0x10, 9, b"to the server");
    assert_eq!(server_keys.open(9, &mut d, 5), Some(5 + 13));
    let mut d = sealed(&mut server_keys, 0x10, 9, b"to the client");
    assert_eq!(client_keys.open(9, &mut d, 5), Some(5 + 13));
    // Each direction has its own key: a datagram reflected back does not open.
    let mut d = sealed(&mut client_keys, 0x10, 10, b"reflected");
    assert_eq!(client_keys.open(10, &mut d, 5), None);
}

#[test]
fn a_handshake_for_another_key_cookie_or_nonce_or_changed_on_the_way_fails() {
    let server = RudpServerKey::generate();
    let other = RudpServerKey::generate();
    let cookie = [7u8; 20];
    let client = ClientHandshake::new(&other.public(), 42, &cookie, b"").unwrap();
    assert!(matches!(
        accept(&server, 42, &cookie, client.first_message()),
        Err(HandshakeError::Verify(_))
    ));
    let client = ClientHandshake::new(&server.public(), 42, &cookie, b"").unwrap();
    assert!(accept(&server, 43, &cookie, client.first_message()).is_err());
    assert!(accept(&server, 42, &[8u8; 20], client.first_message()).is_err());
    let mut changed = client.first_message().to_vec();
    changed[40] ^= 1;
    assert!(accept(&server, 42, &cookie, &changed).is_err());
    assert!(accept(&server, 42, &cookie, &[]).is_err());
    // The server's answer, changed, or from someone without the server's key.
    let mut client = ClientHandshake::new(&server.public(), 42, &cookie, b"").unwrap();
    let accepted = accept(&server, 42, &cookie, client.first_message()).unwrap();
    let mut forged = accepted.second.clone();
    forged[0] ^= 1;
    assert!(client.finish(&forged).is_err());
    assert!(client.finish(&[1, 2, 3]).is_err());
    // A forged answer leaves the handshake as it was: the genuine one still completes.
    assert!(client.finish(&accepted.second).is_ok());
    let mut client = ClientHandshake::new(&server.public(), 42, &cookie, b"").unwrap();
    let impostor = accept(&other, 42, &cookie, client.first_message());
    assert!(
        impostor.is_err(),
        "the impostor cannot read the first message"
    );
    assert!(client.finish(&[0u8; SECOND_MESSAGE]).is_err());
}

#[test]
fn public_keys_print_and_parse_as_hex() {
    let key = RudpServerKey::generate().public();
    let text = key.to_string();
    assert_eq!(text.len(), 64);
    assert_eq!(RudpPublicKey::from_hex(&text), Ok(key));
    assert!(RudpPublicKey::from_hex("abc").is_err());
    assert!(RudpPublicKey::from_hex(&"zz".repeat(32)).is_err());
    let restored = RudpServerKey::from_secret(RudpServerKey::generate().secret());
    assert_eq!(
        RudpServerKey::from_secret(restored.secret()).public(),
        restored.public()
    );
}
