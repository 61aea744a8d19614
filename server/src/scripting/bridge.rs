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
/// `redis.acl_check_cmd`) passes to [`Bridge::command`] as they are; past it they travel
/// packed in one table. Lua 5.1 lets a C function (a Rust one included) use only
/// `LUAI_MAXCSTACK` (8,000) stack slots, its arguments among them, and mlua holds each string
/// argument in a slot of a thread of its own that has no more: a Rust function given 8,000
/// arguments can neither read them all nor push a reply (it works up to about 7,990). Redis'
/// `redis.call` takes what `unpack` gives (7,999 values). Reading a table costs more per
/// value than reading arguments, so only calls this big pay for it; the rest of the 8,000
/// slots is a margin for what else holds one.
pub(super) const PACK_PAST: usize = 7000;

/// What a command function asks of [`Bridge::command`] (its first argument): `redis.call`,
/// `redis.pcall` or `redis.acl_check_cmd`, plus [`PACKED`] when the command's arguments come
/// packed (see [`PACK_PAST`]).
pub(super) const CALL: i64 = 0;
pub(super) const PCALL: i64 = 1;
pub(super) const ACL_CHECK: i64 = 2;
pub(super) const PACKED: i64 = 4;

/// The arrays [`fast_command`] pushes itself: at most this deep and this long; longer or
/// deeper replies go through [`Bridge::finish`].
const FAST_DEPTH: usize = 4;
const FAST_LEN: usize = 1024;

/// What [`fast_step`] did with a command.
enum Step {
    /// It ran the command and pushed its reply.
    Pushed,
    /// It ran the command; its outcome waits in [`Bridge::pending`] for [`Bridge::finish`].
    Pending,
    /// It did not run the command: [`Bridge::command`] takes it as it came.
    Slow,
}

/// A command function of Lua's (`redis.call`, `redis.pcall`, `redis.acl_check_cmd`), a Lua
/// C function with four upvalues: the state's [`Bridge`], its mode ([`CALL`], [`PCALL`] or
/// [`ACL_CHECK`]), `run` (the state's Rust function [`Bridge::command`]) and `finish`
/// ([`Bridge::finish`]). It runs `redis.call`'s or `redis.pcall`'s command itself when every
/// argument is a string and an invocation is lent, and answers its reply when it is one
/// [`push_plain`] pushes and no error; otherwise it answers `finish(mode)` for a command it
/// ran, or `run(mode, ...)` for one it did not, past [`PACK_PAST`] arguments
/// `run(mode + PACKED, n, {...})` (`n` counts the nils a table cannot). Reading the arguments
/// from Lua's stack and pushing the reply there, without mlua's conversions of each value to
/// and from its own, saves about 2,000 instructions a script of two commands; being a C
/// function rather than a Lua one that calls one, about 1,000 more
/// (`TESTS=evalsha benches/callgrind_commands.sh`). Being a C function, it runs above the
/// frame of the code that called it, also when called as `return redis.call(…)`: an error
/// raised in it is placed at that code's line.
///
/// # Safety
///
/// Called by Lua only, as the C closure [`Bridge::command_function`] makes: its first
/// upvalue points to the state's `Bridge`, which the state's app data keeps alive as long as
/// the state.
pub(super) unsafe extern "C-unwind" fn fast_command(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    // SAFETY: the upvalue is the pointer `Bridge::command_function` gave, to the `Bridge`
    // the state's app data holds (an `Rc` never moved nor dropped before the state closes).
    let bridge = unsafe { &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Bridge) };
    // SAFETY: the second upvalue is the mode, an integer.
    let mode = unsafe { ffi::lua_tointeger(state, ffi::lua_upvalueindex(2)) };
    let step = if mode == CALL || mode == PCALL {
        // No Rust value with a destructor is alive outside `fast_step` when Lua is called
        // (here or below): a Lua error (a `longjmp`) crosses no Rust frame that would need
        // unwinding. The Lua calls `fast_step` makes push and set values only: mlua's
        // allocator aborts rather than fail (no memory limit is set), so they raise no
        // memory error.
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: `state` is the state Lua called this function with.
            unsafe { fast_step(state, bridge) }
        }));
        match answer {
            Ok(step) => step,
            Err(panic) => {
                bridge.pending.set(Some(Outcome::Panic(panic)));
                Step::Pending
            }
        }
    } else {
        Step::Slow
    };
    // SAFETY (each Lua call below): `state` is the running state; the functions called are
    // the upvalues, mlua's Rust functions, whose errors (and panics, which mlua carries as
    // errors) go on as this function's. The stack room: a C function starts with
    // `LUA_MINSTACK` (20) free slots; this one pushes at most three past its arguments.
    unsafe {
        match step {
            Step::Pushed => 1,
            Step::Pending => {
                ffi::lua_settop(state, 0);
                ffi::lua_pushvalue(state, ffi::lua_upvalueindex(4));
                ffi::lua_pushinteger(state, mode as ffi::lua_Integer);
                ffi::lua_call(state, 1, 1);
                1
            }
            Step::Slow => {
                let n = ffi::lua_gettop(state);
                if n as usize > PACK_PAST {
                    // The arguments into one table, the last first (each store pops it).
                    ffi::lua_createtable(state, n, 0);
                    ffi::lua_insert(state, 1);
                    for i in (1..=n).rev() {
                        ffi::lua_rawseti(state, 1, i as ffi::lua_Integer);
                    }
                    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(3));
                    ffi::lua_insert(state, 1);
                    ffi::lua_pushinteger(state, (mode + PACKED) as ffi::lua_Integer);
                    ffi::lua_insert(state, 2);
                    ffi::lua_pushinteger(state, n as ffi::lua_Integer);
                    ffi::lua_insert(state, 3);
                    ffi::lua_call(state, 3, ffi::LUA_MULTRET);
                } else {
                    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(3));
                    ffi::lua_insert(state, 1);
                    ffi::lua_pushinteger(state, mode as ffi::lua_Integer);
                    ffi::lua_insert(state, 2);
                    ffi::lua_call(state, n + 1, ffi::LUA_MULTRET);
                }
                ffi::lua_gettop(state)
            }
        }
    }
}

