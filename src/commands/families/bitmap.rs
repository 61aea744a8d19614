//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.
//!
//! Each works on a string key's inline value, as Redis, and on the Kvrocks bitmap type
//! (1024-byte fragments in subkeys, see `bitmap/store.rs`), which SETBIT and BITFIELD create
//! for a missing key unless [`Db::set_bitmap_strings`] asks for strings like Redis. Replies
//! and errors are Redis 7.0's; a bitmap answers every command as the equivalent string would.

mod bits;
mod store;

use bytes::Bytes;

use self::bits::{FieldType, Overflow, low_mask};
use crate::backend::{KvBackend, WriteBatch};
use crate::commands::args::{int_arg, parse_i64};
use crate::commands::notify::NotifyFlags;
use crate::commands::{CommandError, CommandResult, Db, Reply};

pub(crate) use store::Bits;

/// Redis' `proto-max-bulk-len`: bit offsets address at most this many bytes.
const MAX_BYTES: i64 = 512 * 1024 * 1024;

fn offset_error() -> CommandError {
    CommandError::err("bit offset is not an integer or out of range")
}

/// A bit offset: an integer in `0..2^32`; with `bits`, BITFIELD's `#n` form means
/// `n * bits`.
fn offset_arg(arg: &[u8], bits: Option<u32>) -> CommandResult<u64> {
    let (digits, times) = match (arg.split_first(), bits) {
        (Some((b'#', rest)), Some(bits)) => (rest, i64::from(bits)),
        _ => (arg, 1),
    };
    let offset = parse_i64(digits).ok_or_else(offset_error)?.wrapping_mul(times);
    if offset < 0 || offset >> 3 >= MAX_BYTES {
        return Err(offset_error());
    }
    Ok(offset as u64)
}

pub(crate) fn setbit<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let offset = offset_arg(&argv[2], None)?;
    let on = match parse_i64(&argv[3]) {
        Some(v @ (0 | 1)) => v == 1,
        _ => return Err(CommandError::err("bit is not an integer or out of range")),
    };
    let key = &argv[1];
    let existing = db.open_bits(key, false)?;
    let created = existing.is_none();
    let mut bits = match existing {
        Some(bits) => bits,
        None => db.open_bits(key, true)?.ok_or(CommandError::NoSuchKey)?,
    };
    let old = bits.bit(db, key, offset)?;
    // Redis 7.0 writes (and signals the key to WATCH) only when the key is new, grows, or
    // the bit changes.
    if !created && old == on && offset / 8 < bits.len() {
        return Ok(Reply::Integer(i64::from(old)));
    }
    let len = bits.len();
    bits.set_bit(db, key, offset, on)?;
    let mut batch = WriteBatch::new();
    bits.queue(db, &mut batch, key)?;
    db.commit(batch)?;
    // Redis reports a created or grown value, or a changed bit.
    if old != on || bits.len() != len {
        db.notify(NotifyFlags::STRING, "setbit", key);
    }
    Ok(Reply::Integer(i64::from(old)))
}

pub(crate) fn getbit<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let offset = offset_arg(&argv[2], None)?;
    let bit = match db.open_bits(&argv[1], false)? {
        Some(mut bits) => bits.bit(db, &argv[1], offset)?,
        None => false,
    };
    Ok(Reply::Integer(i64::from(bit)))
}

/// Whether a BYTE|BIT argument says BIT.
fn unit_is_bit(arg: &[u8]) -> CommandResult<bool> {
    if arg.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(CommandError::Syntax)
    }
}

/// Redis' range rule for BITCOUNT/BITPOS: negative indexes count from the end of `total`
/// units, then both ends are clamped. Returns the bit span `lo..=hi`, `None` when empty.
fn bit_span(start: i64, end: i64, total: i64, is_bit: bool) -> Option<(u64, u64)> {
    let fix = |i: i64| if i < 0 { i.saturating_add(total) } else { i }.max(0);
    let (start, end) = (fix(start), fix(end).min(total - 1));
    if start > end {
        return None;
    }
    let (start, end) = (start as u64, end as u64);
    Some(if is_bit { (start, end) } else { (start * 8, end * 8 + 7) })
}

