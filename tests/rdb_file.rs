//! The RDB file with a real redis-server 7.0: a `dump.rdb` it SAVEd (every type in every
//! encoding, TTLs, three databases, a function library) reads back, fed in small pieces, to
//! exactly what the server answers (each key's DUMP, PEXPIRETIME, the database's keys,
//! FUNCTION LIST); a file [`RdbFileWriter`] wrote (compressed or not, with or without a
//! checksum) loads in redis-server (`DEBUG RELOAD NOSAVE`, its start-up loader) to the same
//! keys. Corrupt and cut files give an error naming an offset; no bytes make the reader panic.
//!
//! Without `redis-server` the tests that need it are skipped loudly, except under `CI=true`.

#[path = "differential/client.rs"]
#[allow(dead_code)]
mod client;
#[path = "support/rdb_fixtures.rs"]
mod rdb_fixtures;

use std::collections::BTreeMap;
use std::path::PathBuf;

use bytes::Bytes;
use client::{Client, RedisServer};
use proptest::prelude::*;
use rdb_fixtures::normalized;
use rediskv::Error;
use rediskv::Reply;
use rediskv::rdb::{RdbValue, restore};
use rediskv::{RdbEntry, RdbFileOptions, RdbFileReader, RdbFileWriter, RdbHeader, RdbItem, RdbReplication};

const LIBRARY: &str =
    "#!lua name=mylib\nredis.register_function('myfunc', function(keys, args) return 1 end)";

fn call<A: AsRef<[u8]>>(redis: &mut Client, argv: &[A]) -> Reply {
    let reply = redis.call(argv).expect("redis-server answers");
    assert!(
        !reply.is_error(),
        "{:?}: {reply:?}",
        argv.iter().map(|a| String::from_utf8_lossy(a.as_ref())).collect::<Vec<_>>()
    );
    reply
}

fn start() -> Option<(RedisServer, Client, PathBuf)> {
    if !RedisServer::available() {
        client::missing_redis("rdb_file");
        return None;
    }
    let server = RedisServer::start_with(&["--enable-debug-command", "local"]).expect("start redis-server");
    let mut client = server.connect().expect("connect");
    let Reply::Array(dir) = call(&mut client, &["CONFIG", "GET", "dir"]) else { panic!("CONFIG GET dir") };
    let Reply::Bulk(dir) = &dir[1] else { panic!("dir") };
    let dir = PathBuf::from(String::from_utf8_lossy(dir).into_owned());
    Some((server, client, dir))
}

/// Fills db 0 with the fixtures, db 3 and db 15 with a few keys (some with TTLs), and loads
/// a function library.
fn fill(redis: &mut Client) {
    for argv in rdb_fixtures::fixtures() {
        call(redis, &argv);
    }
    call(redis, &["SET", "ttl_string", "v", "PX", "86400000"]);
    call(redis, &["RPUSH", "ttl_list", "a", "b"]);
    call(redis, &["EXPIRE", "ttl_list", "100000"]);
    call(redis, &["SELECT", "3"]);
    call(redis, &["SET", "in_three", "3"]);
    call(redis, &["HSET", "h3", "f", "v"]);
    call(redis, &["PEXPIREAT", "h3", "4102444800000"]);
    call(redis, &["SELECT", "15"]);
    call(redis, &["SADD", "in_fifteen", "x", "y"]);
    call(redis, &["SELECT", "0"]);
    call(redis, &["FUNCTION", "LOAD", LIBRARY]);
}

/// Every key of every database as redis-server answers: value (from its DUMP) and expiry.
fn server_keys(redis: &mut Client) -> Keys {
    let mut all = BTreeMap::new();
    for db in 0..16u64 {
        call(redis, &["SELECT", &db.to_string()]);
        let Reply::Array(keys) = call(redis, &["KEYS", "*"]) else { panic!("KEYS") };
        for key in keys {
            let Reply::Bulk(key) = key else { panic!("key") };
            let Reply::Bulk(payload) = call(redis, &[&b"DUMP"[..], &key]) else { panic!("DUMP") };
            let value = restore(&payload).expect("Redis' DUMP restores");
            let Reply::Integer(at) = call(redis, &[&b"PEXPIRETIME"[..], &key]) else { panic!("PEXPIRETIME") };
            all.insert((db, key), (normalized(value), (at >= 0).then_some(at)));
        }
    }
    call(redis, &["SELECT", "0"]);
    all
}

