//! Random sequences of list commands on two keys, checked reply by reply against a
//! `VecDeque` model of Redis' semantics; after every command the number of subkey records
//! under each key's live version must equal its length (no leaked or missing elements).

mod common;
use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use common::*;
use proptest::prelude::*;
use rediskv::{ColumnFamily, Metadata};
use rediskv::{Db, Reply};
use rediskv::{Direction, KvBackend, MemoryBackend};

const KEYS: [&str; 2] = ["a", "b"];

#[derive(Debug, Clone)]
enum Op {
    Push { left: bool, key: usize, items: Vec<String> },
    Pop { left: bool, key: usize, count: Option<u64> },
    Index { key: usize, index: i64 },
    Set { key: usize, index: i64, value: String },
    Range { key: usize, start: i64, stop: i64 },
    Rem { key: usize, count: i64, value: String },
    Insert { key: usize, before: bool, pivot: String, value: String },
    Trim { key: usize, start: i64, stop: i64 },
    Pos { key: usize, value: String, rank: i64, count: Option<u64>, maxlen: Option<u64> },
    Move { src: usize, dst: usize, from_left: bool, to_left: bool },
    Del { key: usize },
    Len { key: usize },
}

fn elem() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["x", "y", "z", "w"]).prop_map(str::to_string)
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..2usize;
    let idx = -9i64..9;
    prop_oneof![
        4 => (any::<bool>(), key.clone(), prop::collection::vec(elem(), 1..5))
            .prop_map(|(left, key, items)| Op::Push { left, key, items }),
        2 => (any::<bool>(), key.clone(), prop::option::of(0u64..5)).prop_map(|(left, key, count)| Op::Pop { left, key, count }),
        1 => (key.clone(), idx.clone()).prop_map(|(key, index)| Op::Index { key, index }),
        1 => (key.clone(), idx.clone(), elem()).prop_map(|(key, index, value)| Op::Set { key, index, value }),
        1 => (key.clone(), idx.clone(), idx.clone()).prop_map(|(key, start, stop)| Op::Range { key, start, stop }),
        2 => (key.clone(), -3i64..4, elem()).prop_map(|(key, count, value)| Op::Rem { key, count, value }),
        2 => (key.clone(), any::<bool>(), elem(), elem())
            .prop_map(|(key, before, pivot, value)| Op::Insert { key, before, pivot, value }),
        1 => (key.clone(), idx.clone(), idx.clone()).prop_map(|(key, start, stop)| Op::Trim { key, start, stop }),
        1 => (key.clone(), elem(), prop::sample::select(vec![1i64, 2, 3, -1, -2, -3]), prop::option::of(0u64..4), prop::option::of(0u64..6))
            .prop_map(|(key, value, rank, count, maxlen)| Op::Pos { key, value, rank, count, maxlen }),
        2 => (key.clone(), key.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(src, dst, from_left, to_left)| Op::Move { src, dst, from_left, to_left }),
        1 => key.clone().prop_map(|key| Op::Del { key }),
        1 => key.prop_map(|key| Op::Len { key }),
    ]
}

type Model = HashMap<&'static str, VecDeque<String>>;

fn side(left: bool) -> &'static str {
    if left { "LEFT" } else { "RIGHT" }
}

fn resolve(len: usize, index: i64) -> Option<usize> {
    let len = len as i64;
    let i = if index < 0 { index + len } else { index };
    (0..len).contains(&i).then_some(i as usize)
}

fn range(len: usize, start: i64, stop: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { start + len } else { start };
    let mut stop = if stop < 0 { stop + len } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return None;
    }
    if stop >= len {
        stop = len - 1;
    }
    Some((start as usize, stop as usize))
}

fn cleanup(model: &mut Model, key: &'static str) {
    if model.get(key).is_some_and(VecDeque::is_empty) {
        model.remove(key);
    }
}