pub(crate) fn bitcount<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let Some(view) = db.bit_view(&argv[1])? else {
        return Ok(Reply::Integer(0));
    };
    let span = match argv.len() {
        2 => bit_span(0, -1, view.len as i64, false),
        4 | 5 => {
            let (start, end) = (int_arg(&argv[2])?, int_arg(&argv[3])?);
            // Redis answers this before reading the unit.
            if start < 0 && end < 0 && start > end {
                return Ok(Reply::Integer(0));
            }
            let is_bit = argv.len() == 5 && unit_is_bit(&argv[4])?;
            let total = view.len as i64 * if is_bit { 8 } else { 1 };
            bit_span(start, end, total, is_bit)
        }
        _ => return Err(CommandError::Syntax),
    };
    Ok(Reply::Integer(span.map_or(0, |(lo, hi)| view.count(lo, hi) as i64)))
}

pub(crate) fn bitpos<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let bit = match parse_i64(&argv[2]) {
        Some(v @ (0 | 1)) => v == 1,
        Some(_) => return Err(CommandError::err("The bit argument must be 1 or 0.")),
        None => return Err(CommandError::NotInteger),
    };
    let Some(view) = db.bit_view(&argv[1])? else {
        return Ok(Reply::Integer(if bit { -1 } else { 0 }));
    };
    let (start, end, is_bit) = match argv.len() {
        3 => (0, -1, false),
        4..=6 => {
            let start = int_arg(&argv[3])?;
            let is_bit = argv.len() == 6 && unit_is_bit(&argv[5])?;
            let end = if argv.len() >= 5 { int_arg(&argv[4])? } else { -1 };
            (start, end, is_bit)
        }
        _ => return Err(CommandError::Syntax),
    };
    let end_given = argv.len() >= 5;
    let total = view.len as i64 * if is_bit { 8 } else { 1 };
    let Some((lo, hi)) = bit_span(start, end, total, is_bit) else {
        return Ok(Reply::Integer(-1));
    };
    // Looking for a clear bit without an explicit end, the string continues with zeros.
    let pos = match view.find(bit, lo, hi) {
        Some(p) => p as i64,
        None if !bit && !end_given => hi as i64 + 1,
        None => -1,
    };
    Ok(Reply::Integer(pos))
}

pub(crate) fn bitop<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    let op = argv[1].to_ascii_lowercase();
    if !matches!(&op[..], b"and" | b"or" | b"xor" | b"not") {
        return Err(CommandError::Syntax);
    }
    let sources = &argv[3..];
    if op == b"not" && sources.len() != 1 {
        return Err(CommandError::err("BITOP NOT must be called with a single source key."));
    }
    let mut values = Vec::with_capacity(sources.len());
    for key in sources {
        values.push(db.bit_view(key)?.map(|v| v.to_vec()).unwrap_or_default());
    }
    let len = values.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    let result: Vec<u8> = (0..len)
        .map(|i| {
            let mut all = values.iter().map(|v| byte(v, i));
            let first = all.next().unwrap_or(0);
            match &op[..] {
                b"and" => all.fold(first, |a, b| a & b),
                b"or" => all.fold(first, |a, b| a | b),
                b"xor" => all.fold(first, |a, b| a ^ b),
                _ => !first,
            }
        })
        .collect();
    let existed = db.store_target(&argv[2], result.is_empty())?;
    let mut batch = WriteBatch::new();
    if result.is_empty() {
        db.delete_key(&mut batch, &argv[2]);
    } else {
        db.queue_bits(&mut batch, &argv[2], &result)?;
    }
    db.commit(batch)?;
    db.notify_store(NotifyFlags::STRING, "set", &argv[2], result.is_empty(), existed);
    Ok(Reply::Integer(len as i64))
}

/// One BITFIELD operation.
#[derive(Debug, Clone, Copy)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// A parsed BITFIELD operation with the overflow rule in force at its position.
struct Field {
    op: FieldOp,
    ty: FieldType,
    offset: u64,
    overflow: Overflow,
}

fn field_type_arg(arg: &[u8]) -> CommandResult<FieldType> {
    let invalid = || {
        CommandError::err(
            "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
        )
    };
    let (signed, digits) = match arg.split_first() {
        Some((b'i', rest)) => (true, rest),
        Some((b'u', rest)) => (false, rest),
        _ => return Err(invalid()),
    };
    match parse_i64(digits) {
        Some(bits) if bits >= 1 && bits <= if signed { 64 } else { 63 } => {
            Ok(FieldType { signed, bits: bits as u32 })
        }
        _ => Err(invalid()),
    }
}

