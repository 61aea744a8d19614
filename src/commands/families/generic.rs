//! Generic commands that read keys of any type: OBJECT, TOUCH, WAIT and LCS.
//!
//! OBJECT ENCODING names the encoding Redis 7.0 would pick for the value as it is now, by
//! Redis' default thresholds (`hash-max-listpack-entries 512`, `…-value 64`,
//! `set-max-intset-entries 512`, `zset-max-listpack-entries 128`, `…-value 64`; strings:
//! `int` for a canonical 64-bit integer, `embstr` up to 44 bytes, else `raw`; a HyperLogLog
//! is `raw` whatever its length, as PFADD and PFMERGE create it). Redis also
//! remembers history — a hash that once grew past the thresholds stays `hashtable`, an
//! APPENDed string is `raw` — which a store of records does not keep.

use bytes::Bytes;

use crate::backend::{Direction, KvBackend};
use crate::codec::RedisType;
use crate::commands::args::{int_arg, parse_i64};
use crate::commands::db::RECORD_OVERHEAD;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// Redis' `OBJ_SHARED_REFCOUNT`: small integers are shared objects.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integers `0..10000` (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;
/// What the LCS table may take, as Redis' `proto-max-bulk-len` default (512 MB).
const LCS_MAX_TABLE_BYTES: u64 = 512 * 1024 * 1024;

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

const MEMORY_HELP: &[&str] = &[
    "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
    "HELP",
    "    Prints this help.",
];

impl<B: KvBackend> Db<'_, B> {
    /// An estimate of the bytes `key` takes in the store, `None` when missing: its metadata
    /// record, plus, for a collection, its size times the average record of its first
    /// `samples` elements (all of them when `samples` is 0; a zset's elements count twice, for
    /// their score records). Reads the metadata and at most `samples` records.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn memory_usage(&self, key: &[u8], samples: u64) -> CommandResult<Option<u64>> {
        let Some(entry) = self.lookup_stringlike(key)? else {
            return Ok(None);
        };
        let metadata_key = self.layout().metadata_key(key).len() as u64;
        let metadata = metadata_key + entry.value.len() as u64 + 26 + RECORD_OVERHEAD;
        let meta = entry.meta;
        if meta.ty.is_single_kv() || meta.size == 0 {
            return Ok(Some(metadata));
        }
        // A subkey is the metadata key's prefix and key, a key length and a version, the sub.
        let subkey_prefix = metadata_key + 12;
        let (mut seen, mut bytes) = (0u64, 0u64);
        for item in self.scan_subkeys(key, meta.version, Direction::Forward)? {
            let (sub, value) = item?;
            bytes += subkey_prefix + sub.len() as u64 + value.len() as u64 + RECORD_OVERHEAD;
            seen += 1;
            if seen == samples {
                break;
            }
        }
        let per_element = bytes.checked_div(seen).unwrap_or(0);
        let copies = if meta.ty == RedisType::ZSet { 2 } else { 1 };
        Ok(Some(metadata + per_element * meta.size * copies))
    }

    /// The encoding Redis 7.0 would report for `key` (see the module docs), `None` when
    /// missing. Reads the metadata, and at most 513 records of a collection.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn object_encoding(&self, key: &[u8]) -> CommandResult<Option<&'static str>> {
        let Some(entry) = self.lookup_stringlike(key)? else {
            return Ok(None);
        };
        let meta = entry.meta;
        let all_small = |limit: u64, ok: &dyn Fn(&Bytes, &Bytes) -> bool| -> CommandResult<bool> {
            if meta.size > limit {
                return Ok(false);
            }
            for item in self.scan_subkeys(key, meta.version, Direction::Forward)? {
                let (sub, value) = item?;
                if !ok(&sub, &value) {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        Ok(Some(match meta.ty {
            RedisType::String if entry.value.len() <= 20 && parse_i64(&entry.value).is_some() => "int",
            RedisType::String if entry.value.len() <= 44 && !super::hll::is_hll(&entry.value) => "embstr",
            RedisType::String => "raw",
            RedisType::List => "quicklist",
            RedisType::Hash if all_small(512, &|f, v| f.len() <= 64 && v.len() <= 64)? => "listpack",
            RedisType::Hash => "hashtable",
            RedisType::Set if all_small(512, &|m, _| parse_i64(m).is_some())? => "intset",
            RedisType::Set => "hashtable",
            RedisType::ZSet if all_small(128, &|m, _| m.len() <= 64)? => "listpack",
            RedisType::ZSet => "skiplist",
            ty => ty.name(),
        }))
    }

    /// How many of `keys` exist (a key named twice counts twice, as in Redis).
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn touch(&self, keys: &[Bytes]) -> CommandResult<i64> {
        let mut n = 0;
        for key in keys {
            n += i64::from(self.lookup_meta(key)?.is_some());
        }
        Ok(n)
    }

    /// The string value of `key` for LCS: empty when missing.
    fn lcs_operand(&self, key: &[u8]) -> CommandResult<Bytes> {
        match self.lookup_stringlike(key)? {
            None => Ok(Bytes::new()),
            Some(e) if e.meta.ty == RedisType::String => Ok(e.value),
            Some(_) => Err(CommandError::err("The specified keys must contain string values")),
        }
    }
}

/// MEMORY USAGE key [SAMPLES count] (an estimate: see [`Db::memory_usage`]) and MEMORY HELP.
pub(crate) fn memory<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = argv[1].to_ascii_lowercase();
    match (sub.as_slice(), argv.len()) {
        (b"help", 2) => Ok(Reply::Array(MEMORY_HELP.iter().map(|l| Reply::Status((*l).into())).collect())),
        (b"usage", 3..) => {
            let mut samples = 5;
            let mut rest = argv[3..].chunks(2);
            for pair in rest.by_ref() {
                match pair {
                    [word, count] if word.eq_ignore_ascii_case(b"samples") => {
                        samples = parse_i64(count).ok_or(CommandError::NotInteger)?;
                        if samples < 0 {
                            return Err(CommandError::Syntax);
                        }
                    }
                    _ => return Err(CommandError::Syntax),
                }
            }
            Ok(db.memory_usage(&argv[2], samples as u64)?.map_or(Reply::Nil, |n| Reply::Integer(n as i64)))
        }
        (b"help" | b"usage", _) => Err(CommandError::Other(format!(
            "ERR wrong number of arguments for 'memory|{}' command",
            String::from_utf8_lossy(&sub)
        ))),
        _ => Err(CommandError::Other(format!(
            "ERR unknown subcommand '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(&argv[1])
        ))),
    }
}

