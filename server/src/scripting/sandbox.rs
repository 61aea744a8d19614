//! The sandbox: a Lua state ([`Vm`], one per thread that runs scripts) with Redis' libraries
//! and globals protection ([`PRELUDE`]), `loadstring`/`load` confined to it, function
//! registration, and where an error took place ([`CallSite`]) for Redis' error texts.

use super::*;

/// `7.0.15` → `0x07000f`, as Redis' `REDIS_VERSION_NUM`.
pub(super) fn redis_version_num(version: &str) -> i64 {
    version.split('.').take(3).fold(0, |n, part| n << 8 | part.parse::<i64>().unwrap_or(0))
}

/// Sandboxed Lua, with Redis' libraries and the prelude below.
pub(super) struct Vm {
    pub(super) lua: Lua,
    /// The state's bridge (also its app data).
    pub(super) bridge: Rc<Bridge>,
    /// The state's main thread, where `run::call_runner` calls past mlua.
    pub(super) main: MainState,
    /// The error handler scripts and functions are called under (`__redis__err__handler`)
    /// and the globals' table (the prelude's `fast`), in the registry.
    pub(super) handler: RawRef,
    pub(super) fast: RawRef,
    /// The KEYS and ARGV tables the state's scripts get, and the keys and arguments tables
    /// of the functions that keep neither (see `run::call_runner`).
    pub(super) tables: (RawRef, RawRef),
    pub(super) function_tables: (RawRef, RawRef),
    pub(super) generation: u64,
    /// The scripts this state compiled.
    pub(super) scripts: CompiledScripts,
    /// The registered functions by name.
    pub(super) functions: HashMap<String, VmFunction>,
}

/// A registered function in a thread's state, with the flags FCALL checks.
pub(super) struct VmFunction {
    /// Its name as registered.
    pub(super) name: Rc<str>,
    /// The function, in the registry.
    pub(super) raw: RawRef,
    pub(super) no_writes: bool,
    pub(super) allow_oom: bool,
    /// The one line all its library's code is on, if it is (see [`single_line`]).
    pub(super) line: Option<i32>,
    /// It neither keeps nor passes on its keys and arguments tables (see [`keeps_arguments`]): it
    /// gets the state's `function_tables`.
    pub(super) lends: bool,
}

/// Defines Redis' `pcall`, the runner that calls a library's code under the error handler,
/// and the global protection: the globals scripts see (their environment, also given to the
/// code `loadstring` and `load` make), the library tables and the strings' metatable are
/// read-only views (assignment, `setmetatable`, `rawset` and `table.insert` refuse them), a
/// script can neither create globals nor read undefined ones; where it looks up
/// `setmetatable`, `rawset`, `getmetatable` or `table.insert`, [`CallSite`] notes. Takes the
/// `pcall` error converter, the mark function and the place function (see [`CallSite::place`]);
/// answers the pieces the server keeps (see [`Vm::new`]), none of them a global.
pub(super) const PRELUDE: &str = r#"
local error_text, mark, place = ...
local G = _G
local error, select, unpack, pcall_, maxn, setmetatable_ = error, select, unpack, pcall, table.maxn, setmetatable
local type, tonumber, find, sub = type, tonumber, string.find, string.sub
local rawset_, insert_, getmetatable_ = rawset, table.insert, getmetatable
local READONLY = 'Attempt to modify a readonly table'
-- Redis' pcall: an error reply raised by redis.call (or a library) comes back as its text.
-- Without arguments it calls the boolean it puts before them, as Redis' does.
pcall = function(...)
  if select('#', ...) == 0 then return false, 'attempt to call a boolean value' end
  local result = {pcall_(...)}
  if not result[1] then return false, error_text(result[2]) end
  return unpack(result, 1, maxn(result))
