#![no_main]
//! Metadata::decode on arbitrary bytes: never panics; what decodes re-encodes to the same
//! record (the 64-bit form; a blind record's size field as 0) and decodes back equal. Every
//! Kvrocks type id (1–14) decodes, so the input space covers their extra fields; `cargo fuzz run fuzz_metadata
//! fuzz/seeds/fuzz_metadata` starts from one record of each type.

use libfuzzer_sys::fuzz_target;
use rediskv::{Flags, Metadata, peek_type_and_expire};

fuzz_target!(|data: &[u8]| {
    if let Some(&first) = data.first() {
        let _ = Flags::from_byte(first);
    }
    let peeked = peek_type_and_expire(data);
    let Ok(meta) = Metadata::decode(data) else { return };
    assert_eq!(peeked, Ok((meta.ty, meta.expire_ms)));
    let _ = rediskv::gc::decide_with_metadata(&rediskv::KeyLayout::default(), data, meta.version, 0, 0);
    let encoded = meta.to_vec();
    assert_eq!(encoded.len(), meta.encoded_len());
    assert_eq!(Metadata::decode(&encoded), Ok(meta.clone()));
    let wide = data[0] & 0x80 != 0;
    if wide {
        let mut expected = data.to_vec();
        if meta.blind_write {
            expected[17..25].fill(0);
        }
        assert_eq!(encoded, expected);
    }
});
