//! The `cjson` library (encode, decode and their settings), as Redis' lua-cjson answers.

use super::*;

/// `cjson.encode` / `cjson.decode`, as Redis' lua-cjson converts (tables with a sequence are
/// arrays, others objects; numbers print as `%.14g`).
pub(super) fn cjson_library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = String::new();
            let config = cjson_config(lua);
            encode_json(&v, &mut out, 0, &config).map_err(mlua::Error::RuntimeError)?;
            Ok(out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let bytes = s.as_bytes();
            let mut at = 0;
            let max_depth = cjson_config(lua).decode_max_depth;
            let v = decode_json(lua, &bytes, &mut at, 0, max_depth).map_err(mlua::Error::RuntimeError)?;
            skip_ws(&bytes, &mut at);
            if at != bytes.len() {
                return Err(mlua::Error::RuntimeError(
                    "Expected the end but found invalid token at character ".to_string()
                        + &(at + 1).to_string(),
                ));
            }
            Ok(v)
        })?,
    )?;
    t.set("null", Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())))?;
    // lua-cjson's settings: each takes an optional new value and answers the current one.
    let depth = |name: &'static str, field: fn(&mut CjsonConfig) -> &mut i64| {
        lua.create_function(move |lua, value: Option<i64>| {
            let mut config = cjson_config(lua);
            if let Some(n) = value {
                if !(1..=i64::from(i32::MAX)).contains(&n) {
                    let place = caller_place(lua);
                    return Err(mlua::Error::RuntimeError(format!(
                        "{place}bad argument #1 to '{name}' (expected integer between 1 and 2147483647)"
                    )));
                }
                *field(&mut config) = n;
                lua.set_app_data(config.clone());
            }
            Ok(*field(&mut config))
        })
    };
    t.set("encode_max_depth", depth("encode_max_depth", |c| &mut c.encode_max_depth)?)?;
    t.set("decode_max_depth", depth("decode_max_depth", |c| &mut c.decode_max_depth)?)?;
    t.set(
        "encode_keep_buffer",
        lua.create_function(|lua, on: Option<Value>| {
            let mut config = cjson_config(lua);
            if let Some(on) = on.filter(|v| !v.is_nil()) {
                config.keep_buffer = cjson_switch(lua, &on, "encode_keep_buffer", &["off", "on"])? == 1;
                lua.set_app_data(config.clone());
            }
            Ok(config.keep_buffer)
        })?,
    )?;
    t.set(
        "encode_invalid_numbers",
        lua.create_function(|lua, on: Option<Value>| {
            let mut config = cjson_config(lua);
            if let Some(on) = on.filter(|v| !v.is_nil()) {
                config.invalid_numbers =
                    cjson_switch(lua, &on, "encode_invalid_numbers", &["off", "on", "null"])?;
                lua.set_app_data(config.clone());
            }
            Ok(match config.invalid_numbers {
                0 => Value::Boolean(false),
                1 => Value::Boolean(true),
                _ => Value::String(lua.create_string("null")?),
            })
        })?,
    )?;
    Ok(t)
}

/// lua-cjson's settings for one Lua state.
#[derive(Debug, Clone)]
pub(super) struct CjsonConfig {
    pub(super) encode_max_depth: i64,
    pub(super) decode_max_depth: i64,
    /// 0: NaN and Inf are errors; 1: written as `nan`/`inf`; 2: written as `null`.
    pub(super) invalid_numbers: u8,
    /// Kept for `encode_keep_buffer`'s answer; buffers are not kept between calls here.
    pub(super) keep_buffer: bool,
}

impl Default for CjsonConfig {
    fn default() -> Self {
        CjsonConfig { encode_max_depth: 1000, decode_max_depth: 1000, invalid_numbers: 0, keep_buffer: true }
    }
}

pub(super) fn cjson_config(lua: &Lua) -> CjsonConfig {
    lua.app_data_ref::<CjsonConfig>().map(|c| c.clone()).unwrap_or_default()
}

