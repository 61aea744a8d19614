//! The contract of [`KvBackend`] as runnable checks.
//!
//! Each function takes a fresh, empty backend and panics with a message when the backend
//! breaks the contract. Run them all from your own tests with the macro:
//!
//! ```
//! rediskv::kv_backend_conformance!(rediskv::MemoryBackend::new());
//! ```
//! which expands to one `#[test]` per check, or call [`run_all`] from one test.

use bytes::Bytes;

use super::{ColumnFamily, Direction, KvBackend, WriteBatch};
use crate::codec::KeyRange;

fn range(start: &[u8], end: Option<&[u8]>) -> KeyRange {
    KeyRange { start: start.to_vec(), end: end.map(<[u8]>::to_vec) }
}

fn keys<B: KvBackend + ?Sized>(b: &B, cf: ColumnFamily, r: &KeyRange, dir: Direction) -> Vec<Vec<u8>> {
    b.scan(cf, r, dir).expect("scan starts").map(|item| item.expect("scan item").0.to_vec()).collect()
}

fn put_all<B: KvBackend>(b: &B, cf: ColumnFamily, ks: &[&[u8]]) {
    let mut batch = WriteBatch::new();
    for k in ks {
        batch.put(cf, k.to_vec(), k.to_vec());
    }
    b.write(batch).expect("write");
}

/// What [`KvBackend::get_with`] lends for `key`, copied; `None` when it lends nothing.
fn lent<B: KvBackend>(b: &B, cf: ColumnFamily, key: &[u8]) -> Option<Vec<u8>> {
    let mut lent = None;
    let mut calls = 0;
    b.get_with(cf, key, &mut |v| {
        calls += 1;
        lent = v.map(<[u8]>::to_vec);
    })
    .unwrap();
    assert_eq!(calls, 1, "get_with lends exactly once");
    lent
}

/// Point reads (`get`, and `get_with` alike) see puts, deletes and overwrites; a missing
/// key reads as `None`.
pub fn get_put_delete<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Metadata;
    assert_eq!(b.get(cf, b"a").unwrap(), None, "empty store has no key");
    assert_eq!(lent(&b, cf, b"a"), None, "empty store lends nothing");
    let mut batch = WriteBatch::new();
    batch.put(cf, &b"a"[..], &b"1"[..]);
    b.write(batch).unwrap();
    assert_eq!(b.get(cf, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(lent(&b, cf, b"a").as_deref(), Some(&b"1"[..]));
    let mut batch = WriteBatch::new();
    batch.put(cf, &b"a"[..], &b"2"[..]);
    // A value past any inline limit reads whole too.
    batch.put(cf, &b"big"[..], vec![7u8; 10_000]);
    b.write(batch).unwrap();
    assert_eq!(b.get(cf, b"a").unwrap().as_deref(), Some(&b"2"[..]), "put overwrites");
    assert_eq!(lent(&b, cf, b"a").as_deref(), Some(&b"2"[..]), "get_with sees the overwrite");
    assert_eq!(lent(&b, cf, b"big"), Some(vec![7u8; 10_000]));
    assert_eq!(b.get(cf, b"big").unwrap().as_deref(), Some(&[7u8; 10_000][..]));
    let mut batch = WriteBatch::new();
    batch.delete(cf, &b"a"[..]);
    b.write(batch).unwrap();
    assert_eq!(b.get(cf, b"a").unwrap(), None, "delete removes");
    assert_eq!(lent(&b, cf, b"a"), None, "get_with sees the delete");
}

/// Keys of many lengths, each a prefix of the longer ones (short keys, keys around the
/// lengths where a store may change how it builds or holds them, and long ones) are put,
/// read, scanned in order and deleted like any other.
pub fn keys_of_many_lengths<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Subkey;
    let lengths = [1, 2, 20, 21, 63, 64, 126, 127, 128, 129, 255, 256, 1000, 4096];
    let key = |len: usize| (0..len).map(|i| b'a' + (i % 26) as u8).collect::<Vec<u8>>();
    let mut batch = WriteBatch::new();
    for len in lengths {
        batch.put(cf, key(len), len.to_string().into_bytes());
    }
    b.write(batch).unwrap();
    for len in lengths {
        let want = len.to_string().into_bytes();
        assert_eq!(b.get(cf, &key(len)).unwrap().as_deref(), Some(&want[..]), "get of a {len}-byte key");
        assert_eq!(lent(&b, cf, &key(len)), Some(want), "get_with of a {len}-byte key");
    }
    assert_eq!(b.get(cf, &key(3)).unwrap(), None, "a prefix of stored keys is not one of them");
    let all: Vec<Vec<u8>> = lengths.iter().map(|&len| key(len)).collect();
    assert_eq!(keys(&b, cf, &range(b"", None), Direction::Forward), all, "shorter keys sort first");
    let deleted = [1, 127, 128, 4096];
    let mut batch = WriteBatch::new();
    for len in deleted {
        batch.delete(cf, key(len));
    }
    b.write(batch).unwrap();
    for len in lengths {
        let gone = deleted.contains(&len);
        assert_eq!(b.get(cf, &key(len)).unwrap().is_none(), gone, "after deletes, the {len}-byte key");
    }
}