type Keys = BTreeMap<(u64, Bytes), (RdbValue, Option<i64>)>;

/// Asserts `got == want`, naming the keys that differ (the maps are too large to print).
fn assert_same(got: &Keys, want: &Keys, what: &str) {
    let keys: std::collections::BTreeSet<_> = want.keys().chain(got.keys()).collect();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|(db, key)| {
            let short =
                |v: Option<&(RdbValue, Option<i64>)>| format!("{v:?}").chars().take(300).collect::<String>();
            format!(
                "db {db} {key:?}: got {} want {}",
                short(got.get(&(*db, key.clone()))),
                short(want.get(&(*db, key.clone())))
            )
        })
        .collect();
    assert!(differ.is_empty(), "{what}:\n{}", differ.join("\n"));
}

fn file_keys(items: &[RdbItem]) -> Keys {
    items
        .iter()
        .filter_map(|item| match item {
            RdbItem::Entry(e) => Some(((e.db, e.key.clone()), (normalized(e.value.clone()), e.expire_at_ms))),
            _ => None,
        })
        .collect()
}

/// Reads `file` feeding `chunk` bytes at a time.
fn read_in_chunks(file: &[u8], chunk: usize) -> Vec<RdbItem> {
    let mut reader = RdbFileReader::new();
    let mut items = Vec::new();
    for piece in file.chunks(chunk) {
        reader.feed(piece);
        while let Some(item) = reader.next_item().expect("the file reads") {
            items.push(item);
        }
    }
    reader.finish();
    while let Some(item) = reader.next_item().expect("the file reads") {
        items.push(item);
    }
    assert!(reader.is_done());
    items
}

fn functions(items: &[RdbItem]) -> Vec<Bytes> {
    items
        .iter()
        .filter_map(|i| match i {
            RdbItem::Function(code) => Some(code.clone()),
            _ => None,
        })
        .collect()
}

/// Writes `entries` (and the library) as an RDB file.
fn write_file(entries: &[RdbEntry], options: RdbFileOptions) -> Vec<u8> {
    let mut w = RdbFileWriter::new(options);
    let mut out = Vec::new();
    let header = RdbHeader {
        redis_ver: "7.0.15".into(),
        ctime: 1_700_000_000,
        used_mem: 1 << 20,
        replication: Some(RdbReplication { stream_db: 0, id: "a".repeat(40), offset: 12345 }),
    };
    w.header(&mut out, &header);
    w.function(&mut out, LIBRARY.as_bytes());
    let mut dbs: BTreeMap<u64, Vec<&RdbEntry>> = BTreeMap::new();
    for e in entries {
        dbs.entry(e.db).or_default().push(e);
    }
    for (db, keys) in dbs {
        let expires = keys.iter().filter(|e| e.expire_at_ms.is_some()).count() as u64;
        w.select_db(&mut out, db, keys.len() as u64, expires);
        for e in keys {
            w.entry(&mut out, &e.key, &e.value, e.expire_at_ms.map(|t| t as u64));
        }
    }
    w.finish(&mut out);
    out
}