end
local function readonly() error(READONLY, 2) end
-- What getmetatable answers for a library table: a table nobody can change.
local sealed = setmetatable_({}, {__newindex = readonly, __metatable = false})
-- Tables scripts may not change (the server's rawset and table.insert refuse them too), and
-- what its getmetatable answers for them (nil for most, as Redis' library tables have none).
local protected, answers = {[sealed] = true}, {}
local function view(t, index)
  local v = setmetatable_({}, {__index = index or t, __newindex = readonly, __metatable = sealed})
  protected[v] = true
  return v
end
-- Library tables reach scripts as read-only views, as Redis makes them read-only.
local views, originals = {}, {}
for _, name in ipairs({'redis', 'cjson', 'cmsgpack', 'struct', 'bit', 'string', 'math', 'table', 'coroutine'}) do
  originals[name] = G[name]
  views[name] = view(G[name])
end
-- `table.insert` is noted where it is looked up, as the globals above.
local table_ = G.table
views.table = view(table_, function(_, k)
  if k == 'insert' then mark() end
  return table_[k]
end)
-- The strings' metatable (the server installs it): its __index is the string view, and the
-- server's getmetatable answers a read-only view of it.
local string_meta = {__index = views.string}
local string_meta_view = view(string_meta)
-- rawset, table.insert and getmetatable refuse the read-only tables as Redis' (its C
-- functions raise without a place) and otherwise are Lua's own. Lua's errors keep their text:
-- the original runs under pcall, called by a local of its own name (Lua names the function
-- in its argument errors by the caller's variable), and its place, this prelude's line, is
-- replaced by the script's: where the script called, or, if it called as `return f(...)` (a
-- tail call: the guard replaced the script's frame), where it looked the function up, as the
-- lookups note.
local function rawset_call(...) local rawset = rawset_ return rawset(...) end
local function insert_call(...) local insert = insert_ return insert(...) end
local function getmetatable_call(...) local getmetatable = getmetatable_ return getmetatable(...) end
-- Called (not tail-called) by a guard: place() looks three levels up, above itself, this
-- function and the guard.
local function raise(err)
  if type(err) == 'string' then
    local _, stop = find(err, '^redis_prelude:%d+: ')
    if stop then err = place() .. sub(err, stop + 1) end
  end
  error(err, 0)
end
local function rawset(...)
  local t, k = ...
  local n = select('#', ...)
  if n >= 3 then
    if protected[t] then error(READONLY, 0) end
    if type(t) == 'table' and k ~= nil and k == k then return rawset_(...) end
  end
  local ok, err = pcall_(rawset_call, ...)
  if ok then return err end
  raise(err)
end
local function insert(...)
  local t, pos = ...
  local n = select('#', ...)
  if protected[t] then
    if n == 2 or (n == 3 and tonumber(pos) ~= nil) then error(READONLY, 0) end
  elseif type(t) == 'table' and (n == 2 or (n == 3 and type(pos) == 'number')) then
    return insert_(...)
  end
  local ok, err = pcall_(insert_call, ...)
  if ok then return end
  raise(err)
end
local function getmetatable(...)
  local v = ...
  if select('#', ...) == 0 then
    local _, err = pcall_(getmetatable_call)
    raise(err)
  end
  if type(v) == 'string' then return string_meta_view end
  if protected[v] then return answers[v] end
  return getmetatable_(v)
end
G.rawset, G.getmetatable, table_.insert = rawset, getmetatable, insert
local env_setmetatable = function(t, mt)
  -- Raised without a place, as by Redis' C setmetatable.
  if protected[t] then error(READONLY, 0) end
  return setmetatable_(t, mt)
end
-- While a library loads, its code sees `redis` (its registration table) and nothing else,
-- as in Redis; the functions it registers see every global when they run.
local loading = false
local env, env_meta, fast
local function set_loading(on)
  loading = on
  env_meta.__index = on and getmetatable_(fast).__index or fast
end
-- Where a script looks up `setmetatable`, `rawset` or `getmetatable` is noted: their
-- functions here are Lua functions, which take over the script's frame when called as
-- `return f(...)`, and an error one raises then gets this place. (`redis` reaches `lookup`
-- only while a library loads.)
local redis_view = views.redis
local function lookup(_, k)
  if k == 'redis' then
    if loading then return G.redis end
    return redis_view
  end
  if loading then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  if k == '_G' then return env end
  if k == 'setmetatable' then mark() return env_setmetatable end
  if k == 'rawset' or k == 'getmetatable' then mark() end
  local v = rawget(G, k)
  -- The view of a library table (while a library loads, `redis` is its own table).
  if v ~= nil and v == originals[k] then
    v = views[k]
  end
  if v == nil then error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end
  return v
end
-- The scripts' globals stay empty, so that every assignment reaches __newindex (Lua 5.1
-- calls it only for a missing key). A lookup first finds the global in `fast` (KEYS and ARGV,
-- set there by the server, and every global `lookup` answers as it is, without noting), a
-- table index with no function call; the rest go to `lookup`.
fast = setmetatable_({}, {__index = lookup})
for k, v in pairs(G) do
  if k ~= 'setmetatable' and k ~= 'rawset' and k ~= 'getmetatable' then
    rawset_(fast, k, views[k] or v)
  end
end
env_meta = {__index = fast, __newindex = readonly, __metatable = sealed}
env = setmetatable_({}, env_meta)
rawset_(fast, '_G', env)
protected[env] = true
answers[env] = view({__index = lookup})
-- Calls a library's code under the error handler. It returns what xpcall does, in its own
-- tail call: after a timeout every new line fails. (Scripts and functions are called from
-- the server, see run::call_runner.)
local handler = __redis__err__handler
local f_
local function call_f() return f_() end
local function run(f)
  f_ = f
  return xpcall(call_f, handler)
end
return {run = run, env = env, set_loading = set_loading, protected = protected, string_meta = string_meta, fast = fast,
  handler = handler}
"#;

/// Lua's collector starts a cycle when its heap reaches this percentage of what the last one
/// kept (Lua's default is 200). A script's state keeps little (about 50 KB), and every
/// command a script runs makes garbage (its arguments and reply): a cycle every few scripts
/// marks that little again each time, for a heap that stays small.
pub(super) const GC_PAUSE: std::ffi::c_int = 1000;

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

impl Vm {
    pub(super) fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        lua.gc_inc(GC_PAUSE, 0, 0);
        let g = lua.globals();
        let bridge = Rc::new(Bridge::default());
        lua.set_app_data(bridge.clone());
        let b = bridge.clone();
        g.set(
            "__redis__err__handler",
            lua.create_function(move |lua, err: Value| error_handler(lua, err, &b.site))?,
        )?;
        // The prelude's global lookup notes where `setmetatable`, `rawset`, `getmetatable`
        // and `table.insert` are looked up (level 2: above this function and the lookup).
        let b = bridge.clone();
        let mark = lua.create_function(move |lua, ()| {
            b.site.mark(lua, 2);
            Ok(())
        })?;
        // The prelude's guards (`rawset`, `table.insert`, `getmetatable`) place Lua's errors
        // where the script called them (level 3: above this function, the prelude's raiser and
        // the guard).
        let b = bridge.clone();
        let place = lua.create_function(move |lua, ()| lua.create_string(b.site.place(lua, 3)))?;
        lua.set_named_registry_value(SLOT, lua.create_table()?)?;
        // What Redis' sandbox leaves out: a script reaches no function environment (the real
        // global table), no files, no `newproxy`.
        for name in ["loadfile", "dofile", "print", "getfenv", "setfenv", "newproxy"] {
            g.set(name, Value::Nil)?;
        }
        let loadstring: mlua::Function = g.get("loadstring")?;
        g.set("loadstring", sandboxed_loader(&lua, loadstring.clone(), false)?)?;
        g.set("load", sandboxed_loader(&lua, loadstring, true)?)?;
        g.set("bit", bit_library(&lua)?)?;
        g.set("cjson", cjson_library(&lua)?)?;
        g.set("cmsgpack", crate::cmsgpack::library(&lua)?)?;
        g.set("struct", crate::lua_struct::library(&lua)?)?;
        let redis = lua.create_table()?;
        // The command functions reach the running invocation through the bridge.
        let b = bridge.clone();
        let command = lua.create_function(move |lua, args: MultiValue| b.command(lua, args))?;
        let b = bridge.clone();
        let finish = lua.create_function(move |lua, mode: i64| b.finish(lua, mode))?;
        // SAFETY: `bridge` is the state's app data, kept as long as the state.
        let make = |mode| unsafe { bridge.command_function(&lua, mode, &command, &finish) };
        redis.set("call", make(CALL)?)?;
        // The Redis version this server answers as (INFO's redis_version).
        redis.set("REDIS_VERSION", crate::config::REDIS_VERSION)?;
        redis.set("REDIS_VERSION_NUM", redis_version_num(crate::config::REDIS_VERSION))?;
        redis.set("pcall", make(PCALL)?)?;
        redis.set("acl_check_cmd", make(ACL_CHECK)?)?;
        redis.set(
            "sha1hex",
            lua.create_function(|_, args: MultiValue| match args.iter().collect::<Vec<_>>()[..] {
                [Value::String(s)] => Ok(sha1_hex(&s.as_bytes())),
                [v @ (Value::Integer(_) | Value::Number(_))] => Ok(sha1_hex(v.to_string()?.as_bytes())),
                _ => Err(mlua::Error::RuntimeError("wrong number of arguments".into())),
            })?,
        )?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, s: mlua::String| {
                // "-CODE msg" keeps its code; anything else gets ERR, as Redis' luaPushErrorBuff.
                let s = s.to_str()?.to_string();
                let rest = s.strip_prefix('-').unwrap_or(&s);
                let text = match rest.split_once(' ') {
                    Some((code, msg)) if s.starts_with('-') || !rest.is_empty() => format!("{code} {msg}"),
                    _ => format!("ERR {rest}"),
                };
                let t = lua.create_table()?;
                t.set("err", text)?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, s: mlua::String| {
                let t = lua.create_table()?;
                t.set("ok", s)?;
                Ok(t)
            })?,
        )?;
        redis.set(
            "log",
            lua.create_function(|_, args: MultiValue| {
                let number = match args.front() {
                    Some(Value::Integer(n)) => Some(*n),
                    Some(Value::Number(n)) => Some(*n as i64),
                    _ => None,
                };
                let level = number.and_then(crate::log::Level::from_number);
                let level = level.unwrap_or(crate::log::Level::Notice);
                if crate::log::enabled(level) {
                    let text: Vec<String> =
                        args.iter().skip(1).map(|v| v.to_string().unwrap_or_default()).collect();
                    crate::log::write(level, format_args!("{}", text.join(" ")));
                }
                Ok(())
            })?,
        )?;
        for (name, value) in [("LOG_DEBUG", 0), ("LOG_VERBOSE", 1), ("LOG_NOTICE", 2), ("LOG_WARNING", 3)] {
            redis.set(name, value)?;
        }
        for (name, value) in
            [("REPL_NONE", 0), ("REPL_AOF", 1), ("REPL_SLAVE", 2), ("REPL_REPLICA", 2), ("REPL_ALL", 3)]
        {
            redis.set(name, value)?;
        }
        redis.set("set_repl", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
        redis.set("replicate_commands", lua.create_function(|_, _: MultiValue| Ok(true))?)?;
        redis.set("breakpoint", lua.create_function(|_, _: MultiValue| Ok(false))?)?;
        redis.set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
        redis.set(
            "setresp",
            lua.create_function(|lua, n: i64| {
                if n != 2 && n != 3 {
                    return Err(mlua::Error::RuntimeError("RESP version must be 2 or 3.".into()));
                }
                if let Some(bridge) = lua.app_data_ref::<Rc<Bridge>>() {
                    bridge.resp3.set(n == 3);
                }
                Ok(())
            })?,
        )?;
        g.set("redis", redis)?;
        let pieces: Table = lua.load(PRELUDE).set_name("=redis_prelude").call((
            lua.create_function(error_text)?,
            mark,
            place,
        ))?;
        for (key, piece) in [
            (RUN, "run"),
            (ENV, "env"),
            (SET_LOADING, "set_loading"),
            (PROTECTED, "protected"),
            (FAST, "fast"),
        ] {
            lua.set_named_registry_value(key, pieces.raw_get::<Value>(piece)?)?;
        }
        lua.set_type_metatable::<mlua::String>(Some(pieces.raw_get("string_meta")?));
        let (main, handler) = raw_ref(&lua, pieces.raw_get::<mlua::Function>("handler")?)?;
        let (_, fast) = raw_ref(&lua, pieces.raw_get::<Table>("fast")?)?;
        let table = || -> mlua::Result<RawRef> { Ok(raw_ref(&lua, &lua.create_table()?)?.1) };
        let tables = (table()?, table()?);
        let function_tables = (table()?, table()?);
        Ok(Vm {
            lua,
            bridge,
            main,
            handler,
            fast,
            tables,
            function_tables,
            generation: u64::MAX,
            scripts: CompiledScripts::default(),
            functions: HashMap::new(),
        })
    }

    /// Runs a library's code with `redis.register_function` available; returns what it
    /// registered.
    pub(super) fn register(&self, body: &str) -> Result<Vec<(FunctionInfo, RegistryKey)>, String> {
        let lua = &self.lua;
        if let Some(bridge) = lua.app_data_ref::<Rc<Bridge>>() {
            bridge.site.begin(None, None);
        }
        let registered: RefCell<Vec<(FunctionInfo, RegistryKey)>> = RefCell::new(Vec::new());
        let run = lua.scope(|scope| {
            let register = scope.create_function(|lua, args: MultiValue| {
                let parsed = parse_register(args);
                match parsed {
                    Ok((info, f)) => {
                        let mut list = registered.borrow_mut();
                        if list.iter().any(|(i, _)| i.name == info.name) {
                            return Err(mlua::Error::RuntimeError("Function already exists in the library".into()));
                        }
                        if info.name.is_empty() || !info.name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
                            return Err(mlua::Error::RuntimeError("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into()));
                        }
                        list.push((info, lua.create_registry_value(f)?));
                        Ok(())
                    }
                    Err(e) => Err(mlua::Error::RuntimeError(e)),
                }
            })?;
            // While loading, `redis` has no call/pcall: reading a missing field is an error,
            // as Redis' load-time `redis` table.
            let g = lua.globals();
            let redis: Table = g.get("redis")?;
            // What Redis' load-time `redis` holds: registration, logging, the version.
            let loading = lua.create_table()?;
            for name in [
                "log",
                "LOG_DEBUG",
                "LOG_VERBOSE",
                "LOG_NOTICE",
                "LOG_WARNING",
                "REDIS_VERSION",
                "REDIS_VERSION_NUM",
            ] {
                loading.raw_set(name, redis.raw_get::<Value>(name)?)?;
            }
            // The registration outlives the load in the library's closures: past it, it
            // refuses (the scoped function behind it is gone).
            let slot: Table = lua.named_registry_value(SLOT)?;
            slot.raw_set("register", register)?;
            loading.raw_set(
                "register_function",
                lua.create_function(|lua, args: MultiValue| {
                    let slot: Table = lua.named_registry_value(SLOT)?;
                    match slot.raw_get::<Value>("register")? {
                        Value::Function(f) => f.call::<()>(args),
                        _ => Err(mlua::Error::RuntimeError(
                            "redis.register_function can only be called on FUNCTION LOAD command".into(),
                        )),
                    }
                })?,
            )?;
            // Read-only, as a view of what it holds (assignment, rawset and table.insert
            // refuse it, also in a registered function that keeps it).
            let loading: Table = lua
                .load(
                    "local api = ...
                     return setmetatable({}, {
                       __index = function(_, k)
                         local v = api[k]
                         if v == nil then error(\"Script attempted to access nonexistent global variable '\" .. tostring(k) .. \"'\", 2) end
                         return v
                       end,
                       __newindex = function() error('Attempt to modify a readonly table', 2) end,
                       __metatable = false,
                     })",
                )
                .set_name("=redis_prelude")
                .call(loading)?;
            lua.named_registry_value::<Table>(PROTECTED)?.raw_set(&loading, true)?;
            g.raw_set("redis", loading)?;
            let compiled = lua.load(body).set_name(FUNCTION_CHUNK).set_mode(mlua::ChunkMode::Text).into_function();
            let result = compiled
                .map_err(|e| mlua::Error::RuntimeError(format!("Error compiling function: {}", lua_message(&e))))
                .and_then(|f| {
                    set_env(lua, &f)?;
                    let runner: mlua::Function = lua.named_registry_value(RUN)?;
                    // A library's top-level code gets half a second, as in Redis.
                    let started = Instant::now();
                    if let Some(bridge) = lua.app_data_ref::<Rc<Bridge>>() {
                        bridge.hooked.set(false);
                    }
                    lua.set_hook(HookTriggers::new().every_nth_instruction(10_000), move |_, _| {
                        if started.elapsed() > std::time::Duration::from_millis(500) {
                            return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
                        }
                        Ok(VmState::Continue)
                    });
                    let set_loading: mlua::Function = lua.named_registry_value(SET_LOADING)?;
                    set_loading.call::<()>(true)?;
                    let called: mlua::Result<(bool, Value)> = runner.call(f);
                    set_loading.call::<()>(false)?;
                    lua.remove_hook();
                    let (ok, err) = called?;
                    if ok {
                        return Ok(());
                    }
                    let text = match &err {
                        Value::Table(t) => t.raw_get::<Option<String>>("err")?.unwrap_or_default(),
                        other => other.to_string()?,
                    };
                    Err(mlua::Error::RuntimeError(format!("Error registering functions: {text}")))
                });
            g.raw_set("redis", redis)?;
            slot.raw_set("register", Value::Nil)?;
            result
        });
        run.map_err(|e| lua_message(&e))?;
        Ok(registered.into_inner())
    }
}

/// Where user code last looked up `setmetatable`, `rawset`, `getmetatable` or
/// `table.insert`, whose functions here are Lua functions (the sandbox's guards). Such a
/// function called as `return f(…)` takes over its caller's frame (a Lua tail call; a C
/// function, as `redis.call`, runs above it), so an error it raises finds no script frame on
/// the stack: the error handler takes this place instead, the line of the `rawset` in
/// `return rawset(…)`. (The sandbox's `pcall` is a Lua function too, but raises nothing
/// itself.)
#[derive(Default)]
pub(super) struct CallSite {
    pub(super) source: RefCell<String>,
    /// 0: none noted in this invocation.
    pub(super) line: Cell<i32>,
    /// The chunk name of all the user code the running invocation can reach
    /// ([`SCRIPT_CHUNK`] or [`FUNCTION_CHUNK`]), when known: then a mark reads only the line
    /// (a frame's source is the dearer half of a mark). Unknown once `loadstring` or `load`
    /// made code in this state, and while a library loads.
    pub(super) chunk: Cell<Option<&'static str>>,
    /// `loadstring` or `load` ran in this state.
    pub(super) loaded: Cell<bool>,
}

/// The line all of `code`'s tokens are on, counted as Lua counts lines, if they are all on
/// one: leading line feeds only move it, and trailing white space has no token. A carriage
/// return anywhere (Lua counts it as a line break, alone or paired) answers `None`.
pub(super) fn single_line(code: &[u8]) -> Option<i32> {
    let end = code.iter().rposition(|c| !c.is_ascii_whitespace())? + 1;
    let start = code.iter().position(|c| !c.is_ascii_whitespace())?;
    let (lead, rest) = (&code[..start], &code[start..end]);
    if lead.contains(&b'\r') || rest.iter().any(|&c| c == b'\n' || c == b'\r') {
        return None;
    }
    Some(1 + lead.iter().filter(|&&c| c == b'\n').count() as i32)
}

/// The chunk name of a script's code (EVAL), as Redis names it.
pub(super) const SCRIPT_CHUNK: &str = "@user_script";
/// The chunk name of a library's code (FUNCTION LOAD), as Redis names it.
pub(super) const FUNCTION_CHUNK: &str = "@user_function";

impl CallSite {
    /// Notes the place of the frame `level` levels up (the caller of the prelude's
    /// `__index`, for the mark function).
    pub(super) fn mark(&self, lua: &Lua, level: usize) {
        if let Some(frame) = lua.inspect_stack(level) {
            self.line.set(frame.curr_line());
            match self.chunk.get() {
                Some(name) => self.keep_source(name),
                None => self.keep_source(frame.source().source.as_deref().unwrap_or("")),
            }
        }
    }

    fn keep_source(&self, name: &str) {
        let mut kept = self.source.borrow_mut();
        if *kept != name {
            kept.clear();
            kept.push_str(name);
        }
    }

    /// Starts an invocation whose user code is all of chunk `chunk` (`None`: not known), all
    /// of it on line `line` when that is known. Then every mark would note that chunk and
    /// line: they are noted now.
    pub(super) fn begin(&self, chunk: Option<&'static str>, line: Option<i32>) {
        let chunk = chunk.filter(|_| !self.loaded.get());
        self.chunk.set(chunk);
        match (chunk, line) {
            (Some(name), Some(line)) => {
                self.line.set(line);
                self.keep_source(name);
            }
            _ => self.line.set(0),
        }
    }

    /// Lua's place (`luaL_where`) of the frame `level` up, as an error raised there starts:
    /// `user_script:3: `; for a frame a tail call replaced, the place noted last (if any); none
    /// for a C function.
    pub(super) fn place(&self, lua: &Lua, level: usize) -> Vec<u8> {
        let (source, line) = match lua.inspect_stack(level) {
            Some(frame) if frame.source().what == "tail" => {
                (self.source.borrow().as_bytes().to_vec(), self.line.get())
            }
            Some(frame) => {
                (frame.source().source.as_deref().unwrap_or("").as_bytes().to_vec(), frame.curr_line())
            }
            None => return Vec::new(),
        };
        if line <= 0 {
            return Vec::new();
        }
        let mut place = chunk_id(&source);
        place.extend_from_slice(format!(":{line}: ").as_bytes());
        place
    }
}

/// What Redis' `pcall` gives for an error: the `err` text of an error reply (raised by
/// `redis.call`, or a table a script raised), the message of a library's error, any other
/// value as it is.
pub(super) fn error_text(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let pending: Value = lua.named_registry_value("__redis_pending_error")?;
    lua.unset_named_registry_value("__redis_pending_error")?;
    let table = match (&err, pending) {
        (Value::Table(t), _) => Some(t.clone()),
        (Value::Error(_), Value::Table(t)) => Some(t),
        _ => None,
    };
    if let Some(text) =
        table.and_then(|t| t.raw_get::<Value>("err").ok()).filter(|v| matches!(v, Value::String(_)))
    {
        return Ok(text);
    }
    Ok(match err {
        Value::Error(e) => Value::String(lua.create_string(lua_message(&e))?),
        other => other,
    })
}

/// Redis' `__redis__err__handler`: an error becomes an `{err=…}` table (a string error gets
/// the `ERR` code), with the source and line of the script code that raised it (not of a
/// C function or of the prelude's `redis.call`; `site` when the prelude's function took
/// over the script's frame).
pub(super) fn error_handler(lua: &Lua, err: Value, site: &CallSite) -> mlua::Result<Table> {
    let pending: Value = lua.named_registry_value("__redis_pending_error")?;
    lua.unset_named_registry_value("__redis_pending_error")?;
    let table = match (err, pending) {
        (Value::Table(t), _) => t,
        (Value::Error(_), Value::Table(t)) => t,
        (other, _) => {
            let text = match &other {
                Value::String(s) => s.to_string_lossy().to_string(),
                Value::Error(e) => lua_message(e),
                other => other.to_string().unwrap_or_default(),
            };
            let t = lua.create_table()?;
            t.set("err", format!("ERR {text}"))?;
            t
        }
    };
    if table.raw_get::<Value>("source")?.is_nil() {
        let mut level = 1;
        while let Some(frame) = lua.inspect_stack(level) {
            let source = frame.source();
            if source.what == "tail" {
                // A prelude function took over the frame of the code that called it.
                if site.line.get() > 0 {
                    table.raw_set("source", site.source.borrow().as_str())?;
                    table.raw_set("line", site.line.get())?;
                }
                break;
            }
            let name = source.source.as_deref().unwrap_or("").to_string();
            if source.what != "C" && name != "=redis_prelude" {
                table.raw_set("source", name)?;
                table.raw_set("line", frame.curr_line())?;
                break;
            }
            level += 1;
        }
    }
    Ok(table)
}

/// The text of a Lua error without mlua's decorations.
pub(super) fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        other => other.to_string(),
    }
}

