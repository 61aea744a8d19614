#![no_main]
//! decode_subkey on arbitrary bytes under a fuzzed layout: never panics; the parts rebuild
//! the input, a canonical subkey re-encodes to the same bytes and lies in its key's range.

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((layout, bytes)) = common::split(data) else { return };
    let Ok(s) = layout.decode_subkey(bytes) else { return };
    let version = s.version.short().expect("a 64-bit layout decodes 64-bit versions");
    let mut rebuilt = common::route(&layout, s.namespace, s.slot, s.hash);
    rebuilt.extend_from_slice(&(s.user_key.len() as u32).to_be_bytes());
    rebuilt.extend_from_slice(s.user_key);
    rebuilt.extend_from_slice(&version.to_be_bytes());
    rebuilt.extend_from_slice(s.sub);
    assert_eq!(rebuilt, bytes);
    if common::canonical(&layout, s.slot, s.hash, s.user_key) {
        let same = layout.clone().with_namespace(s.namespace).expect("namespace fits");
        assert_eq!(same.subkey(s.user_key, s.version, s.sub).expect("key fits"), bytes);
        let range = same.subkey_range(s.user_key, s.version).expect("key fits");
        assert!(range.contains(bytes));
        if let Some(next) = version.checked_add(1) {
            assert!(!same.subkey_range(s.user_key, next.into()).expect("key fits").contains(bytes));
        }
    }
});