/// The argv and the reply Redis gives, computed on the model.
fn apply(model: &mut Model, op: &Op) -> (Vec<String>, Reply) {
    let s = |x: &str| x.to_string();
    match op.clone() {
        Op::Push { left, key, items } => {
            let k = KEYS[key];
            let list = model.entry(k).or_default();
            for it in &items {
                if left { list.push_front(it.clone()) } else { list.push_back(it.clone()) }
            }
            let mut argv = vec![s(if left { "LPUSH" } else { "RPUSH" }), s(k)];
            argv.extend(items);
            (argv, int(list.len() as i64))
        }
        Op::Pop { left, key, count } => {
            let k = KEYS[key];
            let mut argv = vec![s(if left { "LPOP" } else { "RPOP" }), s(k)];
            if let Some(c) = count {
                argv.push(c.to_string());
            }
            let reply = match (model.get_mut(k), count) {
                (None, None) => Reply::Nil,
                (None, Some(_)) => Reply::NilArray,
                (Some(list), c) => {
                    let n = c.unwrap_or(1).min(list.len() as u64);
                    let mut out = Vec::new();
                    for _ in 0..n {
                        out.push(if left { list.pop_front() } else { list.pop_back() }.unwrap());
                    }
                    match c {
                        None => bulk(&out[0]),
                        Some(_) => Reply::Array(out.iter().map(|e| bulk(e)).collect()),
                    }
                }
            };
            cleanup(model, k);
            (argv, reply)
        }
        Op::Index { key, index } => {
            let k = KEYS[key];
            let reply =
                model.get(k).and_then(|l| resolve(l.len(), index).map(|i| bulk(&l[i]))).unwrap_or(Reply::Nil);
            (vec![s("LINDEX"), s(k), index.to_string()], reply)
        }
        Op::Set { key, index, value } => {
            let k = KEYS[key];
            let reply = match model.get_mut(k) {
                None => err("ERR no such key"),
                Some(l) => match resolve(l.len(), index) {
                    None => err("ERR index out of range"),
                    Some(i) => {
                        l[i] = value.clone();
                        Reply::OK
                    }
                },
            };
            (vec![s("LSET"), s(k), index.to_string(), value], reply)
        }
        Op::Range { key, start, stop } => {
            let k = KEYS[key];
            let items: Vec<Reply> = match model.get(k) {
                None => vec![],
                Some(l) => match range(l.len(), start, stop) {
                    None => vec![],
                    Some((a, b)) => (a..=b).map(|i| bulk(&l[i])).collect(),
                },
            };
            (vec![s("LRANGE"), s(k), start.to_string(), stop.to_string()], Reply::Array(items))
        }
        Op::Rem { key, count, value } => {
            let k = KEYS[key];
            let mut removed = 0;
            if let Some(l) = model.get_mut(k) {
                let limit = count.unsigned_abs() as usize;
                let mut positions: Vec<usize> = (0..l.len()).filter(|&i| l[i] == value).collect();
                if count < 0 {
                    positions.reverse();
                }
                if limit > 0 {
                    positions.truncate(limit);
                }
                positions.sort_unstable();
                for &p in positions.iter().rev() {
                    l.remove(p);
                }
                removed = positions.len() as i64;
            }
            cleanup(model, k);
            (vec![s("LREM"), s(k), count.to_string(), value], int(removed))
        }
        Op::Insert { key, before, pivot, value } => {
            let k = KEYS[key];
            let reply = match model.get_mut(k) {
                None => int(0),
                Some(l) => match l.iter().position(|e| *e == pivot) {
                    None => int(-1),
                    Some(p) => {
                        l.insert(if before { p } else { p + 1 }, value.clone());
                        int(l.len() as i64)
                    }
                },
            };
            (vec![s("LINSERT"), s(k), s(if before { "BEFORE" } else { "AFTER" }), pivot, value], reply)
        }
        Op::Trim { key, start, stop } => {
            let k = KEYS[key];
            if let Some(l) = model.get_mut(k) {
                match range(l.len(), start, stop) {
                    None => l.clear(),
                    Some((a, b)) => {
                        l.truncate(b + 1);
                        l.drain(..a);
                    }
                }
            }
            cleanup(model, k);
            (vec![s("LTRIM"), s(k), start.to_string(), stop.to_string()], Reply::OK)
        }
        Op::Pos { key, value, rank, count, maxlen } => {
            let k = KEYS[key];
            let mut argv = vec![s("LPOS"), s(k), value.clone(), s("RANK"), rank.to_string()];
            if let Some(c) = count {
                argv.extend([s("COUNT"), c.to_string()]);
            }
            if let Some(m) = maxlen {
                argv.extend([s("MAXLEN"), m.to_string()]);
            }
            let mut found: Vec<i64> = Vec::new();
            if let Some(l) = model.get(k) {
                let n = l.len();
                let order: Vec<usize> = if rank > 0 { (0..n).collect() } else { (0..n).rev().collect() };
                let limit = match maxlen {
                    Some(m) if m > 0 => m as usize,
                    _ => n,
                };
                let want = count.unwrap_or(1);
                let mut matches = 0;
                for &i in order.iter().take(limit) {
                    if l[i] == value {
                        matches += 1;
                        if matches >= rank.unsigned_abs() {
                            found.push(i as i64);
                            if want != 0 && found.len() as u64 == want {
                                break;
                            }
                        }
                    }
                }
            }
            let reply = match count {
                Some(_) => Reply::Array(found.iter().map(|&p| int(p)).collect()),
                None => found.first().map_or(Reply::Nil, |&p| int(p)),
            };
            (argv, reply)
        }
        Op::Move { src, dst, from_left, to_left } => {
            let (sk, dk) = (KEYS[src], KEYS[dst]);
            let argv = vec![s("LMOVE"), s(sk), s(dk), s(side(from_left)), s(side(to_left))];
            let popped =
                model.get_mut(sk).map(|l| if from_left { l.pop_front() } else { l.pop_back() }.unwrap());
            cleanup(model, sk);
            let reply = match popped {
                None => Reply::Nil,
                Some(e) => {
                    let l = model.entry(dk).or_default();
                    if to_left {
                        l.push_front(e.clone())
                    } else {
                        l.push_back(e.clone())
                    }
                    bulk(&e)
                }
            };
            (argv, reply)
        }
        Op::Del { key } => {
            let k = KEYS[key];
            let existed = model.remove(k).is_some();
            (vec![s("DEL"), s(k)], int(i64::from(existed)))
        }
        Op::Len { key } => {
            let k = KEYS[key];
            (vec![s("LLEN"), s(k)], int(model.get(k).map_or(0, |l| l.len() as i64)))
        }
    }
}

