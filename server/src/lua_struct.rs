//! The `struct` library Redis gives scripts (Roberto Ierusalimschy's `struct`, as Redis 7.0
//! ships it): `struct.pack(fmt, …)`, `struct.unpack(fmt, s [, pos])`, `struct.size(fmt)`.
//!
//! Format: `>` big-endian, `<` and `=` little-endian (the native order here), `!n` maximum
//! alignment (a power of two; `!` alone 8), `b B` 1-byte, `h H` 2-byte, `l L T` 8-byte,
//! `i I` with an optional size (default 4, at most 32), signed in lower case; `f` float,
//! `d` double; `s` zero-terminated string; `cn` n chars (`c0`: the whole string when
//! packing, the previous number as length when unpacking); `x` a zero byte; spaces ignored.

use mlua::{Lua, MultiValue, Table, Value};

const MAX_INT_SIZE: usize = 32;
const MAX_ALIGN: usize = 8;

/// The `struct` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, args: MultiValue| pack(lua, &args).map_err(|e| fail(lua, "pack", e)))?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, args: MultiValue| unpack(lua, &args).map_err(|e| fail(lua, "unpack", e)))?,
    )?;
    t.set(
        "size",
        lua.create_function(|lua, args: MultiValue| size(lua, &args).map_err(|e| fail(lua, "size", e)))?,
    )?;
    Ok(t)
}

/// Why a call failed: a bad argument (its number), or another error.
enum Failure {
    Arg(usize, String),
    Other(String),
}

fn fail(lua: &Lua, function: &str, failure: Failure) -> mlua::Error {
    let place = caller_place(lua);
    mlua::Error::RuntimeError(match failure {
        Failure::Arg(n, why) => format!("{place}bad argument #{n} to '{function}' ({why})"),
        Failure::Other(why) => format!("{place}{why}"),
    })
}

fn type_name(v: Option<&Value>) -> &'static str {
    match v {
        None | Some(Value::Nil) => "no value",
        Some(v) => v.type_name(),
    }
}

/// `luaL_checklstring`: a string, or a number as Lua writes it.
fn string_arg(lua: &Lua, args: &MultiValue, n: usize) -> Result<Vec<u8>, Failure> {
    let v = args.get(n - 1);
    match v {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        Some(number @ (Value::Integer(_) | Value::Number(_))) => match lua.coerce_string(number.clone()) {
            Ok(Some(s)) => Ok(s.as_bytes().to_vec()),
            _ => Err(Failure::Arg(n, "string expected, got number".into())),
        },
        _ => Err(Failure::Arg(n, format!("string expected, got {}", type_name(v)))),
    }
}

/// `luaL_checknumber`: a number, or a string that reads as one.
fn number_arg(lua: &Lua, args: &MultiValue, n: usize) -> Result<f64, Failure> {
    let v = args.get(n - 1);
    match v {
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::Number(x)) => Ok(*x),
        Some(s @ Value::String(_)) => match lua.coerce_number(s.clone()) {
            Ok(Some(x)) => Ok(x),
            _ => Err(Failure::Arg(n, "number expected, got string".into())),
        },
        _ => Err(Failure::Arg(n, format!("number expected, got {}", type_name(v)))),
    }
}

/// The parser's state: endianness and maximum alignment.
struct Header {
    big: bool,
    align: usize,
}

/// A number written after an option (`i4`, `c10`, `!2`), or `default`.
fn number_after(fmt: &[u8], at: &mut usize, default: usize) -> Result<usize, Failure> {
    if !fmt.get(*at).is_some_and(u8::is_ascii_digit) {
        return Ok(default);
    }
    let mut n: usize = 0;
    while let Some(d) = fmt.get(*at).filter(|d| d.is_ascii_digit()) {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(usize::from(d - b'0')))
            .filter(|&n| n <= i32::MAX as usize)
            .ok_or_else(|| Failure::Other("integral size overflow".into()))?;
        *at += 1;
    }
    Ok(n)
}