/// An on/off (or enumerated) setting: a boolean, or one of `options` by name.
pub(super) fn cjson_switch(lua: &Lua, v: &Value, name: &str, options: &[&str]) -> mlua::Result<u8> {
    match v {
        Value::Boolean(b) => Ok(u8::from(*b)),
        Value::String(s) => {
            let text = s.to_string_lossy();
            options.iter().position(|o| *o == text).map(|i| i as u8).ok_or_else(|| {
                mlua::Error::RuntimeError(format!(
                    "{}bad argument #1 to '{name}' (invalid option '{text}')",
                    caller_place(lua)
                ))
            })
        }
        _ => Err(mlua::Error::RuntimeError(format!(
            "{}bad argument #1 to '{name}' (string expected)",
            caller_place(lua)
        ))),
    }
}

pub(super) fn encode_json(
    v: &Value,
    out: &mut String,
    depth: usize,
    config: &CjsonConfig,
) -> Result<(), String> {
    if depth as i64 >= config.encode_max_depth && matches!(v, Value::Table(_)) {
        return Err(format!("Cannot serialise, excessive nesting ({})", depth + 1));
    }
    match v {
        Value::Nil | Value::LightUserData(_) => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(n) => out.push_str(&n.to_string()),
        Value::Number(n) if !n.is_finite() => match config.invalid_numbers {
            0 => return Err("Cannot serialise number: must not be NaN or Inf".into()),
            1 if n.is_nan() => out.push_str("nan"),
            1 => out.push_str(if *n > 0.0 { "inf" } else { "-inf" }),
            _ => out.push_str("null"),
        },
        Value::Number(n) => {
            if n.fract() == 0.0 && n.abs() < 1e14 {
                out.push_str(&(*n as i64).to_string());
            } else {
                out.push_str(&format!("{}", n));
            }
        }
        Value::String(s) => {
            out.push('"');
            for c in String::from_utf8_lossy(&s.as_bytes()).chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '/' => out.push_str("\\/"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    '\t' => out.push_str("\\t"),
                    '\u{8}' => out.push_str("\\b"),
                    '\u{c}' => out.push_str("\\f"),
                    c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Value::Table(t) => {
            let len = t.raw_len();
            let count = t.clone().pairs::<Value, Value>().count();
            if len > 0 && count == len {
                out.push('[');
                for i in 1..=len {
                    if i > 1 {
                        out.push(',');
                    }
                    encode_json(&t.raw_get::<Value>(i).map_err(|e| e.to_string())?, out, depth + 1, config)?;
                }
                out.push(']');
            } else if count == 0 {
                out.push_str("{}");
            } else {
                out.push('{');
                let mut first = true;
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair.map_err(|e| e.to_string())?;
                    let key = match &k {
                        Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                        Value::Integer(n) => n.to_string(),
                        Value::Number(n) => format!("{n}"),
                        _ => {
                            return Err("Cannot serialise table: table key must be a number or string".into());
                        }
                    };
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    out.push('"');
                    out.push_str(&key.replace('\\', "\\\\").replace('"', "\\\""));
                    out.push_str("\":");
                    encode_json(&v, out, depth + 1, config)?;
                }
                out.push('}');
            }
        }
        _ => return Err("Cannot serialise function: type not supported".into()),
    }
    Ok(())
}

pub(super) fn skip_ws(b: &[u8], at: &mut usize) {
    while *at < b.len() && b[*at].is_ascii_whitespace() {
        *at += 1;
    }
}

pub(super) fn decode_json(
    lua: &Lua,
    b: &[u8],
    at: &mut usize,
    depth: usize,
    max_depth: i64,
) -> Result<Value, String> {
    skip_ws(b, at);
    if depth as i64 >= max_depth && matches!(b.get(*at), Some(b'{' | b'[')) {
        return Err(format!(
            "Found too many nested data structures ({}) at character {}",
            depth + 1,
            *at + 1
        ));
    }
    let bad = |at: usize| format!("Expected value but found invalid token at character {}", at + 1);
    match b.get(*at) {
        Some(b'{') => {
            *at += 1;
            let t = lua.create_table().map_err(|e| e.to_string())?;
            skip_ws(b, at);
            if b.get(*at) == Some(&b'}') {
                *at += 1;
                return Ok(Value::Table(t));
            }
            loop {
                skip_ws(b, at);
                let k = decode_json(lua, b, at, depth + 1, max_depth)?;
                skip_ws(b, at);
                if b.get(*at) != Some(&b':') {
                    return Err(format!("Expected colon but found invalid token at character {}", *at + 1));
                }
                *at += 1;
                let v = decode_json(lua, b, at, depth + 1, max_depth)?;
                t.raw_set(k, v).map_err(|e| e.to_string())?;
                skip_ws(b, at);
                match b.get(*at) {
                    Some(b',') => *at += 1,
                    Some(b'}') => {
                        *at += 1;
                        return Ok(Value::Table(t));
                    }
                    _ => {
                        return Err(format!(
                            "Expected comma or object end but found invalid token at character {}",
                            *at + 1
                        ));
                    }
                }
            }
        }
        Some(b'[') => {
            *at += 1;
            let t = lua.create_table().map_err(|e| e.to_string())?;
            skip_ws(b, at);
            if b.get(*at) == Some(&b']') {
                *at += 1;
                return Ok(Value::Table(t));
            }
            let mut i = 1;
            loop {
                let v = decode_json(lua, b, at, depth + 1, max_depth)?;
                t.raw_set(i, v).map_err(|e| e.to_string())?;
                i += 1;
                skip_ws(b, at);
                match b.get(*at) {
                    Some(b',') => *at += 1,
                    Some(b']') => {
                        *at += 1;
                        return Ok(Value::Table(t));
                    }
                    _ => {
                        return Err(format!(
                            "Expected comma or array end but found invalid token at character {}",
                            *at + 1
                        ));
                    }
                }
            }
        }
        Some(b'"') => {
            *at += 1;
            let mut s = Vec::new();
            while let Some(&c) = b.get(*at) {
                *at += 1;
                match c {
                    b'"' => return lua.create_string(&s).map(Value::String).map_err(|e| e.to_string()),
                    b'\\' => {
                        let e = *b.get(*at).ok_or_else(|| bad(*at))?;
                        *at += 1;
                        match e {
                            b'n' => s.push(b'\n'),
                            b't' => s.push(b'\t'),
                            b'r' => s.push(b'\r'),
                            b'b' => s.push(8),
                            b'f' => s.push(12),
                            b'u' => {
                                let hex = std::str::from_utf8(b.get(*at..*at + 4).ok_or_else(|| bad(*at))?)
                                    .map_err(|_| bad(*at))?;
                                let code = u32::from_str_radix(hex, 16).map_err(|_| bad(*at))?;
                                *at += 4;
                                let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                                let mut buf = [0; 4];
                                s.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            }
                            other => s.push(other),
                        }
                    }
                    c => s.push(c),
                }
            }
            Err("Expected string end".into())
        }
        Some(b't') if b[*at..].starts_with(b"true") => {
            *at += 4;
            Ok(Value::Boolean(true))
        }
        Some(b'f') if b[*at..].starts_with(b"false") => {
            *at += 5;
            Ok(Value::Boolean(false))
        }
        Some(b'n') if b[*at..].starts_with(b"null") => {
            *at += 4;
            Ok(Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())))
        }
        Some(c) if c.is_ascii_digit() || *c == b'-' => {
            let start = *at;
            while *at < b.len() && matches!(b[*at], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
                *at += 1;
            }
            let text = std::str::from_utf8(&b[start..*at]).map_err(|_| bad(start))?;
            text.parse::<f64>().map(Value::Number).map_err(|_| bad(start))
        }
        _ => Err(bad(*at)),
    }
}