fn live_subkeys(db: &Db<MemoryBackend>, key: &str) -> usize {
    let Some(raw) =
        db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(key.as_bytes())).unwrap()
    else {
        return 0;
    };
    let m = Metadata::decode(&raw).unwrap();
    let range = db.layout().subkey_range(key.as_bytes(), m.version).unwrap();
    let n = db.backend().scan(ColumnFamily::Subkey, &range, Direction::Forward).unwrap().count();
    assert_eq!(m.tail - m.head, m.size, "head/tail/size disagree for {key}");
    n
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn list_commands_match_a_vecdeque_model(ops in prop::collection::vec(op(), 1..60)) {
        let (mut db, _) = db();
        let mut model: Model = HashMap::new();
        for op in &ops {
            let (argv, want) = apply(&mut model, op);
            let got = db.run(&argv);
            prop_assert_eq!(&got, &want, "{:?}", argv);
            for k in KEYS {
                let len = model.get(k).map_or(0, VecDeque::len);
                prop_assert_eq!(live_subkeys(&db, k), len, "subkeys of {} after {:?}", k, argv);
            }
        }
        for k in KEYS {
            let want: Vec<Bytes> = model.get(k).map(|l| l.iter().map(|e| Bytes::from(e.clone())).collect()).unwrap_or_default();
            let len = want.len() as i64;
            prop_assert_eq!(db.run(&["LRANGE", k, "0", "-1"]), Reply::Array(want.into_iter().map(Reply::Bulk).collect()));
            prop_assert_eq!(db.run(&["LLEN", k]), Reply::Integer(len));
        }
    }
}
