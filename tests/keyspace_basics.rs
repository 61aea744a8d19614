//! DEL, EXISTS, TYPE, SELECT, PING and the dispatcher's errors.

mod common;
use common::*;
use rediskv::Reply;

#[test]
fn unknown_command_and_arity_errors_match_redis() {
    let (mut db, _) = db();
    // Texts from redis-server 7.0.15.
    assert_eq!(run(&mut db, "foo a b"), err("ERR unknown command 'foo', with args beginning with: 'a' 'b' "));
    assert_eq!(run(&mut db, "GeT"), err("ERR wrong number of arguments for 'get' command"));
    assert_eq!(run(&mut db, "ping a b"), err("ERR wrong number of arguments for 'ping' command"));
    assert_eq!(run(&mut db, "select 16"), err("ERR DB index is out of range"));
    assert_eq!(run(&mut db, "select x"), err("ERR value is not an integer or out of range"));
}

#[test]
fn ping_echo_type_of_missing() {
    let (mut db, _) = db();
    assert_eq!(run(&mut db, "PING"), Reply::status("PONG"));
    assert_eq!(run(&mut db, "ping hi"), bulk("hi"));
    assert_eq!(run(&mut db, "echo x"), bulk("x"));
    assert_eq!(run(&mut db, "type nosuch"), Reply::status("none"));
    assert_eq!(run(&mut db, "exists a b"), int(0));
    assert_eq!(run(&mut db, "del a b"), int(0));
}

#[test]
fn undecodable_metadata_is_an_error_naming_the_user_key() {
    use rediskv::ColumnFamily;
    use rediskv::{KvBackend, WriteBatch};
    let (mut db, _) = db();
    let mut batch = WriteBatch::new();
    // Flags byte 0x3F: reserved bits set, which no writer produces.
    batch.put(ColumnFamily::Metadata, db.layout().metadata_key(b"bad"), vec![0x3F]);
    db.backend().write(batch).unwrap();
    let Reply::Error(text) = run(&mut db, "lpop bad") else { panic!("expected an error") };
    assert!(text.contains("undecodable metadata of key 'bad'"), "{text}");
}
