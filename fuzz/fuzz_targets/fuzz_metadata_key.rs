#![no_main]
//! decode_metadata_key on arbitrary bytes under a fuzzed layout: never panics; the parts
//! rebuild the input, and a canonical key re-encodes to the same bytes.

use libfuzzer_sys::fuzz_target;
use rediskv::KeyOwner;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((layout, bytes)) = common::split(data) else { return };
    let Ok(k) = layout.decode_metadata_key(bytes) else { return };
    let mut rebuilt = common::route(&layout, k.namespace, k.slot, k.hash);
    rebuilt.extend_from_slice(k.user_key);
    assert_eq!(rebuilt, bytes);
    let owner = KeyOwner { namespace: k.namespace, slot: k.slot, hash: k.hash, user_key: k.user_key };
    assert_eq!(layout.owner_metadata_key(&owner), bytes);
    if common::canonical(&layout, k.slot, k.hash, k.user_key) {
        let same = layout.clone().with_namespace(k.namespace).expect("namespace fits");
        assert_eq!(same.metadata_key(k.user_key), bytes);
        assert!(same.namespace_range().contains(bytes));
    }
});
