//! The string commands. Every expected reply was checked against redis-server 7.0.15.

mod common;
use common::*;
use rediskv::{ColumnFamily, Metadata, RedisType};
use rediskv::{Db, Reply};
use rediskv::{KvBackend, MemoryBackend, WriteBatch};

const SYNTAX: &str = "ERR syntax error";
const NOT_INT: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";

/// Writes a one-field hash record directly, to test WRONGTYPE replies.
fn put_hash(db: &mut Db<MemoryBackend>, key: &str) {
    let version = db.new_version();
    let mut meta = Metadata::collection(RedisType::Hash, version);
    meta.size = 1;
    let mut batch = WriteBatch::new();
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(key.as_bytes()), meta.to_vec());
    batch.put(
        ColumnFamily::Subkey,
        db.layout().subkey(key.as_bytes(), version, b"f").unwrap(),
        b"v".to_vec(),
    );
    db.backend_mut().write(batch).unwrap();
}

fn ok() -> Reply {
    Reply::OK
}

#[test]
fn get_set_basics() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "GET k"), Reply::Nil);
    assert_eq!(run(&mut db, "SET k v"), ok());
    assert_eq!(run(&mut db, "GET k"), bulk("v"));
    assert_eq!(db.run(&["SET", "empty", ""]), ok());
    assert_eq!(run(&mut db, "GET empty"), bulk(""));
    assert_eq!(run(&mut db, "STRLEN empty"), int(0));
    assert_eq!(run(&mut db, "TYPE k"), Reply::status("string"));
}

#[test]
fn set_option_conflicts_are_syntax_errors() {
    let (mut db, _) = db();
    for line in [
        "SET k v NX XX",
        "SET k v XX NX",
        "SET k v EX 10 PX 10",
        "SET k v KEEPTTL EX 10",
        "SET k v EX 10 KEEPTTL",
        "SET k v EXAT 10 EX 5",
        "SET k v EX",
        "SET k v PERSIST",
        "SET k v FOO",
    ] {
        assert_eq!(run(&mut db, line), err(SYNTAX), "{line}");
    }
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    // Repeating the same option is accepted; the last value wins.
    assert_eq!(run(&mut db, "SET k v EX 10 EX 20"), ok());
    assert_eq!(run(&mut db, "TTL k"), int(20));
    assert_eq!(run(&mut db, "SET k v NX NX"), Reply::Nil);
    assert_eq!(run(&mut db, "SET k w GET GET"), bulk("v"));
}

#[test]
fn set_nx_xx_get() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "SET k v XX"), Reply::Nil);
    assert_eq!(run(&mut db, "SET k v XX GET"), Reply::Nil);
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    assert_eq!(run(&mut db, "SET k v NX"), ok());
    assert_eq!(run(&mut db, "SET k w NX"), Reply::Nil);
    // NX with GET returns the old value even though nothing is written.
    assert_eq!(run(&mut db, "SET k w NX GET"), bulk("v"));
    assert_eq!(run(&mut db, "GET k"), bulk("v"));
    assert_eq!(run(&mut db, "SET k w XX GET"), bulk("v"));
    assert_eq!(run(&mut db, "GET k"), bulk("w"));
    assert_eq!(run(&mut db, "SETNX k x"), int(0));
    assert_eq!(run(&mut db, "SETNX k2 x"), int(1));
}

#[test]
fn set_expiry_options() {
    let (mut db, clock) = db();
    assert_eq!(run(&mut db, "SET k v PX 1500"), ok());
    assert_eq!(run(&mut db, "PTTL k"), int(1500));
    assert_eq!(run(&mut db, "SET k v KEEPTTL"), ok());
    assert_eq!(run(&mut db, "PTTL k"), int(1500));
    assert_eq!(run(&mut db, "SET k v"), ok());
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    let at = T0_MS / 1000 + 100;
    assert_eq!(run(&mut db, &format!("SET k v EXAT {at}")), ok());
    assert_eq!(run(&mut db, "TTL k"), int(100));
    assert_eq!(run(&mut db, &format!("SET k v PXAT {}", T0_MS + 10)), ok());
    clock.advance_ms(10);
    assert_eq!(run(&mut db, "GET k"), bulk("v"));
    clock.advance_ms(1);
    assert_eq!(run(&mut db, "GET k"), Reply::Nil);
    // An absolute time in the past: the key is set already expired.
    assert_eq!(run(&mut db, "SET k v EXAT 1"), ok());
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
}

