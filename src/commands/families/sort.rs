//! SORT and SORT_RO, as Redis 7.0's `sortCommandGeneric`: BY with patterns (`nosort` or any
//! pattern without `*` keeps the native order), GET with `#` and `->field` hash lookups,
//! LIMIT, ASC/DESC, ALPHA, STORE.
//!
//! Numeric sorting parses each weight with C's `strtod` (the whole string up to a NUL byte;
//! an empty string is 0) and breaks ties by comparing the elements' bytes. ALPHA compares
//! as C strings (Redis' `strcoll` under the C locale: bytes up to the first NUL), or all the
//! bytes with STORE, keeping equal ones in their native order (glibc's `qsort` is a stable
//! merge sort). A set comes out of `BY nosort` in this engine's member order where Redis
//! uses its hash order, and equal ALPHA weights of a set's members in member order.

use bytes::Bytes;

use crate::backend::{Direction, KvBackend, WriteBatch};
use crate::codec::RedisType;
use crate::codec::rdb::RdbValue;
use crate::commands::args::{int_arg, strtod};
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// The parsed options of one SORT.
#[derive(Debug, Default)]
struct SortSpec<'a> {
    desc: bool,
    alpha: bool,
    limit: Option<(i64, i64)>,
    by: Option<&'a [u8]>,
    /// `BY` without `*`: keep the native order.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
    store: Option<&'a [u8]>,
}

pub(crate) fn sort<B: KvBackend>(db: &mut Db<'_, B>, argv: &[Bytes]) -> CommandResult {
    sort_generic(db, argv, false)
}

pub(crate) fn sort_ro<B: KvBackend>(db: &mut Db<'_, B>, argv: &[Bytes]) -> CommandResult {
    sort_generic(db, argv, true)
}

fn parse(argv: &[Bytes], readonly: bool) -> CommandResult<SortSpec<'_>> {
    let mut spec = SortSpec::default();
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        match argv[j].to_ascii_lowercase().as_slice() {
            b"asc" => spec.desc = false,
            b"desc" => spec.desc = true,
            b"alpha" => spec.alpha = true,
            b"limit" if left >= 2 => {
                spec.limit = Some((int_arg(&argv[j + 1])?, int_arg(&argv[j + 2])?));
                j += 2;
            }
            b"store" if left >= 1 && !readonly => {
                spec.store = Some(&argv[j + 1]);
                j += 1;
            }
            b"by" if left >= 1 => {
                spec.by = Some(&argv[j + 1]);
                spec.dont_sort = !argv[j + 1].contains(&b'*');
                j += 1;
            }
            b"get" if left >= 1 => {
                spec.gets.push(&argv[j + 1]);
                j += 1;
            }
            _ => return Err(CommandError::Syntax),
        }
        j += 1;
    }
    Ok(spec)
}

impl<B: KvBackend> Db<'_, B> {
    /// Redis' `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` is
    /// replaced by the element, and a `->field` suffix reads that hash field instead of a
    /// string. A pattern without `*`, a missing key or a key of the wrong type give `None`.
    fn by_pattern(&self, pattern: &[u8], element: &Bytes) -> CommandResult<Option<Bytes>> {
        if pattern == b"#" {
            return Ok(Some(element.clone()));
        }
        let Some(star) = pattern.iter().position(|&b| b == b'*') else {
            return Ok(None);
        };
        let arrow = pattern[star + 1..].windows(2).position(|w| w == b"->").map(|p| star + 1 + p);
        let (key_end, field) = match arrow {
            Some(a) if a + 2 < pattern.len() => (a, Some(&pattern[a + 2..])),
            _ => (pattern.len(), None),
        };
        let mut key = Vec::with_capacity(key_end + element.len());
        key.extend_from_slice(&pattern[..star]);
        key.extend_from_slice(element);
        key.extend_from_slice(&pattern[star + 1..key_end]);
        // A bitmap reads as the string Redis would hold.
        let Some(entry) = self.lookup_stringlike(&key)? else {
            return Ok(None);
        };
        match (field, entry.meta.ty) {
            (None, RedisType::String) => Ok(Some(entry.value)),
            (Some(field), RedisType::Hash) => self.get_subkey(&key, entry.meta.version, field),
            _ => Ok(None),
        }
    }

    /// The elements of the key to sort in their native order: a list head to tail, a set in
    /// member order, a sorted set by score.
    fn sort_source(&self, key: &[u8]) -> CommandResult<(RedisType, Vec<Bytes>)> {
        let Some(entry) = self.lookup(key)? else {
            return Ok((RedisType::List, Vec::new()));
        };
        let meta = entry.meta;
        let items: Vec<Bytes> = match meta.ty {
            RedisType::List => self
                .scan_subkeys(key, meta.version, Direction::Forward)?
                .map(|r| r.map(|(_, v)| v))
                .collect::<CommandResult<_>>()?,
            RedisType::Set => self
                .scan_subkeys(key, meta.version, Direction::Forward)?
                .map(|r| r.map(|(m, _)| m))
                .collect::<CommandResult<_>>()?,
            RedisType::ZSet => {
                let mut pairs: Vec<(f64, Bytes)> = self
                    .scan_members(key, meta.version)?
                    .map(|r| r.map(|(m, s)| (s, m)))
                    .collect::<CommandResult<_>>()?;
                pairs.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
                pairs.into_iter().map(|(_, m)| m).collect()
            }
            _ => return Err(CommandError::WrongType),
        };
        Ok((meta.ty, items))
    }
}