/// An empty value is stored and read back as present and empty, not as missing.
pub fn empty_values<B: KvBackend>(b: B) {
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Subkey, &b"k"[..], Bytes::new());
    b.write(batch).unwrap();
    assert_eq!(b.get(ColumnFamily::Subkey, b"k").unwrap(), Some(Bytes::new()));
    let all = keys(&b, ColumnFamily::Subkey, &range(b"", None), Direction::Forward);
    assert_eq!(all, vec![b"k".to_vec()], "an empty value is still scanned");
}

/// Column families are separate key spaces.
pub fn column_families_are_separate<B: KvBackend>(b: B) {
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, &b"k"[..], &b"m"[..]);
    batch.put(ColumnFamily::Subkey, &b"k"[..], &b"s"[..]);
    b.write(batch).unwrap();
    assert_eq!(b.get(ColumnFamily::Metadata, b"k").unwrap().as_deref(), Some(&b"m"[..]));
    assert_eq!(b.get(ColumnFamily::Subkey, b"k").unwrap().as_deref(), Some(&b"s"[..]));
    assert_eq!(b.get(ColumnFamily::Score, b"k").unwrap(), None);
    let mut batch = WriteBatch::new();
    batch.delete(ColumnFamily::Metadata, &b"k"[..]);
    b.write(batch).unwrap();
    assert_eq!(
        b.get(ColumnFamily::Subkey, b"k").unwrap().as_deref(),
        Some(&b"s"[..]),
        "delete stays in its CF"
    );
}

/// Scans order keys as unsigned bytes, including 0x00 and 0xFF and keys that are prefixes
/// of each other; the end bound is exclusive.
pub fn scan_order_and_bounds<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Subkey;
    let all: [&[u8]; 8] = [b"", b"\x00", b"\x00\x00", b"\x00\xff", b"a", b"ab", b"\x7f", b"\xff\xff"];
    put_all(&b, cf, &all);
    let mut sorted: Vec<Vec<u8>> = all.iter().map(|k| k.to_vec()).collect();
    sorted.sort();
    assert_eq!(keys(&b, cf, &range(b"", None), Direction::Forward), sorted, "unsigned byte order");
    let mut rev = sorted.clone();
    rev.reverse();
    assert_eq!(keys(&b, cf, &range(b"", None), Direction::Reverse), rev, "reverse order");
    assert_eq!(
        keys(&b, cf, &range(b"\x00", Some(b"\x7f")), Direction::Forward),
        vec![b"\x00".to_vec(), b"\x00\x00".to_vec(), b"\x00\xff".to_vec(), b"a".to_vec(), b"ab".to_vec()],
        "start inclusive, end exclusive"
    );
    assert_eq!(
        keys(&b, cf, &range(b"\x00", Some(b"\x7f")), Direction::Reverse),
        vec![b"ab".to_vec(), b"a".to_vec(), b"\x00\xff".to_vec(), b"\x00\x00".to_vec(), b"\x00".to_vec()],
        "reverse starts just before the end"
    );
    assert_eq!(
        keys(&b, cf, &range(b"a", Some(b"ab")), Direction::Forward),
        vec![b"a".to_vec()],
        "a key equal to the end is excluded"
    );
    assert!(keys(&b, cf, &range(b"b", Some(b"b")), Direction::Forward).is_empty(), "empty range");
    assert!(keys(&b, cf, &range(b"b", Some(b"a")), Direction::Reverse).is_empty(), "inverted range");
}

