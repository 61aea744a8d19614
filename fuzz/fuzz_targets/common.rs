//! Shared by the key targets: the first two input bytes choose the layout.
#![allow(dead_code)] // each target uses part of it

use md5::{Digest, Md5};
use rediskv::{KeyLayout, key_slot};

/// A layout chosen by `data[0]` (bit 0: cluster slots, bits 1..: md5 length mod 17) and
/// `data[1]` (fixed prefix length mod 7, a prefix of `00 00 00 07 00 03`), and the rest.
pub fn split(data: &[u8]) -> Option<(KeyLayout, &[u8])> {
    let (&[a, b], rest) = data.split_first_chunk::<2>()?;
    let prefix = &[0, 0, 0, 7, 0, 3][..usize::from(b % 7)];
    let layout = KeyLayout::default()
        .with_cluster_slots(a & 1 == 1)
        .with_fixed_prefix(prefix)
        .with_hash_prefix(usize::from(a >> 1) % 17)
        .expect("md5 length <= 16");
    Some((layout, rest))
}

/// Whether the decoded slot and md5 are what the encoder would write for `user_key`.
pub fn canonical(layout: &KeyLayout, slot: Option<u16>, hash: &[u8], user_key: &[u8]) -> bool {
    let slot_ok = slot.is_none_or(|s| s == key_slot(user_key));
    slot_ok && hash == &Md5::digest(user_key)[..layout.hash_prefix_len()]
}

/// `[fixed prefix][ns_len][ns][slot]?[hash]`, rebuilt by hand.
pub fn route(layout: &KeyLayout, namespace: &[u8], slot: Option<u16>, hash: &[u8]) -> Vec<u8> {
    let mut out = layout.fixed_prefix().to_vec();
    out.push(u8::try_from(namespace.len()).expect("decoded namespace fits a u8"));
    out.extend_from_slice(namespace);
    if let Some(slot) = slot {
        out.extend_from_slice(&slot.to_be_bytes());
    }
    out.extend_from_slice(hash);
    out
}
