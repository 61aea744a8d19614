//! The string commands.
//!
//! A string lives inline in its metadata record ([`Metadata::string`]): every command
//! reads at most that one record per key and writes it back. Overwriting a collection
//! with a string only rewrites the metadata record (O(1)); the collection's subkeys become
//! garbage.

use bytes::Bytes;

use crate::backend::{KvBackend, WriteBatch};
use crate::codec::{Metadata, RedisType};
use crate::commands::args::{Distinct, int_arg};
use crate::commands::long_double;
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

/// The largest string Redis accepts (`proto-max-bulk-len`, 512 MB).
pub const MAX_STRING_LEN: u64 = 512 * 1024 * 1024;

/// What SET does besides storing the value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetOptions {
    /// NX: only when the key does not exist.
    pub(crate) nx: bool,
    /// XX: only when the key exists.
    pub(crate) xx: bool,
    /// GET: read the old value (the key must then hold a string or be missing).
    pub(crate) get: bool,
    /// The absolute expiry in unix milliseconds (a past time stores the key already
    /// expired); `None` means no expiry (or, with `keep_ttl`, the current one).
    pub(crate) expire_at_ms: Option<i64>,
    /// KEEPTTL: keep the current expiry.
    pub(crate) keep_ttl: bool,
}

/// What GETEX does to the expiry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GetExpiry {
    /// Leave it.
    #[default]
    Keep,
    /// Set it to this absolute unix time in milliseconds (at or before now deletes the key
    /// when `absolute`, i.e. EXAT/PXAT).
    At {
        /// The new expiry.
        ms: i64,
        /// Given as EXAT/PXAT (an elapsed time deletes the key).
        absolute: bool,
    },
    /// PERSIST: remove it.
    Persist,
}

/// A byte length as i64 (never above 512 MB in practice).
fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An absolute expiry as the metadata field: a time at or before the epoch becomes 1 ms
/// (already expired), never 0 (which would mean "no expiry").
fn expire_field(at_ms: i64) -> u64 {
    u64::try_from(at_ms).unwrap_or(0).max(1)
}

fn check_length(size: u64, append: u64) -> CommandResult<()> {
    match size.checked_add(append) {
        Some(total) if total <= MAX_STRING_LEN => Ok(()),
        _ => Err(CommandError::StringTooLong),
    }
}

