//! HyperLogLog commands: the stored value is a Redis HLL string (header, sparse then dense
//! registers, the cardinality cache PFCOUNT writes back), and corrupt or foreign strings get
//! Redis' errors. Exact counts and bytes are compared with redis-server by the differential
//! test (`gen_hll.rs`).

mod common;

use bytes::Bytes;
use common::*;
use rediskv::Reply;

fn get(db: &mut rediskv::Db<'static, rediskv::MemoryBackend>, key: &str) -> Vec<u8> {
    match run(db, &format!("GET {key}")) {
        Reply::Bulk(b) => b.to_vec(),
        other => panic!("{other:?}"),
    }
}

/// Registers covered by a sparse body, and the VAL opcodes in it.
fn sparse_runs(body: &[u8]) -> (usize, usize) {
    let (mut regs, mut vals, mut p) = (0, 0, 0);
    while p < body.len() {
        let b = body[p];
        if b & 0x80 != 0 {
            regs += usize::from(b & 3) + 1;
            vals += 1;
            p += 1;
        } else if b & 0x40 != 0 {
            regs += (usize::from(b & 0x3F) << 8 | usize::from(body[p + 1])) + 1;
            p += 2;
        } else {
            regs += usize::from(b & 0x3F) + 1;
            p += 1;
        }
    }
    (regs, vals)
}

#[test]
fn pfadd_stores_a_sparse_redis_hll_and_pfcount_caches() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "PFADD h"), int(1));
    // An empty HLL: header, cache marked stale (creating counts as an update, as in Redis),
    // then one XZERO covering 16384 registers.
    assert_eq!(get(&mut db, "h"), b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xff");
    assert_eq!(run(&mut db, "PFADD h"), int(0));
    assert_eq!(run(&mut db, "PFADD h a b c"), int(1));
    assert_eq!(run(&mut db, "PFADD h a"), int(0));
    let v = get(&mut db, "h");
    assert_eq!((&v[..5], v[15] & 0x80), (&b"HYLL\x01"[..], 0x80), "stale cache after an update");
    assert_eq!(sparse_runs(&v[16..]), (16384, 3));
    assert_eq!(run(&mut db, "PFCOUNT h"), int(3));
    let v = get(&mut db, "h");
    assert_eq!(&v[8..16], &[3, 0, 0, 0, 0, 0, 0, 0], "PFCOUNT writes the cache back");
}

#[test]
fn many_elements_turn_dense_and_merge() {
    let (mut db, _) = db();
    let elems: Vec<String> = (0..5000).map(|i| format!("x{i}")).collect();
    let mut argv = vec!["PFADD".to_string(), "d".to_string()];
    argv.extend(elems.iter().cloned());
    assert_eq!(db.run(&argv), int(1));
    assert_eq!(get(&mut db, "d").len(), 16 + 12288);
    let Reply::Integer(n) = run(&mut db, "PFCOUNT d") else { panic!() };
    assert!((4800..=5200).contains(&n), "{n}");
    run(&mut db, "PFADD s x1 x2 y1");
    assert_eq!(run(&mut db, "PFMERGE m s d"), Reply::status("OK"));
    assert_eq!(get(&mut db, "m").len(), 16 + 12288, "a dense source makes a dense target");
    let Reply::Integer(merged) = run(&mut db, "PFCOUNT m") else { panic!() };
    assert_eq!(run(&mut db, "PFCOUNT s d"), int(merged));
    assert_eq!(run(&mut db, "PFCOUNT s nothing"), run(&mut db, "PFCOUNT s"));
}