/// A weight read as Redis reads it: C's `strtod` over the bytes before any NUL, which must
/// all be used, without range error or NaN.
fn numeric_weight(bytes: &[u8]) -> Option<f64> {
    let text = bytes.split(|&b| b == 0).next().unwrap_or_default();
    let r = strtod(text);
    (r.used == text.len() && !r.range_error && !r.value.is_nan()).then_some(r.value)
}

fn sort_generic<B: KvBackend>(db: &mut Db<'_, B>, argv: &[Bytes], readonly: bool) -> CommandResult {
    let mut spec = parse(argv, readonly)?;
    let (ty, mut items) = db.sort_source(&argv[1])?;
    if spec.dont_sort && ty == RedisType::Set && spec.store.is_some() {
        // A stored set must not depend on the hash order: Redis forces ALPHA.
        (spec.dont_sort, spec.alpha, spec.by) = (false, true, None);
    }
    let len = items.len() as i64;
    let (offset, count) = spec.limit.unwrap_or((0, -1));
    let mut start = offset.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut end = if count < 0 { len - 1 } else { start + count - 1 };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);

    let mut bad_weight = false;
    if spec.dont_sort {
        if spec.desc && ty != RedisType::Set {
            items.reverse();
        }
    } else {
        // (weight, element): a number, or for ALPHA the BY value (None sorts first).
        let mut keyed = Vec::with_capacity(items.len());
        for item in items {
            let by = match spec.by {
                Some(pattern) => db.by_pattern(pattern, &item)?,
                None => Some(item.clone()),
            };
            let weight = match (&by, spec.alpha) {
                (_, true) => Weight::Text(if spec.by.is_some() { by } else { None }),
                (None, false) => Weight::Number(0.0),
                (Some(b), false) => Weight::Number(numeric_weight(b).unwrap_or_else(|| {
                    bad_weight = true;
                    0.0
                })),
            };
            keyed.push((weight, item));
        }
        if !bad_weight {
            let store = spec.store.is_some();
            // Stable, as glibc's merge-sort `qsort`: equal weights keep the native order.
            keyed.sort_by(|(wa, a), (wb, b)| {
                let text = |x: &[u8], y: &[u8]| if store { x.cmp(y) } else { c_string(x).cmp(c_string(y)) };
                let cmp = match (wa, wb) {
                    (Weight::Number(x), Weight::Number(y)) => {
                        x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.cmp(b))
                    }
                    (Weight::Text(x), Weight::Text(y)) if spec.by.is_some() => match (x, y) {
                        (Some(x), Some(y)) => text(x, y),
                        _ => x.is_some().cmp(&y.is_some()),
                    },
                    _ => text(a, b),
                };
                if spec.desc { cmp.reverse() } else { cmp }
            });
        }
        items = keyed.into_iter().map(|(_, item)| item).collect();
    }
    if bad_weight {
        return Err(CommandError::err("One or more scores can't be converted into double"));
    }
    let selected = if end >= start { &items[start as usize..=end as usize] } else { &[] };
    let mut out = Vec::with_capacity(selected.len() * spec.gets.len().max(1));
    for item in selected {
        if spec.gets.is_empty() {
            out.push(Some(item.clone()));
        }
        for pattern in &spec.gets {
            out.push(db.by_pattern(pattern, item)?);
        }
    }
    let Some(dst) = spec.store else {
        return Ok(Reply::Array(out.into_iter().map(Reply::bulk_or_nil).collect()));
    };
    let stored = out.len() as i64;
    let existed = db.store_target(dst, out.is_empty())?;
    let mut batch = WriteBatch::new();
    if out.is_empty() {
        if existed {
            db.delete_key(&mut batch, dst);
        }
    } else {
        let list = out.into_iter().map(Option::unwrap_or_default).collect();
        db.queue_value(&mut batch, dst, RdbValue::List(list), 0)?;
    }
    db.commit(batch)?;
    db.notify_store(NotifyFlags::LIST, "sortstore", dst, stored == 0, existed);
    Ok(Reply::Integer(stored))
}

/// The bytes C's `strcoll` sees (Redis compares ALPHA weights as C strings unless it
/// stores the result): everything before the first NUL.
fn c_string(bytes: &[u8]) -> &[u8] {
    bytes.split(|&b| b == 0).next().unwrap_or_default()
}

/// What an element sorts by.
enum Weight {
    Number(f64),
    Text(Option<Bytes>),
}