#[test]
fn a_file_redis_saved_reads_as_redis_answers_and_ours_loads_in_redis() {
    let Some((_server, mut redis, dir)) = start() else { return };
    fill(&mut redis);
    call(&mut redis, &["SAVE"]);
    let file = std::fs::read(dir.join("dump.rdb")).expect("dump.rdb");
    let want = server_keys(&mut redis);
    assert!(want.len() > 20, "{}", want.len());

    // Redis → reader, in pieces of several sizes (a piece boundary inside every kind of item).
    let items = read_in_chunks(&file, 7);
    for chunk in [1, 100, 4096, file.len()] {
        assert_eq!(read_in_chunks(&file, chunk), items, "pieces of {chunk} bytes");
    }
    assert_same(&file_keys(&items), &want, "Redis' file read here");
    assert_eq!(functions(&items), vec![Bytes::from(LIBRARY)]);
    assert!(items.contains(&RdbItem::Aux { name: "redis-ver".into(), value: "7.0.15".into() }));
    assert!(items.contains(&RdbItem::SelectDb(15)));
    assert!(items.contains(&RdbItem::ResizeDb { keys: 2, expires: 1 }), "db 3: 2 keys, 1 with a TTL");
    assert_eq!(items.last(), Some(&RdbItem::End { checksum_verified: true }));

    // Writer → Redis, in every combination of the two options.
    let entries: Vec<RdbEntry> = items
        .into_iter()
        .filter_map(|i| match i {
            RdbItem::Entry(e) => Some(e),
            _ => None,
        })
        .collect();
    for (compression, checksum) in [(true, true), (false, false), (true, false), (false, true)] {
        let ours = write_file(&entries, RdbFileOptions { compression, checksum });
        assert_same(
            &file_keys(&RdbFileReader::read_all(&ours).expect("our file reads")),
            &want,
            "our file read here",
        );
        call(&mut redis, &["FUNCTION", "FLUSH"]);
        call(&mut redis, &["FLUSHALL"]);
        std::fs::write(dir.join("dump.rdb"), &ours).expect("write dump.rdb");
        call(&mut redis, &["DEBUG", "RELOAD", "NOSAVE"]);
        let what = format!("our file (compression {compression}, checksum {checksum}) loaded in Redis");
        assert_same(&server_keys(&mut redis), &want, &what);
        let Reply::Array(libs) = call(&mut redis, &["FUNCTION", "LIST", "WITHCODE"]) else { panic!() };
        assert_eq!(libs.len(), 1, "{libs:?}");
        assert!(format!("{libs:?}").contains("register_function('myfunc'"), "{libs:?}");
        if compression {
            assert!(ours.len() < file.len() * 2, "compressed: {} bytes, Redis' {}", ours.len(), file.len());
        }
    }
}

#[test]
fn our_header_and_options_are_as_redis_writes_them() {
    let mut out = Vec::new();
    let mut w = RdbFileWriter::new(RdbFileOptions { compression: false, checksum: false });
    w.header(&mut out, &RdbHeader { redis_ver: "7.0.15".into(), ctime: 5, used_mem: 7, replication: None });
    w.finish(&mut out);
    let mut want = b"REDIS0010".to_vec();
    for (k, v) in [
        ("redis-ver", &b"\x067.0.15"[..]),
        ("redis-bits", b"\xc0\x40"),
        ("ctime", b"\xc0\x05"),
        ("used-mem", b"\xc0\x07"),
        ("aof-base", b"\xc0\x00"),
    ] {
        want.push(0xFA);
        want.push(k.len() as u8);
        want.extend_from_slice(k.as_bytes());
        want.extend_from_slice(v);
    }
    want.push(0xFF);
    want.extend_from_slice(&[0; 8]);
    assert_eq!(out, want);

    // A long repetitive string is LZF-compressed only with compression on, and reads back.
    let long = RdbValue::String(Bytes::from("abcdefgh".repeat(50)));
    let sizes: Vec<usize> = [true, false]
        .map(|compression| {
            let mut w = RdbFileWriter::new(RdbFileOptions { compression, checksum: true });
            let mut out = Vec::new();
            w.header(
                &mut out,
                &RdbHeader { redis_ver: "7.0.15".into(), ctime: 0, used_mem: 0, replication: None },
            );
            w.select_db(&mut out, 0, 1, 0);
            w.entry(&mut out, b"k", &long, Some(99));
            w.finish(&mut out);
            let items = RdbFileReader::read_all(&out).expect("reads");
            let entry = items.iter().find_map(|i| if let RdbItem::Entry(e) = i { Some(e) } else { None });
            assert_eq!(entry.map(|e| (&e.value, e.expire_at_ms)), Some((&long, Some(99))));
            out.len()
        })
        .to_vec();
    assert!(sizes[0] + 300 < sizes[1], "{sizes:?}");
}

/// A small valid file with a key of each type.
fn sample_file() -> Vec<u8> {
    let b = |s: &str| Bytes::from(s.to_string());
    let values = [
        RdbValue::String(b("hello hello hello hello hello")),
        RdbValue::List(vec![b("a"), b("12"), b("c")]),
        RdbValue::Set(vec![b("1"), b("2")]),
        RdbValue::ZSet(vec![(b("m"), 1.5)]),
        RdbValue::Hash(vec![(b("f"), b("v"))]),
    ];
    let entries: Vec<RdbEntry> = values
        .into_iter()
        .enumerate()
        .map(|(i, value)| RdbEntry {
            db: i as u64 % 2,
            key: Bytes::from(format!("key{i}")),
            value,
            expire_at_ms: (i == 1).then_some(1234),
            idle: None,
            freq: None,
        })
        .collect();
    write_file(&entries, RdbFileOptions::default())
}

