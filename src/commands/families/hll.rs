//! HyperLogLog: PFADD, PFCOUNT (one key, with Redis' cached cardinality written back, or
//! many keys merged), PFMERGE, and PFDEBUG and PFSELFTEST, Redis' introspection of the
//! encoding. Values are Redis-format HLL strings (see `hll/sketch.rs`), so
//! GET returns a payload Redis accepts and a payload Redis produced counts the same here.

mod sketch;

use bytes::Bytes;

use crate::backend::{KvBackend, WriteBatch};
use crate::codec::{Metadata, RedisType};
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

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

pub(crate) fn pfadd<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
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

pub(crate) fn pfcount<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
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

pub(crate) fn pfmerge<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
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

/// PFDEBUG GETREG|DECODE|ENCODING|TODENSE key: the registers (a sparse HLL is made dense
/// first, and stays so), the sparse opcodes as text (`z:len`, `Z:len`, `v:value,len`), the
/// encoding, or the conversion to dense (1 if it converted).
pub(crate) fn pfdebug<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let sub = String::from_utf8_lossy(&argv[1]).into_owned();
    let key = &argv[2];
    let Some((mut hll, expire)) = db.lookup_hll(key)? else {
        return Err(CommandError::err("The specified key does not exist"));
    };
    let arity = || CommandError::Other(format!("ERR Wrong number of arguments for the '{sub}' subcommand"));
    let sparse = hll[4] != 0;
    match sub.to_ascii_lowercase().as_str() {
        "getreg" | "todense" => {
            if argv.len() != 3 {
                return Err(arity());
            }
            if sparse {
                sketch::to_dense(&mut hll).map_err(corrupt)?;
                // Redis converts in place without signalling the key: a WATCH on it holds.
                let mut batch = WriteBatch::new();
                db.put_metadata(&mut batch, key, &Metadata::string(&hll, expire));
                db.commit_unsignalled(batch)?;
            }
            if sub.eq_ignore_ascii_case("todense") {
                return Ok(Reply::Integer(i64::from(sparse)));
            }
            let regs = sketch::registers(&hll).map_err(corrupt)?;
            Ok(Reply::Array(regs.into_iter().map(|r| Reply::Integer(i64::from(r))).collect()))
        }
        "decode" => {
            if argv.len() != 3 {
                return Err(arity());
            }
            if !sparse {
                return Err(CommandError::err("HLL encoding is not sparse"));
            }
            let ops = &hll[sketch::HEADER..];
            let (mut text, mut p) = (Vec::new(), 0);
            while p < ops.len() {
                let (len, value, size) = sketch::opcode(ops, p);
                text.push(match (ops[p] & 0xC0, value) {
                    (0x00, _) => format!("z:{len}"),
                    (0x40, _) => format!("Z:{len}"),
                    _ => format!("v:{value},{len}"),
                });
                p += size;
            }
            Ok(Reply::Bulk(Bytes::from(text.join(" "))))
        }
        "encoding" => {
            if argv.len() != 3 {
                return Err(arity());
            }
            Ok(Reply::status(if sparse { "sparse" } else { "dense" }))
        }
        _ => Err(CommandError::Other(format!("ERR Unknown PFDEBUG subcommand '{sub}'"))),
    }
}

/// PFSELFTEST: Redis' self test of the HyperLogLog code, on this implementation.
pub(crate) fn pfselftest<B: KvBackend>(db: &mut Db<B>, _argv: &[Bytes]) -> CommandResult {
    let seed = db.random_u64();
    self_test(10_000_000, seed).map(|()| Reply::OK).map_err(CommandError::Other)
}

/// Sets and reads back every dense register with random values, then adds `elements`
/// distinct elements to a dense and to a sparse HLL, checking at 1, 10, 100… that the sparse
/// one is still sparse while small, that both count the same, and that the error is within
/// six standard errors (1 at 10), as Redis' PFSELFTEST.
///
/// # Errors
/// Redis' `TESTFAILED …` text.
fn self_test(elements: u64, seed: u64) -> Result<(), String> {
    let mut rng = seed | 1;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut dense = sketch::new_sparse();
    sketch::to_dense(&mut dense).map_err(|_| "TESTFAILED dense conversion".to_string())?;
    for _ in 0..5 {
        let want: Vec<u8> = (0..sketch::REGISTERS).map(|_| (next() & 63) as u8).collect();
        for (i, &v) in want.iter().enumerate() {
            sketch::dense_set(&mut dense[sketch::HEADER..], i, v);
        }
        for (i, &v) in want.iter().enumerate() {
            let got = sketch::dense_get(&dense[sketch::HEADER..], i);
            if got != v {
                return Err(format!("TESTFAILED Register {i} should be {v} but is {got}"));
            }
        }
    }
    dense[sketch::HEADER..].fill(0);
    let mut sparse = sketch::new_sparse();
    let count = |hll: &[u8]| sketch::histogram(hll).map(|h| sketch::estimate(&h)).unwrap_or(u64::MAX);
    let rel = 1.04 / (sketch::REGISTERS as f64).sqrt();
    let salt = next();
    let mut checkpoint = 1u64;
    for j in 1..=elements {
        let element = (j ^ salt).to_le_bytes();
        let (index, rank) = sketch::pattern(&element);
        sketch::set(&mut dense, index, rank).map_err(|_| "TESTFAILED dense add".to_string())?;
        sketch::set(&mut sparse, index, rank).map_err(|_| "TESTFAILED sparse add".to_string())?;
        if j != checkpoint {
            continue;
        }
        if j < 1500 && sparse[4] == 0 {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = count(&dense);
        if card != count(&sparse) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let max_err = if j == 10 { 1 } else { (rel * 6.0 * checkpoint as f64).ceil() as u64 };
        let abs_err = checkpoint.abs_diff(card);
        if abs_err > max_err {
            return Err(format!("TESTFAILED Too big error. card:{checkpoint} abserr:{abs_err}"));
        }
        checkpoint *= 10;
    }
    Ok(())
}

/// Whether a string value is a HyperLogLog (PFADD and PFMERGE write only those; Redis keeps
/// them as `raw` strings whatever their length).
pub(crate) fn is_hll(value: &[u8]) -> bool {
    sketch::is_valid(value)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_self_test_passes() {
        for seed in [1, 7, 0xDEAD_BEEF] {
            super::self_test(200_000, seed).unwrap();
        }
    }
}