#[test]
fn invalid_expire_times() {
    let (mut db, _) = db();
    let invalid = |cmd: &str| err(&format!("ERR invalid expire time in '{cmd}' command"));
    assert_eq!(run(&mut db, "SET k v EX 0"), invalid("set"));
    assert_eq!(run(&mut db, "SET k v PX -1"), invalid("set"));
    assert_eq!(run(&mut db, "SET k v EX 9223372036854775"), invalid("set"));
    assert_eq!(run(&mut db, "SET k v PX 9223372036854775807"), invalid("set"));
    assert_eq!(run(&mut db, "SET k v EX abc"), err(NOT_INT));
    assert_eq!(run(&mut db, "SET k v EX abc GET"), err(NOT_INT));
    assert_eq!(run(&mut db, "SETEX k 0 v"), invalid("setex"));
    assert_eq!(run(&mut db, "PSETEX k -1 v"), invalid("psetex"));
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    // EXAT far away is fine: no addition of the current time.
    assert_eq!(run(&mut db, "SET k v EXAT 9223372036854775"), ok());
    assert_eq!(run(&mut db, "PEXPIRETIME k"), int(9_223_372_036_854_775_000));
    assert_eq!(run(&mut db, "GETEX k EX 0"), invalid("getex"));
    assert_eq!(run(&mut db, "GETEX nokey EX 0"), Reply::Nil);
}

#[test]
fn setex_psetex_getset_getdel() {
    let (mut db, clock) = db();
    assert_eq!(run(&mut db, "SETEX k 10 v"), ok());
    assert_eq!(run(&mut db, "TTL k"), int(10));
    assert_eq!(run(&mut db, "PSETEX k 2500 w"), ok());
    assert_eq!(run(&mut db, "PTTL k"), int(2500));
    assert_eq!(run(&mut db, "GETSET k x"), bulk("w"));
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    assert_eq!(run(&mut db, "GETSET new x"), Reply::Nil);
    assert_eq!(run(&mut db, "GETDEL k"), bulk("x"));
    assert_eq!(run(&mut db, "GETDEL k"), Reply::Nil);
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
    assert_eq!(run(&mut db, "SETEX k 1 v"), ok());
    clock.advance_ms(1001);
    assert_eq!(run(&mut db, "GET k"), Reply::Nil);
}

#[test]
fn getex_options() {
    let (mut db, _) = db();
    run(&mut db, "SET k v");
    assert_eq!(run(&mut db, "GETEX k"), bulk("v"));
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    assert_eq!(run(&mut db, "GETEX k EX 100"), bulk("v"));
    assert_eq!(run(&mut db, "TTL k"), int(100));
    assert_eq!(run(&mut db, "GETEX k PX 5000"), bulk("v"));
    assert_eq!(run(&mut db, "PTTL k"), int(5000));
    assert_eq!(run(&mut db, &format!("GETEX k PXAT {}", T0_MS + 7000)), bulk("v"));
    assert_eq!(run(&mut db, "PTTL k"), int(7000));
    assert_eq!(run(&mut db, "GETEX k PERSIST"), bulk("v"));
    assert_eq!(run(&mut db, "TTL k"), int(-1));
    for line in [
        "GETEX k PERSIST EX 10",
        "GETEX k EX 10 PERSIST",
        "GETEX k EX 10 PX 100",
        "GETEX k KEEPTTL",
        "GETEX k GET",
        "GETEX k NX",
    ] {
        assert_eq!(run(&mut db, line), err(SYNTAX), "{line}");
    }
    assert_eq!(run(&mut db, "GETEX k EX abc"), err(NOT_INT));
    // EXAT in the past returns the value and deletes the key.
    assert_eq!(run(&mut db, "GETEX k EXAT 1"), bulk("v"));
    assert_eq!(run(&mut db, "EXISTS k"), int(0));
}

#[test]
fn mget_mset_msetnx() {
    let (mut db, _) = db();
    put_hash(&mut db, "h");
    assert_eq!(run(&mut db, "MSET a 1 b"), err("ERR wrong number of arguments for 'mset' command"));
    assert_eq!(run(&mut db, "MSETNX a 1 b"), err("ERR wrong number of arguments for 'msetnx' command"));
    assert_eq!(run(&mut db, "MSET a 1 a 2"), ok());
    assert_eq!(run(&mut db, "GET a"), bulk("2"));
    assert_eq!(run(&mut db, "MSETNX a 1 c 2"), int(0));
    assert_eq!(run(&mut db, "EXISTS c"), int(0));
    assert_eq!(run(&mut db, "MSETNX c 1 d 2 c 3"), int(1));
    assert_eq!(
        run(&mut db, "MGET c d h nope"),
        Reply::Array(vec![bulk("3"), bulk("2"), Reply::Nil, Reply::Nil])
    );
    // MSET drops expiries.
    run(&mut db, "EXPIRE a 100");
    run(&mut db, "MSET a 5");
    assert_eq!(run(&mut db, "TTL a"), int(-1));
}

