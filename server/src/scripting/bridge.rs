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

/// Bytes a command function's string arguments often repeat, taken without a copy: the
/// running invocation's keys and arguments (the client's bytes) and the command names the
/// state has seen ([`Bridge::names`]).
#[derive(Default)]
pub(super) struct Known<'a> {
    pub(super) keys: &'a [Bytes],
    pub(super) args: &'a [Bytes],
    pub(super) names: Option<&'a RefCell<Vec<Bytes>>>,
}

/// How many of an invocation's keys and of its arguments [`Known`] compares.
const KNOWN_SCAN: usize = 8;
/// How many command names a state keeps ([`Bridge::names`]), and their longest.
const NAMES_KEPT: usize = 32;
const NAME_LEN: usize = 32;

impl Known<'_> {
    /// The `i`-th argument's bytes as `Bytes`: shared with an equal one known, else a copy.
    fn bytes(&self, i: usize, bytes: &[u8]) -> Bytes {
        let equal = |b: &&Bytes| b.len() == bytes.len() && b[..] == *bytes;
        if i == 0 {
            let Some(names) = self.names else { return Bytes::copy_from_slice(bytes) };
            if let Some(name) = names.borrow().iter().find(equal) {
                return name.clone();
            }
            // A name as the command table spells it shares the table's: its clones count no
            // references.
            let spelled = table::all().iter().find(|c| c.name.as_bytes() == bytes);
            let name = spelled
                .map_or_else(|| Bytes::copy_from_slice(bytes), |c| Bytes::from_static(c.name.as_bytes()));
            let mut names = names.borrow_mut();
            if names.len() < NAMES_KEPT && bytes.len() <= NAME_LEN {
                names.push(name.clone());
            }
            return name;
        }
        let mut known = self.keys.iter().take(KNOWN_SCAN).chain(self.args.iter().take(KNOWN_SCAN));
        known.find(equal).cloned().unwrap_or_else(|| Bytes::copy_from_slice(bytes))
    }
}

