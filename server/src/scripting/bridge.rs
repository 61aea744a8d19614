//! The `redis.call` bridge: `redis.call`, `redis.pcall` and `redis.acl_check_cmd` from Lua to
//! Rust, their arguments as a command, the checks Redis makes on a command a script runs, and
//! the error tables they answer.

use super::*;

/// The ACL check a script's commands get: `user`'s, unless it may run everything.
pub fn acl_check(user: &crate::acl::User, restricted: bool) -> impl Fn(&[Bytes]) -> Result<(), String> + '_ {
    move |cmd: &[Bytes]| {
        if !restricted {
            return Ok(());
        }
        let Ok(id) = crate::acl::resolve(cmd) else { return Ok(()) };
        user.check(id, cmd).map_err(|d| {
            match d {
                crate::acl::Denied::Command => "The user executing the script can't run this command or subcommand",
                crate::acl::Denied::Key(_) => {
                    "The user executing the script can't access at least one of the keys mentioned in the command arguments"
                }
                crate::acl::Denied::Channel(_) => {
                    "The user executing the script can't publish to the channel mentioned in the command"
                }
            }
            .to_string()
        })
    }
}

/// A `redis.call`'s argument as a command's: a string, an integer, or a number as Lua prints
/// it; `None` for anything else.
pub(super) fn lua_arg(lua: &Lua, v: &Value) -> mlua::Result<Option<Bytes>> {
    Ok(match v {
        Value::String(s) => Some(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Integer(n) => Some(Bytes::from(n.to_string())),
        // As Redis' lua_tolstring: its Lua prints numbers as `%.17g`.
        Value::Number(n) if !n.is_nan() => Some(Bytes::from(rediskv::commands::args::format_g17(*n))),
        Value::Number(_) => lua.coerce_string(v.clone())?.map(|s| Bytes::copy_from_slice(&s.as_bytes())),
        _ => None,
    })
}

/// The command a `redis.call`'s `n` arguments make (`arg(i)` converts the i-th, from 0), or
/// the error reply Redis gives when one is not a string or a number, or for none.
pub(super) fn lua_argv(
    n: usize,
    mut arg: impl FnMut(usize) -> mlua::Result<Option<Bytes>>,
) -> mlua::Result<Argv> {
    if n == 0 {
        return Ok(Err("ERR Please specify at least one argument for this redis lib call"));
    }
    let mut argv = Vec::with_capacity(n);
    for i in 0..n {
        match arg(i)? {
            Some(a) => argv.push(a),
            None => return Ok(Err("ERR Lua redis lib command arguments must be strings or integers")),
        }
    }
    Ok(Ok(argv))
}

/// [`lua_argv`] of a command function's arguments as they came.
pub(super) fn direct_argv(lua: &Lua, args: &MultiValue) -> mlua::Result<Argv> {
    lua_argv(args.len(), |i| lua_arg(lua, &args[i]))
}

/// How many arguments a command function (`redis.call`, `redis.pcall`,
/// `redis.acl_check_cmd`) passes to its Rust function as they are; past it they travel
/// packed in one table. Lua 5.1 lets a C function (a Rust one included) use only
/// `LUAI_MAXCSTACK` (8,000) stack slots, its arguments among them, and mlua holds each string
/// argument in a slot of a thread of its own that has no more: a Rust function given 8,000
/// arguments can neither read them all nor push a reply (it works up to about 7,990). A Lua
/// function has no such limit, and Redis' `redis.call` takes what `unpack` gives (7,999
/// values). Reading a table costs more per value than reading arguments, so only calls this
/// big pay for it; the rest of the 8,000 slots is a margin for what else holds one.
pub(super) const PACK_PAST: usize = 7000;

/// The maker of a command function of Lua's over its Rust functions: `make(direct, packed)`
/// calls `direct(...)` with up to [`PACK_PAST`] arguments, else `packed(n, {...})` (`n`
/// counts the nils a table cannot). Being a Lua function, it takes over its caller's frame
/// when called as `return redis.call(…)`: [`CallSite`] keeps that caller's place for the
/// error handler.
pub(super) fn command_function_maker(lua: &Lua) -> mlua::Result<mlua::Function> {
    lua.load(format!(
        "local select = select
         return function(direct, packed)
           return function(...)
             local n = select('#', ...)
             if n > {PACK_PAST} then return packed(n, {{...}}) end
             return direct(...)
           end
         end"
    ))
    .set_name("=redis_prelude")
    .eval()
}

/// [`lua_argv`] of the `n` arguments a command function packed in `args` (see
/// [`command_function_maker`]), read one at a time.
pub(super) fn packed_argv(lua: &Lua, n: usize, args: &Table) -> mlua::Result<Argv> {
    lua_argv(n, |i| lua_arg(lua, &args.raw_get::<Value>(i + 1)?))
}

/// A command's arguments, or the error reply they make.
pub(super) type Argv = Result<Vec<Bytes>, &'static str>;

/// What the Lua state's long-lived functions share with the invocation running now.
#[derive(Default)]
pub(super) struct Bridge {
    /// The running invocation's command runner (for `redis.call` and `redis.pcall`), which
    /// checks the ACL instead (for `redis.acl_check_cmd`) while `acl_check` is set: a
    /// function of its scope, `None` between invocations.
    pub(super) run: RefCell<Option<mlua::Function>>,
    pub(super) acl_check: Cell<bool>,
    /// A command's arguments on their way to `run` or `acl_check`. They travel beside the
    /// call, as bytes: as its arguments they would be made into Lua strings again, and take
    /// as many of the caller's stack slots again (see [`PACK_PAST`]).
    pub(super) argv: RefCell<Option<Argv>>,
    pub(super) site: CallSite,
    /// The protocol `redis.setresp` chose for the running invocation's command replies.
    pub(super) resp3: Cell<bool>,
    /// The running invocation gave up on the event loop (see [`Caller::inline_until`]).
    pub(super) abandoned: Cell<bool>,
}

impl Bridge {
    /// The arguments handed to the function now running.
    pub(super) fn take_argv(&self) -> Argv {
        self.argv
            .borrow_mut()
            .take()
            .unwrap_or(Err("ERR Please specify at least one argument for this redis lib call"))
    }
}

/// `redis.acl_check_cmd` of `argv`, through the running invocation's check.
pub(super) fn redis_acl_check_cmd(bridge: &Bridge, argv: Argv) -> mlua::Result<Value> {
    match bridge.run.borrow().as_ref() {
        Some(f) => {
            *bridge.argv.borrow_mut() = Some(argv);
            bridge.acl_check.set(true);
            let allowed = f.call::<Value>(());
            bridge.acl_check.set(false);
            allowed
        }
        None => Err(mlua::Error::RuntimeError(
            "redis.acl_check_cmd can only be called inside a script invocation".into(),
        )),
    }
}

/// `redis.call` (`raise`) and `redis.pcall` of `argv`: runs the command through the
/// running invocation's runner. `redis.call` raises an error reply as the script's error:
/// the table is kept in the registry for the error handler, since a Rust function raises
/// only strings.
pub(super) fn redis_call(lua: &Lua, bridge: &Bridge, argv: Argv, raise: bool) -> mlua::Result<Value> {
    let reply = match bridge.run.borrow().as_ref() {
        Some(f) => {
            *bridge.argv.borrow_mut() = Some(argv);
            f.call::<Value>(())?
        }
        None => Value::Table(error_table(
            lua,
            "ERR redis.call/pcall can only be called inside a script invocation",
        )?),
    };
    if raise
        && let Value::Table(t) = &reply
        && let Ok(Value::String(e)) = t.raw_get::<Value>("err")
    {
        let text = e.to_string_lossy().to_string();
        lua.set_named_registry_value("__redis_pending_error", t.clone())?;
        return Err(mlua::Error::RuntimeError(text));
    }
    Ok(reply)
}

pub(super) fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("err", text)?;
    Ok(t)
}