/// A scan can stop early and values come with their keys.
pub fn scan_is_lazy_and_pairs_values<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Score;
    let mut batch = WriteBatch::new();
    for i in 0u32..1000 {
        batch.put(cf, i.to_be_bytes().to_vec(), (i * 2).to_be_bytes().to_vec());
    }
    b.write(batch).unwrap();
    let first: Vec<_> =
        b.scan(cf, &range(b"", None), Direction::Forward).unwrap().take(3).map(Result::unwrap).collect();
    assert_eq!(first.len(), 3);
    for (i, (k, v)) in first.iter().enumerate() {
        assert_eq!(k.as_ref(), (i as u32).to_be_bytes());
        assert_eq!(v.as_ref(), (i as u32 * 2).to_be_bytes());
    }
    let last = b.scan(cf, &range(b"", None), Direction::Reverse).unwrap().next().unwrap().unwrap();
    assert_eq!(last.0.as_ref(), 999u32.to_be_bytes());
}

/// A batch applies in order (the later operation on a key wins) and deleting a missing key
/// is not an error.
pub fn batch_order_and_missing_delete<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Metadata;
    let mut batch = WriteBatch::new();
    batch.delete(cf, &b"never"[..]);
    batch.put(cf, &b"k"[..], &b"1"[..]);
    batch.put(cf, &b"k"[..], &b"2"[..]);
    batch.put(cf, &b"gone"[..], &b"x"[..]);
    batch.delete(cf, &b"gone"[..]);
    b.write(batch).expect("deleting a missing key is not an error");
    assert_eq!(b.get(cf, b"k").unwrap().as_deref(), Some(&b"2"[..]), "later put wins");
    assert_eq!(b.get(cf, b"gone").unwrap(), None, "later delete wins");
    assert_eq!(b.get(cf, b"never").unwrap(), None);
}

/// A batch across column families is visible whole after `write` returns, and an empty
/// batch changes nothing.
pub fn batch_atomic_across_cfs<B: KvBackend>(b: B) {
    let mut batch = WriteBatch::new();
    for cf in ColumnFamily::ALL {
        batch.put(cf, &b"x"[..], &b"v"[..]);
    }
    b.write(batch).unwrap();
    for cf in ColumnFamily::ALL {
        assert_eq!(b.get(cf, b"x").unwrap().as_deref(), Some(&b"v"[..]));
    }
    b.write(WriteBatch::new()).unwrap();
    for cf in ColumnFamily::ALL {
        assert_eq!(keys(&b, cf, &range(b"", None), Direction::Forward), vec![b"x".to_vec()]);
    }
}

/// `multi_get` answers one entry per key, in order, `None` for missing ones.
pub fn multi_get_matches_get<B: KvBackend>(b: B) {
    put_all(&b, ColumnFamily::Subkey, &[b"a", b"c"]);
    let got = b.multi_get(ColumnFamily::Subkey, &[b"a", b"b", b"c", b"a"]).unwrap();
    assert_eq!(
        got,
        vec![
            Some(Bytes::from_static(b"a")),
            None,
            Some(Bytes::from_static(b"c")),
            Some(Bytes::from_static(b"a"))
        ]
    );
}