pub(super) fn parse_register(args: MultiValue) -> Result<(FunctionInfo, mlua::Function), String> {
    let args: Vec<Value> = args.into_iter().collect();
    match args.as_slice() {
        [Value::Table(t)] => {
            let (mut name, mut description, mut callback, mut flags) = (None, None, None, Vec::new());
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let Value::String(k) = k else {
                    return Err("named argument key given to redis.register_function is not a string".into());
                };
                match k.to_str().map(|s| s.to_string()).unwrap_or_default().as_str() {
                    "function_name" => match v {
                        Value::String(s) => name = Some(s.to_str().map_err(|e| e.to_string())?.to_string()),
                        _ => return Err("function_name argument given to redis.register_function must be a string".into()),
                    },
                    "description" => match v {
                        Value::String(s) => description = Some(s.to_str().map_err(|e| e.to_string())?.to_string()),
                        _ => return Err("description argument given to redis.register_function must be a string".into()),
                    },
                    "callback" => match v {
                        Value::Function(f) => callback = Some(f),
                        _ => return Err("callback argument given to redis.register_function must be a function".into()),
                    },
                    "flags" => match v {
                        Value::Table(ft) => {
                            for f in ft.sequence_values::<Value>() {
                                let f = match f {
                                    Ok(Value::String(s)) => s.to_str().map(|s| s.to_string()).unwrap_or_default(),
                                    _ => return Err("unknown flag given".into()),
                                };
                                if !FLAGS.contains(&f.as_str()) {
                                    return Err("unknown flag given".into());
                                }
                                flags.push(f);
                            }
                        }
                        _ => {
                            return Err(
                                "flags argument to redis.register_function must be a table representing function flags"
                                    .into(),
                            );
                        }
                    },
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let name = name.ok_or("redis.register_function must get a function name argument")?;
            let callback = callback.ok_or("redis.register_function must get a callback argument")?;
            Ok((FunctionInfo { name, description, flags }, callback))
        }
        [_] => Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into()),
        [name, f] => {
            let Value::String(name) = name else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(f) = f else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            let name = name.to_str().map_err(|e| e.to_string())?.to_string();
            Ok((FunctionInfo { name, description: None, flags: Vec::new() }, f.clone()))
        }
        _ => Err("wrong number of arguments to redis.register_function".into()),
    }
}

