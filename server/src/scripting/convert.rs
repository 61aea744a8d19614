//! Lua ↔ RESP: a script's result as a reply, and a command's reply as a Lua value, as Redis
//! converts them in RESP2 and RESP3.

use super::*;

/// A failed script's reply: the error table's text, with Redis' `script: …, on
/// @user_script:N.` suffix when the error has a place.
pub(super) fn error_reply(value: &Value) -> Reply {
    let Value::Table(t) = value else {
        return Reply::Error(format!("ERR Error running script, {}", value.to_string().unwrap_or_default()));
    };
    let msg: String =
        t.raw_get::<Option<String>>("err").ok().flatten().unwrap_or_else(|| "ERR unknown error".into());
    let source: Option<String> = t.raw_get("source").ok().flatten();
    let line: Option<i64> = t.raw_get("line").ok().flatten();
    match (source, line) {
        (Some(source), Some(line)) => {
            Reply::Error(format!("{msg} script: \u{0}LABEL\u{0}, on {source}:{line}."))
        }
        _ => Reply::Error(msg),
    }
}

/// A script's result as a reply, as Redis converts it.
pub(super) fn lua_to_reply(value: &Value, resp3: bool) -> Reply {
    lua_to_reply_at(value, resp3, 0)
}

/// Nesting past which a reply ends in Redis' "reached lua stack limit" error (a table that
/// holds itself would never end).
pub(super) const MAX_REPLY_DEPTH: usize = 1000;

pub(super) fn lua_to_reply_at(value: &Value, resp3: bool, depth: usize) -> Reply {
    if depth > MAX_REPLY_DEPTH {
        return Reply::Error("ERR reached lua stack limit".into());
    }
    let lua_to_reply = |v: &Value, resp3: bool| lua_to_reply_at(v, resp3, depth + 1);
    match value {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) if !resp3 => {
            if *b {
                Reply::Integer(1)
            } else {
                Reply::Nil
            }
        }
        Value::Boolean(b) => Reply::Boolean(*b),
        Value::Integer(n) => Reply::Integer(*n),
        Value::Number(n) => Reply::Integer(*n as i64),
        Value::Table(t) => {
            if let Ok(Some(_)) = t.raw_get::<Option<mlua::String>>("err") {
                return error_reply(value);
            }
            if let Ok(Value::String(ok)) = t.raw_get::<Value>("ok") {
                let text = String::from_utf8_lossy(&ok.as_bytes()).replace(['\r', '\n'], " ");
                return Reply::Status(text.into());
            }
            if let Ok(Value::Number(d)) = t.raw_get::<Value>("double") {
                return Reply::Double(d);
            }
            if let Ok(Value::Integer(d)) = t.raw_get::<Value>("double") {
                return Reply::Double(d as f64);
            }
            if let Ok(Value::String(b)) = t.raw_get::<Value>("big_number") {
                return Reply::BigNumber(String::from_utf8_lossy(&b.as_bytes()).replace(['\r', '\n'], " "));
            }
            if let Ok(Value::Table(v)) = t.raw_get::<Value>("verbatim_string")
                && let (Ok(Value::String(format)), Ok(Value::String(text))) =
                    (v.raw_get::<Value>("format"), v.raw_get::<Value>("string"))
            {
                let mut f = [b' '; 3];
                for (i, c) in format.as_bytes().iter().take(3).enumerate() {
                    f[i] = *c;
                }
                return Reply::Verbatim { format: f, text: Bytes::copy_from_slice(&text.as_bytes()) };
            }
            if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
                let pairs = m
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, v)| (lua_to_reply(&k, resp3), lua_to_reply(&v, resp3)))
                    .collect();
                return Reply::Map(pairs);
            }
            if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
                let items = s
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, _)| lua_to_reply(&k, resp3))
                    .collect();
                return Reply::Set(items);
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(v) => items.push(lua_to_reply(&v, resp3)),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    }
}