impl<B: KvBackend> Db<'_, B> {
    fn now_i64(&self) -> i64 {
        i64::try_from(self.now_ms()).unwrap_or(i64::MAX)
    }

    /// Queues `key` = `value` with the given expiry (0: none).
    fn queue_string(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8], expire_ms: u64) {
        self.put_metadata(batch, key, &Metadata::string(value, expire_ms));
    }

    /// Writes one string record under metadata key `mkey` (built by the lookup before).
    fn write_string_at(&mut self, mkey: Vec<u8>, value: &[u8], expire_ms: u64) -> CommandResult<()> {
        let mut batch = WriteBatch::new();
        self.put_metadata_in(self.layout(), &mut batch, mkey, &Metadata::string(value, expire_ms));
        self.commit(batch)
    }

    /// GET: the value of a string key, `None` when missing.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; storage errors.
    pub(crate) fn get(&self, key: &[u8]) -> CommandResult<Option<Bytes>> {
        self.lookup_string(key)
    }

    /// SET with options. Returns whether the value was written and, with `get`, the old
    /// value. Overwrites a key of any type in O(1) (its metadata record only).
    ///
    /// # Errors
    /// With `get`, [`CommandError::WrongType`] when the key holds a collection (nothing is
    /// written); storage errors.
    pub(crate) fn set(
        &mut self,
        key: &[u8],
        value: &[u8],
        opts: SetOptions,
    ) -> CommandResult<(bool, Option<Bytes>)> {
        let mkey = self.metadata_key(key);
        // The old value only for GET: otherwise the record is read for its expiry alone.
        let (meta, old) = if opts.get {
            match self.lookup_stringlike_at(key, &mkey)? {
                Some(e) if e.meta.ty != RedisType::String => return Err(CommandError::WrongType),
                Some(e) => (Some(e.meta), Some(e.value)),
                None => (None, None),
            }
        } else {
            (self.lookup_meta_at(&mkey)?, None)
        };
        let found = meta.is_some();
        if (opts.nx && found) || (opts.xx && !found) {
            return Ok((false, old));
        }
        let expire_ms = match (opts.expire_at_ms, &meta) {
            (Some(at), _) => expire_field(at),
            (None, Some(meta)) if opts.keep_ttl => meta.expire_ms,
            _ => 0,
        };
        self.write_string_at(mkey, value, expire_ms)?;
        self.notify(NotifyFlags::STRING, "set", key);
        if opts.expire_at_ms.is_some() {
            self.notify(NotifyFlags::GENERIC, "expire", key);
        }
        Ok((true, old))
    }

    /// GETDEL: reads a string and deletes the key.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; storage errors.
    pub(crate) fn getdel(&mut self, key: &[u8]) -> CommandResult<Option<Bytes>> {
        let value = self.lookup_string(key)?;
        if value.is_some() {
            let mut batch = WriteBatch::new();
            self.delete_key(&mut batch, key);
            self.commit(batch)?;
            self.notify(NotifyFlags::GENERIC, "del", key);
        }
        Ok(value)
    }

    /// GETEX: reads a string and changes its expiry as `expiry` says.
    ///
    /// # Errors
    /// [`CommandError::WrongType`] for a collection; storage errors.
    pub(crate) fn getex(&mut self, key: &[u8], expiry: GetExpiry) -> CommandResult<Option<Bytes>> {
        let Some(entry) = self.lookup_stringlike(key)? else {
            return Ok(None);
        };
        if entry.meta.ty != RedisType::String {
            return Err(CommandError::WrongType);
        }
        let mut batch = WriteBatch::new();
        let event = match expiry {
            GetExpiry::Keep => None,
            GetExpiry::At { ms, absolute: true } if ms <= self.now_i64() => {
                self.delete_key(&mut batch, key);
                Some("del")
            }
            GetExpiry::At { ms, .. } => {
                self.queue_string(&mut batch, key, &entry.value, expire_field(ms));
                Some("expire")
            }
            GetExpiry::Persist if entry.meta.expire_ms != 0 => {
                self.queue_string(&mut batch, key, &entry.value, 0);
                Some("persist")
            }
            GetExpiry::Persist => None,
        };
        self.commit(batch)?;
        if let Some(event) = event {
            self.notify(NotifyFlags::GENERIC, event, key);
        }
        Ok(Some(entry.value))
    }

    /// MGET: the values of string keys; `None` for missing keys and collections.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn mget(&self, keys: &[Bytes]) -> CommandResult<Vec<Option<Bytes>>> {
        keys.iter()
            .map(|k| {
                Ok(self.lookup_stringlike(k)?.filter(|e| e.meta.ty == RedisType::String).map(|e| e.value))
            })
            .collect()
    }

    /// MSET: stores every pair (no expiry), in one batch; for a repeated key the last
    /// pair wins. With `nx` (MSETNX) nothing is written if any key exists; returns whether
    /// the pairs were written.
    ///
    /// # Errors
    /// Storage errors.
    pub(crate) fn mset(&mut self, pairs: &[(Bytes, Bytes)], nx: bool) -> CommandResult<bool> {
        if nx {
            for (k, _) in pairs {
                if self.lookup(k)?.is_some() {
                    return Ok(false);
                }
            }
        }
        let mut batch = WriteBatch::new();
        let mut seen = Distinct::with_capacity(pairs.len());
        for (k, v) in pairs {
            // Redis looks each key up as it sets it (an expired one is reported expired), so
            // its events go pair by pair, settled by the commit.
            let missing = self.lookup(k)?.is_none();
            if seen.insert(k) && missing {
                self.notify_new_in(self.index(), k);
            }
            self.queue_string(&mut batch, k, v, 0);
            self.notify(NotifyFlags::STRING, "set", k);
        }
        self.commit(batch)?;
        Ok(true)
    }

    /// APPEND: appends to a string (creating it), keeping the expiry; returns the new
    /// length.
    ///
    /// # Errors
    /// [`CommandError::WrongType`], [`CommandError::StringTooLong`] past 512 MB; storage
    /// errors.
    pub(crate) fn append(&mut self, key: &[u8], value: &[u8]) -> CommandResult<i64> {
        let mkey = self.metadata_key(key);
        let appended = |old: &[u8]| -> CommandResult<Vec<u8>> {
            check_length(old.len() as u64, value.len() as u64)?;
            let mut new = Vec::with_capacity(old.len() + value.len());
            new.extend_from_slice(old);
            new.extend_from_slice(value);
            Ok(new)
        };
        let (expire_ms, new) = match self.read_string_at(key, &mkey, appended)? {
            Some((expire_ms, new)) => (expire_ms, new?),
            None => (0, appended(&[])?),
        };
        self.write_string_at(mkey, &new, expire_ms)?;
        self.notify(NotifyFlags::STRING, "append", key);
        Ok(len_i64(new.len()))
    }

    /// STRLEN: the length of a string, 0 when missing.
    ///
    /// # Errors
    /// [`CommandError::WrongType`]; storage errors.
    pub(crate) fn strlen(&self, key: &[u8]) -> CommandResult<i64> {
        Ok(self.read_string_at(key, &self.metadata_key(key), <[u8]>::len)?.map_or(0, |(_, len)| len_i64(len)))
    }

    /// GETRANGE: the bytes from `start` to `end` inclusive; negative indexes count from
    /// the end, out-of-range ones are clamped (Redis 7.0 rules).
    ///
    /// # Errors
    /// [`CommandError::WrongType`]; storage errors.
    pub(crate) fn getrange(&self, key: &[u8], start: i64, end: i64) -> CommandResult<Bytes> {
        let Some(value) = self.lookup_string(key)? else {
            return Ok(Bytes::new());
        };
        if start < 0 && end < 0 && start > end {
            return Ok(Bytes::new());
        }
        let len = i128::try_from(value.len()).unwrap_or(i128::MAX);
        let (mut start, mut end) = (i128::from(start), i128::from(end));
        if start < 0 {
            start += len;
        }
        if end < 0 {
            end += len;
        }
        start = start.max(0);
        end = end.max(0).min(len - 1);
        if start > end || len == 0 {
            return Ok(Bytes::new());
        }
        Ok(value.slice(start as usize..=end as usize))
    }

    /// SETRANGE: overwrites bytes from `offset`, zero-padding as needed, keeping the
    /// expiry; returns the new length. An empty `value` writes nothing (and creates
    /// nothing).
    ///
    /// # Errors
    /// "ERR offset is out of range" for a negative offset, [`CommandError::WrongType`],
    /// [`CommandError::StringTooLong`] past 512 MB; storage errors.
    pub(crate) fn setrange(&mut self, key: &[u8], offset: i64, value: &[u8]) -> CommandResult<i64> {
        let offset = u64::try_from(offset).map_err(|_| CommandError::err("offset is out of range"))?;
        let mkey = self.metadata_key(key);
        // The new value; the old length when `value` is empty (nothing is written then).
        let edit = |old: &[u8]| -> CommandResult<Result<Vec<u8>, usize>> {
            if value.is_empty() {
                return Ok(Err(old.len()));
            }
            check_length(offset, value.len() as u64)?;
            let (offset, end) = (offset as usize, offset as usize + value.len());
            let mut new = Vec::with_capacity(old.len().max(end));
            new.extend_from_slice(old);
            if new.len() < end {
                new.resize(end, 0);
            }
            new[offset..end].copy_from_slice(value);
            Ok(Ok(new))
        };
        let (expire_ms, edited) = match self.read_string_at(key, &mkey, edit)? {
            Some((expire_ms, edited)) => (expire_ms, edited?),
            None => (0, edit(&[])?),
        };
        let new = match edited {
            Ok(new) => new,
            Err(old_len) => return Ok(len_i64(old_len)),
        };
        self.write_string_at(mkey, &new, expire_ms)?;
        self.notify(NotifyFlags::STRING, "setrange", key);
        Ok(len_i64(new.len()))
    }

    /// INCRBY: adds `delta` to the integer in `key` (0 when missing), keeping the expiry;
    /// returns the new value.
    ///
    /// # Errors
    /// [`CommandError::WrongType`], [`CommandError::NotInteger`] when the value is not an
    /// integer, [`CommandError::Overflow`]; storage errors.
    pub(crate) fn incrby(&mut self, key: &[u8], delta: i64) -> CommandResult<i64> {
        let mkey = self.metadata_key(key);
        let (expire_ms, old) = match self.read_string_at(key, &mkey, int_arg)? {
            Some((expire_ms, old)) => (expire_ms, old?),
            None => (0, 0),
        };
        let new = old.checked_add(delta).ok_or(CommandError::Overflow)?;
        self.write_string_at(mkey, crate::commands::reply::decimal(new, &mut [0; 20]), expire_ms)?;
        self.notify(NotifyFlags::STRING, "incrby", key);
        Ok(new)
    }

    /// INCRBYFLOAT: adds `incr` (text) to the number in `key` (0 when missing) with the
    /// x87 80-bit `long double` arithmetic and `%.17Lf` formatting Redis uses, keeping
    /// the expiry; returns (and stores) the new text.
    ///
    /// # Errors
    /// [`CommandError::WrongType`], [`CommandError::NotFloat`] when the value or `incr`
    /// is not a number, "ERR increment would produce NaN or Infinity"; storage errors.
    pub(crate) fn incrbyfloat(&mut self, key: &[u8], incr: &[u8]) -> CommandResult<Bytes> {
        let mkey = self.metadata_key(key);
        let (expire_ms, old) = match self.read_string_at(key, &mkey, long_double::parse)? {
            Some((expire_ms, old)) => (expire_ms, old.ok_or(CommandError::NotFloat)?),
            None => (0, long_double::LongDouble::ZERO),
        };
        let incr = long_double::parse(incr).ok_or(CommandError::NotFloat)?;
        let sum = long_double::add(old, incr)
            .ok_or_else(|| CommandError::err("increment would produce NaN or Infinity"))?;
        let text = Bytes::from(long_double::format_human(sum));
        self.write_string_at(mkey, &text, expire_ms)?;
        self.notify(NotifyFlags::STRING, "incrbyfloat", key);
        Ok(text)
    }
}