/// Gives `f` the protected globals.
pub(super) fn set_env(lua: &Lua, f: &mlua::Function) -> mlua::Result<()> {
    f.set_environment(lua.named_registry_value(ENV)?)?;
    Ok(())
}

/// Gives `f` the globals' table itself (the prelude's `fast`) when no code of its own assigns
/// a global (see [`assigns_globals`]), else the protected globals ([`set_env`]). A global read
/// from `fast` is one table index; from the protected globals, an empty table whose
/// `__index` is `fast`, it is two. Code that assigns no global cannot change `fast` (its
/// `_G` is still the protected view, `rawset` refuses that view, and `setfenv` and `getfenv`
/// are not there), and what it reads, and the errors for what it reads, are the same. The
/// functions `f` makes take its environment, and are in its bytecode.
pub(super) fn set_fast_env(lua: &Lua, f: &mlua::Function) -> mlua::Result<()> {
    match assigns_globals(&f.dump(true)) {
        Some(false) => {
            f.set_environment(lua.named_registry_value(FAST)?)?;
            Ok(())
        }
        _ => set_env(lua, f),
    }
}

/// Whether Lua 5.1 bytecode (`string.dump`'s, stripped or not) assigns a global: whether
/// the function or one it defines has a `SETGLOBAL` instruction. `None` for bytes that are
/// not such a dump, as this reader knows it.
pub(super) fn assigns_globals(dump: &[u8]) -> Option<bool> {
    let mut reader = DumpReader::new(dump)?;
    let assigns = reader.function(0, &mut |_, _| {})?;
    reader.bytes.is_empty().then_some(assigns)
}

