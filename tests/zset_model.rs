//! Random command sequences against a model (a `BTreeMap<member, score>` per key plus its
//! sorted view), comparing every reply; after each sequence the Subkey and Score records
//! of every key, under its live version, must describe exactly the model's pairs.

mod common;
use common::*;

use std::collections::BTreeMap;

use proptest::prelude::*;
use rediskv::server::args::format_g17;
use rediskv::{ColumnFamily, Direction, KvBackend, MemoryBackend};
use rediskv::{Db, Reply};
use rediskv::{Metadata, decode_f64_slice};

const KEYS: [&str; 3] = ["a", "b", "c"];
const MEMBERS: [&str; 6] = ["m", "n", "o", "p", "q", "r"];
const SCORES: [&str; 10] = ["-inf", "-2.5", "-1", "-0", "0", "1", "1.5", "2", "3", "inf"];

type Model = BTreeMap<String, BTreeMap<String, f64>>;

#[derive(Debug, Clone)]
enum Op {
    Zadd {
        key: usize,
        flags: u8,
        pairs: Vec<(usize, usize)>,
    },
    Zincrby {
        key: usize,
        score: usize,
        member: usize,
    },
    Zrem {
        key: usize,
        members: Vec<usize>,
    },
    RangeRank {
        key: usize,
        start: i64,
        stop: i64,
        rev: bool,
    },
    RangeScore {
        key: usize,
        min: usize,
        min_ex: bool,
        max: usize,
        max_ex: bool,
        rev: bool,
        limit: Option<(i64, i64)>,
    },
    RangeLex {
        key: usize,
        min: Lex,
        max: Lex,
        rev: bool,
    },
    Count {
        key: usize,
        min: usize,
        min_ex: bool,
        max: usize,
        max_ex: bool,
    },
    LexCount {
        key: usize,
        min: Lex,
        max: Lex,
    },
    Rank {
        key: usize,
        member: usize,
        rev: bool,
    },
    Score {
        key: usize,
        members: Vec<usize>,
    },
    Card {
        key: usize,
    },
    RemRank {
        key: usize,
        start: i64,
        stop: i64,
    },
    RemScore {
        key: usize,
        min: usize,
        max: usize,
    },
    RemLex {
        key: usize,
        min: Lex,
        max: Lex,
    },
    Pop {
        key: usize,
        max: bool,
        count: usize,
    },
    Store {
        dst: usize,
        op: u8,
        agg: u8,
        weights: Option<(usize, usize)>,
    },
    RangeStore {
        dst: usize,
        src: usize,
        start: i64,
        stop: i64,
    },
}

#[derive(Debug, Clone)]
enum Lex {
    Min,
    Max,
    Inc(usize),
    Exc(usize),
}

impl Lex {
    fn arg(&self) -> String {
        match self {
            Lex::Min => "-".into(),
            Lex::Max => "+".into(),
            Lex::Inc(m) => format!("[{}", MEMBERS[*m]),
            Lex::Exc(m) => format!("({}", MEMBERS[*m]),
        }
    }
    fn above_min(&self, m: &str) -> bool {
        match self {
            Lex::Min => true,
            Lex::Max => false,
            Lex::Inc(b) => m >= MEMBERS[*b],
            Lex::Exc(b) => m > MEMBERS[*b],
        }
    }
    fn below_max(&self, m: &str) -> bool {
        match self {
            Lex::Min => false,
            Lex::Max => true,
            Lex::Inc(b) => m <= MEMBERS[*b],
            Lex::Exc(b) => m < MEMBERS[*b],
        }
    }
}