#[test]
fn foreign_and_corrupt_values() {
    let (mut db, _) = db();
    let not_hll = err("WRONGTYPE Key is not a valid HyperLogLog string value.");
    run(&mut db, "SET s hello");
    assert_eq!(run(&mut db, "PFADD s a"), not_hll);
    assert_eq!(run(&mut db, "PFCOUNT s"), not_hll);
    assert_eq!(run(&mut db, "PFMERGE s"), not_hll);
    run(&mut db, "LPUSH l a");
    assert_eq!(run(&mut db, "PFCOUNT l"), wrongtype());
    // A dense HLL of the wrong length is not an HLL.
    let short =
        Bytes::from([&b"HYLL\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80"[..], &[0; 10]].concat());
    db.run(&[&b"SET"[..], b"x", &short]);
    assert_eq!(run(&mut db, "PFCOUNT x"), not_hll);
    // Sparse runs covering 16369 registers: corrupt.
    db.run(&[&b"SET"[..], b"c", b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xf0"]);
    assert_eq!(run(&mut db, "PFCOUNT c"), err("INVALIDOBJ Corrupted HLL object detected"));
    assert_eq!(run(&mut db, "PFCOUNT s c"), not_hll);
    assert_eq!(run(&mut db, "PFCOUNT c s"), err("INVALIDOBJ Corrupted HLL object detected"));
    assert_eq!(run(&mut db, "PFMERGE d c"), err("INVALIDOBJ Corrupted HLL object detected"));
    assert_eq!(run(&mut db, "EXISTS d"), int(0));
    // A fresh cache is trusted, as Redis trusts it.
    db.run(&[&b"SET"[..], b"f", b"HYLL\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x7f\xff"]);
    assert_eq!(run(&mut db, "PFCOUNT f"), int(7));
}

/// A sparse HLL whose last opcode is an XZERO cut after its first byte: Redis reads the
/// string's terminating zero as the second byte, splits the run, and keeps the new opcodes
/// but the last byte (it resizes by the size difference against a 2-byte opcode). The
/// expected bytes are redis-server 7.0.15's after the same SET and PFADD.
#[test]
fn pfadd_splits_an_xzero_cut_short_as_redis_does() {
    let (mut db, _) = db();
    let cut = b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f";
    assert_eq!(db.run(&[&b"SET"[..], b"t", cut]), Reply::OK);
    assert_eq!(run(&mut db, "PFADD t a"), int(1));
    assert_eq!(get(&mut db, "t"), b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x71\xa6\x84\x4d");
}

/// A HyperLogLog is a `raw` string in Redis whatever its length (PFADD and PFMERGE create it
/// so); a short string with the same first bytes, SET by a client, stays `embstr`.
#[test]
fn object_encoding_of_a_hll_is_raw() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "PFMERGE k0"), Reply::OK);
    assert_eq!(run(&mut db, "OBJECT ENCODING k0"), Reply::bulk(b"raw"));
    assert_eq!(run(&mut db, "PFADD h a"), int(1));
    assert_eq!(run(&mut db, "OBJECT ENCODING h"), Reply::bulk(b"raw"));
    assert_eq!(run(&mut db, "SET s HYLLx"), Reply::OK);
    assert_eq!(run(&mut db, "OBJECT ENCODING s"), Reply::bulk(b"embstr"));
}

/// PFDEBUG TODENSE rewrites the value in place without signalling the key, as Redis does:
/// a WATCH on it holds (a PFADD that changes it does not).
#[test]
fn pfdebug_todense_leaves_a_watch_standing() {
    let engine = rediskv::Engine::new(rediskv::MemoryBackend::new());
    let mut s = engine.session();
    assert_eq!(engine.run(&mut s, &["PFADD", "h", "a", "b"]), Reply::Integer(1));
    let exec = |s: &mut rediskv::Session, between: &[&str]| {
        assert_eq!(engine.run(s, &["WATCH", "h"]), Reply::OK);
        engine.run(s, between);
        assert_eq!(engine.run(s, &["MULTI"]), Reply::OK);
        engine.run(s, &["PING"]);
        engine.run(s, &["EXEC"])
    };
    assert_eq!(exec(&mut s, &["PFDEBUG", "TODENSE", "h"]), Reply::Array(vec![Reply::status("PONG")]));
    assert_eq!(engine.run(&mut s, &["PFDEBUG", "ENCODING", "h"]), Reply::status("dense"));
    assert_eq!(exec(&mut s, &["PFADD", "h", "c"]), Reply::NilArray);
}
