//! Keys of every type in every encoding Redis 7.0 has, as the commands that build them
//! (DUMP/RESTORE's and the RDB file's tests with a real redis-server), and values put in one
//! order for comparing.

use rediskv::rdb::RdbValue;

/// Commands that build one key per type and encoding Redis 7.0 has.
pub fn fixtures() -> Vec<Vec<Vec<u8>>> {
    let mut cmds: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut push = |argv: Vec<String>| cmds.push(argv.into_iter().map(String::into_bytes).collect());
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    push(s(&["SET", "int", "12345"]));
    push(s(&["SET", "negint", "-9223372036854775808"]));
    push(s(&["SET", "small", "hello"]));
    push(s(&["SET", "empty", ""]));
    push(s(&["SET", "lzf", &"abcabcabc".repeat(100)]));
    push(vec!["SET".into(), "binary".into(), "\u{0}\u{1}\r\n\u{ff}".into()]);
    push(s(&["RPUSH", "list_small", "a", "1", "-7", "300", "70000", "9000000000", "x"]));
    let big: Vec<String> = (0..5000).map(|i| format!("element-{i}-{}", "y".repeat(i % 50))).collect();
    push([vec!["RPUSH".into(), "list_big".into()], big.clone()].concat());
    push(s(&["RPUSH", "list_huge_elem", &"z".repeat(20_000), "tail"]));
    push(s(&["SADD", "intset", "1", "-2", "30000", "-70000", "5000000000"]));
    push(s(&["SADD", "set_str", "a", "b", "c"]));
    let many: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    push([vec!["SADD".into(), "set_600_ints".into()], many].concat());
    push(s(&["HSET", "hash_small", "f", "v", "n", "12"]));
    let fields: Vec<String> = (0..300).flat_map(|i| [format!("f{i}"), format!("v{i}")]).collect();
    push([vec!["HSET".into(), "hash_big".into()], fields].concat());
    push(s(&["HSET", "hash_long_value", "f", &"v".repeat(100)]));
    push(s(&["ZADD", "zset_small", "1.5", "a", "2", "b", "-inf", "c", "0.1", "d"]));
    let members: Vec<String> =
        (0..300).flat_map(|i| [format!("{}", i as f64 / 7.0), format!("m{i}")]).collect();
    push([vec!["ZADD".into(), "zset_big".into()], members].concat());
    push(s(&["ZADD", "zset_long_member", "3", &"m".repeat(100)]));
    // Three nodes of entries, some with the first entry's fields and some not, a deleted
    // entry, two groups with pending entries and an idle consumer.
    for i in 1..=250 {
        let (ms, seq) = (i.to_string(), (i % 3).to_string());
        let id = format!("{ms}-{seq}");
        if i % 4 == 0 {
            push(s(&["XADD", "stream", &id, "other", "x", "n", &ms]));
        } else {
            push(s(&["XADD", "stream", &id, "f", &ms, "g", &"y".repeat(i % 9)]));
        }
    }
    push(s(&["XDEL", "stream", "7-1"]));
    push(s(&["XGROUP", "CREATE", "stream", "g1", "0"]));
    push(s(&["XGROUP", "CREATE", "stream", "g2", "100-0", "ENTRIESREAD", "3"]));
    push(s(&["XREADGROUP", "GROUP", "g1", "alice", "COUNT", "4", "STREAMS", "stream", ">"]));
    push(s(&["XREADGROUP", "GROUP", "g1", "bob", "COUNT", "2", "STREAMS", "stream", ">"]));
    push(s(&["XACK", "stream", "g1", "2-2"]));
    push(s(&["XGROUP", "CREATECONSUMER", "stream", "g2", "carol"]));
    push(s(&["XADD", "stream_emptied", "5-5", "a", "1"]));
    push(s(&["XDEL", "stream_emptied", "5-5"]));
    push(s(&["XGROUP", "CREATE", "stream_emptied", "g1", "$"]));
    cmds
}

#[allow(dead_code)] // DUMP/RESTORE's test only
pub fn keys() -> Vec<&'static str> {
    vec![
        "int",
        "negint",
        "small",
        "empty",
        "lzf",
        "binary",
        "list_small",
        "list_big",
        "list_huge_elem",
        "intset",
        "set_str",
        "set_600_ints",
        "hash_small",
        "hash_big",
        "hash_long_value",
        "zset_small",
        "zset_big",
        "zset_long_member",
        "stream",
        "stream_emptied",
    ]
}

/// A value with its collections in one order (a hash table's is Redis' own; a sorted set
/// comes head first from a listpack, tail first from a skiplist).
#[allow(dead_code)] // the RDB file's tests only
pub fn normalized(value: RdbValue) -> RdbValue {
    match value {
        RdbValue::ZSet(mut p) => {
            p.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            RdbValue::ZSet(p)
        }
        RdbValue::Set(mut m) => {
            m.sort();
            RdbValue::Set(m)
        }
        RdbValue::Hash(mut p) => {
            p.sort();
            RdbValue::Hash(p)
        }
        other => other,
    }
}