fn parse_fields(argv: &[Bytes], read_only: bool) -> CommandResult<Vec<Field>> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut writes = false;
    let mut i = 2;
    while i < argv.len() {
        let sub = argv[i].to_ascii_lowercase();
        let left = argv.len() - i - 1;
        let has_value = match &sub[..] {
            b"get" if left >= 2 => false,
            b"set" | b"incrby" if left >= 3 => true,
            b"overflow" if left >= 1 => {
                overflow = match argv[i + 1].to_ascii_lowercase().as_slice() {
                    b"wrap" => Overflow::Wrap,
                    b"sat" => Overflow::Sat,
                    b"fail" => Overflow::Fail,
                    _ => return Err(CommandError::err("Invalid OVERFLOW type specified")),
                };
                i += 2;
                continue;
            }
            _ => return Err(CommandError::Syntax),
        };
        let ty = field_type_arg(&argv[i + 1])?;
        let offset = offset_arg(&argv[i + 2], Some(ty.bits))?;
        let op = if has_value {
            writes = true;
            let value = int_arg(&argv[i + 3])?;
            if sub == b"set" { FieldOp::Set(value) } else { FieldOp::IncrBy(value) }
        } else {
            FieldOp::Get
        };
        fields.push(Field { op, ty, offset, overflow });
        i += if has_value { 4 } else { 3 };
    }
    if read_only && writes {
        return Err(CommandError::err("BITFIELD_RO only supports the GET subcommand"));
    }
    Ok(fields)
}

/// Reads a field's raw bits, most significant first.
fn read_field<B: KvBackend>(db: &Db<B>, key: &[u8], bits: &mut Bits, f: &Field) -> CommandResult<u64> {
    let mut raw = 0u64;
    for p in f.offset..f.offset + u64::from(f.ty.bits) {
        raw = raw << 1 | u64::from(bits.bit(db, key, p)?);
    }
    Ok(raw)
}

fn write_field<B: KvBackend>(
    db: &Db<B>,
    key: &[u8],
    bits: &mut Bits,
    f: &Field,
    value: i64,
) -> CommandResult<()> {
    let raw = value as u64 & low_mask(f.ty.bits);
    let width = u64::from(f.ty.bits);
    for (i, p) in (f.offset..f.offset + width).enumerate() {
        bits.set_bit(db, key, p, raw >> (width - 1 - i as u64) & 1 == 1)?;
    }
    Ok(())
}

fn bitfield_generic<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes], read_only: bool) -> CommandResult {
    let fields = parse_fields(argv, read_only)?;
    let key = &argv[1];
    // Redis grows the string over every write's span first, even writes that then fail.
    let highest = fields
        .iter()
        .filter(|f| !matches!(f.op, FieldOp::Get))
        .map(|f| f.offset + u64::from(f.ty.bits) - 1)
        .max();
    let Some(mut bits) = db.open_bits(key, highest.is_some())? else {
        return Ok(Reply::Array(fields.iter().map(|_| Reply::Integer(0)).collect()));
    };
    let len = bits.len();
    if let Some(highest) = highest {
        bits.grow(highest / 8 + 1);
    }
    // Redis reports `setbit` when a write changed a value or the string grew.
    let mut changed = false;
    let grown = bits.len() != len;
    let mut replies = Vec::with_capacity(fields.len());
    for f in &fields {
        let old = f.ty.interpret(read_field(db, key, &mut bits, f)?);
        let (new, reply) = match f.op {
            FieldOp::Get => (None, Some(old)),
            FieldOp::Set(v) => {
                let new = f.ty.apply(v, 0, f.overflow);
                (new, new.map(|_| old))
            }
            FieldOp::IncrBy(by) => {
                let new = f.ty.apply(old, by, f.overflow);
                (new, new)
            }
        };
        if let (Some(new), false) = (new, matches!(f.op, FieldOp::Get)) {
            write_field(db, key, &mut bits, f, new)?;
            changed |= grown || new != old;
        }
        replies.push(reply.map_or(Reply::Nil, Reply::Integer));
    }
    if highest.is_some() {
        let mut batch = WriteBatch::new();
        bits.queue(db, &mut batch, key)?;
        if changed {
            db.commit(batch)?;
            db.notify(NotifyFlags::STRING, "setbit", key);
        } else {
            db.commit_unsignalled(batch)?;
        }
    }
    Ok(Reply::Array(replies))
}

pub(crate) fn bitfield<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    bitfield_generic(db, argv, false)
}

pub(crate) fn bitfield_ro<B: KvBackend>(db: &mut Db<B>, argv: &[Bytes]) -> CommandResult {
    bitfield_generic(db, argv, true)
}