pub(crate) fn get<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::bulk_or_nil(db.get(&argv[1])?))
}

/// Units of an expiry option of SET / GETEX.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExpireKind {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// The options of SET (`for_set`) or GETEX, parsed with Redis 7.0's exact rules.
#[derive(Debug, Default)]
struct StringOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<(ExpireKind, &'a Bytes)>,
}

fn parse_string_options(args: &[Bytes], for_set: bool) -> CommandResult<StringOptions<'_>> {
    let mut o = StringOptions::default();
    let mut j = 0;
    while j < args.len() {
        let opt = args[j].to_ascii_lowercase();
        let next = args.get(j + 1);
        let has_expire = o.expire.is_some();
        let kind = match opt.as_slice() {
            b"ex" => Some(ExpireKind::Ex),
            b"px" => Some(ExpireKind::Px),
            b"exat" => Some(ExpireKind::ExAt),
            b"pxat" => Some(ExpireKind::PxAt),
            _ => None,
        };
        match (opt.as_slice(), kind) {
            (b"nx", _) if for_set && !o.xx => o.nx = true,
            (b"xx", _) if for_set && !o.nx => o.xx = true,
            (b"get", _) if for_set => o.get = true,
            (b"keepttl", _) if for_set && !o.persist && !has_expire => o.keep_ttl = true,
            (b"persist", _) if !for_set && !has_expire && !o.keep_ttl => o.persist = true,
            (_, Some(kind))
                if !o.keep_ttl && !o.persist && o.expire.is_none_or(|(k, _)| k == kind) && next.is_some() =>
            {
                o.expire = next.map(|n| (kind, n));
                j += 1;
            }
            _ => return Err(CommandError::Syntax),
        }
        j += 1;
    }
    Ok(o)
}