/// [`fast_command`]'s work for `redis.call` and `redis.pcall`.
///
/// # Safety
///
/// `state` is the running state, with the command function's arguments on its stack.
unsafe fn fast_step(state: *mut mlua::ffi::lua_State, bridge: &Bridge) -> Step {
    use mlua::ffi;
    // SAFETY (each Lua call below): `state` is the running state; every index read is
    // within `1..=n`, its stack.
    let n = unsafe { ffi::lua_gettop(state) };
    if n < 1 {
        return Step::Slow;
    }
    let Some(invocation) = bridge.lent.get() else { return Step::Slow };
    // SAFETY: as in `Bridge::command`: lent only while `Bridge::lend` runs its body.
    let invocation = unsafe { invocation.as_ref() };
    let mut argv = Vec::with_capacity(n as usize);
    for at in 1..=n {
        if unsafe { ffi::lua_type(state, at) } != ffi::LUA_TSTRING {
            return Step::Slow;
        }
        let mut len = 0;
        let text = unsafe { ffi::lua_tolstring(state, at, &mut len) };
        // SAFETY: a string's bytes, which stay while it is on the stack (all of this loop).
        let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
        argv.push(invocation.known.bytes(at as usize - 1, bytes));
    }
    let outcome = (invocation.command)(Ok(argv));
    let resp3 = bridge.resp3.get();
    if let Outcome::Reply(reply, false) = &outcome
        && !reply.is_error()
        && plain(reply, FAST_DEPTH)
        // SAFETY: as above; it fails rather than raise.
        && unsafe { ffi::lua_checkstack(state, 2 * FAST_DEPTH as std::ffi::c_int + 4) } != 0
    {
        // SAFETY: `plain` said it is pushed whole, with the stack room checked.
        unsafe { push_plain(state, reply, resp3) };
        return Step::Pushed;
    }
    bridge.pending.set(Some(outcome));
    Step::Pending
}