/// `get_ahead` answers as `get` along walks in both directions: with each step's own
/// delete, overwrites and deletes of keys in the span ahead, a put beside it, keys missing
/// in between, and a key asked twice.
pub fn get_ahead_matches_get<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Subkey;
    let key = |i: u32| [&b"w"[..], &i.to_be_bytes()].concat();
    let mut batch = WriteBatch::new();
    for i in (0..400).filter(|i| i % 7 != 3) {
        batch.put(cf, key(i), i.to_be_bytes().to_vec());
    }
    b.write(batch).unwrap();
    let step = |i: u32, bound: u32, direction: Direction, batch: &mut WriteBatch| {
        let got = b.get_ahead(cf, &key(i), &key(bound), direction).unwrap();
        assert_eq!(got, b.get(cf, &key(i)).unwrap(), "get_ahead of key {i} walking {direction:?}");
        batch.delete(cf, key(i));
    };
    for i in (200..400).rev() {
        let mut batch = WriteBatch::new();
        step(i, 0, Direction::Reverse, &mut batch);
        match i % 50 {
            0 => batch.put(cf, key(i - 10), &b"overwritten"[..]),
            17 => batch.delete(cf, key(i - 3)),
            29 => batch.put(cf, key(i + 1), &b"behind"[..]),
            33 => batch = WriteBatch::new(),
            _ => {}
        }
        b.write(batch).unwrap();
    }
    for i in 0..200 {
        let mut batch = WriteBatch::new();
        step(i, 200, Direction::Forward, &mut batch);
        if i % 40 == 5 {
            batch.put(cf, key(i + 20), &b"overwritten"[..]);
        }
        b.write(batch).unwrap();
    }
}

/// A snapshot, when the backend takes one, keeps answering as the store was when it was
/// taken — point reads and scans of every column family — while the store is overwritten,
/// deleted from and added to, and the store itself sees those writes.
pub fn snapshot_is_a_point_in_time<B: KvBackend>(b: B) {
    let cf = ColumnFamily::Subkey;
    put_all(&b, cf, &[b"a", b"b", b"c"]);
    let Some(snap) = b.snapshot().unwrap() else { return };
    let mut batch = WriteBatch::new();
    batch.put(cf, &b"a"[..], &b"new"[..]);
    batch.delete(cf, &b"b"[..]);
    batch.put(cf, &b"d"[..], &b"d"[..]);
    batch.put(ColumnFamily::Metadata, &b"m"[..], &b"m"[..]);
    b.write(batch).unwrap();
    assert_eq!(snap.get(cf, b"a").unwrap().as_deref(), Some(&b"a"[..]));
    assert_eq!(snap.get(cf, b"b").unwrap().as_deref(), Some(&b"b"[..]));
    assert_eq!(snap.get(cf, b"d").unwrap(), None);
    assert_eq!(snap.get(ColumnFamily::Metadata, b"m").unwrap(), None);
    let all = range(b"", None);
    assert_eq!(keys(&*snap, cf, &all, Direction::Forward), [&b"a"[..], b"b", b"c"].map(<[u8]>::to_vec));
    assert_eq!(keys(&*snap, cf, &all, Direction::Reverse), [&b"c"[..], b"b", b"a"].map(<[u8]>::to_vec));
    assert_eq!(keys(&b, cf, &all, Direction::Forward), [&b"a"[..], b"c", b"d"].map(<[u8]>::to_vec));
    assert_eq!(b.get(cf, b"a").unwrap().as_deref(), Some(&b"new"[..]));
}

/// Every check, each on a fresh backend from `make`.
pub fn run_all<B: KvBackend>(mut make: impl FnMut() -> B) {
    get_put_delete(make());
    keys_of_many_lengths(make());
    empty_values(make());
    column_families_are_separate(make());
    scan_order_and_bounds(make());
    scan_is_lazy_and_pairs_values(make());
    batch_order_and_missing_delete(make());
    batch_atomic_across_cfs(make());
    multi_get_matches_get(make());
    get_ahead_matches_get(make());
    snapshot_is_a_point_in_time(make());
}

/// Expands to one `#[test]` per conformance check, each on a fresh backend made by `$make`.
#[macro_export]
macro_rules! kv_backend_conformance {
    ($make:expr) => {
        $crate::kv_backend_conformance!(@tests $make;
            get_put_delete, keys_of_many_lengths, empty_values, column_families_are_separate,
            scan_order_and_bounds,
            scan_is_lazy_and_pairs_values, batch_order_and_missing_delete, batch_atomic_across_cfs,
            multi_get_matches_get, get_ahead_matches_get, snapshot_is_a_point_in_time);
    };
    (@tests $make:expr; $($check:ident),*) => {
        $(
            #[test]
            fn $check() {
                $crate::conformance::$check($make);
            }
        )*
    };
}
