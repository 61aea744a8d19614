//! HyperLogLog: PFADD, PFCOUNT (one key, with Redis' cached cardinality written back, or
//! many keys merged), PFMERGE. Values are Redis-format HLL strings (see `hll/sketch.rs`), so
//! GET returns a payload Redis accepts and a payload Redis produced counts the same here.

mod sketch;

use bytes::Bytes;

use super::notify::NotifyFlags;
use super::{CommandError, CommandResult, Db, Handler, Reply};
use crate::backend::{KvBackend, WriteBatch};
use crate::codec::{Metadata, RedisType};

/// The HyperLogLog commands' handlers.
pub(super) fn command<B: KvBackend>(name: &str) -> Option<Handler<B>> {
    Some(match name {
        "pfadd" => pfadd,
        "pfcount" => pfcount,
        "pfmerge" => pfmerge,
        _ => return None,
    })
}

fn not_hll() -> CommandError {
    CommandError::Other("WRONGTYPE Key is not a valid HyperLogLog string value.".into())
}

fn corrupt(_: sketch::Corrupt) -> CommandError {
    CommandError::Other("INVALIDOBJ Corrupted HLL object detected".into())
}

impl<B: KvBackend> Db<'_, B> {
    /// The HLL in `key` and its expiry: `None` when missing.
    ///
    /// # Errors
    /// WRONGTYPE for a non-string, "Key is not a valid HyperLogLog string value." for a
    /// string that is not an HLL; storage errors.
    fn lookup_hll(&self, key: &[u8]) -> CommandResult<Option<(Vec<u8>, u64)>> {
        match self.lookup_stringlike(key)? {
            None => Ok(None),
            Some(e) if e.meta.ty != RedisType::String => Err(CommandError::WrongType),
            Some(e) if sketch::is_valid(&e.value) => Ok(Some((e.value.to_vec(), e.meta.expire_ms))),
            Some(_) => Err(not_hll()),
        }
    }

    fn write_hll(&mut self, key: &[u8], hll: &[u8], expire_ms: u64) -> CommandResult<()> {
        let mut batch = WriteBatch::new();
        self.put_metadata(&mut batch, key, &Metadata::string(hll, expire_ms));
        self.commit(batch)
    }

    /// The registers merged over `keys` (missing keys count as empty).
    fn merged_registers(&self, keys: &[Bytes]) -> CommandResult<(Vec<u8>, bool)> {
        let mut max = vec![0u8; sketch::REGISTERS];
        let mut any_dense = false;
        for key in keys {
            if let Some((hll, _)) = self.lookup_hll(key)? {
                any_dense |= hll[4] == 0;
                sketch::merge_into(&mut max, &hll).map_err(corrupt)?;
            }
        }
        Ok((max, any_dense))
    }
}

fn pfadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let key = &argv[1];
    let (mut hll, expire_ms, mut updated) = match db.lookup_hll(key)? {
        Some((hll, expire_ms)) => (hll, expire_ms, false),
        None => (sketch::new_sparse(), 0, true),
    };
    for element in &argv[2..] {
        let (index, count) = sketch::pattern(element);
        match sketch::set(&mut hll, index, count) {
            Ok(changed) => updated |= changed,
            Err(e) => {
                // Redis edits the string in place: what changed before the corrupt part stays.
                if updated {
                    db.write_hll(key, &hll, expire_ms)?;
                }
                return Err(corrupt(e));
            }
        }
    }
    if updated {
        sketch::invalidate_cache(&mut hll);
        db.write_hll(key, &hll, expire_ms)?;
        db.notify(NotifyFlags::STRING, "pfadd", key);
    }
    Ok(Reply::Integer(i64::from(updated)))
}

fn pfcount<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    if argv.len() > 2 {
        let (max, _) = db.merged_registers(&argv[1..])?;
        return Ok(Reply::Integer(sketch::estimate(&sketch::raw_histogram(&max)) as i64));
    }
    let key = &argv[1];
    let Some((mut hll, expire_ms)) = db.lookup_hll(key)? else {
        return Ok(Reply::Integer(0));
    };
    if let Some(card) = sketch::cached(&hll) {
        return Ok(Reply::Integer(card as i64));
    }
    let card = sketch::estimate(&sketch::histogram(&hll).map_err(corrupt)?);
    // Redis writes the fresh cardinality back into the string.
    sketch::store_cache(&mut hll, card);
    db.write_hll(key, &hll, expire_ms)?;
    Ok(Reply::Integer(card as i64))
}

fn pfmerge<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let dest = &argv[1];
    // The destination is one of the sources, as in Redis.
    let (max, any_dense) = db.merged_registers(&argv[1..])?;
    let (mut hll, expire_ms) = db.lookup_hll(dest)?.unwrap_or_else(|| (sketch::new_sparse(), 0));
    if any_dense {
        sketch::to_dense(&mut hll).map_err(corrupt)?;
    }
    for (index, &count) in max.iter().enumerate().filter(|(_, c)| **c > 0) {
        sketch::set(&mut hll, index, count).map_err(corrupt)?;
    }
    sketch::invalidate_cache(&mut hll);
    db.write_hll(dest, &hll, expire_ms)?;
    // Redis reports a merge as a mass add.
    db.notify(NotifyFlags::STRING, "pfadd", dest);
    Ok(Reply::status("OK"))
}