#[test]
fn append_and_strlen() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "APPEND k Hello"), int(5));
    assert_eq!(run(&mut db, "APPEND k World"), int(10));
    assert_eq!(run(&mut db, "GET k"), bulk("HelloWorld"));
    assert_eq!(run(&mut db, "STRLEN k"), int(10));
    assert_eq!(run(&mut db, "STRLEN nope"), int(0));
    run(&mut db, "EXPIRE k 100");
    run(&mut db, "APPEND k !");
    assert_eq!(run(&mut db, "TTL k"), int(100));
}

#[test]
fn getrange_indexes() {
    let (mut db, _) = db();
    db.run(&["SET", "s", "Hello World"]);
    for (range, want) in [
        ("0 3", "Hell"),
        ("-3 -1", "rld"),
        ("0 -1", "Hello World"),
        ("10 100", "d"),
        ("-1 -5", ""),
        ("5 3", ""),
        ("-100 -50", "H"),
        ("-100 2", "Hel"),
        ("100 200", ""),
        ("0 -100", "H"),
        ("-9223372036854775808 9223372036854775807", "Hello World"),
    ] {
        assert_eq!(run(&mut db, &format!("GETRANGE s {range}")), bulk(want), "{range}");
    }
    assert_eq!(run(&mut db, "SUBSTR s 0 2"), bulk("Hel"));
    assert_eq!(run(&mut db, "GETRANGE nokey 0 -1"), bulk(""));
    db.run(&["SET", "e", ""]);
    assert_eq!(run(&mut db, "GETRANGE e 0 -1"), bulk(""));
    assert_eq!(run(&mut db, "GETRANGE s a 1"), err(NOT_INT));
}

#[test]
fn setrange_edges() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "SETRANGE s -1 x"), err("ERR offset is out of range"));
    assert_eq!(db.run(&["SETRANGE", "nk", "5", ""]), int(0));
    assert_eq!(run(&mut db, "EXISTS nk"), int(0));
    assert_eq!(run(&mut db, "SETRANGE nk 3 ab"), int(5));
    assert_eq!(run(&mut db, "GET nk"), Reply::bulk(b"\0\0\0ab"));
    db.run(&["SET", "s", "Hello World"]);
    assert_eq!(run(&mut db, "SETRANGE s 6 Redis"), int(11));
    assert_eq!(run(&mut db, "GET s"), bulk("Hello Redis"));
    assert_eq!(
        run(&mut db, "SETRANGE s 536870912 x"),
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    // Nothing to write: the length, without any size check.
    assert_eq!(db.run(&["SETRANGE", "s", "536870912", ""]), int(11));
    assert_eq!(run(&mut db, "SETRANGE s a x"), err(NOT_INT));
    run(&mut db, "EXPIRE s 100");
    run(&mut db, "SETRANGE s 0 J");
    assert_eq!(run(&mut db, "TTL s"), int(100));
    assert_eq!(run(&mut db, "GET s"), bulk("Jello Redis"));
}

#[test]
fn incr_decr_family() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "INCR n"), int(1));
    assert_eq!(run(&mut db, "INCRBY n 10"), int(11));
    assert_eq!(run(&mut db, "DECR n"), int(10));
    assert_eq!(run(&mut db, "DECRBY n 20"), int(-10));
    assert_eq!(run(&mut db, "GET n"), bulk("-10"));
    run(&mut db, "SET i 9223372036854775807");
    assert_eq!(run(&mut db, "INCR i"), err("ERR increment or decrement would overflow"));
    assert_eq!(run(&mut db, "DECRBY i -9223372036854775808"), err("ERR decrement would overflow"));
    assert_eq!(run(&mut db, "INCRBY i abc"), err(NOT_INT));
    run(&mut db, "SET j abc");
    assert_eq!(run(&mut db, "INCR j"), err(NOT_INT));
    db.run(&["SET", "j", " 1"]);
    assert_eq!(run(&mut db, "INCR j"), err(NOT_INT));
    run(&mut db, "SET t 5");
    run(&mut db, "EXPIRE t 100");
    assert_eq!(run(&mut db, "INCR t"), int(6));
    assert_eq!(run(&mut db, "TTL t"), int(100));
}