/// An option's size in bytes (0 for the ones without a fixed size or that take none).
fn option_size(opt: u8, fmt: &[u8], at: &mut usize) -> Result<usize, Failure> {
    Ok(match opt {
        b'b' | b'B' | b'x' => 1,
        b'h' | b'H' => 2,
        b'l' | b'L' | b'T' | b'd' => 8,
        b'f' => 4,
        b'c' => number_after(fmt, at, 1)?,
        b'i' | b'I' => {
            let size = number_after(fmt, at, 4)?;
            if size > MAX_INT_SIZE {
                return Err(Failure::Other(format!(
                    "integral size {size} is larger than limit of {MAX_INT_SIZE}"
                )));
            }
            size
        }
        _ => 0,
    })
}

/// Padding before an item of `size` at offset `len`.
fn padding(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

/// The options that change the header (or nothing: a space).
fn control(opt: u8, fmt: &[u8], at: &mut usize, h: &mut Header) -> Result<(), Failure> {
    match opt {
        b' ' => {}
        b'>' => h.big = true,
        b'<' | b'=' => h.big = false,
        b'!' => {
            let a = number_after(fmt, at, MAX_ALIGN)?;
            if !a.is_power_of_two() {
                return Err(Failure::Other(format!("alignment {a} is not a power of 2")));
            }
            h.align = a;
        }
        other => return Err(Failure::Arg(1, format!("invalid format option '{}'", other as char))),
    }
    Ok(())
}

fn integer_bytes(n: f64, size: usize, big: bool) -> Vec<u8> {
    let value: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
    let mut bytes: Vec<u8> = (0..size).map(|i| if i < 8 { (value >> (8 * i)) as u8 } else { 0 }).collect();
    if big {
        bytes.reverse();
    }
    bytes
}

fn pack(lua: &Lua, args: &MultiValue) -> Result<mlua::String, Failure> {
    let fmt = string_arg(lua, args, 1)?;
    let mut h = Header { big: false, align: 1 };
    let (mut out, mut at, mut arg) = (Vec::new(), 0, 2);
    while at < fmt.len() {
        let opt = fmt[at];
        at += 1;
        let size = option_size(opt, &fmt, &mut at)?;
        out.resize(out.len() + padding(out.len(), &h, opt, size), 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number_arg(lua, args, arg)?;
                arg += 1;
                out.extend(integer_bytes(n, size, h.big));
            }
            b'x' => out.push(0),
            b'f' => {
                let f = number_arg(lua, args, arg)? as f32;
                arg += 1;
                out.extend(if h.big { f.to_be_bytes() } else { f.to_le_bytes() });
            }
            b'd' => {
                let d = number_arg(lua, args, arg)?;
                arg += 1;
                out.extend(if h.big { d.to_be_bytes() } else { d.to_le_bytes() });
            }
            b'c' | b's' => {
                let s = string_arg(lua, args, arg)?;
                arg += 1;
                let size = if size == 0 { s.len() } else { size };
                if s.len() < size {
                    return Err(Failure::Arg(arg, "string too short".into()));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => control(opt, &fmt, &mut at, &mut h)?,
        }
    }
    lua.create_string(&out).map_err(|e| Failure::Other(e.to_string()))
}

fn integer_value(bytes: &[u8], big: bool, signed: bool) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut l: u64 = 0;
    let ordered: Box<dyn Iterator<Item = &u8>> =
        if big { Box::new(bytes.iter()) } else { Box::new(bytes.iter().rev()) };
    for b in ordered {
        l = l << 8 | u64::from(*b);
    }
    if !signed {
        return l as f64;
    }
    let mask = u64::MAX.wrapping_shl((bytes.len() * 8 - 1) as u32);
    if l & mask != 0 {
        l |= mask;
    }
    l as i64 as f64
}

fn unpack(lua: &Lua, args: &MultiValue) -> Result<MultiValue, Failure> {
    let fmt = string_arg(lua, args, 1)?;
    let data = string_arg(lua, args, 2)?;
    let pos = match args.get(2) {
        None | Some(Value::Nil) => 1.0,
        Some(_) => number_arg(lua, args, 3)?.trunc(),
    };
    if pos <= 0.0 {
        return Err(Failure::Arg(3, "offset must be 1 or greater".into()));
    }
    let mut pos = pos as usize - 1;
    let mut h = Header { big: false, align: 1 };
    let mut values: Vec<Value> = Vec::new();
    let mut at = 0;
    let short = || Failure::Arg(2, "data string too short".into());
    while at < fmt.len() {
        let opt = fmt[at];
        at += 1;
        let mut size = option_size(opt, &fmt, &mut at)?;
        pos += padding(pos, &h, opt, size);
        if size > data.len() || pos > data.len() - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = integer_value(&data[pos..pos + size], h.big, opt.is_ascii_lowercase());
                values.push(Value::Number(n));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().unwrap_or_default();
                let f = if h.big { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) };
                values.push(Value::Number(f64::from(f)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().unwrap_or_default();
                values.push(Value::Number(if h.big { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) }));
            }
            b'c' => {
                if size == 0 {
                    let previous = match values.last() {
                        Some(Value::Number(n)) => *n,
                        _ => return Err(Failure::Other("format 'c0' needs a previous size".into())),
                    };
                    values.pop();
                    size = previous.max(0.0) as usize;
                    if size > data.len() || pos > data.len() - size {
                        return Err(short());
                    }
                }
                values.push(Value::String(
                    lua.create_string(&data[pos..pos + size]).map_err(|e| Failure::Other(e.to_string()))?,
                ));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err(Failure::Other("unfinished string in data".into()));
                };
                values.push(Value::String(
                    lua.create_string(&data[pos..pos + end]).map_err(|e| Failure::Other(e.to_string()))?,
                ));
                size = end + 1;
            }
            _ => control(opt, &fmt, &mut at, &mut h)?,
        }
        pos += size;
    }
    values.push(Value::Integer(pos as i64 + 1));
    Ok(MultiValue::from_iter(values))
}

