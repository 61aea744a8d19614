//! Lazy deletion end to end: after random commands with DEL, overwrites and expiries, an
//! expiry sweep and a compaction pass leave no Subkey/Score record without its live key, and
//! every live key reads exactly as before.

mod common;

use common::*;
use proptest::prelude::*;
use rediskv::backend::{ColumnFamily, MemoryBackend};
use rediskv::codec::{Metadata, RedisType};
use rediskv::commands::{Db, Reply};
use rediskv::gc::{Decision, ExpirySweep, compact, decide};

const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];

fn op() -> impl Strategy<Value = Vec<String>> {
    let key = prop::sample::select(&KEYS[..]).prop_map(str::to_string);
    let word = prop::sample::select(&["x", "y", "z", "w"][..]).prop_map(str::to_string);
    prop_oneof![
        (key.clone(), word.clone()).prop_map(|(k, v)| vec!["SET".into(), k, v]),
        (key.clone(), word.clone(), word.clone()).prop_map(|(k, f, v)| vec!["HSET".into(), k, f, v]),
        (key.clone(), word.clone()).prop_map(|(k, f)| vec!["HDEL".into(), k, f]),
        (key.clone(), word.clone()).prop_map(|(k, m)| vec!["SADD".into(), k, m]),
        (key.clone(), word.clone()).prop_map(|(k, m)| vec!["SREM".into(), k, m]),
        (key.clone(), word.clone()).prop_map(|(k, v)| vec!["RPUSH".into(), k, v]),
        key.clone().prop_map(|k| vec!["LPOP".into(), k]),
        (key.clone(), -3i32..3, word.clone()).prop_map(|(k, s, m)| vec!["ZADD".into(), k, s.to_string(), m]),
        (key.clone(), word).prop_map(|(k, m)| vec!["ZREM".into(), k, m]),
        key.clone().prop_map(|k| vec!["DEL".into(), k]),
        (key.clone(), 1u32..50).prop_map(|(k, ms)| vec!["PEXPIRE".into(), k, ms.to_string()]),
        key.prop_map(|k| vec!["PERSIST".into(), k]),
        (1u32..40).prop_map(|ms| vec!["#advance".into(), ms.to_string()]),
    ]
}

/// Everything a client can read of the key pool.
fn contents(db: &mut Db<MemoryBackend>) -> Vec<(String, Reply)> {
    KEYS.iter()
        .map(|k| {
            let Reply::Status(ty) = run(db, &format!("TYPE {k}")) else { panic!("TYPE reply") };
            let read = match ty.as_ref() {
                "string" => run(db, &format!("GET {k}")),
                "hash" => sorted(run(db, &format!("HKEYS {k}"))),
                "set" => sorted(run(db, &format!("SMEMBERS {k}"))),
                "list" => run(db, &format!("LRANGE {k} 0 -1")),
                "zset" => run(db, &format!("ZRANGE {k} 0 -1 WITHSCORES")),
                _ => Reply::Nil,
            };
            (ty.to_string(), read)
        })
        .collect()
}

fn sorted(reply: Reply) -> Reply {
    match reply {
        Reply::Array(mut items) => {
            items.sort_by_key(|r| format!("{r:?}"));
            Reply::Array(items)
        }
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn sweep_and_compaction_keep_live_data_and_drop_orphans(ops in prop::collection::vec(op(), 1..80)) {
        let (mut db, clock) = db();
        for argv in &ops {
            if argv[0] == "#advance" {
                clock.advance_ms(argv[1].parse().unwrap());
            } else {
                let reply = db.run(argv);
                prop_assert!(!matches!(&reply, Reply::Error(e) if !e.starts_with("WRONGTYPE")), "{argv:?} -> {reply:?}");
            }
        }
        let before = contents(&mut db);
        let now = db.now_ms();
        let layout = db.layout().clone();

        let mut sweep = ExpirySweep::new(layout.namespace_range());
        while !sweep.is_done() {
            sweep.step(db.backend(), now, 3).unwrap();
        }
        compact(db.backend(), &layout, now, 0).unwrap();

        prop_assert_eq!(contents(&mut db), before);
        let backend = db.backend();
        for (key, value) in backend.records(ColumnFamily::Metadata) {
            let meta = Metadata::decode(&value).unwrap();
            prop_assert!(meta.is_live(now), "sweep left an expired or empty record {:?}", key);
            if meta.ty == RedisType::String {
                continue;
            }
            let user_key = layout.decode_metadata_key(&key).unwrap().user_key.to_vec();
            let range = layout.subkey_range(&user_key, meta.version).unwrap();
            let subkeys = backend.records(ColumnFamily::Subkey).filter(|(k, _)| range.contains(k)).count();
            prop_assert_eq!(subkeys as u64, meta.size, "subkeys of live {:?}", user_key);
            let scores = backend.records(ColumnFamily::Score).filter(|(k, _)| range.contains(k)).count();
            let want = if meta.ty == RedisType::ZSet { meta.size } else { 0 };
            prop_assert_eq!(scores as u64, want, "score records of live {:?}", user_key);
        }
        for cf in [ColumnFamily::Subkey, ColumnFamily::Score] {
            for (key, _) in backend.records(cf) {
                let d = decide(&layout, cf, &key, |k: &[u8]| backend.records(ColumnFamily::Metadata)
                    .find(|(mk, _)| mk.as_ref() == k).map(|(_, v)| v.clone()), now, 0);
                prop_assert_eq!(d, Decision::Keep, "orphan left in {:?}: {:?}", cf, key);
            }
        }
    }
}