#[test]
fn incrbyfloat_format() {
    let (mut db, _) = db();
    for (start, incr, want) in [
        ("10.5", "0", "10.5"),
        ("3", "0", "3"),
        ("5.0e3", "0", "5000"),
        ("0.1", "0.2", "0.3"),
        ("10.50", "0.1", "10.6"),
        ("1e20", "0", "100000000000000000000"),
        ("0", "1.5e-10", "0.00000000015"),
        ("0", "-0.00000000000000000001", "0"),
        ("0", "0x10", "16"),
        ("-1.5", "1.5", "0"),
        ("9007199254740993", "0", "9007199254740993"),
        ("123456789.987654321", "0.000000001", "123456789.98765432199434144"),
    ] {
        db.run(&["SET", "f", start]);
        assert_eq!(db.run(&["INCRBYFLOAT", "f", incr]), bulk(want), "{start} + {incr}");
        assert_eq!(run(&mut db, "GET f"), bulk(want));
    }
    assert_eq!(run(&mut db, "INCRBYFLOAT new 2.5"), bulk("2.5"));
    // long double range: 1e308 + 1e308 does not overflow.
    run(&mut db, "SET f 1e308");
    let Reply::Bulk(sum) = run(&mut db, "INCRBYFLOAT f 1e308") else { panic!() };
    assert!(sum.starts_with(b"1999999999999999999933717593116912913211"));
    assert_eq!(sum.len(), 309);
    let nan = err("ERR increment would produce NaN or Infinity");
    assert_eq!(run(&mut db, "INCRBYFLOAT f inf"), nan);
    run(&mut db, "SET g 1e4932");
    assert_eq!(run(&mut db, "INCRBYFLOAT g 1e4932"), nan);
    for bad in ["abc", "1e5000", "1e-5000", "nan", "1e", "."] {
        assert_eq!(db.run(&["INCRBYFLOAT", "f", bad]), err(NOT_FLOAT), "{bad}");
    }
    assert_eq!(db.run(&["INCRBYFLOAT", "f", " 1"]), err(NOT_FLOAT));
    run(&mut db, "SET s abc");
    assert_eq!(run(&mut db, "INCRBYFLOAT s 1"), err(NOT_FLOAT));
    run(&mut db, "SET t 1");
    run(&mut db, "EXPIRE t 100");
    assert_eq!(run(&mut db, "INCRBYFLOAT t 1"), bulk("2"));
    assert_eq!(run(&mut db, "TTL t"), int(100));
}

#[test]
fn wrongtype_replies() {
    let (mut db, _) = db();
    put_hash(&mut db, "h");
    for line in [
        "GET h",
        "GETSET h v",
        "GETDEL h",
        "GETEX h",
        "GETEX h EX abc",
        "SET h v GET",
        "APPEND h x",
        "STRLEN h",
        "GETRANGE h 0 1",
        "SETRANGE h 0 x",
        "INCR h",
        "DECRBY h 2",
        "INCRBYFLOAT h 1",
        "INCRBYFLOAT h abc",
    ] {
        assert_eq!(run(&mut db, line), wrongtype(), "{line}");
    }
    // Argument errors come first where Redis checks them first.
    assert_eq!(run(&mut db, "INCRBY h abc"), err(NOT_INT));
    assert_eq!(run(&mut db, "DECRBY h -9223372036854775808"), err("ERR decrement would overflow"));
    assert_eq!(run(&mut db, "TYPE h"), Reply::status("hash"));
    // SET overwrites any type; SETNX sees the hash.
    assert_eq!(run(&mut db, "SETNX h v"), int(0));
    assert_eq!(run(&mut db, "SET h v"), ok());
    assert_eq!(run(&mut db, "TYPE h"), Reply::status("string"));
    assert_eq!(run(&mut db, "GET h"), bulk("v"));
}

#[test]
fn incrbyfloat_refuses_nul_bytes_anywhere() {
    // redis-server 7.0.15: every one of these is "ERR value is not a valid float".
    let (mut db, _) = db();
    for value in [&b"\x00"[..], b"1\x00", b"\x001", b"1.5\x00"] {
        db.run(&[&b"SET"[..], b"k", value]);
        assert_eq!(db.run(&["INCRBYFLOAT", "k", "1"]), err("ERR value is not a valid float"));
        assert_eq!(db.run(&[&b"INCRBYFLOAT"[..], b"other", value]), err("ERR value is not a valid float"));
    }
}