/// Turns an EX/PX/EXAT/PXAT argument into absolute unix milliseconds, with Redis'
/// checks and error text ("ERR invalid expire time in 'NAME' command").
fn expire_ms_of(kind: ExpireKind, arg: &[u8], now_ms: i64, name: &str) -> CommandResult<i64> {
    let invalid = || CommandError::err(format_args!("invalid expire time in '{name}' command"));
    let mut ms = int_arg(arg)?;
    let seconds = matches!(kind, ExpireKind::Ex | ExpireKind::ExAt);
    if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
        return Err(invalid());
    }
    if seconds {
        ms *= 1000;
    }
    if matches!(kind, ExpireKind::Ex | ExpireKind::Px) {
        ms = ms.wrapping_add(now_ms);
    }
    if ms <= 0 {
        return Err(invalid());
    }
    Ok(ms)
}

pub(crate) fn set<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    if argv.len() == 3 {
        // No options (the common SET): nothing to parse.
        db.set(&argv[1], &argv[2], SetOptions::default())?;
        return Ok(Reply::OK);
    }
    let o = parse_string_options(&argv[3..], true)?;
    let expire_at_ms = match o.expire {
        Some((kind, arg)) => Some(expire_ms_of(kind, arg, db.now_i64(), "set")?),
        None => None,
    };
    let opts = SetOptions { nx: o.nx, xx: o.xx, get: o.get, expire_at_ms, keep_ttl: o.keep_ttl };
    let (written, old) = db.set(&argv[1], &argv[2], opts)?;
    Ok(if opts.get {
        Reply::bulk_or_nil(old)
    } else if written {
        Reply::OK
    } else {
        Reply::Nil
    })
}