/// `OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ key` and `OBJECT HELP`. IDLETIME answers under an
/// LRU (or no) policy and FREQ under an LFU one, each with Redis' error otherwise.
pub(crate) fn object<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = argv[1].to_ascii_lowercase();
    let arity = match sub.as_slice() {
        b"help" => 2,
        b"encoding" | b"refcount" | b"idletime" | b"freq" => 3,
        _ => {
            return Err(CommandError::Other(format!(
                "ERR unknown subcommand '{}'. Try OBJECT HELP.",
                String::from_utf8_lossy(&argv[1])
            )));
        }
    };
    if argv.len() != arity {
        return Err(CommandError::Other(format!(
            "ERR wrong number of arguments for 'object|{}' command",
            String::from_utf8_lossy(&sub)
        )));
    }
    if sub == b"help" {
        return Ok(Reply::Array(OBJECT_HELP.iter().map(|l| Reply::Status((*l).into())).collect()));
    }
    let key = &argv[2];
    if sub == b"encoding" {
        return Ok(db
            .object_encoding(key)?
            .map_or(Reply::Nil, |e| Reply::Bulk(Bytes::from_static(e.as_bytes()))));
    }
    let Some(entry) = db.lookup(key)? else {
        return Ok(Reply::Nil);
    };
    Ok(match sub.as_slice() {
        b"refcount" => {
            let shared = entry.meta.ty == RedisType::String
                && parse_i64(&entry.value).is_some_and(|v| (0..SHARED_INTEGERS).contains(&v));
            Reply::Integer(if shared { SHARED_REFCOUNT } else { 1 })
        }
        b"idletime" if db.lfu() => {
            return Err(CommandError::err(
                "An LFU maxmemory policy is selected, idle time not tracked. Please note that when \
                 switching between policies at runtime LRU and LFU data will take some time to adjust.",
            ));
        }
        b"idletime" => Reply::Integer(db.idle_secs(key) as i64),
        _ if db.lfu() => Reply::Integer(i64::from(db.freq(key))),
        _ => {
            return Err(CommandError::err(
                "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that \
                 when switching between policies at runtime LRU and LFU data will take some time to adjust.",
            ));
        }
    })
}

pub(crate) fn touch<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.touch(&argv[1..])?))
}