/// The field Redis sets on the error table of a command a script ran, whose error INFO
/// errorstats counted already (visible to the script, as in Redis).
pub(super) const COUNTED: &str = "ignore_error_stats_update";

/// [`error_table`] for an error counted already (see [`COUNTED`]).
pub(super) fn counted_error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = error_table(lua, text)?;
    t.set(COUNTED, true)?;
    Ok(t)
}

/// The checks Redis makes on a command a script runs; `Ok(None)` for a command the server
/// answers itself.
pub(super) fn check_command(
    argv: &[Bytes],
    read_only: bool,
    acl: &dyn Fn(&[Bytes]) -> Result<(), String>,
) -> Result<Option<&'static table::CommandInfo>, String> {
    let info = match table::find(argv) {
        Ok(info) => info,
        Err(Some(container)) => {
            if !container.arity_ok(argv.len()) {
                return Err("Wrong number of args calling Redis command from script".into());
            }
            container
        }
        Err(None) => return Err("Unknown Redis command called from script".into()),
    };
    if !info.arity_ok(argv.len()) {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    if info.has(flag::NOSCRIPT) {
        return Err("This Redis command is not allowed from script".into());
    }
    if read_only && info.has(flag::WRITE | flag::MAY_REPLICATE) {
        return Err("Write commands are not allowed from read-only scripts.".into());
    }
    acl(argv)?;
    let options = || argv.iter().take_while(|a| !a.eq_ignore_ascii_case(b"streams"));
    if matches!(info.name, "xread" | "xreadgroup") && options().any(|a| a.eq_ignore_ascii_case(b"block")) {
        return Err(format!(
            "{} command is not allowed with BLOCK option from scripts",
            String::from_utf8_lossy(&argv[0])
        ));
    }
    if info.family == table::Family::Server {
        // The server's own commands a script may run (see `server_command`).
        return match info.name {
            "publish" | "spublish" | "time" | "info" => Ok(None),
            _ => Err("This Redis command is not allowed from script".into()),
        };
    }
    Ok(Some(info))
}