fn lex() -> impl Strategy<Value = Lex> {
    prop_oneof![
        Just(Lex::Min),
        Just(Lex::Max),
        (0..6usize).prop_map(Lex::Inc),
        (0..6usize).prop_map(Lex::Exc)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..3usize;
    let s = 0..SCORES.len();
    let m = 0..MEMBERS.len();
    prop_oneof![
        4 => (k.clone(), 0..64u8, prop::collection::vec((s.clone(), m.clone()), 1..5))
            .prop_map(|(key, flags, pairs)| Op::Zadd { key, flags, pairs }),
        2 => (k.clone(), s.clone(), m.clone()).prop_map(|(key, score, member)| Op::Zincrby { key, score, member }),
        2 => (k.clone(), prop::collection::vec(m.clone(), 1..4)).prop_map(|(key, members)| Op::Zrem { key, members }),
        2 => (k.clone(), -8..8i64, -8..8i64, any::<bool>())
            .prop_map(|(key, start, stop, rev)| Op::RangeRank { key, start, stop, rev }),
        2 => (k.clone(), s.clone(), any::<bool>(), s.clone(), any::<bool>(), any::<bool>(),
              prop::option::of((-1..4i64, -1..4i64)))
            .prop_map(|(key, min, min_ex, max, max_ex, rev, limit)| Op::RangeScore { key, min, min_ex, max, max_ex, rev, limit }),
        1 => (k.clone(), lex(), lex(), any::<bool>()).prop_map(|(key, min, max, rev)| Op::RangeLex { key, min, max, rev }),
        1 => (k.clone(), s.clone(), any::<bool>(), s.clone(), any::<bool>())
            .prop_map(|(key, min, min_ex, max, max_ex)| Op::Count { key, min, min_ex, max, max_ex }),
        1 => (k.clone(), lex(), lex()).prop_map(|(key, min, max)| Op::LexCount { key, min, max }),
        2 => (k.clone(), m.clone(), any::<bool>()).prop_map(|(key, member, rev)| Op::Rank { key, member, rev }),
        1 => (k.clone(), prop::collection::vec(m.clone(), 1..4)).prop_map(|(key, members)| Op::Score { key, members }),
        1 => k.clone().prop_map(|key| Op::Card { key }),
        1 => (k.clone(), -6..6i64, -6..6i64).prop_map(|(key, start, stop)| Op::RemRank { key, start, stop }),
        1 => (k.clone(), s.clone(), s.clone()).prop_map(|(key, min, max)| Op::RemScore { key, min, max }),
        1 => (k.clone(), lex(), lex()).prop_map(|(key, min, max)| Op::RemLex { key, min, max }),
        1 => (k.clone(), any::<bool>(), 0..4usize).prop_map(|(key, max, count)| Op::Pop { key, max, count }),
        1 => (k.clone(), 0..3u8, 0..3u8, prop::option::of((s.clone(), s.clone())))
            .prop_map(|(dst, op, agg, weights)| Op::Store { dst, op, agg, weights }),
        1 => (k.clone(), k, -4..4i64, -4..4i64).prop_map(|(dst, src, start, stop)| Op::RangeStore { dst, src, start, stop }),
    ]
}

fn num(i: usize) -> f64 {
    rediskv_score(SCORES[i])
}

fn rediskv_score(s: &str) -> f64 {
    match s {
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        other => other.parse().unwrap(),
    }
}

fn stored(x: f64) -> f64 {
    if x == 0.0 { 0.0 } else { x }
}

fn sorted(set: &BTreeMap<String, f64>) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = set.iter().map(|(m, s)| (m.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
    v
}

fn items(v: &[(String, f64)], withscores: bool) -> Reply {
    let mut out = Vec::new();
    for (m, s) in v {
        out.push(bulk(m));
        if withscores {
            out.push(bulk(&format_g17(*s)));
        }
    }
    Reply::Array(out)
}

fn norm_ranks(start: i64, stop: i64, len: i64) -> Option<(usize, usize)> {
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    start = start.max(0);
    if start > stop || start >= len {
        return None;
    }
    stop = stop.min(len - 1);
    Some((start as usize, stop as usize))
}

fn in_score(s: f64, min: f64, min_ex: bool, max: f64, max_ex: bool) -> bool {
    (if min_ex { s > min } else { s >= min }) && (if max_ex { s < max } else { s <= max })
}

fn bound(i: usize, ex: bool) -> String {
    format!("{}{}", if ex { "(" } else { "" }, SCORES[i])
}

/// Applies `op` to the model and returns (command line, expected reply).
fn apply(model: &mut Model, op: &Op) -> (String, Reply) {
    let key = |k: usize| KEYS[k].to_string();
    match op {
        Op::Zadd { key: k, flags, pairs } => {
            let (nx, xx, gt, lt, ch, incr) = (
                flags & 1 != 0,
                flags & 2 != 0,
                flags & 4 != 0,
                flags & 8 != 0,
                flags & 16 != 0,
                flags & 32 != 0,
            );
            let mut line = format!("zadd {}", key(*k));
            for (on, name) in [(nx, "nx"), (xx, "xx"), (gt, "gt"), (lt, "lt"), (ch, "ch"), (incr, "incr")] {
                if on {
                    line.push_str(&format!(" {name}"));
                }
            }
            for (s, m) in pairs {
                line.push_str(&format!(" {} {}", SCORES[*s], MEMBERS[*m]));
            }
            if nx && xx {
                return (line, err("ERR XX and NX options at the same time are not compatible"));
            }
            if (nx && (gt || lt)) || (gt && lt) {
                return (line, err("ERR GT, LT, and/or NX options at the same time are not compatible"));
            }
            if incr && pairs.len() > 1 {
                return (line, err("ERR INCR option supports a single increment-element pair"));
            }
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            let existed = !set.is_empty();
            let (mut added, mut updated, mut last) = (0, 0, None);
            if existed || !xx {
                for (s, m) in pairs {
                    let score = num(*s);
                    let member = MEMBERS[*m].to_string();
                    match set.get(&member).copied() {
                        Some(cur) => {
                            if nx {
                                continue;
                            }
                            let new = if incr { score + cur } else { score };
                            if new.is_nan() {
                                return (line, err("ERR resulting score is not a number (NaN)"));
                            }
                            if (lt && new >= cur) || (gt && new <= cur) {
                                continue;
                            }
                            last = Some(new);
                            if new != cur {
                                set.insert(member, stored(new));
                                updated += 1;
                            }
                        }
                        None if !xx => {
                            set.insert(member, stored(score));
                            last = Some(score);
                            added += 1;
                        }
                        None => {}
                    }
                }
            }
            put(model, &key(*k), set);
            let reply = if incr {
                last.map_or(Reply::Nil, |s| bulk(&format_g17(s)))
            } else {
                int(added + if ch { updated } else { 0 })
            };
            (line, reply)
        }
        Op::Zincrby { key: k, score, member } => {
            let line = format!("zincrby {} {} {}", key(*k), SCORES[*score], MEMBERS[*member]);
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            let new = set.get(MEMBERS[*member]).copied().map_or(num(*score), |c| c + num(*score));
            if new.is_nan() {
                return (line, err("ERR resulting score is not a number (NaN)"));
            }
            set.insert(MEMBERS[*member].to_string(), stored(new));
            put(model, &key(*k), set);
            (line, bulk(&format_g17(new)))
        }
        Op::Zrem { key: k, members } => {
            let mut line = format!("zrem {}", key(*k));
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            let mut n = 0;
            for m in members {
                line.push_str(&format!(" {}", MEMBERS[*m]));
                if set.remove(MEMBERS[*m]).is_some() {
                    n += 1;
                }
            }
            put(model, &key(*k), set);
            (line, int(n))
        }
        Op::RangeRank { key: k, start, stop, rev } => {
            let line =
                format!("zrange {} {start} {stop}{} withscores", key(*k), if *rev { " rev" } else { "" });
            let mut v = view(model, *k);
            if *rev {
                v.reverse();
            }
            let sel =
                norm_ranks(*start, *stop, v.len() as i64).map_or(Vec::new(), |(a, b)| v[a..=b].to_vec());
            (line, items(&sel, true))
        }
        Op::RangeScore { key: k, min, min_ex, max, max_ex, rev, limit } => {
            let (lo, hi) = (bound(*min, *min_ex), bound(*max, *max_ex));
            let mut line = if *rev {
                format!("zrevrangebyscore {} {hi} {lo} withscores", key(*k))
            } else {
                format!("zrangebyscore {} {lo} {hi} withscores", key(*k))
            };
            let mut v: Vec<_> = view(model, *k)
                .into_iter()
                .filter(|(_, s)| in_score(*s, num(*min), *min_ex, num(*max), *max_ex))
                .collect();
            if *rev {
                v.reverse();
            }
            if let Some((off, cnt)) = limit {
                line.push_str(&format!(" limit {off} {cnt}"));
                v = if *off < 0 {
                    Vec::new()
                } else {
                    v.into_iter()
                        .skip(*off as usize)
                        .take(if *cnt < 0 { usize::MAX } else { *cnt as usize })
                        .collect()
                };
            }
            (line, items(&v, true))
        }
        Op::RangeLex { key: k, min, max, rev } => {
            let line = if *rev {
                format!("zrevrangebylex {} {} {}", key(*k), max.arg(), min.arg())
            } else {
                format!("zrangebylex {} {} {}", key(*k), min.arg(), max.arg())
            };
            let set = model.get(&key(*k)).cloned().unwrap_or_default();
            let mut v: Vec<(String, f64)> =
                set.into_iter().filter(|(m, _)| min.above_min(m) && max.below_max(m)).collect();
            if *rev {
                v.reverse();
            }
            (line, items(&v, false))
        }
        Op::Count { key: k, min, min_ex, max, max_ex } => {
            let line = format!("zcount {} {} {}", key(*k), bound(*min, *min_ex), bound(*max, *max_ex));
            let n = view(model, *k)
                .iter()
                .filter(|(_, s)| in_score(*s, num(*min), *min_ex, num(*max), *max_ex))
                .count();
            (line, int(n as i64))
        }
        Op::LexCount { key: k, min, max } => {
            let line = format!("zlexcount {} {} {}", key(*k), min.arg(), max.arg());
            let set = model.get(&key(*k)).cloned().unwrap_or_default();
            (line, int(set.keys().filter(|m| min.above_min(m) && max.below_max(m)).count() as i64))
        }
        Op::Rank { key: k, member, rev } => {
            let line =
                format!("{} {} {}", if *rev { "zrevrank" } else { "zrank" }, key(*k), MEMBERS[*member]);
            let v = view(model, *k);
            let reply = v
                .iter()
                .position(|(m, _)| m == MEMBERS[*member])
                .map_or(Reply::Nil, |p| int(if *rev { v.len() - 1 - p } else { p } as i64));
            (line, reply)
        }
        Op::Score { key: k, members } => {
            let set = model.get(&key(*k)).cloned().unwrap_or_default();
            let mut line = format!("zmscore {}", key(*k));
            let mut out = Vec::new();
            for m in members {
                line.push_str(&format!(" {}", MEMBERS[*m]));
                out.push(set.get(MEMBERS[*m]).map_or(Reply::Nil, |s| bulk(&format_g17(*s))));
            }
            (line, Reply::Array(out))
        }
        Op::Card { key: k } => (format!("zcard {}", key(*k)), int(view(model, *k).len() as i64)),
        Op::RemRank { key: k, start, stop } => {
            let line = format!("zremrangebyrank {} {start} {stop}", key(*k));
            let v = view(model, *k);
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            let mut n = 0;
            if let Some((a, b)) = norm_ranks(*start, *stop, v.len() as i64) {
                for (m, _) in &v[a..=b] {
                    set.remove(m);
                    n += 1;
                }
            }
            put(model, &key(*k), set);
            (line, int(n))
        }
        Op::RemScore { key: k, min, max } => {
            let line = format!("zremrangebyscore {} {} {}", key(*k), SCORES[*min], SCORES[*max]);
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            let before = set.len();
            set.retain(|_, s| !in_score(*s, num(*min), false, num(*max), false));
            let n = before - set.len();
            put(model, &key(*k), set);
            (line, int(n as i64))
        }
        Op::RemLex { key: k, min, max } => {
            let line = format!("zremrangebylex {} {} {}", key(*k), min.arg(), max.arg());
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            let before = set.len();
            set.retain(|m, _| !(min.above_min(m) && max.below_max(m)));
            let n = before - set.len();
            put(model, &key(*k), set);
            (line, int(n as i64))
        }
        Op::Pop { key: k, max, count } => {
            let line = format!("{} {} {count}", if *max { "zpopmax" } else { "zpopmin" }, key(*k));
            let mut v = view(model, *k);
            if *max {
                v.reverse();
            }
            let taken: Vec<_> = v.into_iter().take(*count).collect();
            let mut set = model.get(&key(*k)).cloned().unwrap_or_default();
            for (m, _) in &taken {
                set.remove(m);
            }
            put(model, &key(*k), set);
            (line, items(&taken, true))
        }
        Op::Store { dst, op, agg, weights } => {
            let name = ["zunionstore", "zinterstore", "zdiffstore"][*op as usize];
            let mut line = format!("{name} {} 2 a b", key(*dst));
            let (wa, wb) = match weights {
                Some((x, y)) if *op != 2 => {
                    line.push_str(&format!(" weights {} {}", SCORES[*x], SCORES[*y]));
                    (num(*x), num(*y))
                }
                _ => (1.0, 1.0),
            };
            if *op != 2 {
                line.push_str(&format!(" aggregate {}", ["sum", "min", "max"][*agg as usize]));
            }
            let a = model.get("a").cloned().unwrap_or_default();
            let b = model.get("b").cloned().unwrap_or_default();
            let w = |w: f64, s: f64| {
                let x = w * s;
                if x.is_nan() { 0.0 } else { x }
            };
            let combine = |x: f64, y: f64| match agg {
                0 => {
                    let s = x + y;
                    if s.is_nan() { 0.0 } else { s }
                }
                1 => x.min(y),
                _ => x.max(y),
            };
            // Redis sorts inputs by size (stable here) and aggregates in that order.
            let a_first = a.len() <= b.len();
            let mut out = BTreeMap::new();
            match op {
                0 => {
                    for (m, s) in &a {
                        out.insert(m.clone(), w(wa, *s));
                    }
                    for (m, s) in &b {
                        let v = w(wb, *s);
                        let merged = match out.get(m) {
                            Some(x) => {
                                if a_first {
                                    combine(*x, v)
                                } else {
                                    combine(v, *x)
                                }
                            }
                            None => v,
                        };
                        out.insert(m.clone(), merged);
                    }
                }
                1 => {
                    for (m, s) in &a {
                        if let Some(t) = b.get(m) {
                            // Only the first (smallest) input's weighted score has NaN
                            // replaced by 0; the others' go into the aggregate as they are.
                            let merged = if a_first {
                                combine(w(wa, *s), wb * *t)
                            } else {
                                combine(w(wb, *t), wa * *s)
                            };
                            out.insert(m.clone(), merged);
                        }
                    }
                }
                _ => {
                    for (m, s) in &a {
                        if !b.contains_key(m) {
                            out.insert(m.clone(), *s);
                        }
                    }
                }
            }
            let out: BTreeMap<String, f64> = out.into_iter().map(|(m, s)| (m, stored(s))).collect();
            let n = out.len() as i64;
            model.insert(key(*dst), out);
            model.retain(|_, s| !s.is_empty());
            (line, int(n))
        }
        Op::RangeStore { dst, src, start, stop } => {
            let line = format!("zrangestore {} {} {start} {stop}", key(*dst), key(*src));
            let v = view(model, *src);
            let sel =
                norm_ranks(*start, *stop, v.len() as i64).map_or(Vec::new(), |(a, b)| v[a..=b].to_vec());
            let n = sel.len() as i64;
            model.insert(key(*dst), sel.into_iter().collect());
            model.retain(|_, s| !s.is_empty());
            (line, int(n))
        }
    }
}

fn put(model: &mut Model, key: &str, set: BTreeMap<String, f64>) {
    if set.is_empty() {
        model.remove(key);
    } else {
        model.insert(key.to_string(), set);
    }
}

fn view(model: &Model, k: usize) -> Vec<(String, f64)> {
    model.get(KEYS[k]).map(sorted).unwrap_or_default()
}

/// The (member, score) pairs of `key` read from both column families, checked equal.
fn stored_pairs(db: &Db<MemoryBackend>, key: &str) -> Option<BTreeMap<String, f64>> {
    let raw = db.backend().get(ColumnFamily::Metadata, &db.layout().metadata_key(key.as_bytes())).unwrap()?;
    let meta = Metadata::decode(&raw).unwrap();
    let layout = db.layout();
    let range = layout.subkey_range(key.as_bytes(), meta.version).unwrap();
    let mut by_member = BTreeMap::new();
    for item in db.backend().scan(ColumnFamily::Subkey, &range, Direction::Forward).unwrap() {
        let (k, v) = item.unwrap();
        let sk = layout.decode_subkey(&k).unwrap();
        assert_eq!(sk.version, meta.version);
        by_member.insert(String::from_utf8(sk.sub.to_vec()).unwrap(), decode_f64_slice(&v).unwrap());
    }
    let mut by_score = BTreeMap::new();
    let mut last: Option<(f64, Vec<u8>)> = None;
    for item in db.backend().scan(ColumnFamily::Score, &range, Direction::Forward).unwrap() {
        let (k, _) = item.unwrap();
        let sk = layout.decode_score_key(&k).unwrap();
        assert_eq!(sk.version, meta.version);
        if let Some((s, m)) = &last {
            assert!((*s, m.as_slice()) < (sk.score, sk.member), "Score CF out of (score, member) order");
        }
        last = Some((sk.score, sk.member.to_vec()));
        by_score.insert(String::from_utf8(sk.member.to_vec()).unwrap(), sk.score);
    }
    assert_eq!(by_member, by_score, "Subkey and Score records of {key} disagree");
    assert_eq!(meta.size as usize, by_member.len(), "metadata size of {key}");
    Some(by_member)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn zset_commands_match_the_model(ops in prop::collection::vec(op(), 1..40)) {
        let (mut db, _) = db();
        let mut model = Model::new();
        for op in &ops {
            let (line, expected) = apply(&mut model, op);
            let got = run(&mut db, &line);
            prop_assert_eq!(got, expected, "{}", line);
        }
        for key in KEYS {
            let stored = stored_pairs(&db, key);
            prop_assert_eq!(stored.as_ref(), model.get(key), "records of {}", key);
        }
    }
}