/// `WAIT numreplicas timeout` (milliseconds): there are no replicas, so `0` — at once for
/// `numreplicas <= 0` (and inside MULTI), else after blocking until the timeout (forever
/// for 0), as Redis 7.0 waits for acknowledgements that never come. It blocks on no key.
pub(crate) fn wait<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let replicas = int_arg(&argv[1])?;
    let timeout = match parse_i64(&argv[2]) {
        Some(t) if t >= 0 => (t > 0).then(|| std::time::Duration::from_millis(t as u64)),
        Some(_) => return Err(CommandError::err("timeout is negative")),
        None => return Err(CommandError::err("timeout is not an integer or out of range")),
    };
    if replicas <= 0 {
        return Ok(Reply::Integer(0));
    }
    Ok(db.would_block(&[], timeout, Reply::Integer(0), Reply::Integer(0)))
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`, Redis 7.0's dynamic program
/// and its walk back from the end, so the matches come out in Redis' order.
pub(crate) fn lcs<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    // Both keys are looked up before either is type-checked (Redis reports both expired).
    let (a, b) = (db.lcs_operand(&argv[1]), db.lcs_operand(&argv[2]));
    let (a, b) = (a?, b?);
    let (mut len_only, mut idx, mut with_len, mut min_len) = (false, false, false, 0u64);
    let mut j = 3;
    while j < argv.len() {
        match argv[j].to_ascii_lowercase().as_slice() {
            b"idx" => idx = true,
            b"len" => len_only = true,
            b"withmatchlen" => with_len = true,
            b"minmatchlen" if j + 1 < argv.len() => {
                min_len = u64::try_from(int_arg(&argv[j + 1])?).unwrap_or(0);
                j += 1;
            }
            _ => return Err(CommandError::Syntax),
        }
        j += 1;
    }
    if len_only && idx {
        return Err(CommandError::err("If you want both the length and indexes, please just use IDX."));
    }
    let (rows, cols) = (a.len() as u64 + 1, b.len() as u64 + 1);
    if rows.saturating_mul(cols).saturating_mul(4) > LCS_MAX_TABLE_BYTES {
        return Err(CommandError::err(
            "Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
        ));
    }
    let table = lcs_table(&a, &b);
    let at = |i: usize, j: usize| table[i * (b.len() + 1) + j];
    let total = at(a.len(), b.len());
    if len_only {
        return Ok(Reply::Integer(i64::from(total)));
    }
    let mut common = vec![0u8; total as usize];
    let mut matches = Vec::new();
    let (mut i, mut j, mut k) = (a.len(), b.len(), total as usize);
    // The current range, walking backwards: (a_start, a_end, b_start, b_end).
    let mut range: Option<(usize, usize, usize, usize)> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[k - 1] = a[i - 1];
            range = Some(match range {
                None => (i - 1, i - 1, j - 1, j - 1),
                Some((sa, ea, sb, eb)) => (sa - 1, ea, sb - 1, eb),
            });
            if range.is_some_and(|(sa, _, sb, _)| sa == 0 || sb == 0) {
                emit = true;
            }
            (i, j, k) = (i - 1, j - 1, k - 1);
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = range.is_some();
        }
        if let (true, Some((sa, ea, sb, eb))) = (emit, range) {
            let len = (ea - sa + 1) as u64;
            if min_len == 0 || len >= min_len {
                let pos = |s: usize, e: usize| {
                    Reply::Array(vec![Reply::Integer(s as i64), Reply::Integer(e as i64)])
                };
                let mut m = vec![pos(sa, ea), pos(sb, eb)];
                if with_len {
                    m.push(Reply::Integer(len as i64));
                }
                matches.push(Reply::Array(m));
            }
            range = None;
        }
    }
    if !idx {
        return Ok(Reply::Bulk(Bytes::from(common)));
    }
    Ok(Reply::Map(vec![
        (Reply::bulk(b"matches"), Reply::Array(matches)),
        (Reply::bulk(b"len"), Reply::Integer(i64::from(total))),
    ]))
}

/// `t[i][j]` = the LCS length of `a[..i]` and `b[..j]`, row-major.
fn lcs_table(a: &[u8], b: &[u8]) -> Vec<u32> {
    let cols = b.len() + 1;
    let mut t = vec![0u32; (a.len() + 1) * cols];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            t[i * cols + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * cols + j - 1] + 1
            } else {
                t[(i - 1) * cols + j].max(t[i * cols + j - 1])
            };
        }
    }
    t
}
