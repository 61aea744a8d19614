//! The `cmsgpack` library Redis gives scripts: MessagePack as lua-cmsgpack writes and reads
//! it. Numbers that are whole (and fit an i64) are the smallest integer form, others a
//! float32 when it holds the value exactly, else a float64; strings the smallest `str`
//! form; a table whose keys are exactly 1..n an array, any other a map; tables nested past
//! 16 levels (a table holding itself, say) nil. Decoding takes the types lua-cmsgpack takes
//! (no `bin` or `ext`).

use mlua::{Lua, MultiValue, Table, Value};

/// Tables nested deeper than this are written as nil.
const MAX_NESTING: usize = 16;

/// The `cmsgpack` table: `pack`, `unpack`, `unpack_one`, `unpack_limit`.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| {
            if args.is_empty() {
                let message = "bad argument #0 to 'pack' (MessagePack pack needs input.)".into();
                return Err(located(lua, mlua::Error::RuntimeError(message)));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, &mut out, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::String| {
            unpack(lua, &s.as_bytes(), 0, 0).map_err(|e| located(lua, e))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::String, Option<i64>)| {
            unpack(lua, &s.as_bytes(), 1, offset.unwrap_or(0)).map_err(|e| located(lua, e))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (mlua::String, i64, Option<i64>)| {
            unpack(lua, &s.as_bytes(), limit, offset.unwrap_or(0)).map_err(|e| located(lua, e))
        })?,
    )?;
    Ok(t)
}

/// The error as Redis' library raises it: with the calling script's place in front.
fn located(lua: &Lua, e: mlua::Error) -> mlua::Error {
    match e {
        mlua::Error::RuntimeError(m) => {
            mlua::Error::RuntimeError(format!("{}{m}", crate::lua_struct::caller_place(lua)))
        }
        other => other,
    }
}