/// Converts one RESP2/RESP3 reply, as written for a client, into the Lua value Redis gives a
/// script (`redisProtocolToLuaType`).
pub(super) fn resp_to_lua(lua: &Lua, bytes: &[u8], at: &mut usize) -> mlua::Result<Value> {
    let line_end = bytes[*at..].windows(2).position(|w| w == b"\r\n").map_or(bytes.len(), |p| *at + p);
    let kind = bytes[*at];
    let text = &bytes[*at + 1..line_end];
    *at = line_end + 2;
    let num = || std::str::from_utf8(text).ok().and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
    let single = |field: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.set(field, v)?;
        Ok(Value::Table(t))
    };
    Ok(match kind {
        b':' => Value::Integer(num()),
        b'$' | b'=' if num() < 0 => Value::Boolean(false),
        b'$' | b'=' => {
            let n = num() as usize;
            let data = &bytes[*at..*at + n];
            *at += n + 2;
            if kind == b'=' {
                let v = lua.create_table()?;
                v.set("format", lua.create_string(&data[..3.min(data.len())])?)?;
                v.set("string", lua.create_string(data.get(4..).unwrap_or_default())?)?;
                single("verbatim_string", Value::Table(v))?
            } else {
                Value::String(lua.create_string(data)?)
            }
        }
        b'+' => single("ok", Value::String(lua.create_string(text)?))?,
        b'-' => single("err", Value::String(lua.create_string(text)?))?,
        b'*' | b'>' | b'~' | b'%' if num() < 0 => Value::Boolean(false),
        b'*' | b'>' => {
            let t = lua.create_table()?;
            for i in 1..=num() {
                t.raw_set(i, resp_to_lua(lua, bytes, at)?)?;
            }
            Value::Table(t)
        }
        b'~' => {
            let t = lua.create_table()?;
            for _ in 0..num() {
                t.raw_set(resp_to_lua(lua, bytes, at)?, true)?;
            }
            single("set", Value::Table(t))?
        }
        b'%' => {
            let t = lua.create_table()?;
            for _ in 0..num() {
                let k = resp_to_lua(lua, bytes, at)?;
                let v = resp_to_lua(lua, bytes, at)?;
                t.raw_set(k, v)?;
            }
            single("map", Value::Table(t))?
        }
        b'_' => Value::Nil,
        b'#' => Value::Boolean(text == b"t"),
        b',' => {
            let d = std::str::from_utf8(text).ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
            single("double", Value::Number(d))?
        }
        b'(' => single("big_number", Value::String(lua.create_string(text)?))?,
        _ => Value::Nil,
    })
}

/// A command's reply as the Lua value Redis gives a script: the replies commands mostly give
/// (integers, bulk strings, nils, status lines, arrays of them) directly, the rest as
/// [`resp_to_lua`] reads them written in the invocation's protocol.
pub(super) fn reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<Value> {
    if let Some(value) = plain_reply_to_lua(lua, reply, resp3)? {
        return Ok(value);
    }
    let protocol = if resp3 { Protocol::Resp3 } else { Protocol::Resp2 };
    let mut bytes = Vec::new();
    reply.write(protocol, &mut bytes);
    resp_to_lua(lua, &bytes, &mut 0)
}

/// [`reply_to_lua`] of a reply made only of integers, bulk strings, nils, clean status lines
/// and arrays; `None` for any other.
fn plain_reply_to_lua(lua: &Lua, reply: &Reply, resp3: bool) -> mlua::Result<Option<Value>> {
    Ok(Some(match reply {
        Reply::Integer(n) => Value::Integer(*n),
        Reply::Bulk(b) => Value::String(lua.create_string(&b[..])?),
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Status(s) if !s.bytes().any(|b| b == b'\r' || b == b'\n') => {
            let t = lua.create_table_with_capacity(0, 1)?;
            t.raw_set("ok", lua.create_string(s.as_bytes())?)?;
            Value::Table(t)
        }
        Reply::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                match plain_reply_to_lua(lua, item, resp3)? {
                    Some(v) => t.raw_set(i + 1, v)?,
                    None => return Ok(None),
                }
            }
            Value::Table(t)
        }
        _ => return Ok(None),
    }))
}