/// Whether a function (Lua 5.1 bytecode as [`assigns_globals`] reads it) keeps or passes on
/// the tables it gets as its first two arguments (a registered function's keys and
/// arguments), or may. It does not when its code uses them only to index them, take their
/// length, compare or test them, or write into them: it neither copies them to another
/// register, an upvalue, a global or a table, nor calls or returns them, nor uses them as a
/// key, a method's `self` or an operand of arithmetic or concatenation (where another
/// value's metamethod would get them), nor reaches its arguments as `...`. (Tables without a
/// metatable, they call no metamethod of their own; the functions it defines reach them
/// only as upvalues, which its code would copy.) Then the tables can be the state's own
/// from call to call. `None` for bytes that are not such a dump.
pub(super) fn keeps_arguments(dump: &[u8]) -> Option<bool> {
    // Lua 5.1's opcodes this reads.
    const MOVE: u32 = 0;
    const SETGLOBAL: u32 = 7;
    const SETUPVAL: u32 = 8;
    const SETTABLE: u32 = 9;
    const GETTABLE: u32 = 6;
    const SELF: u32 = 11;
    const ADD: u32 = 12;
    const POW: u32 = 17;
    const CONCAT: u32 = 21;
    const TESTSET: u32 = 27;
    const CALL: u32 = 28;
    const TAILCALL: u32 = 29;
    const RETURN: u32 = 30;
    const FORLOOP: u32 = 31;
    const FORPREP: u32 = 32;
    const TFORLOOP: u32 = 33;
    const SETLIST: u32 = 34;
    let mut reader = DumpReader::new(dump)?;
    let mut keeps = false;
    let (mut vararg, mut params) = (false, 0);
    reader.function(0, &mut |depth, code| match code {
        Code::Header { params: named, is_vararg } if depth == 0 => {
            (vararg, params) = (is_vararg, named.min(2))
        }
        Code::Instruction(i) if depth == 0 => {
            let (op, a, b, c) = (i & 0x3f, (i >> 6) & 0xff, i >> 23, (i >> 14) & 0x1ff);
            // An argument's register: the first two hold the first two parameters (an RK
            // operand below 256 is a register).
            let arg = |r: u32| r < params;
            keeps |= match op {
                // As a key (a table's `__index` or `__newindex` gets it), or an operand of
                // arithmetic (the other operand's metamethod gets it).
                GETTABLE => arg(c),
                SELF | ADD..=POW => arg(b) || arg(c),
                MOVE | TESTSET | CONCAT => arg(b),
                SETGLOBAL | SETUPVAL | CALL | TAILCALL | FORLOOP | FORPREP | TFORLOOP | SETLIST => arg(a),
                SETTABLE => arg(b) || arg(c),
                RETURN => arg(a) && b != 1,
                _ => false,
            };
        }
        _ => {}
    })?;
    reader.bytes.is_empty().then_some(keeps || vararg)
}

