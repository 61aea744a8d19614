//! `import` and `export` on real fjall stores: an RDB file of every type (TTLs, three
//! databases, a function library) imported into a store of each Kvrocks layout exports back to the
//! same keys, values, expiries and libraries; a cut file, or a key the layout cannot store,
//! imports nothing (a cut file's error names its offset); the binary prints the count of keys by type.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use rdb_fixtures::normalized;
use rediskv::rdb::{RdbGroup, RdbStream, RdbValue};
use rediskv::{KeyLayout, RdbFileOptions, RdbFileReader, RdbFileWriter, RdbHeader, RdbItem, StreamId};
use rediskv_engine::testkit::TempDir;

// The workspace's shared test helpers (this crate is not published alone).
#[path = "../../tests/support/rdb_fixtures.rs"]
#[allow(dead_code)]
mod rdb_fixtures;

const LIBRARY: &str = "#!lua name=lib\nredis.register_function('f', function() return 1 end)";

fn b(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

/// Keys of every type, in databases 0, 3 and 15, some with a TTL far ahead, one expired.
fn entries() -> Vec<(u64, Bytes, RdbValue, Option<u64>)> {
    let big_hash: Vec<(Bytes, Bytes)> =
        (0..300).map(|i| (b(&format!("f{i}")), b(&format!("v{i}")))).collect();
    let stream = RdbStream {
        entries: vec![
            (StreamId { ms: 1, seq: 0 }, vec![b("a"), b("1")]),
            (StreamId { ms: 2, seq: 0 }, vec![b("a"), b("2")]),
        ],
        last_id: StreamId { ms: 2, seq: 0 },
        first_id: StreamId { ms: 1, seq: 0 },
        max_deleted_id: StreamId::MIN,
        entries_added: 2,
        groups: vec![RdbGroup {
            name: b("g"),
            last_id: StreamId { ms: 1, seq: 0 },
            entries_read: 1,
            pending: vec![(StreamId { ms: 1, seq: 0 }, 1_700_000_000_000, 1, b("alice"))],
            consumers: vec![(b("alice"), 1_700_000_000_000)],
        }],
    };
    vec![
        (0, b("s"), RdbValue::String(b(&"long value ".repeat(10))), None),
        (0, b("n"), RdbValue::String(b("12345")), Some(4_102_444_800_000)),
        (0, b("l"), RdbValue::List(vec![b("a"), b("1"), b("b")]), None),
        (0, b("h"), RdbValue::Hash(big_hash), None),
        (0, b("z"), RdbValue::ZSet(vec![(b("m"), 1.5), (b("n"), -2.0)]), None),
        (0, b("gone"), RdbValue::String(b("expired")), Some(1000)),
        (3, b("set"), RdbValue::Set(vec![b("1"), b("2"), b("x")]), Some(4_102_444_800_000)),
        (3, b("st"), RdbValue::Stream(Box::new(stream)), None),
        (15, b("last"), RdbValue::String(b("v")), None),
    ]
}

fn rdb_file() -> Vec<u8> {
    let mut w = RdbFileWriter::new(RdbFileOptions::default());
    let mut out = Vec::new();
    w.header(&mut out, &RdbHeader { redis_ver: "7.0.15".into(), ctime: 0, used_mem: 0, replication: None });
    w.function(&mut out, LIBRARY.as_bytes());
    let all = entries();
    for db in [0, 3, 15] {
        let keys: Vec<_> = all.iter().filter(|e| e.0 == db).collect();
        w.select_db(&mut out, db, keys.len() as u64, keys.iter().filter(|e| e.3.is_some()).count() as u64);
        for (_, key, value, expire) in keys {
            w.entry(&mut out, key, value, *expire);
        }
    }
    w.finish(&mut out);
    out
}

type Keys = BTreeMap<(u64, Bytes), (RdbValue, Option<i64>)>;

fn keys_and_functions(file: &[u8]) -> (Keys, Vec<Bytes>) {
    let (mut keys, mut functions) = (BTreeMap::new(), Vec::new());
    for item in RdbFileReader::read_all(file).expect("a valid file") {
        match item {
            RdbItem::Entry(e) => {
                keys.insert((e.db, e.key), (normalized(e.value), e.expire_at_ms));
            }
            RdbItem::Function(code) => functions.push(code),
            _ => {}
        }
    }
    (keys, functions)
}

fn export(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    rediskv_inspect::rdb::export("fjall", dir, &mut out, RdbFileOptions::default(), &mut |_, _| {})
        .expect("export");
    out
}

#[test]
fn an_imported_file_exports_back_to_the_same_keys_in_every_layout() {
    let file = rdb_file();
    let (mut want, want_functions) = keys_and_functions(&file);
    want.remove(&(0, b("gone")));
    for layout in [KeyLayout::default(), KeyLayout::new(b"ns").unwrap().with_cluster_slots(true)] {
        let tmp = TempDir::new("inspect-import");
        let dir = tmp.path().join("store");
        let counts = rediskv_inspect::rdb::import(&mut &file[..], "fjall", &dir, &layout, &mut |_| {})
            .expect("import");
        assert_eq!((counts.keys, counts.skipped, counts.functions), (8, 1, 1), "{:?}", layout.kind());
        assert_eq!(counts.by_type.get("string"), Some(&3));
        let (got, functions) = keys_and_functions(&export(&dir));
        assert_eq!(got, want, "{:?}", layout.kind());
        assert_eq!(functions, want_functions);
    }
}

#[test]
fn a_key_the_layout_cannot_store_imports_nothing() {
    let tmp = TempDir::new("inspect-neokv");
    let dir = tmp.path().join("store");
    let e = rediskv_inspect::rdb::import(
        &mut &rdb_file()[..],
        "fjall",
        &dir,
        &KeyLayout::neokv(1, 1),
        &mut |_| {},
    )
    .expect_err("NeoKV has no streams");
    assert!(e.contains("the neokv layout cannot store a stream key"), "{e}");
    assert!(!dir.exists());
}

#[test]
fn a_cut_file_imports_nothing_and_names_its_offset() {
    let file = rdb_file();
    let cut = &file[..file.len() - 30];
    let tmp = TempDir::new("inspect-cut");
    let missing = tmp.path().join("new");
    let e =
        rediskv_inspect::rdb::import(&mut &cut[..], "fjall", &missing, &KeyLayout::default(), &mut |_| {})
            .expect_err("a cut file");
    assert!(e.contains("unexpected end of file at byte"), "{e}");
    assert!(!missing.exists(), "the directory it made is gone");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    rediskv_inspect::rdb::import(&mut &cut[..], "fjall", &empty, &KeyLayout::default(), &mut |_| {})
        .expect_err("a cut file");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "the empty directory stays empty");
    let e =
        rediskv_inspect::rdb::import(&mut &file[..], "fjall", tmp.path(), &KeyLayout::default(), &mut |_| {})
            .expect_err("not empty");
    assert!(e.contains("is not empty"), "{e}");
}

#[test]
fn the_binary_imports_and_exports_and_counts_keys_by_type() {
    let tmp = TempDir::new("inspect-binary");
    let (input, output, dir) =
        (tmp.path().join("in.rdb"), tmp.path().join("out.rdb"), tmp.path().join("store"));
    std::fs::write(&input, rdb_file()).unwrap();
    let run = |args: &[&Path]| {
        let out = Command::new(env!("CARGO_BIN_EXE_rediskv-inspect")).args(args).output().expect("run");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let p = Path::new;
    let said = run(&[p("import"), p("--file"), &input, p("--dir"), &dir]);
    assert!(said.contains("8 keys imported"), "{said}");
    assert!(
        said.contains("(hash 1, list 1, set 1, stream 1, string 3, zset 1), 1 already expired"),
        "{said}"
    );
    let said = run(&[p("export"), p("--dir"), &dir, p("--file"), &output, p("--no-compression")]);
    assert!(said.contains("8 keys exported"), "{said}");
    assert_eq!(keys_and_functions(&std::fs::read(&output).unwrap()).0.len(), 8);
}