pub(crate) fn setnx<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let opts = SetOptions { nx: true, ..SetOptions::default() };
    Ok(Reply::Integer(i64::from(db.set(&argv[1], &argv[2], opts)?.0)))
}

fn setex_generic<B: KvBackend>(
    db: &mut Db<B>,
    argv: &[Bytes],
    kind: ExpireKind,
    name: &str,
) -> CommandResult {
    let at = expire_ms_of(kind, &argv[2], db.now_i64(), name)?;
    let opts = SetOptions { expire_at_ms: Some(at), ..SetOptions::default() };
    db.set(&argv[1], &argv[3], opts)?;
    Ok(Reply::OK)
}

pub(crate) fn setex<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    setex_generic(db, argv, ExpireKind::Ex, "setex")
}

pub(crate) fn psetex<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    setex_generic(db, argv, ExpireKind::Px, "psetex")
}

pub(crate) fn getset<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let opts = SetOptions { get: true, ..SetOptions::default() };
    Ok(Reply::bulk_or_nil(db.set(&argv[1], &argv[2], opts)?.1))
}

pub(crate) fn getdel<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::bulk_or_nil(db.getdel(&argv[1])?))
}

pub(crate) fn getex<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let o = parse_string_options(&argv[2..], false)?;
    // Redis looks the key up (nil, WRONGTYPE) before validating the expire time.
    match db.lookup(&argv[1])? {
        None => return Ok(Reply::Nil),
        Some(e) if !matches!(e.meta.ty, RedisType::String | RedisType::Bitmap) => {
            return Err(CommandError::WrongType);
        }
        Some(_) => {}
    }
    let expiry = match o.expire {
        Some((kind, arg)) => GetExpiry::At {
            ms: expire_ms_of(kind, arg, db.now_i64(), "getex")?,
            absolute: matches!(kind, ExpireKind::ExAt | ExpireKind::PxAt),
        },
        None if o.persist => GetExpiry::Persist,
        None => GetExpiry::Keep,
    };
    Ok(Reply::bulk_or_nil(db.getex(&argv[1], expiry)?))
}