fn offset_of(e: Error) -> u64 {
    match e {
        Error::RdbFile { offset, .. } => offset,
        other => panic!("not an RdbFile error: {other}"),
    }
}

#[test]
fn cut_and_corrupt_files_name_an_offset() {
    let file = sample_file();
    assert!(RdbFileReader::read_all(&file).is_ok());
    for len in 0..file.len() {
        let e = RdbFileReader::read_all(&file[..len]).expect_err("a cut file is an error");
        assert!(e.to_string().contains("unexpected end of file"), "{len}: {e}");
        assert!(offset_of(e) <= len as u64);
    }
    let mut bad_crc = file.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    let e = RdbFileReader::read_all(&bad_crc).unwrap_err();
    assert!(e.to_string().contains("checksum mismatch"), "{e}");
    assert_eq!(offset_of(e), file.len() as u64);

    let e = RdbFileReader::read_all(b"REDIS0011\xff").unwrap_err();
    assert_eq!(e.to_string(), "RDB format version 0011 is not supported (1 to 10) at byte 9");
    let e = RdbFileReader::read_all(b"RUBIS0009\xff").unwrap_err();
    assert!(e.to_string().starts_with("not an RDB file"), "{e}");
    // A module's auxiliary data names the module (id of "mymodule1", version 0).
    let mut module = b"REDIS0009\xf7\x81".to_vec();
    let id = "mymodule1".bytes().fold(0u64, |id, c| {
        let set = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        id << 6 | set.iter().position(|&x| x == c).unwrap() as u64
    }) << 10;
    module.extend_from_slice(&id.to_be_bytes());
    let e = RdbFileReader::read_all(&module).unwrap_err();
    assert_eq!(e.to_string(), "module auxiliary data of module 'mymodule1' cannot be loaded at byte 19");
    let e = RdbFileReader::read_all(b"REDIS0009\xf0").unwrap_err();
    assert_eq!(e.to_string(), "unknown opcode or object type 240 at byte 10");
}

#[test]
fn old_opcodes_load() {
    // Version 3: EXPIRETIME in seconds, IDLE, FREQ, SLOT_INFO, the 7.0 release candidates'
    // FUNCTION record, an empty list (skipped), no checksum before version 5.
    let mut file = b"REDIS0003".to_vec();
    file.extend_from_slice(b"\xfe\x02\xf4\x01\x02\x03\xfd");
    file.extend_from_slice(&100u32.to_le_bytes());
    file.extend_from_slice(b"\xf8\x05\xf9\x07\x00\x01k\x01v");
    file.extend_from_slice(b"\x01\x05empty\x00");
    file.extend_from_slice(b"\xf6\x03lib\x03lua\x01\x04desc\x04code\xff");
    let items = RdbFileReader::read_all(&file).expect("reads");
    let entry = RdbEntry {
        db: 2,
        key: "k".into(),
        value: RdbValue::String("v".into()),
        expire_at_ms: Some(100_000),
        idle: Some(5),
        freq: Some(7),
    };
    assert_eq!(
        items,
        vec![
            RdbItem::SelectDb(2),
            RdbItem::Entry(entry),
            RdbItem::Function("#!lua name=lib\ncode".into()),
            RdbItem::End { checksum_verified: false },
        ]
    );
}

proptest! {
    /// Random bytes after a header, fed in random pieces: no panic, and the answer (items
    /// or error) is the one reading them whole gives.
    #[test]
    fn no_bytes_make_the_reader_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), chunk in 1usize..50) {
        let mut file = b"REDIS0010".to_vec();
        file.extend_from_slice(&bytes);
        let in_pieces = || -> rediskv::Result<Vec<RdbItem>> {
            let mut reader = RdbFileReader::new();
            let mut items = Vec::new();
            for piece in file.chunks(chunk) {
                reader.feed(piece);
                while let Some(item) = reader.next_item()? {
                    items.push(item);
                }
            }
            reader.finish();
            while let Some(item) = reader.next_item()? {
                items.push(item);
            }
            Ok(items)
        };
        prop_assert_eq!(in_pieces(), RdbFileReader::read_all(&file));
    }

    #[test]
    fn flipped_bytes_never_panic(at in 0usize..1000, xor in 1u8..=255) {
        let mut file = sample_file();
        let at = at % file.len();
        file[at] ^= xor;
        if let Err(e) = RdbFileReader::read_all(&file) {
            prop_assert!(offset_of(e) <= file.len() as u64);
        }
    }
}
