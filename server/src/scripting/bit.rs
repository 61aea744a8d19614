//! Lua BitOp's `bit` library, as Redis bundles it.

use super::*;

/// Lua BitOp's `bit` library, as Redis ships it (32-bit results).
pub(super) fn bit_library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let norm = |n: f64| -> i32 { (n as i64) as i32 };
    t.set("tobit", lua.create_function(move |_, n: f64| Ok(norm(n)))?)?;
    t.set("bnot", lua.create_function(move |_, n: f64| Ok(!norm(n)))?)?;
    t.set(
        "band",
        lua.create_function(move |_, v: mlua::Variadic<f64>| Ok(v.iter().fold(-1i32, |a, b| a & norm(*b))))?,
    )?;
    t.set(
        "bor",
        lua.create_function(move |_, v: mlua::Variadic<f64>| Ok(v.iter().fold(0i32, |a, b| a | norm(*b))))?,
    )?;
    t.set(
        "bxor",
        lua.create_function(move |_, v: mlua::Variadic<f64>| Ok(v.iter().fold(0i32, |a, b| a ^ norm(*b))))?,
    )?;
    t.set(
        "lshift",
        lua.create_function(move |_, (a, n): (f64, f64)| Ok(((norm(a) as u32) << (norm(n) & 31)) as i32))?,
    )?;
    t.set(
        "rshift",
        lua.create_function(move |_, (a, n): (f64, f64)| Ok(((norm(a) as u32) >> (norm(n) & 31)) as i32))?,
    )?;
    t.set("arshift", lua.create_function(move |_, (a, n): (f64, f64)| Ok(norm(a) >> (norm(n) & 31)))?)?;
    t.set(
        "rol",
        lua.create_function(move |_, (a, n): (f64, f64)| {
            Ok((norm(a) as u32).rotate_left((norm(n) & 31) as u32) as i32)
        })?,
    )?;
    t.set(
        "ror",
        lua.create_function(move |_, (a, n): (f64, f64)| {
            Ok((norm(a) as u32).rotate_right((norm(n) & 31) as u32) as i32)
        })?,
    )?;
    t.set("bswap", lua.create_function(move |_, a: f64| Ok(norm(a).swap_bytes()))?)?;
    t.set(
        "tohex",
        lua.create_function(move |_, (a, n): (f64, Option<f64>)| {
            let n = n.map_or(8, norm);
            let (upper, digits) = if n < 0 { (true, (-n).min(8)) } else { (false, n.min(8)) };
            let v = norm(a) as u32;
            let s = format!("{v:08x}");
            let s = &s[8 - digits as usize..];
            Ok(if upper { s.to_uppercase() } else { s.to_string() })
        })?,
    )?;
    Ok(t)
}