pub(crate) fn mget<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Array(db.mget(&argv[1..])?.into_iter().map(Reply::bulk_or_nil).collect()))
}

fn pairs_of(argv: &[Bytes], name: &str) -> CommandResult<Vec<(Bytes, Bytes)>> {
    if argv.len().is_multiple_of(2) {
        return Err(CommandError::WrongArity(name.into()));
    }
    Ok(argv[1..].chunks_exact(2).map(|p| (p[0].clone(), p[1].clone())).collect())
}

pub(crate) fn mset<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    db.mset(&pairs_of(argv, "mset")?, false)?;
    Ok(Reply::OK)
}

pub(crate) fn msetnx<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(i64::from(db.mset(&pairs_of(argv, "msetnx")?, true)?)))
}

pub(crate) fn append<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.append(&argv[1], &argv[2])?))
}

pub(crate) fn strlen<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.strlen(&argv[1])?))
}

pub(crate) fn getrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let start = int_arg(&argv[2])?;
    let end = int_arg(&argv[3])?;
    Ok(Reply::Bulk(db.getrange(&argv[1], start, end)?))
}

pub(crate) fn setrange<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let offset = int_arg(&argv[2])?;
    Ok(Reply::Integer(db.setrange(&argv[1], offset, &argv[3])?))
}

pub(crate) fn incr<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.incrby(&argv[1], 1)?))
}

pub(crate) fn decr<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Integer(db.incrby(&argv[1], -1)?))
}

pub(crate) fn incrby<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let delta = int_arg(&argv[2])?;
    Ok(Reply::Integer(db.incrby(&argv[1], delta)?))
}

pub(crate) fn decrby<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let delta = int_arg(&argv[2])?;
    let delta = delta.checked_neg().ok_or_else(|| CommandError::err("decrement would overflow"))?;
    Ok(Reply::Integer(db.incrby(&argv[1], delta)?))
}

pub(crate) fn incrbyfloat<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    Ok(Reply::Bulk(db.incrbyfloat(&argv[1], &argv[2])?))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::backend::MemoryBackend;
    use crate::codec::ManualClock;

    const T0_MS: u64 = 1_767_225_600_000;

    #[test]
    fn typed_api() {
        let mut db = Db::new(MemoryBackend::new()).with_clock(Arc::new(ManualClock::new(T0_MS)));
        let opts = SetOptions { expire_at_ms: Some(T0_MS as i64 + 5000), ..SetOptions::default() };
        assert_eq!(db.set(b"k", b"10", opts).unwrap(), (true, None));
        assert_eq!(db.pttl(b"k").unwrap(), 5000);
        assert_eq!(db.incrby(b"k", 5).unwrap(), 15);
        assert_eq!(db.pttl(b"k").unwrap(), 5000);
        assert_eq!(db.getrange(b"k", 1, -1).unwrap(), bytes::Bytes::from_static(b"5"));
        assert_eq!(db.getex(b"k", GetExpiry::Persist).unwrap().as_deref(), Some(&b"15"[..]));
        assert_eq!(db.pttl(b"k").unwrap(), -1);
        // An expiry before the epoch stores the key already expired, never persistent.
        let past = SetOptions { expire_at_ms: Some(-5), ..SetOptions::default() };
        assert_eq!(db.set(b"p", b"v", past).unwrap(), (true, None));
        assert_eq!(db.get(b"p").unwrap(), None);
        assert_eq!(db.incrbyfloat(b"f", b"0.1").unwrap(), bytes::Bytes::from_static(b"0.1"));
        assert_eq!(db.append(b"f", b"5").unwrap(), 4);
        assert_eq!(db.strlen(b"f").unwrap(), 4);
        assert_eq!(db.setrange(b"f", 0, b"9").unwrap(), 4);
        assert_eq!(db.get(b"f").unwrap().as_deref(), Some(&b"9.15"[..]));
    }
}