/// What [`DumpReader::function`] shows of a function's code.
enum Code {
    /// Its header: how many parameters it names, whether it takes `...`.
    Header { params: u32, is_vararg: bool },
    /// One instruction.
    Instruction(u32),
}

/// A reader of Lua 5.1 bytecode as `string.dump` writes it (`ldump.c`): little-endian, 4-byte
/// instructions, 8-byte floating-point numbers.
struct DumpReader<'a> {
    bytes: &'a [u8],
    int: usize,
    size_t: usize,
}

impl<'a> DumpReader<'a> {
    /// The reader of `dump` past its header, if the header is one it reads: signature,
    /// version 5.1, official format, little-endian, the sizes of an int and a size_t, 4-byte
    /// instructions, 8-byte floating-point numbers.
    fn new(dump: &'a [u8]) -> Option<DumpReader<'a>> {
        let header = dump.get(..12)?;
        if header[..6] != *b"\x1bLua\x51\x00"
            || header[6] != 1
            || header[9] != 4
            || header[10] != 8
            || header[11] != 0
        {
            return None;
        }
        let (int, size_t) = (usize::from(header[7]), usize::from(header[8]));
        if !matches!(int, 4 | 8) || !matches!(size_t, 4 | 8) {
            return None;
        }
        Some(DumpReader { bytes: &dump[12..], int, size_t })
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.bytes.len() {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(taken)
    }

    fn number(&mut self, width: usize) -> Option<usize> {
        let bytes = self.take(width)?;
        let mut n: u64 = 0;
        for (i, &b) in bytes.iter().enumerate().take(8) {
            n |= u64::from(b) << (8 * i);
        }
        usize::try_from(n).ok()
    }

    fn int(&mut self) -> Option<usize> {
        self.number(self.int)
    }

    fn string(&mut self) -> Option<()> {
        let len = self.number(self.size_t)?;
        self.take(len).map(|_| ())
    }

    /// One function (at `depth`: 0 for the dump's, 1 for one it defines…) and those it
    /// defines, each one's header and instructions shown to `see`: whether one has a
    /// `SETGLOBAL`.
    fn function(&mut self, depth: usize, see: &mut dyn FnMut(usize, Code)) -> Option<bool> {
        /// Lua 5.1's `OP_SETGLOBAL`, in the low 6 bits of an instruction.
        const SETGLOBAL: u32 = 7;
        if depth > 200 {
            return None;
        }
        self.string()?;
        // The first and last lines, the upvalue and parameter counts, the vararg flag and
        // the stack size.
        let header = self.take(2 * self.int + 4)?;
        let (params, is_vararg) = (header[2 * self.int + 1], header[2 * self.int + 2]);
        see(depth, Code::Header { params: u32::from(params), is_vararg: is_vararg != 0 });
        let code = self.int()?;
        let mut assigns = false;
        for _ in 0..code {
            let op = self.take(4)?;
            let instruction = u32::from_le_bytes([op[0], op[1], op[2], op[3]]);
            assigns |= instruction & 0x3f == SETGLOBAL;
            see(depth, Code::Instruction(instruction));
        }
        for _ in 0..self.int()? {
            match self.take(1)?[0] {
                0 => {}
                1 => {
                    self.take(1)?;
                }
                3 => {
                    self.take(8)?;
                }
                4 => self.string()?,
                _ => return None,
            }
        }
        for _ in 0..self.int()? {
            assigns |= self.function(depth + 1, see)?;
        }
        let lines = self.int()?;
        self.take(lines.checked_mul(self.int)?)?;
        for _ in 0..self.int()? {
            self.string()?;
            self.take(2 * self.int)?;
        }
        for _ in 0..self.int()? {
            self.string()?;
        }
        Some(assigns)
    }
}

/// Registry names of the prelude's pieces: the runner, the scripts' globals, the switch for a
/// library's load, the read-only tables; and of the slot `redis.register_function` reaches
/// the running FUNCTION LOAD through.
pub(super) const RUN: &str = "__redis_run";
pub(super) const ENV: &str = "__redis_env";
pub(super) const SET_LOADING: &str = "__redis_set_loading";
pub(super) const PROTECTED: &str = "__redis_protected";
pub(super) const SLOT: &str = "__redis_slot";
pub(super) const FAST: &str = "__redis_fast";
/// Registry name of what `run::call_runner` hands mlua: a result or error it does not
/// convert itself.
pub(super) const RESULT: &std::ffi::CStr = c"__redis_result";

/// The type Lua's argument errors name: `no value` for a missing argument.
pub(super) fn lua_type(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) | Value::Other(_)) => "userdata",
        Some(v) => v.type_name(),
    }
}