fn size(lua: &Lua, args: &MultiValue) -> Result<i64, Failure> {
    let fmt = string_arg(lua, args, 1)?;
    let mut h = Header { big: false, align: 1 };
    let (mut pos, mut at) = (0usize, 0);
    while at < fmt.len() {
        let opt = fmt[at];
        at += 1;
        let size = option_size(opt, &fmt, &mut at)?;
        pos += padding(pos, &h, opt, size);
        if opt == b's' {
            return Err(Failure::Arg(1, "option 's' has no fixed size".into()));
        }
        if opt == b'c' && size == 0 {
            return Err(Failure::Arg(1, "option 'c0' has no fixed size".into()));
        }
        if !opt.is_ascii_alphanumeric() {
            control(opt, &fmt, &mut at, &mut h)?;
        }
        pos += size;
    }
    Ok(pos as i64)
}

/// Where a library function was called from, as `luaL_where(L, 1)` words it: `user_script:3: `
/// when script code called it, empty when a C function did (`pcall(cmsgpack.unpack, …)`).
pub fn caller_place(lua: &Lua) -> String {
    match lua.inspect_stack(1) {
        Some(frame) if frame.source().what != "C" && frame.curr_line() > 0 => {
            let source = frame.source();
            format!("{}:{}: ", source.short_src.as_deref().unwrap_or("?"), frame.curr_line())
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_format_and_data_fail_without_a_panic() {
        let lua = Lua::new();
        let alphabet = b"><=!bBhHlLTiIfdscx 0123456789?";
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let fmt: Vec<u8> =
                (0..next() % 8).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]).collect();
            let data: Vec<u8> = (0..next() % 24).map(|_| next() as u8).collect();
            let args = |v: Vec<Value>| MultiValue::from_iter(v);
            let s = |b: &[u8]| Value::String(lua.create_string(b).unwrap());
            let _ = size(&lua, &args(vec![s(&fmt)]));
            let _ = unpack(&lua, &args(vec![s(&fmt), s(&data), Value::Integer((next() % 5) as i64)]));
            let _ = pack(&lua, &args(vec![s(&fmt), Value::Number(-3.5), s(b"abc"), Value::Integer(7)]));
        }
    }
}