/// Whether [`push_plain`] pushes `reply`: what [`reply_to_lua`] converts without writing it
/// out, arrays at most `depth` deep and [`FAST_LEN`] long.
fn plain(reply: &Reply, depth: usize) -> bool {
    match reply {
        Reply::Integer(_) | Reply::Bulk(_) | Reply::Nil | Reply::NilArray => true,
        Reply::Status(s) => !s.bytes().any(|b| b == b'\r' || b == b'\n'),
        Reply::Array(items) => {
            depth > 0 && items.len() <= FAST_LEN && items.iter().all(|item| plain(item, depth - 1))
        }
        _ => false,
    }
}

/// Pushes `reply` as the Lua value [`reply_to_lua`] makes of it.
///
/// # Safety
///
/// `state` is the running state, with room for two values per level of `reply`'s nesting
/// and [`plain`] true of it.
unsafe fn push_plain(state: *mut mlua::ffi::lua_State, reply: &Reply, resp3: bool) {
    use mlua::ffi;
    // SAFETY (each Lua call below): as the caller promises.
    unsafe {
        match reply {
            Reply::Integer(n) => ffi::lua_pushinteger(state, *n as ffi::lua_Integer),
            Reply::Bulk(b) => {
                ffi::lua_pushlstring(state, b.as_ptr().cast(), b.len());
            }
            Reply::Nil | Reply::NilArray if resp3 => ffi::lua_pushnil(state),
            Reply::Nil | Reply::NilArray => ffi::lua_pushboolean(state, 0),
            Reply::Status(s) => {
                ffi::lua_createtable(state, 0, 1);
                ffi::lua_pushlstring(state, c"ok".as_ptr(), 2);
                ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
                ffi::lua_rawset(state, -3);
            }
            Reply::Array(items) => {
                ffi::lua_createtable(state, items.len() as std::ffi::c_int, 0);
                for (i, item) in items.iter().enumerate() {
                    push_plain(state, item, resp3);
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                }
            }
            _ => ffi::lua_pushnil(state),
        }
    }
}

/// The mode (without [`PACKED`]) and the command a command function's Rust side gets (see
/// [`fast_command`]).
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

