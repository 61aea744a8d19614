#![no_main]
//! decode_score_key on arbitrary bytes under a fuzzed layout: never panics, never yields NaN
//! or -0.0; a canonical score key re-encodes to the same bytes (except the one never-written
//! alias of zero, 7F FF FF FF FF FF FF FF).

use libfuzzer_sys::fuzz_target;
use rediskv::encode_f64;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((layout, bytes)) = common::split(data) else { return };
    let Ok(k) = layout.decode_score_key(bytes) else { return };
    assert!(!k.score.is_nan());
    assert!(k.score != 0.0 || k.score.is_sign_positive());
    let sub = layout.decode_subkey(bytes).expect("a score key is a subkey");
    assert_eq!(sub.owner(), k.owner);
    assert_eq!(sub.version, k.version);
    let (score_bytes, member) = sub.sub.split_at(8);
    assert_eq!(member, k.member);
    let canonical_score = encode_f64(k.score).expect("not NaN");
    if canonical_score != score_bytes {
        assert_eq!(score_bytes, [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        return;
    }
    let o = k.owner;
    if common::canonical(&layout, o.slot, o.hash, o.user_key) {
        let same = layout.clone().with_namespace(o.namespace).expect("namespace fits");
        assert_eq!(same.score_key(o.user_key, k.version, k.score, k.member).expect("valid"), bytes);
        assert!(same.score_range(o.user_key, k.version, Some(k.score)).expect("valid").contains(bytes));
    }
});