/// A `redis.call`'s `i`-th argument as a command's: a string, an integer, or a number as Lua
/// prints it; `None` for anything else.
pub(super) fn lua_arg(lua: &Lua, v: &Value, i: usize, known: &Known<'_>) -> mlua::Result<Option<Bytes>> {
    Ok(match v {
        Value::String(s) => Some(known.bytes(i, &s.as_bytes())),
        Value::Integer(n) => Some(Bytes::from(n.to_string())),
        // As Redis' lua_tolstring: its Lua prints numbers as `%.17g`.
        Value::Number(n) if !n.is_nan() => Some(Bytes::from(rediskv::server::args::format_g17(*n))),
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
pub(super) fn direct_argv(lua: &Lua, args: &MultiValue, known: &Known<'_>) -> mlua::Result<Argv> {
    lua_argv(args.len(), |i| lua_arg(lua, &args[i], i, known))
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

/// What a command function asks of the Rust function behind it (its first argument):
/// `redis.call`, `redis.pcall` or `redis.acl_check_cmd`, plus [`PACKED`] when the command's
/// arguments come packed (see [`PACK_PAST`]).
pub(super) const CALL: i64 = 0;
pub(super) const PCALL: i64 = 1;
pub(super) const ACL_CHECK: i64 = 2;
pub(super) const PACKED: i64 = 4;

/// The maker of a command function of Lua's: `make(mode)` calls `run(mode, ...)` with up to
/// [`PACK_PAST`] arguments, else `run(mode + PACKED, n, {...})` (`n` counts the nils a table
/// cannot). `run` is the state's Rust function [`Bridge::command`]. Being a Lua function, a
/// command function takes over its caller's frame when called as `return redis.call(…)`:
/// [`CallSite`] keeps that caller's place for the error handler.
pub(super) fn command_function_maker(lua: &Lua, run: &mlua::Function) -> mlua::Result<mlua::Function> {
    lua.load(format!(
        "local select, run = select, ...
         return function(mode)
           return function(...)
             local n = select('#', ...)
             if n > {PACK_PAST} then return run(mode + {PACKED}, n, {{...}}) end
             return run(mode, ...)
           end
         end"
    ))
    .set_name("=redis_prelude")
    .call(run)
}

/// The mode (without [`PACKED`]) and the command a command function's Rust side gets (see
/// [`command_function_maker`]).
pub(super) fn command_args(lua: &Lua, mut args: MultiValue, known: &Known<'_>) -> mlua::Result<(i64, Argv)> {
    let mode = match args.pop_front() {
        Some(Value::Integer(mode)) => mode,
        _ => CALL,
    };
    if mode & PACKED == 0 {
        return Ok((mode, direct_argv(lua, &args, known)?));
    }
    let n = match args.front() {
        Some(Value::Integer(n)) => *n as usize,
        _ => 0,
    };
    let Some(Value::Table(packed)) = args.get(1) else {
        return Ok((mode & !PACKED, lua_argv(0, |_| Ok(None))?));
    };
    let argv = lua_argv(n, |i| lua_arg(lua, &packed.raw_get::<Value>(i + 1)?, i, known))?;
    Ok((mode & !PACKED, argv))
}

/// A command's arguments, or the error reply they make.
pub(super) type Argv = Result<Vec<Bytes>, &'static str>;

/// What the Lua state's long-lived functions share with the invocation running now.
#[derive(Default)]
pub(super) struct Bridge {
    pub(super) site: CallSite,
    /// The protocol `redis.setresp` chose for the running invocation's command replies.
    pub(super) resp3: Cell<bool>,
    /// The running invocation gave up on the event loop (see [`Caller::inline_until`]).
    pub(super) abandoned: Cell<bool>,
    /// Command names the state's scripts ran, shared by their commands (see [`Known`]).
    pub(super) names: RefCell<Vec<Bytes>>,
    /// The hook of the runs (SCRIPT KILL's flag, the inline deadline) is the state's: another
    /// (a killed run's, a library load's) replaces it until the next run installs it again.
    pub(super) hooked: Cell<bool>,
    /// SCRIPT KILL's flag, for the hook.
    pub(super) kill: RefCell<Option<Arc<AtomicBool>>>,
    /// The running invocation's deadline on its event loop, for the hook (see
    /// [`Caller::inline_until`]); `None` outside an invocation.
    pub(super) until: Cell<Option<Instant>>,
    /// The counts the running invocation owes (see [`Tally`]), a buffer kept from run to run.
    pub(super) tallies: RefCell<Vec<Tally>>,
    /// The running invocation's side of the command functions, lent by [`Bridge::lend`].
    lent: Cell<Option<std::ptr::NonNull<Invocation<'static>>>>,
}

/// The Rust side of the command functions (`redis.call`, `redis.pcall`,
/// `redis.acl_check_cmd`) for one invocation: their arguments as they came, their answer.
pub(super) type Invocation<'a> = dyn Fn(&Lua, MultiValue) -> mlua::Result<Value> + 'a;

impl Bridge {
    /// The command functions' Rust function (`current.run`, made once per state): the lent
    /// invocation's, or, between invocations, [`outside_invocation`].
    pub(super) fn command(&self, lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
        match self.lent.get() {
            Some(invocation) => {
                // SAFETY: `lent` holds a pointer only while `lend` runs its body, and `lend`
                // borrows the invocation for all that time: it is alive, and only shared
                // references to it exist (it is `Fn`).
                let invocation = unsafe { invocation.as_ref() };
                invocation(lua, args)
            }
            None => outside_invocation(lua, args),
        }
    }

    /// Runs `body` with `invocation` answering the command functions; after it, as before it,
    /// they answer as outside an invocation (also when `body` panics). One long-lived Rust
    /// function reaches the invocation's, which borrows the run's state: making a scoped Lua
    /// function for each run and destroying it after costs about 1,900 instructions a script
    /// (`benches/callgrind_commands.sh`, EVALSHA).
    pub(super) fn lend<R>(&self, invocation: &Invocation<'_>, body: impl FnOnce() -> R) -> R {
        struct Restore<'b>(&'b Bridge, Option<std::ptr::NonNull<Invocation<'static>>>);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.lent.set(self.1);
            }
        }
        let pointer = std::ptr::NonNull::from(invocation);
        // SAFETY: only the lifetime bound of the trait object changes (the same fat pointer);
        // the pointer is dereferenced only while it is lent, within this call (see
        // `Bridge::command`), and `Restore` takes it back before this call returns or unwinds.
        let pointer = unsafe {
            std::mem::transmute::<std::ptr::NonNull<Invocation<'_>>, std::ptr::NonNull<Invocation<'static>>>(
                pointer,
            )
        };
        let _restore = Restore(self, self.lent.replace(Some(pointer)));
        body()
    }
}

/// The command functions' Rust side between invocations: `redis.call` raises and
/// `redis.pcall` answers Redis' error, `redis.acl_check_cmd` raises its own.
pub(super) fn outside_invocation(lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
    let (mode, _) = command_args(lua, args, &Known::default())?;
    if mode == ACL_CHECK {
        return Err(mlua::Error::RuntimeError(
            "redis.acl_check_cmd can only be called inside a script invocation".into(),
        ));
    }
    let refusal = error_table(lua, "ERR redis.call/pcall can only be called inside a script invocation")?;
    answer(lua, Value::Table(refusal), mode == CALL)
}

/// A command's reply as `redis.call` (`raise`) or `redis.pcall` gives it: `redis.call` raises
/// an error reply as the script's error; the table is kept in the registry for the error
/// handler, since a Rust function raises only strings.
pub(super) fn answer(lua: &Lua, reply: Value, raise: bool) -> mlua::Result<Value> {
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

/// The checks Redis makes on a command a script runs, and its row: one the server answers
/// itself ([`table::Family::Server`]) only when `host` runs it for scripts.
pub(super) fn check_command(
    argv: &[Bytes],
    read_only: bool,
    acl: &dyn Fn(&[Bytes]) -> Result<(), String>,
    host: &dyn Host,
) -> Result<&'static table::CommandInfo, String> {
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
    if info.family == table::Family::Server && !host.runs_for_scripts(info) {
        return Err("This Redis command is not allowed from script".into());
    }
    Ok(info)
}