/// What a command a script runs comes to, before it is the Lua value its command function
/// answers (see [`Outcome::into_lua`]).
pub(super) enum Outcome {
    /// Refused with an error table of this text; `true`: counted in INFO errorstats already
    /// (see [`COUNTED`]).
    Refused(std::borrow::Cow<'static, str>, bool),
    /// The command's reply; `true`: an error reply counted already.
    Reply(Reply, bool),
    /// The running invocation gives up on the event loop (see [`Caller::inline_until`]).
    Abandon,
    /// The command's Rust side panicked in [`fast_command`]: the panic goes on in
    /// [`Bridge::finish`], where mlua carries it.
    Panic(Box<dyn std::any::Any + Send>),
}

impl Outcome {
    /// The Lua value of the outcome, as the command function answers it before
    /// [`answer`] raises an error reply for `redis.call`.
    pub(super) fn into_lua(self, lua: &Lua, resp3: bool) -> mlua::Result<Value> {
        match self {
            Outcome::Refused(text, false) => Ok(Value::Table(error_table(lua, &text)?)),
            Outcome::Refused(text, true) => Ok(Value::Table(counted_error_table(lua, &text)?)),
            Outcome::Reply(reply, counted) => {
                let value = reply_to_lua(lua, &reply, resp3)?;
                if let (true, Value::Table(t)) = (counted, &value) {
                    t.set(COUNTED, true)?;
                }
                Ok(value)
            }
            Outcome::Abandon => Err(stop(lua, abandoned())),
            Outcome::Panic(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// The running invocation's side of the command functions (`redis.call`, `redis.pcall`,
/// `redis.acl_check_cmd`), lent to the state's [`Bridge`] for the invocation.
pub(super) struct Invocation<'a> {
    /// Runs a command (or answers its arguments' error).
    pub(super) command: &'a dyn Fn(Argv) -> Outcome,
    /// `redis.acl_check_cmd`.
    pub(super) acl_check: &'a dyn Fn(&Lua, Argv) -> mlua::Result<bool>,
    /// The bytes the invocation's commands often repeat.
    pub(super) known: Known<'a>,
}

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
    /// The rows of the commands the state's scripts ran last (see [`check_command`]).
    pub(super) rows: Cell<[Option<&'static table::CommandInfo>; 2]>,
    /// The state's KEYS and ARGV tables are the globals `KEYS` and `ARGV` (set when the
    /// first script runs).
    pub(super) keys_set: Cell<bool>,
    /// The outcome of the command [`fast_command`] ran, for [`Bridge::finish`].
    pending: Cell<Option<Outcome>>,
    /// The running invocation's side of the command functions, lent by [`Bridge::lend`].
    lent: Cell<Option<std::ptr::NonNull<Invocation<'static>>>>,
}

impl Bridge {
    /// The command functions' Rust function for what [`fast_command`] leaves (`run`, made
    /// once per state): the lent invocation's, or, between invocations,
    /// [`outside_invocation`].
    pub(super) fn command(&self, lua: &Lua, args: MultiValue) -> mlua::Result<Value> {
        match self.lent.get() {
            Some(invocation) => {
                // SAFETY: `lent` holds a pointer only while `lend` runs its body, and `lend`
                // borrows the invocation for all that time: it is alive, and only shared
                // references to it exist.
                let invocation = unsafe { invocation.as_ref() };
                let (mode, argv) = command_args(lua, args, &invocation.known)?;
                if mode == ACL_CHECK {
                    return (invocation.acl_check)(lua, argv).map(Value::Boolean);
                }
                answer(lua, (invocation.command)(argv).into_lua(lua, self.resp3.get())?, mode == CALL)
            }
            None => outside_invocation(lua, args),
        }
    }

    /// The command functions' answer for a command [`fast_command`] ran and did not answer
    /// (`finish(mode)`, made once per state).
    pub(super) fn finish(&self, lua: &Lua, mode: i64) -> mlua::Result<Value> {
        let Some(outcome) = self.pending.take() else { return Ok(Value::Nil) };
        answer(lua, outcome.into_lua(lua, self.resp3.get())?, mode == CALL)
    }

    /// The command function of `mode` ([`fast_command`] with its upvalues): `run` is the
    /// state's Rust function for [`Bridge::command`], `finish` for [`Bridge::finish`].
    ///
    /// # Safety
    ///
    /// `self` is the bridge `lua`'s app data holds, for as long as the state lives.
    pub(super) unsafe fn command_function(
        &self,
        lua: &Lua,
        mode: i64,
        run: &mlua::Function,
        finish: &mlua::Function,
    ) -> mlua::Result<mlua::Function> {
        let this = mlua::LightUserData(std::ptr::from_ref(self).cast_mut().cast());
        // SAFETY: the closure only consumes the four values `exec_raw` pushed and pushes the
        // C closure it answers.
        unsafe {
            lua.exec_raw((this, mode, run, finish), |state| {
                mlua::ffi::lua_pushcclosure(state, fast_command, 4)
            })
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
                self.0.pending.set(None);
            }
        }
        // Only the lifetime parameter changes: the pointer is dereferenced only while it is
        // lent, within this call (see `Bridge::command`), and `Restore` takes it back before
        // this call returns or unwinds.
        let pointer = std::ptr::NonNull::from(invocation).cast::<Invocation<'static>>();
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
/// `recent` holds the rows of the commands found last: one whose name `argv` repeats is
/// taken without a lookup in the command table (see [`table::find_repeated`]).
pub(super) fn check_command(
    argv: &[Bytes],
    recent: &Cell<[Option<&'static table::CommandInfo>; 2]>,
    read_only: bool,
    acl: &dyn Fn(&[Bytes]) -> Result<(), String>,
    host: &dyn Host,
) -> Result<&'static table::CommandInfo, String> {
    let rows = recent.get();
    let name = argv.first().map_or(&[][..], |name| &name[..]);
    let last = rows.iter().flatten().find(|row| name.eq_ignore_ascii_case(row.name.as_bytes()));
    let found = table::find_repeated(argv, last.copied());
    if let (Ok(info), None) = (found, last) {
        recent.set([Some(info), rows[0]]);
    }
    let info = match found {
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