/// Lua's error for a bad argument of the function `name`, with the caller's place.
pub(super) fn bad_argument(lua: &Lua, n: usize, name: &str, what: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}bad argument #{n} to '{name}' ({what})", caller_place(lua)))
}

/// `loadstring` (or, `reader`, `load`) for scripts: the code made gets the scripts' globals,
/// not the real global table. A binary chunk is read as text, as Redis' Lua reads it (it fails
/// on its first byte). `original` is Lua's `loadstring`.
pub(super) fn sandboxed_loader(
    lua: &Lua,
    original: mlua::Function,
    reader: bool,
) -> mlua::Result<mlua::Function> {
    let name = if reader { "load" } else { "loadstring" };
    lua.create_function(move |lua, args: MultiValue| {
        if let Some(bridge) = lua.app_data_ref::<Rc<Bridge>>() {
            // Code with a chunk name of its own: marks read each frame's source from now on.
            bridge.site.loaded.set(true);
            bridge.site.chunk.set(None);
        }
        let chunkname = match args.get(1) {
            None | Some(Value::Nil) => None,
            Some(v @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => {
                lua.coerce_string(v.clone())?
            }
            other => {
                return Err(bad_argument(lua, 2, name, &format!("string expected, got {}", lua_type(other))));
            }
        };
        let code = if reader {
            let Some(Value::Function(read)) = args.front() else {
                return Err(bad_argument(
                    lua,
                    1,
                    name,
                    &format!("function expected, got {}", lua_type(args.front())),
                ));
            };
            let mut code = Vec::new();
            loop {
                // An error in the reader is load's answer, as Lua's load catches it.
                let piece = match read.call::<Value>(()) {
                    Ok(piece) => piece,
                    Err(e) => return Ok((Value::Nil, Value::String(lua.create_string(lua_message(&e))?))),
                };
                match piece {
                    Value::Nil => break,
                    Value::String(s) if s.as_bytes().is_empty() => break,
                    v @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
                        if let Some(s) = lua.coerce_string(v)? {
                            code.extend_from_slice(&s.as_bytes());
                        }
                    }
                    _ => {
                        return Err(mlua::Error::RuntimeError(format!(
                            "{}reader function must return a string",
                            caller_place(lua)
                        )));
                    }
                }
            }
            lua.create_string(code)?
        } else {
            match args.front() {
                Some(v @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => {
                    lua.coerce_string(v.clone())?.expect("a string or a number")
                }
                other => {
                    return Err(bad_argument(
                        lua,
                        1,
                        name,
                        &format!("string expected, got {}", lua_type(other)),
                    ));
                }
            }
        };
        let chunkname = match chunkname {
            Some(s) => s,
            None if reader => lua.create_string("=(load)")?,
            None => code.clone(),
        };
        if code.as_bytes().first() == Some(&0x1b) {
            let mut message = chunk_id(&chunkname.as_bytes());
            message.extend_from_slice(b":1: unexpected symbol near 'char(27)'");
            return Ok((Value::Nil, Value::String(lua.create_string(message)?)));
        }
        let (made, error): (Value, Value) = original.call((code, chunkname))?;
        if let Value::Function(f) = &made {
            set_env(lua, f)?;
        }
        Ok((made, error))
    })
}

/// How Lua 5.1 names a chunk in its messages (`luaO_chunkid`, `LUA_IDSIZE` 60): `=name` as
/// `name`, `@file` as `file` (its end), code as `[string "its first line"]`.
pub(super) fn chunk_id(name: &[u8]) -> Vec<u8> {
    const ROOM: usize = 60;
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    match name.split_first() {
        Some((b'=', rest)) => rest[..rest.len().min(ROOM - 1)].to_vec(),
        Some((b'@', rest)) => {
            let room = ROOM - 8;
            if rest.len() > room { [b"...", &rest[rest.len() - room..]].concat() } else { rest.to_vec() }
        }
        _ => {
            let line = name.iter().position(|&b| b == b'\n' || b == b'\r').unwrap_or(name.len());
            let len = line.min(ROOM - 17);
            let dots: &[u8] = if len < name.len() { b"..." } else { b"" };
            [b"[string \"", &name[..len], dots, b"\"]"].concat()
        }
    }
}

/// A state's main thread, for the calls `run::call_runner` makes on its stack.
#[derive(Clone, Copy)]
pub(super) struct MainState(pub(super) *mut mlua::ffi::lua_State);

/// A value held in the registry of a state under an integer reference, as long as the
/// state lives (scripts and functions are dropped only with their state).
#[derive(Clone, Copy)]
pub(super) struct RawRef(pub(super) std::ffi::c_int);

/// `value` held in `lua`'s registry, and `lua`'s main thread.
pub(super) fn raw_ref(lua: &Lua, value: impl mlua::IntoLua) -> mlua::Result<(MainState, RawRef)> {
    let made = Cell::new((std::ptr::null_mut(), 0));
    // SAFETY: the closure runs in `exec_raw`'s protected call on the main thread (`lua` is
    // not running: no coroutine is current), with `value` alone on its stack, which `luaL_ref`
    // pops.
    unsafe {
        lua.exec_raw::<()>(value, |state| {
            made.set((state, mlua::ffi::luaL_ref(state, mlua::ffi::LUA_REGISTRYINDEX)));
        })?;
    }
    let (state, slot) = made.get();
    Ok((MainState(state), RawRef(slot)))
}

/// Runs `f` on this thread's Lua state, rebuilt first if the scripts or libraries changed.
pub(super) fn with_vm<R>(scripts: &Scripts, f: impl FnOnce(&mut Vm) -> Result<R, Reply>) -> Result<R, Reply> {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let generation = scripts.generation.load(Relaxed);
        if slot.as_ref().is_none_or(|vm| vm.generation != generation) {
            let mut vm = Vm::new().map_err(|e| Reply::Error(format!("ERR {e}")))?;
            vm.generation = generation;
            let libraries: Vec<Library> = lock(&scripts.libraries).values().cloned().collect();
            for lib in libraries {
                let (_, body) = library_metadata(&lib.code).map_err(|e| Reply::Error(format!("ERR {e}")))?;
                let line = single_line(body.as_bytes());
                for (info, key) in vm.register(&body).map_err(|e| Reply::Error(format!("ERR {e}")))? {
                    let function: mlua::Function =
                        vm.lua.registry_value(&key).map_err(|e| Reply::Error(format!("ERR {e}")))?;
                    let flag = |name: &str| info.flags.iter().any(|f| f == name);
                    let (no_writes, allow_oom) = (flag("no-writes"), flag("allow-oom"));
                    set_fast_env(&vm.lua, &function).map_err(|e| Reply::Error(format!("ERR {e}")))?;
                    let lends = keeps_arguments(&function.dump(true)) == Some(false);
                    let (_, raw) =
                        raw_ref(&vm.lua, &function).map_err(|e| Reply::Error(format!("ERR {e}")))?;
                    let name: Rc<str> = info.name.as_str().into();
                    vm.functions
                        .insert(info.name, VmFunction { name, raw, no_writes, allow_oom, line, lends });
                }
            }
            *slot = Some(vm);
        }
        f(slot.as_mut().expect("built above"))
    })
}