fn encode(v: &Value, out: &mut Vec<u8>, level: usize) -> mlua::Result<()> {
    match v {
        Value::String(s) => encode_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => encode_int(*n, out),
        Value::Number(n) => {
            // Whole and within i64: an integer, as lua-cmsgpack's IS_INT64_EQUIVALENT.
            if n.is_finite()
                && n.fract() == 0.0
                && *n >= -9.223_372_036_854_776e18
                && *n < 9.223_372_036_854_776e18
            {
                encode_int(*n as i64, out);
            } else if f64::from(*n as f32) == *n {
                out.push(0xca);
                out.extend_from_slice(&(*n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        Value::Table(t) if level < MAX_NESTING => encode_table(t, out, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(s: &[u8], out: &mut Vec<u8>) {
    let len = s.len();
    match len {
        0..=31 => out.push(0xa0 | len as u8),
        32..=0xff => out.extend_from_slice(&[0xd9, len as u8]),
        0x100..=0xffff => {
            out.push(0xda);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(0xdb);
            out.extend_from_slice(&(len as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(s);
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    match n {
        0..=127 => out.push(n as u8),
        128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
        0x100..=0xffff => {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        0x1_0000_0000.. => {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        -32..=-1 => out.push(n as i8 as u8),
        -128..=-33 => out.extend_from_slice(&[0xd0, n as i8 as u8]),
        -32768..=-129 => {
            out.push(0xd1);
            out.extend_from_slice(&(n as i16).to_be_bytes());
        }
        -2_147_483_648..=-32769 => {
            out.push(0xd2);
            out.extend_from_slice(&(n as i32).to_be_bytes());
        }
        _ => {
            out.push(0xd3);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

/// Writes a count header: the fix form under 16, then 16- and 32-bit forms.
fn encode_len(n: usize, fix: u8, sixteen: u8, out: &mut Vec<u8>) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(sixteen);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(sixteen + 1);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_table(t: &Table, out: &mut Vec<u8>, level: usize) -> mlua::Result<()> {
    // An array when the keys are exactly 1..n (positive whole numbers, as many as the
    // largest). Two walks, each holding one pair at a time: a table of 100,000 keys must not
    // pin 200,000 references at once.
    let index = |k: &Value| match k {
        Value::Integer(i) if *i > 0 && *i <= i64::from(i32::MAX) => Some(*i as usize),
        Value::Number(n) if *n > 0.0 && n.fract() == 0.0 && *n <= f64::from(i32::MAX) => Some(*n as usize),
        _ => None,
    };
    let (mut count, mut max) = (0usize, Some(0usize));
    t.for_each(|k: Value, _: Value| {
        count += 1;
        max = max.zip(index(&k)).map(|(m, i)| m.max(i));
        Ok(())
    })?;
    if max == Some(count) {
        let len = t.raw_len();
        encode_len(len, 0x90, 0xdc, out);
        for i in 1..=len {
            encode(&t.raw_get::<Value>(i)?, out, level + 1)?;
        }
    } else {
        encode_len(count, 0x80, 0xde, out);
        t.for_each(|k: Value, v: Value| {
            encode(&k, out, level + 1)?;
            encode(&v, out, level + 1)
        })?;
    }
    Ok(())
}

/// lua-cmsgpack's `mp_unpack_full`: up to `limit` values (0 with offset 0: all) from byte
/// `offset`; with a limit or an offset, the next offset (-1 at the end) comes first.
fn unpack(lua: &Lua, bytes: &[u8], limit: i64, offset: i64) -> mlua::Result<MultiValue> {
    let fail = |m: String| Err(mlua::Error::RuntimeError(m));
    if offset < 0 || limit < 0 {
        return fail(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            bytes.len()
        ));
    }
    if offset as usize > bytes.len() {
        return fail(format!("Start offset {offset} greater than input length {}.", bytes.len()));
    }
    let all = limit == 0 && offset == 0;
    let limit = if all { i64::MAX } else { limit };
    let mut at = offset as usize;
    let mut values = Vec::new();
    while at < bytes.len() && (values.len() as i64) < limit {
        values.push(decode(lua, bytes, &mut at, 0)?);
    }
    if !all {
        let next = if at == bytes.len() { -1 } else { at as i64 };
        values.insert(0, Value::Integer(next));
    }
    Ok(MultiValue::from_iter(values))
}

fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> mlua::Result<&'a [u8]> {
    let end = at.checked_add(n).filter(|&e| e <= bytes.len());
    let Some(end) = end else {
        return Err(mlua::Error::RuntimeError("Missing bytes in input.".into()));
    };
    let slice = &bytes[*at..end];
    *at = end;
    Ok(slice)
}

fn be(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |n, &b| n << 8 | u64::from(b))
}

/// Nesting past this is refused rather than recursed into (the input could nest a million
/// arrays in a megabyte).
const MAX_DECODE_DEPTH: usize = 128;

fn decode(lua: &Lua, bytes: &[u8], at: &mut usize, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_DECODE_DEPTH {
        return Err(mlua::Error::RuntimeError("Bad data format in input.".into()));
    }
    let tag = take(bytes, at, 1)?[0];
    // A string's, array's or map's count: in the tag (the fix forms), or after it.
    let count = match tag {
        0xa0..=0xbf => usize::from(tag & 0x1f),
        0x80..=0x9f => usize::from(tag & 0x0f),
        0xd9 => be(take(bytes, at, 1)?) as usize,
        0xda | 0xdc | 0xde => be(take(bytes, at, 2)?) as usize,
        0xdb | 0xdd | 0xdf => be(take(bytes, at, 4)?) as usize,
        _ => 0,
    };
    let mut uint = |n: usize| -> mlua::Result<u64> { Ok(be(take(bytes, at, n)?)) };
    let number = |n: i64| Value::Number(n as f64);
    Ok(match tag {
        0x00..=0x7f => number(i64::from(tag)),
        0xe0..=0xff => number(i64::from(tag as i8)),
        0xcc => number(uint(1)? as i64),
        0xcd => number(uint(2)? as i64),
        0xce => number(uint(4)? as i64),
        0xcf => number(uint(8)? as i64),
        0xd0 => number(i64::from(uint(1)? as u8 as i8)),
        0xd1 => number(i64::from(uint(2)? as u16 as i16)),
        0xd2 => number(i64::from(uint(4)? as u32 as i32)),
        0xd3 => number(uint(8)? as i64),
        0xc0 => Value::Nil,
        0xc2 => Value::Boolean(false),
        0xc3 => Value::Boolean(true),
        0xca => Value::Number(f64::from(f32::from_bits(uint(4)? as u32))),
        0xcb => Value::Number(f64::from_bits(uint(8)?)),
        0xa0..=0xbf | 0xd9..=0xdb => string(lua, bytes, at, count)?,
        0x90..=0x9f | 0xdc | 0xdd => array(lua, bytes, at, count, depth)?,
        0x80..=0x8f | 0xde | 0xdf => map(lua, bytes, at, count, depth)?,
        _ => return Err(mlua::Error::RuntimeError("Bad data format in input.".into())),
    })
}

fn string(lua: &Lua, bytes: &[u8], at: &mut usize, n: usize) -> mlua::Result<Value> {
    Ok(Value::String(lua.create_string(take(bytes, at, n)?)?))
}

fn array(lua: &Lua, bytes: &[u8], at: &mut usize, n: usize, depth: usize) -> mlua::Result<Value> {
    // Every element takes a byte at least: a count past the input is short input, not a
    // reason to allocate.
    if n > bytes.len() - *at {
        return Err(mlua::Error::RuntimeError("Missing bytes in input.".into()));
    }
    let t = lua.create_table_with_capacity(n, 0)?;
    for i in 1..=n {
        t.raw_set(i, decode(lua, bytes, at, depth + 1)?)?;
    }
    Ok(Value::Table(t))
}

fn map(lua: &Lua, bytes: &[u8], at: &mut usize, n: usize, depth: usize) -> mlua::Result<Value> {
    if n > bytes.len() - *at {
        return Err(mlua::Error::RuntimeError("Missing bytes in input.".into()));
    }
    let t = lua.create_table()?;
    for _ in 0..n {
        let k = decode(lua, bytes, at, depth + 1)?;
        let v = decode(lua, bytes, at, depth + 1)?;
        if !matches!(k, Value::Nil) {
            t.raw_set(k, v)?;
        }
    }
    Ok(Value::Table(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_bytes_decode_or_fail_without_a_panic() {
        let lua = Lua::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let len = (next() % 40) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let _ = unpack(&lua, &bytes, 0, 0);
            let _ = unpack(&lua, &bytes, 1, (next() % 4) as i64);
        }
        // A million nested arrays: refused, not recursed into.
        let deep = vec![0x91u8; 1_000_000];
        assert!(unpack(&lua, &deep, 0, 0).is_err());
        // Huge counts with nothing behind them: short input, no allocation.
        assert!(unpack(&lua, &[0xdd, 0xff, 0xff, 0xff, 0xff], 0, 0).is_err());
        assert!(unpack(&lua, &[0xdf, 0xff, 0xff, 0xff, 0xff], 0, 0).is_err());
    }

    #[test]
    fn round_trips() {
        let lua = Lua::new();
        let packed: mlua::String = lua
            .load("return cmsgpack.pack({1, 'a', {x = -7.5}}, 2^40, -3)")
            .set_name("t")
            .call(())
            .or_else(|_| {
                lua.globals().set("cmsgpack", library(&lua)?)?;
                lua.load("return cmsgpack.pack({1, 'a', {x = -7.5}}, 2^40, -3)").call(())
            })
            .unwrap();
        let values = unpack(&lua, &packed.as_bytes(), 0, 0).unwrap();
        let v: Vec<Value> = values.into_iter().collect();
        assert_eq!(v.len(), 3);
        assert_eq!(v[1], Value::Number(2f64.powi(40)));
        assert_eq!(v[2], Value::Number(-3.0));
        let Value::Table(t) = &v[0] else { panic!("{v:?}") };
        assert_eq!(t.raw_get::<String>(2).unwrap(), "a");
        let inner: Table = t.raw_get(3).unwrap();
        assert_eq!(inner.raw_get::<f64>("x").unwrap(), -7.5);
    }
}
