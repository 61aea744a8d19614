//! Lua scripting, as Redis 7.0 embeds it: EVAL / EVALSHA / EVAL_RO / EVALSHA_RO and SCRIPT,
//! FUNCTION and FCALL / FCALL_RO.
//!
//! Lua 5.1 (vendored by `mlua`, built by cargo). Each thread that runs scripts has a Lua
//! state of its own: every event loop, and the script thread (`script_thread::spawn`). A
//! script first runs on the event loop that received it, for at most [`INLINE_BUDGET`]; one
//! that would take longer, or publish, or that arrives while another script runs, gives up
//! having written nothing and runs again, from the start and to its end, on the script
//! thread, while its client waits parked and its loop goes on serving (see [`Caller`]). The
//! script cache and the libraries are shared; each state compiles a cached script on its
//! first run and is rebuilt when SCRIPT FLUSH or a library change bumps the generation
//! (FUNCTION LOAD checks a library in a fresh state). One script runs at a time (the
//! running slot, [`Scripts::claim`]), through
//! [`rediskv::commands::Engine::atomically_or_abandon`]: alone, seeing its own writes,
//! committed as one batch (a script that fails after writing keeps its writes, as in Redis).
//!
//! The sandbox follows Redis': the `base`, `table`, `string` and `math` libraries, `bit`,
//! `cjson`, `cmsgpack` and `struct` (written here), no `loadfile`/`dofile`/`print`, no
//! `getfenv`/`setfenv`/`newproxy`; globals can be neither created nor read when undefined,
//! and neither they, the library tables nor the strings' metatable can be changed, also by
//! code `loadstring` and `load` make (see [`PRELUDE`]); replies convert between Lua and RESP as Redis converts them, RESP3
//! included after `redis.setresp(3)`; errors carry Redis' `script: …, on @user_script:N.`
//! suffix. A script past `busy-reply-threshold` makes other threads' clients get BUSY, and
//! SCRIPT KILL / FUNCTION KILL stop one that has not written.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use mlua::{HookTriggers, Lua, LuaOptions, MultiValue, RegistryKey, StdLib, Table, Value, VmState};
use rediskv::commands::args::parse_i64;
use rediskv::commands::table::{self, flag};
use rediskv::commands::{Protocol, Reply};
use sha1::{Digest, Sha1};

use crate::lua_struct::caller_place;
use crate::store::SharedEngine;
use crate::sync::lock;

/// A function library (FUNCTION LOAD).
#[derive(Debug, Clone)]
pub struct Library {
    /// The whole code, `#!lua name=…` line included.
    pub code: String,
    /// Its functions, in registration order.
    pub functions: Vec<FunctionInfo>,
}

/// One registered function.
#[derive(Debug, Clone)]
pub struct FunctionInfo {
    /// Its name.
    pub name: String,
    /// `description` given to `redis.register_function`.
    pub description: Option<String>,
    /// Its flags (`no-writes`, `allow-oom`, `allow-stale`, `no-cluster`,
    /// `allow-cross-slot-keys`).
    pub flags: Vec<String>,
}

/// The script running now (for BUSY, SCRIPT KILL and FUNCTION STATS).
struct Running {
    since: Instant,
    /// A function's name, or `None` for EVAL.
    function: Option<String>,
    /// The command that started it (FUNCTION STATS).
    command: Vec<Bytes>,
    /// It ran a write command: it cannot be killed.
    wrote: bool,
    /// The server was out of memory when it started and it may not ignore that (no
    /// `allow-oom`): its first command that may grow memory fails with OOM, as in Redis.
    oom: bool,
}

/// The script cache, the function libraries and the running script, shared by every thread.
#[derive(Default)]
pub struct Scripts {
    cache: Mutex<HashMap<String, Bytes>>,
    libraries: Mutex<BTreeMap<String, Library>>,
    /// Bumped by SCRIPT FLUSH and every library change: thread states rebuild.
    generation: AtomicU64,
    running: Mutex<Option<Running>>,
    /// Signalled when `running` empties, for the commands waiting in the gate (counted by
    /// `waiting`, under `running`'s lock, so that a script's end wakes no one in vain).
    ended: Condvar,
    waiting: AtomicUsize,
    /// A script runs (the gate checks for BUSY only then).
    active: AtomicBool,
    kill: Arc<AtomicBool>,
    /// The script thread's queue.
    pub jobs: std::sync::OnceLock<std::sync::mpsc::Sender<Job>>,
}

impl Scripts {
    /// INFO memory's script figures: cached scripts and their bytes, functions, libraries
    /// and their code's bytes.
    pub fn counts(&self) -> [u64; 5] {
        let cache = lock(&self.cache);
        let libraries = lock(&self.libraries);
        [
            cache.len() as u64,
            cache.values().map(|b| b.len() as u64).sum(),
            libraries.values().map(|l| l.functions.len() as u64).sum(),
            libraries.len() as u64,
            libraries.values().map(|l| l.code.len() as u64).sum(),
        ]
    }
}

/// A script to run on the script thread for a parked client.
pub struct Job {
    /// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL or FCALL_RO, and its arguments.
    pub argv: Vec<Bytes>,
    /// The command's lowercase name.
    pub name: String,
    /// The client's session, handed back with the answer.
    pub session: rediskv::commands::Session,
    /// The engine of the client's namespace.
    pub engine: Arc<SharedEngine>,
    /// The client (where the answer goes).
    pub info: Arc<crate::client_info::ClientInfo>,
    /// The client's ACL user.
    pub user: Arc<crate::acl::User>,
    /// `user` may not run everything.
    pub restricted: bool,
    /// The client tracks the keys its reads name (CLIENT TRACKING, caching included).
    pub tracks_reads: bool,
    /// Where the answer goes when the client waits for it in place (a script queued in a
    /// transaction, whose reply is a slot of EXEC's) rather than parked.
    pub answer: Option<std::sync::mpsc::Sender<Answer>>,
}

/// A script's reply, the invalidation pushes it owes its client, and the client's session.
pub type Answer = (Reply, Vec<u8>, Box<rediskv::commands::Session>);

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

const FLAGS: [&str; 5] = ["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

/// How long a script may run on the event loop that received it before it gives up and runs
/// on the script thread: the most a script holds up the other clients of its loop.
pub const INLINE_BUDGET: Duration = Duration::from_millis(2);

/// The stack of a thread that runs scripts: Lua's C recursion and deep replies need more than
/// a default thread's 2 MB.
pub const STACK_SIZE: usize = 64 << 20;

/// Lua instructions between two looks at SCRIPT KILL and the inline budget.
const HOOK_EVERY: u32 = 10_000;

impl Scripts {
    /// Whether a script runs now.
    pub fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// Hands `job` to the script thread; gives it back when there is none.
    pub fn submit(&self, job: Job) -> Result<(), Box<Job>> {
        match self.jobs.get() {
            Some(tx) => tx.send(job).map_err(|e| Box::new(e.0)),
            None => Err(Box::new(job)),
        }
    }

    /// For a command arriving while a script runs: waits until the script ends or has run
    /// `threshold_ms` (then answers BUSY), as Redis serves no one but SCRIPT KILL & co.
    /// during a script. `None`: go on, which only a script's end allows (or a threshold of
    /// 0): the script holds the engine's whole-keyspace lock, so a command let through
    /// while it runs would hold up its event loop until the script ends. The wait ends as
    /// the script does (its end signals `ended`).
    pub fn wait_or_busy(&self, threshold_ms: u64, argv: &[Bytes]) -> Option<Reply> {
        if threshold_ms == 0 || self.allowed_while_busy(argv) {
            return None;
        }
        let threshold = Duration::from_millis(threshold_ms);
        let mut running = lock(&self.running);
        loop {
            let left = threshold.checked_sub(running.as_ref()?.since.elapsed());
            let Some(left) = left.filter(|left| !left.is_zero()) else {
                drop(running);
                return self.busy(threshold_ms, argv);
            };
            self.waiting.fetch_add(1, Relaxed);
            running = self.ended.wait_timeout(running, left).unwrap_or_else(|e| e.into_inner()).0;
            self.waiting.fetch_sub(1, Relaxed);
        }
    }

    /// Makes `running` the running script, with no SCRIPT KILL pending: at once when no
    /// script runs; otherwise after the running one ends when `wait`, else not (`false`).
    fn claim(&self, running: Running, wait: bool) -> bool {
        let mut slot = lock(&self.running);
        while slot.is_some() {
            if !wait {
                return false;
            }
            self.waiting.fetch_add(1, Relaxed);
            slot = self.ended.wait(slot).unwrap_or_else(|e| e.into_inner());
            self.waiting.fetch_sub(1, Relaxed);
        }
        self.kill.store(false, Relaxed);
        *slot = Some(running);
        self.active.store(true, Relaxed);
        true
    }

    /// Marks the running script ended and wakes the commands waiting for it.
    fn end_running(&self) {
        let mut running = lock(&self.running);
        *running = None;
        self.active.store(false, Relaxed);
        if self.waiting.load(Relaxed) > 0 {
            self.ended.notify_all();
        }
    }

    fn allowed_while_busy(&self, argv: &[Bytes]) -> bool {
        let name = argv[0].to_ascii_lowercase();
        let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
        matches!(
            (name.as_slice(), sub.as_slice()),
            (b"script", b"kill")
                | (b"function", b"kill")
                | (b"function", b"stats")
                | (b"shutdown", _)
                | (b"auth", _)
                | (b"hello", _)
                | (b"reset", _)
                | (b"quit", _)
        ) || table::find(argv).is_ok_and(|info| info.has(flag::ALLOW_BUSY))
    }

    /// The BUSY error for a command of another client while a script has run past
    /// `threshold_ms`, unless the command may run then (SCRIPT KILL, FUNCTION KILL,
    /// FUNCTION STATS, SHUTDOWN NOSAVE…).
    pub fn busy(&self, threshold_ms: u64, argv: &[Bytes]) -> Option<Reply> {
        if !self.active.load(Relaxed) {
            return None;
        }
        let running = lock(&self.running);
        let r = running.as_ref()?;
        if threshold_ms == 0 || r.since.elapsed().as_millis() < u128::from(threshold_ms) {
            return None;
        }
        // MULTI, DISCARD, WATCH and UNWATCH carry Redis' allow-busy flag.
        if self.allowed_while_busy(argv) {
            return None;
        }
        let text = if r.function.is_some() {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        };
        Some(Reply::Error(text.into()))
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL.
    fn kill(&self, eval: bool) -> Reply {
        let running = lock(&self.running);
        let Some(r) = running.as_ref() else {
            return Reply::Error("NOTBUSY No scripts in execution right now.".into());
        };
        if r.wrote {
            return Reply::Error(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into(),
            );
        }
        match (eval, r.function.is_some()) {
            (true, true) => Reply::Error(
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
                    .into(),
            ),
            (false, false) => Reply::Error(
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
                    .into(),
            ),
            _ => {
                self.kill.store(true, Relaxed);
                Reply::OK
            }
        }
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Relaxed);
    }

    /// The libraries' code, for saving them with the data.
    pub fn dump_codes(&self) -> Vec<String> {
        lock(&self.libraries).values().map(|l| l.code.clone()).collect()
    }

    /// Loads libraries saved by [`Scripts::dump_codes`] (at startup).
    ///
    /// # Errors
    /// The first library that does not load, with Redis' error.
    pub fn restore_codes(&self, codes: &[String]) -> Result<(), String> {
        for code in codes {
            self.load_library(code, true)?;
        }
        Ok(())
    }

    /// Replaces every library with those of `codes` (loading an RDB file).
    ///
    /// # Errors
    /// As [`Scripts::restore_codes`]; the libraries before the failing one stay.
    pub fn replace_codes(&self, codes: &[String]) -> Result<(), String> {
        lock(&self.libraries).clear();
        self.changed();
        self.restore_codes(codes)
    }

    /// FUNCTION LOAD: checks the library in a fresh Lua state and registers it.
    fn load_library(&self, code: &str, replace: bool) -> Result<String, String> {
        let (name, Library { functions, .. }) = build_library(code)?;
        let mut libs = lock(&self.libraries);
        if libs.contains_key(&name) && !replace {
            return Err(format!("Library '{name}' already exists"));
        }
        for f in &functions {
            let owner =
                libs.iter().find(|(lib, l)| **lib != name && l.functions.iter().any(|g| g.name == f.name));
            if owner.is_some() {
                return Err(format!("Function {} already exists", f.name));
            }
        }
        libs.insert(name.clone(), Library { code: code.to_string(), functions });
        drop(libs);
        self.changed();
        Ok(name)
    }
}

/// A library checked in a fresh Lua state: its name and what it registers.
fn build_library(code: &str) -> Result<(String, Library), String> {
    let (name, body) = library_metadata(code)?;
    let vm = Vm::new().map_err(|e| e.to_string())?;
    let functions: Vec<FunctionInfo> = vm.register(&body)?.into_iter().map(|(info, _)| info).collect();
    if functions.is_empty() {
        return Err("No functions registered".into());
    }
    Ok((name, Library { code: code.to_string(), functions }))
}

/// FUNCTION RESTORE's policy for libraries already there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Flush,
    Append,
    Replace,
}

impl Scripts {
    /// FUNCTION RESTORE: joins the payload's libraries to the current ones under `policy`,
    /// all or nothing, with Redis' errors.
    fn restore(&self, payload: &[u8], policy: Policy) -> Result<(), String> {
        let codes = rediskv::codec::rdb::restore_functions(payload).map_err(|e| match e {
            rediskv::Error::DumpFormat(text) => text.to_string(),
            _ => "DUMP payload version or checksum are wrong".to_string(),
        })?;
        let mut incoming = BTreeMap::new();
        for code in codes {
            let (name, lib) = build_library(&String::from_utf8_lossy(&code))?;
            if incoming.insert(name.clone(), lib).is_some() {
                return Err(format!("Library '{name}' already exists"));
            }
        }
        let mut libs = lock(&self.libraries);
        let mut joined = if policy == Policy::Flush { BTreeMap::new() } else { libs.clone() };
        for (name, lib) in incoming {
            if joined.contains_key(&name) && policy == Policy::Append {
                return Err(format!("Library {name} already exists"));
            }
            joined.remove(&name);
            for f in &lib.functions {
                if joined.values().any(|l: &Library| l.functions.iter().any(|g| g.name == f.name)) {
                    return Err(format!("Function {} already exists", f.name));
                }
            }
            joined.insert(name, lib);
        }
        *libs = joined;
        drop(libs);
        self.changed();
        Ok(())
    }
}

/// `7.0.15` → `0x07000f`, as Redis' `REDIS_VERSION_NUM`.
fn redis_version_num(version: &str) -> i64 {
    version.split('.').take(3).fold(0, |n, part| n << 8 | part.parse::<i64>().unwrap_or(0))
}

/// `#!lua name=<lib>` → (name, code after the first line).
fn library_metadata(code: &str) -> Result<(String, String), String> {
    let Some(rest) = code.strip_prefix("#!") else { return Err("Missing library metadata".into()) };
    let Some((shebang, _)) = rest.split_once('\n') else { return Err("Missing library metadata".into()) };
    // As Redis' sdssplitargs over the whole line: `#!lua` is the first word (`#!` alone an
    // empty engine), and quotes inside a word only group.
    let line = format!("#!{shebang}");
    let mut parts = line.split_whitespace().map(|w| w.replace(['"', '\''], ""));
    let engine = parts.next().unwrap_or_default()[2..].to_string();
    let mut name = None;
    for part in parts {
        match part.get(..5) {
            Some(p) if p.eq_ignore_ascii_case("name=") => {
                if name.is_some() {
                    return Err("Invalid metadata value, name argument was given multiple times".into());
                }
                name = Some(part[5..].to_string())
            }
            _ => return Err(format!("Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return Err(
            "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
                .into(),
        );
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    // The code keeps its first line empty so line numbers match the library's.
    Ok((name, format!("\n{}", &code[2 + shebang.len() + 1..])))
}

/// Sandboxed Lua, with Redis' libraries and the prelude below.
struct Vm {
    lua: Lua,
    /// The prelude's runner (`RUN`): calls a script or function under the error handler.
    runner: mlua::Function,
    generation: u64,
    /// sha → compiled script.
    scripts: HashMap<String, RegistryKey>,
    /// function name → (callback, flags).
    functions: HashMap<String, (RegistryKey, Vec<String>)>,
}

/// Defines Redis' `pcall`, the runner that calls a script under the error handler, and the
/// global protection: the globals scripts see (their environment, also given to the code
/// `loadstring` and `load` make), the library tables and the strings' metatable are
/// read-only views (assignment, `setmetatable`, `rawset` and `table.insert` refuse them), a
/// script can neither create globals nor read undefined ones; where it looks up `redis` or
/// `setmetatable`, `rawset`, `getmetatable` or `table.insert`, [`CallSite`] notes. Takes the
/// `pcall` error converter, the mark function and the place function (see [`CallSite::place`]);
/// answers the pieces the server keeps (see [`Vm::new`]), none of them a global.
const PRELUDE: &str = r#"
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
local function run(f, keys, args)
  return xpcall(function() return f(keys, args) end, __redis__err__handler)
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
local function set_loading(on) loading = on end
-- Where a script looks up `redis`, `setmetatable`, `rawset` or `getmetatable` is noted: their
-- functions here are Lua functions, which take over the script's frame when called as
-- `return f(...)`, and an error one raises then gets this place.
local function lookup(env, k)
  if loading and k ~= 'redis' then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  if k == '_G' then return env end
  if k == 'setmetatable' then mark() return env_setmetatable end
  if k == 'rawset' or k == 'getmetatable' then mark() end
  local v = rawget(G, k)
  -- The view of a library table (while a library loads, `redis` is its own table).
  if v ~= nil and v == originals[k] then
    if k == 'redis' then mark() end
    v = views[k]
  end
  if v == nil then error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2) end
  return v
end
local env = setmetatable_({}, {__index = lookup, __newindex = readonly, __metatable = sealed})
protected[env] = true
answers[env] = view({__index = lookup})
return {run = run, env = env, set_loading = set_loading, protected = protected, string_meta = string_meta}
"#;

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

impl Vm {
    fn new() -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, LuaOptions::default())?;
        let g = lua.globals();
        let bridge = Rc::new(Bridge::default());
        lua.set_app_data(bridge.clone());
        let b = bridge.clone();
        g.set(
            "__redis__err__handler",
            lua.create_function(move |lua, err: Value| error_handler(lua, err, &b.site))?,
        )?;
        // The prelude's global lookup notes where `redis` and `setmetatable` are looked up
        // (level 2: above this function and the lookup).
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
        let make = command_function_maker(&lua)?;
        let command = |raise: bool| -> mlua::Result<mlua::Function> {
            let (b, b2) = (bridge.clone(), bridge.clone());
            make.call((
                lua.create_function(move |lua, args: MultiValue| {
                    let argv = direct_argv(lua, &args)?;
                    drop(args);
                    redis_call(lua, &b, argv, raise)
                })?,
                lua.create_function(move |lua, (n, args): (usize, Table)| {
                    redis_call(lua, &b2, packed_argv(lua, n, &args)?, raise)
                })?,
            ))
        };
        redis.set("call", command(true)?)?;
        // The Redis version this server answers as (INFO's redis_version).
        redis.set("REDIS_VERSION", crate::config::REDIS_VERSION)?;
        redis.set("REDIS_VERSION_NUM", redis_version_num(crate::config::REDIS_VERSION))?;
        redis.set("pcall", command(false)?)?;
        let (b, b2) = (bridge.clone(), bridge.clone());
        let acl_check_cmd = make.call::<mlua::Function>((
            lua.create_function(move |lua, args: MultiValue| {
                let argv = direct_argv(lua, &args)?;
                drop(args);
                redis_acl_check_cmd(&b, argv)
            })?,
            lua.create_function(move |lua, (n, args): (usize, Table)| {
                redis_acl_check_cmd(&b2, packed_argv(lua, n, &args)?)
            })?,
        ))?;
        redis.set("acl_check_cmd", acl_check_cmd)?;
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
        for (key, piece) in
            [(RUN, "run"), (ENV, "env"), (SET_LOADING, "set_loading"), (PROTECTED, "protected")]
        {
            lua.set_named_registry_value(key, pieces.raw_get::<Value>(piece)?)?;
        }
        lua.set_type_metatable::<mlua::String>(Some(pieces.raw_get("string_meta")?));
        let runner = pieces.raw_get("run")?;
        Ok(Vm { lua, runner, generation: u64::MAX, scripts: HashMap::new(), functions: HashMap::new() })
    }

    /// Runs a library's code with `redis.register_function` available; returns what it
    /// registered.
    fn register(&self, body: &str) -> Result<Vec<(FunctionInfo, RegistryKey)>, String> {
        let lua = &self.lua;
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
            let compiled = lua.load(body).set_name("@user_function").set_mode(mlua::ChunkMode::Text).into_function();
            let result = compiled
                .map_err(|e| mlua::Error::RuntimeError(format!("Error compiling function: {}", lua_message(&e))))
                .and_then(|f| {
                    set_env(lua, &f)?;
                    let runner: mlua::Function = lua.named_registry_value(RUN)?;
                    // A library's top-level code gets half a second, as in Redis.
                    let started = Instant::now();
                    lua.set_hook(HookTriggers::new().every_nth_instruction(10_000), move |_, _| {
                        if started.elapsed() > std::time::Duration::from_millis(500) {
                            return Err(mlua::Error::RuntimeError("FUNCTION LOAD timeout".into()));
                        }
                        Ok(VmState::Continue)
                    });
                    let set_loading: mlua::Function = lua.named_registry_value(SET_LOADING)?;
                    set_loading.call::<()>(true)?;
                    let called: mlua::Result<(bool, Value)> = runner.call((f, Value::Nil, Value::Nil));
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

/// A `redis.call`'s argument as a command's: a string, an integer, or a number as Lua prints
/// it; `None` for anything else.
fn lua_arg(lua: &Lua, v: &Value) -> mlua::Result<Option<Bytes>> {
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
fn lua_argv(n: usize, mut arg: impl FnMut(usize) -> mlua::Result<Option<Bytes>>) -> mlua::Result<Argv> {
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
fn direct_argv(lua: &Lua, args: &MultiValue) -> mlua::Result<Argv> {
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
const PACK_PAST: usize = 7000;

/// The maker of a command function of Lua's over its Rust functions: `make(direct, packed)`
/// calls `direct(...)` with up to [`PACK_PAST`] arguments, else `packed(n, {...})` (`n`
/// counts the nils a table cannot). Being a Lua function, it takes over its caller's frame
/// when called as `return redis.call(…)`: [`CallSite`] keeps that caller's place for the
/// error handler.
fn command_function_maker(lua: &Lua) -> mlua::Result<mlua::Function> {
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
fn packed_argv(lua: &Lua, n: usize, args: &Table) -> mlua::Result<Argv> {
    lua_argv(n, |i| lua_arg(lua, &args.raw_get::<Value>(i + 1)?))
}

/// A command's arguments, or the error reply they make.
type Argv = Result<Vec<Bytes>, &'static str>;

/// What the Lua state's long-lived functions share with the invocation running now.
#[derive(Default)]
struct Bridge {
    /// The running invocation's command runner (for `redis.call` and `redis.pcall`), which
    /// checks the ACL instead (for `redis.acl_check_cmd`) while `acl_check` is set: a
    /// function of its scope, `None` between invocations.
    run: RefCell<Option<mlua::Function>>,
    acl_check: Cell<bool>,
    /// A command's arguments on their way to `run` or `acl_check`. They travel beside the
    /// call, as bytes: as its arguments they would be made into Lua strings again, and take
    /// as many of the caller's stack slots again (see [`PACK_PAST`]).
    argv: RefCell<Option<Argv>>,
    site: CallSite,
    /// The protocol `redis.setresp` chose for the running invocation's command replies.
    resp3: Cell<bool>,
    /// The running invocation gave up on the event loop (see [`Caller::inline_until`]).
    abandoned: Cell<bool>,
}

impl Bridge {
    /// The arguments handed to the function now running.
    fn take_argv(&self) -> Argv {
        self.argv
            .borrow_mut()
            .take()
            .unwrap_or(Err("ERR Please specify at least one argument for this redis lib call"))
    }
}

/// `redis.acl_check_cmd` of `argv`, through the running invocation's check.
fn redis_acl_check_cmd(bridge: &Bridge, argv: Argv) -> mlua::Result<Value> {
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
fn redis_call(lua: &Lua, bridge: &Bridge, argv: Argv, raise: bool) -> mlua::Result<Value> {
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

/// Where user code last looked up `redis`, `setmetatable`, `rawset`, `getmetatable` or
/// `table.insert`, whose functions here are Lua functions (`redis.call`, `redis.pcall`,
/// `redis.acl_check_cmd`, the sandbox's guards). Such a function called as `return f(…)` takes over its caller's frame (a
/// Lua tail call; a C function would run above it), so an error it raises finds no script
/// frame on the stack: the error handler takes this place instead, the line of the `redis`
/// in `return redis.call(…)`. (The sandbox's `pcall` is a Lua function too, but raises
/// nothing itself.)
#[derive(Default)]
struct CallSite {
    source: RefCell<String>,
    /// 0: none noted in this invocation.
    line: Cell<i32>,
}

impl CallSite {
    /// Notes the place of the frame `level` levels up (the caller of the prelude's
    /// `__index`, for the mark function).
    fn mark(&self, lua: &Lua, level: usize) {
        if let Some(frame) = lua.inspect_stack(level) {
            self.line.set(frame.curr_line());
            let source = frame.source();
            let name = source.source.as_deref().unwrap_or("");
            let mut kept = self.source.borrow_mut();
            if *kept != name {
                kept.clear();
                kept.push_str(name);
            }
        }
    }

    fn clear(&self) {
        self.line.set(0);
    }

    /// Lua's place (`luaL_where`) of the frame `level` up, as an error raised there starts:
    /// `user_script:3: `; for a frame a tail call replaced, the place noted last (if any); none
    /// for a C function.
    fn place(&self, lua: &Lua, level: usize) -> Vec<u8> {
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
fn error_text(lua: &Lua, err: Value) -> mlua::Result<Value> {
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
fn error_handler(lua: &Lua, err: Value, site: &CallSite) -> mlua::Result<Table> {
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
fn lua_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_message(cause),
        other => other.to_string(),
    }
}

fn parse_register(args: MultiValue) -> Result<(FunctionInfo, mlua::Function), String> {
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
fn set_env(lua: &Lua, f: &mlua::Function) -> mlua::Result<()> {
    f.set_environment(lua.named_registry_value(ENV)?)?;
    Ok(())
}

/// Registry names of the prelude's pieces: the runner, the scripts' globals, the switch for a
/// library's load, the read-only tables; and of the slot `redis.register_function` reaches
/// the running FUNCTION LOAD through.
const RUN: &str = "__redis_run";
const ENV: &str = "__redis_env";
const SET_LOADING: &str = "__redis_set_loading";
const PROTECTED: &str = "__redis_protected";
const SLOT: &str = "__redis_slot";

/// The type Lua's argument errors name: `no value` for a missing argument.
fn lua_type(v: Option<&Value>) -> &'static str {
    match v {
        None => "no value",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) | Value::Other(_)) => "userdata",
        Some(v) => v.type_name(),
    }
}

/// Lua's error for a bad argument of the function `name`, with the caller's place.
fn bad_argument(lua: &Lua, n: usize, name: &str, what: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("{}bad argument #{n} to '{name}' ({what})", caller_place(lua)))
}

/// `loadstring` (or, `reader`, `load`) for scripts: the code made gets the scripts' globals,
/// not the real global table. A binary chunk is read as text, as Redis' Lua reads it (it fails
/// on its first byte). `original` is Lua's `loadstring`.
fn sandboxed_loader(lua: &Lua, original: mlua::Function, reader: bool) -> mlua::Result<mlua::Function> {
    let name = if reader { "load" } else { "loadstring" };
    lua.create_function(move |lua, args: MultiValue| {
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
fn chunk_id(name: &[u8]) -> Vec<u8> {
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

fn error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("err", text)?;
    Ok(t)
}

/// The field Redis sets on the error table of a command a script ran, whose error INFO
/// errorstats counted already (visible to the script, as in Redis).
const COUNTED: &str = "ignore_error_stats_update";

/// [`error_table`] for an error counted already (see [`COUNTED`]).
fn counted_error_table(lua: &Lua, text: &str) -> mlua::Result<Table> {
    let t = error_table(lua, text)?;
    t.set(COUNTED, true)?;
    Ok(t)
}

/// The SHA1 of `bytes`, lowercase hex (SCRIPT LOAD, `redis.sha1hex`).
pub fn sha1_hex(bytes: &[u8]) -> String {
    Sha1::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What scripts need of the server around them: implemented by the server's shared state,
/// so the script engine here needs none of it.
pub trait Host {
    /// The script cache and the function libraries.
    fn scripts(&self) -> &Scripts;
    /// Whether the store is past `maxmemory` (a deny-oom command in a script is refused).
    fn out_of_memory(&self) -> bool;
    /// The error a write command in a script gets while the store cannot write or too few
    /// replicas are good (`min-replicas-to-write`).
    fn write_refusal(&self) -> Option<String>;
    /// Shows a command a script runs in database `db` to the MONITOR clients (`[db lua]`).
    fn monitor(&self, argv: &[Bytes], db: usize);
    /// Counts a command a script ran in INFO commandstats, as a client's.
    fn count(&self, info: &table::CommandInfo, usec: u64, failed: bool);
    /// Counts an error a command a script ran answered or was refused with (INFO
    /// errorstats), and a refused command's `rejected_calls`.
    fn count_error(&self, refused: Option<&table::CommandInfo>, error: &str);
    /// The server's own commands a script may run: PUBLISH, SPUBLISH, TIME and INFO.
    fn server_command(&self, argv: &[Bytes]) -> Reply;
}

/// What the scripting commands need of the client that runs them.
pub struct Caller<'a> {
    /// The server around the script.
    pub host: &'a dyn Host,
    /// The engine of its namespace.
    pub engine: &'a SharedEngine,
    /// Its session (database, MULTI).
    pub session: &'a mut rediskv::commands::Session,
    /// Its ACL check for each command a script runs: `Err(text)` refuses it.
    pub acl: &'a dyn Fn(&[Bytes]) -> Result<(), String>,
    /// `Some(deadline)` on the client's event loop: the script gives up, having written
    /// nothing, published nothing and counted nothing, when another script runs, when it
    /// would publish, or at `deadline` (then [`RunFacts::abandoned`] is set and the reply
    /// means nothing). `None` on the script thread: it waits its turn and runs to its end.
    pub inline_until: Option<Instant>,
    /// What the run found out.
    pub facts: RunFacts,
}

/// What a script's run tells its client besides the reply.
#[derive(Default)]
pub struct RunFacts {
    /// It ran a read-only command (client tracking then remembers its keys).
    pub read_any: Cell<bool>,
    /// Its error was a command's, counted in INFO errorstats when the command answered it
    /// (Redis' `ignore_error_stats_update`): the reply is not counted again.
    pub error_counted: Cell<bool>,
    /// It gave up on the event loop (see [`Caller::inline_until`]).
    pub abandoned: Cell<bool>,
}

/// Whether the command runs a script: EVAL, EVALSHA, FCALL and their read-only forms, the
/// commands Redis flags `skip_monitor` (MONITOR shows them before their scripts' commands).
pub fn runs_script(info: &table::CommandInfo) -> bool {
    info.has(flag::SKIP_MONITOR)
}

/// EVAL script numkeys key… arg… (and EVALSHA, EVAL_RO, EVALSHA_RO).
pub fn eval(argv: &[Bytes], caller: &mut Caller<'_>, by_sha: bool, read_only: bool) -> Reply {
    let scripts = caller.host.scripts();
    let (keys, args) = match split_keys(argv) {
        Ok(split) => split,
        Err(e) => return e,
    };
    let (sha, body) = if by_sha {
        let sha = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
        match lock(&scripts.cache).get(&sha) {
            Some(body) => (sha, body.clone()),
            None => return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into()),
        }
    } else {
        (sha1_hex(&argv[1]), argv[1].clone())
    };
    // `#!lua flags=…`: the script declares its flags (Redis 7.0); without it, compat mode.
    let (flags, shebang_len) = match shebang_flags(&body) {
        Ok(found) => found.unwrap_or_default(),
        Err(e) => return Reply::Error(format!("ERR {e}")),
    };
    let declared = shebang_len > 0;
    let no_writes = flags.iter().any(|f| f == "no-writes");
    if read_only && declared && !no_writes {
        return Reply::Error("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    let compiled = with_vm(scripts, |vm| {
        if !vm.scripts.contains_key(&sha) {
            // The shebang line goes, its line feed stays: line numbers are the user's.
            let f = vm
                .lua
                .load(&body[shebang_len..])
                .set_name("@user_script")
                .set_mode(mlua::ChunkMode::Text)
                .into_function()
                .map_err(|e| {
                    Reply::Error(format!("ERR Error compiling script (new function): {}", lua_message(&e)))
                })?;
            set_env(&vm.lua, &f).map_err(|e| Reply::Error(format!("ERR {e}")))?;
            let key = vm.lua.create_registry_value(f).map_err(|e| Reply::Error(format!("ERR {e}")))?;
            vm.scripts.insert(sha.clone(), key);
        }
        Ok(())
    });
    if let Err(e) = compiled {
        return e;
    }
    if !by_sha {
        lock(&scripts.cache).entry(sha.clone()).or_insert(body);
    }
    let allow_oom = flags.iter().any(|f| f == "allow-oom");
    run(caller, Target::Script(sha), keys, args, read_only || (declared && no_writes), allow_oom, argv)
}

/// The flags of an EVAL script's `#!lua flags=a,b` first line, and that line's length;
/// `None` for a script without one.
///
/// # Errors
/// Redis' texts for a bad shebang.
fn shebang_flags(body: &[u8]) -> Result<Option<(Vec<String>, usize)>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let end = body.iter().position(|&c| c == b'\n').ok_or("Invalid script shebang")?;
    let line = String::from_utf8_lossy(&body[..end]).into_owned();
    let mut parts = line.split_whitespace();
    let engine = parts.next().ok_or("Invalid engine in script shebang")?;
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = Vec::new();
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        // `flags=` alone declares no flag.
        for flag in list.split(',').filter(|f| !list.is_empty() || !f.is_empty()) {
            if !FLAGS.contains(&flag) {
                return Err(format!("Unexpected flag in script shebang: {flag}"));
            }
            flags.push(flag.to_string());
        }
    }
    Ok(Some((flags, end)))
}

/// Whether a script command is refused when out of memory before it runs, as Redis 7.0
/// flags it `denyoom`: a script or function that declares its flags (a shebang; every
/// function) without `allow-oom` or `no-writes`. A script without a shebang runs in the
/// compatibility mode, where only its deny-oom commands fail.
pub fn denies_oom(scripts: &Scripts, name: &str, argv: &[Bytes]) -> bool {
    declared(scripts, name, argv, |flags| !flags.iter().any(|f| f == "allow-oom" || f == "no-writes"))
}

/// Whether a script command declares that it writes, as Redis 7.0 flags it `write`: a
/// script or function that declares its flags without `no-writes` (a script without a
/// shebang declares nothing: its write commands are refused as it runs them).
pub fn declares_writes(scripts: &Scripts, name: &str, argv: &[Bytes]) -> bool {
    declared(scripts, name, argv, |flags| !flags.iter().any(|f| f == "no-writes"))
}

/// Whether the script or function a script command runs declares flags that `test` accepts.
fn declared(scripts: &Scripts, name: &str, argv: &[Bytes], test: impl Fn(&[String]) -> bool) -> bool {
    match name {
        "eval" | "eval_ro" => {
            matches!(argv.get(1).map(|b| shebang_flags(b)), Some(Ok(Some((flags, _)))) if test(&flags))
        }
        "evalsha" | "evalsha_ro" => {
            let sha = String::from_utf8_lossy(argv.get(1).map_or(&b""[..], |a| a)).to_ascii_lowercase();
            let body = lock(&scripts.cache).get(&sha).cloned();
            matches!(body.map(|b| shebang_flags(&b)), Some(Ok(Some((flags, _)))) if test(&flags))
        }
        "fcall" | "fcall_ro" => {
            let function = String::from_utf8_lossy(argv.get(1).map_or(&b""[..], |a| a)).into_owned();
            let libs = lock(&scripts.libraries);
            let found = libs
                .values()
                .flat_map(|l| l.functions.iter())
                .find(|f| f.name.eq_ignore_ascii_case(&function));
            found.is_some_and(|f| test(&f.flags))
        }
        _ => false,
    }
}

/// Whether a script command (EVAL, EVALSHA, FCALL) may write, by its script's flags; `None`
/// for any other command.
pub fn script_may_write(scripts: &Scripts, argv: &[Bytes]) -> Option<bool> {
    let name = argv.first()?;
    if name.eq_ignore_ascii_case(b"eval") || name.eq_ignore_ascii_case(b"evalsha") {
        Some(eval_may_write(scripts, argv))
    } else if name.eq_ignore_ascii_case(b"fcall") {
        Some(fcall_may_write(scripts, argv))
    } else if name.eq_ignore_ascii_case(b"eval_ro")
        || name.eq_ignore_ascii_case(b"evalsha_ro")
        || name.eq_ignore_ascii_case(b"fcall_ro")
    {
        Some(false)
    } else {
        None
    }
}

/// Whether an FCALL may write: unless its function declares `no-writes`.
pub fn fcall_may_write(scripts: &Scripts, argv: &[Bytes]) -> bool {
    let name = String::from_utf8_lossy(argv.get(1).map_or(&b""[..], |a| a)).into_owned();
    let libs = lock(&scripts.libraries);
    let function =
        libs.values().flat_map(|l| l.functions.iter()).find(|f| f.name.eq_ignore_ascii_case(&name));
    !function.is_some_and(|f| f.flags.iter().any(|x| x == "no-writes"))
}

/// Whether an EVAL or EVALSHA may write: a script without a `#!lua` line may; one with it
/// may unless it declares `no-writes` (CLIENT PAUSE WRITE holds the first kind only).
pub fn eval_may_write(scripts: &Scripts, argv: &[Bytes]) -> bool {
    let body = if argv[0].eq_ignore_ascii_case(b"evalsha") {
        let sha = String::from_utf8_lossy(argv.get(1).map_or(&b""[..], |a| a)).to_ascii_lowercase();
        lock(&scripts.cache).get(&sha).cloned()
    } else {
        argv.get(1).cloned()
    };
    match body.map(|b| shebang_flags(&b)) {
        Some(Ok(Some((flags, _)))) => !flags.iter().any(|f| f == "no-writes"),
        _ => true,
    }
}

/// FCALL function numkeys key… arg… (and FCALL_RO).
pub fn fcall(argv: &[Bytes], caller: &mut Caller<'_>, read_only: bool) -> Reply {
    // Function names are found whatever their case; the name, then the key count, is checked
    // (Redis' order, and its FCALL wording for a count that is not a number).
    let wanted = String::from_utf8_lossy(&argv[1]).into_owned();
    let found = lock(&caller.host.scripts().libraries)
        .values()
        .flat_map(|l| l.functions.iter())
        .find(|f| f.name.eq_ignore_ascii_case(&wanted))
        .map(|f| (f.name.clone(), f.flags.clone()));
    let Some((name, flags)) = found else { return Reply::Error("ERR Function not found".into()) };
    let Some(n) = parse_i64(&argv[2]) else { return Reply::Error("ERR Bad number of keys provided".into()) };
    if n > (argv.len() - 3) as i64 {
        return Reply::Error("ERR Number of keys can't be greater than number of args".into());
    }
    let (keys, args) = match split_keys(argv) {
        Ok(split) => split,
        Err(e) => return e,
    };
    let no_writes = flags.iter().any(|f| f == "no-writes");
    if read_only && !no_writes {
        return Reply::Error("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    let allow_oom = flags.iter().any(|f| f == "allow-oom");
    run(caller, Target::Function(name), keys, args, read_only || no_writes, allow_oom, argv)
}

/// numkeys, keys and arguments of EVAL/FCALL, or Redis' errors.
pub fn split_keys(argv: &[Bytes]) -> Result<(Vec<Bytes>, Vec<Bytes>), Reply> {
    let Some(n) = parse_i64(&argv[2]) else {
        return Err(Reply::Error("ERR value is not an integer or out of range".into()));
    };
    if n < 0 {
        return Err(Reply::Error("ERR Number of keys can't be negative".into()));
    }
    if n as usize > argv.len() - 3 {
        return Err(Reply::Error("ERR Number of keys can't be greater than number of args".into()));
    }
    let n = n as usize;
    Ok((argv[3..3 + n].to_vec(), argv[3 + n..].to_vec()))
}

enum Target {
    Script(String),
    Function(String),
}

/// Runs `f` on this thread's Lua state, rebuilt first if the scripts or libraries changed.
fn with_vm<R>(scripts: &Scripts, f: impl FnOnce(&mut Vm) -> Result<R, Reply>) -> Result<R, Reply> {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let generation = scripts.generation.load(Relaxed);
        if slot.as_ref().is_none_or(|vm| vm.generation != generation) {
            let mut vm = Vm::new().map_err(|e| Reply::Error(format!("ERR {e}")))?;
            vm.generation = generation;
            let libraries: Vec<Library> = lock(&scripts.libraries).values().cloned().collect();
            for lib in libraries {
                let (_, body) = library_metadata(&lib.code).map_err(|e| Reply::Error(format!("ERR {e}")))?;
                for (info, key) in vm.register(&body).map_err(|e| Reply::Error(format!("ERR {e}")))? {
                    vm.functions.insert(info.name, (key, info.flags));
                }
            }
            *slot = Some(vm);
        }
        f(slot.as_mut().expect("built above"))
    })
}

/// Runs a script or function atomically and converts its result.
fn run(
    caller: &mut Caller<'_>,
    target: Target,
    keys: Vec<Bytes>,
    args: Vec<Bytes>,
    read_only: bool,
    allow_oom: bool,
    argv: &[Bytes],
) -> Reply {
    let host = caller.host;
    let scripts = host.scripts();
    let db = caller.session.db();
    let (label, function) = match &target {
        Target::Script(sha) => (sha.clone(), None),
        Target::Function(name) => (name.clone(), Some(name.clone())),
    };

    let (acl, engine, facts, until) = (caller.acl, caller.engine, &caller.facts, caller.inline_until);
    let result = with_vm(scripts, |vm| {
        let lua = &vm.lua;
        let f: mlua::Function = match &target {
            Target::Script(sha) => lua.registry_value(&vm.scripts[sha]),
            Target::Function(name) => match vm.functions.get(name) {
                Some((key, _)) => lua.registry_value(key),
                None => return Err(Reply::Error("ERR Function not found".into())),
            },
        }
        .map_err(|e| Reply::Error(format!("ERR {e}")))?;
        // Running before the engine's whole-keyspace lock is asked for: from then on a
        // command of another client waits in the gate for the script's end or BUSY, never
        // for that lock (one script runs at a time).
        let running = Running {
            since: Instant::now(),
            function: function.clone(),
            command: argv.to_vec(),
            wrote: false,
            oom: !allow_oom && host.out_of_memory(),
        };
        if !scripts.claim(running, until.is_none()) {
            facts.abandoned.set(true);
            return Ok(Reply::Nil);
        }
        let reply = engine.atomically_or_abandon(caller.session, |call| {
            // A store's conflict runs the script again from the start, with nothing written.
            if let Some(r) = lock(&scripts.running).as_mut() {
                r.wrote = false;
            }
            facts.read_any.set(false);
            let run = Run { runner: &vm.runner, f: &f, target: &target, keys: &keys, args: &args };
            run_once(lua, run, read_only, db, acl, host, until, facts, call)
        });
        scripts.end_running();
        reply.map(|run| {
            run.unwrap_or_else(|Abandoned| {
                facts.abandoned.set(true);
                Reply::Nil
            })
        })
    });
    let reply = result.unwrap_or_else(|e| e);
    // The `script: …` suffix names the script by its SHA1 or the function by its name.
    match reply {
        Reply::Error(e) => Reply::Error(e.replace("\u{0}LABEL\u{0}", &label)),
        other => other,
    }
}

/// What one attempt calls: the prelude's runner, the script or function, its keys and
/// arguments.
struct Run<'a> {
    runner: &'a mlua::Function,
    f: &'a mlua::Function,
    target: &'a Target,
    keys: &'a [Bytes],
    args: &'a [Bytes],
}

/// An attempt on the event loop gave up (see [`Caller::inline_until`]).
struct Abandoned;

/// A count an attempt owes INFO commandstats and errorstats, made when it does not give up.
enum Tally {
    Count(&'static table::CommandInfo, u64, bool),
    Error(Option<&'static table::CommandInfo>, String),
}

/// One attempt: fresh KEYS/ARGV, the hook for SCRIPT KILL (and the inline deadline `until`),
/// `redis.__raw` bound to `call`.
#[allow(clippy::too_many_arguments)]
fn run_once(
    lua: &Lua,
    Run { runner, f, target, keys, args }: Run<'_>,
    read_only: bool,
    db: usize,
    acl: &dyn Fn(&[Bytes]) -> Result<(), String>,
    host: &dyn Host,
    until: Option<Instant>,
    facts: &RunFacts,
    call: &mut dyn FnMut(&[Bytes]) -> Reply,
) -> Result<Reply, Abandoned> {
    let scripts = host.scripts();
    let Some(bridge) = lua.app_data_ref::<Rc<Bridge>>().map(|b| Rc::clone(&b)) else {
        return Ok(Reply::Error("ERR Lua state without its bridge".into()));
    };
    bridge.resp3.set(false);
    bridge.site.clear();
    bridge.abandoned.set(false);
    let call = RefCell::new(call);
    let tallies = RefCell::new(Vec::new());
    let count_error = |refused: Option<&'static table::CommandInfo>, text: &str| {
        tallies.borrow_mut().push(Tally::Error(refused, text.to_string()));
    };
    let result = lua.scope(|scope| {
        // redis.acl_check_cmd: whether the script's user may run the command.
        let acl_check_cmd = |lua: &Lua| -> mlua::Result<bool> {
            // Errors are raised as Redis raises them: the error reply as the script's error.
            let raise = |text: &str| -> mlua::Error {
                match error_table(lua, text)
                    .and_then(|t| lua.set_named_registry_value("__redis_pending_error", t))
                {
                    Ok(()) => mlua::Error::RuntimeError(text.trim_start_matches("ERR ").into()),
                    Err(e) => e,
                }
            };
            let argv = bridge.take_argv().map_err(raise)?;
            if crate::acl::resolve(&argv).is_err() {
                return Err(raise("ERR Invalid command passed to redis.acl_check_cmd()"));
            }
            Ok(acl(&argv).is_ok())
        };
        let raw = |lua: &Lua| -> mlua::Result<Value> {
            let argv = match bridge.take_argv() {
                Ok(argv) => argv,
                Err(text) => return Ok(Value::Table(error_table(lua, text)?)),
            };
            let mut counted = false;
            let reply = match check_command(&argv, read_only, acl) {
                Err(text) => {
                    // Refused before running, as Redis counts it.
                    let text = format!("ERR {text}");
                    count_error(table::find(&argv).ok(), &text);
                    return Ok(Value::Table(counted_error_table(lua, &text)?));
                }
                Ok(found) => {
                    host.monitor(&argv, db);
                    match found {
                        Some(info) => {
                            if info.has(flag::READONLY) {
                                facts.read_any.set(true);
                            }
                            let mut running = lock(&scripts.running);
                            if let Some(r) = running.as_mut() {
                                if r.oom && !r.wrote && info.has(flag::DENYOOM) {
                                    drop(running);
                                    count_error(Some(info), OOM);
                                    return Ok(Value::Table(counted_error_table(lua, OOM)?));
                                }
                                if let Some(refusal) = info.is_write().then(|| host.write_refusal()).flatten()
                                {
                                    drop(running);
                                    count_error(Some(info), &refusal);
                                    return Ok(Value::Table(counted_error_table(lua, &refusal)?));
                                }
                                r.wrote |= info.is_write();
                            }
                            drop(running);
                            // Counted in INFO commandstats like a client's command, as Redis.
                            let started = Instant::now();
                            let reply = (call.borrow_mut())(&argv);
                            let usec = started.elapsed().as_micros() as u64;
                            tallies.borrow_mut().push(Tally::Count(info, usec, reply.is_error()));
                            if let Reply::Error(e) = &reply {
                                count_error(None, e);
                                counted = true;
                            }
                            reply
                        }
                        // A publish cannot be taken back: an attempt on the event loop gives
                        // up before it.
                        None if until.is_some() && publishes(&argv) => {
                            bridge.abandoned.set(true);
                            return Err(stop(lua, abandoned()));
                        }
                        None => host.server_command(&argv),
                    }
                }
            };
            let protocol = if bridge.resp3.get() { Protocol::Resp3 } else { Protocol::Resp2 };
            let mut bytes = Vec::new();
            reply.write(protocol, &mut bytes);
            let mut at = 0;
            let value = resp_to_lua(lua, &bytes, &mut at)?;
            if let (true, Value::Table(t)) = (counted, &value) {
                t.set(COUNTED, true)?;
            }
            Ok(value)
        };
        let acl_mode = &bridge.acl_check;
        let run = scope.create_function(move |lua, (): ()| {
            if acl_mode.get() { acl_check_cmd(lua).map(Value::Boolean) } else { raw(lua) }
        })?;
        *bridge.run.borrow_mut() = Some(run);
        let g = lua.globals();
        // One string at a time: mlua holds every Lua string Rust holds in a slot of a thread
        // of its own, and that thread has only 8,000 (`LUAI_MAXCSTACK`).
        let sequence = |items: &[Bytes]| -> mlua::Result<Table> {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, lua.create_string(&item[..])?)?;
            }
            Ok(t)
        };
        let key_table = sequence(keys)?;
        let arg_table = sequence(args)?;
        if matches!(target, Target::Script(_)) {
            g.raw_set("KEYS", key_table.clone())?;
            g.raw_set("ARGV", arg_table.clone())?;
        }
        let kill = scripts.kill.clone();
        let b = bridge.clone();
        lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |lua, _| {
            if kill.load(Relaxed) {
                return Err(stop(lua, killed()));
            }
            if until.is_some_and(|until| Instant::now() >= until) {
                b.abandoned.set(true);
                return Err(stop(lua, abandoned()));
            }
            Ok(VmState::Continue)
        });
        let out: MultiValue = runner.call((f.clone(), key_table, arg_table))?;
        let mut out = out.into_iter();
        let ok = matches!(out.next(), Some(Value::Boolean(true)));
        let value = out.next().unwrap_or(Value::Nil);
        let counted = matches!(&value, Value::Table(t) if t.raw_get::<bool>(COUNTED).unwrap_or(false));
        facts.error_counted.set(counted);
        Ok(if ok { lua_to_reply(&value, bridge.resp3.get()) } else { error_reply(&value) })
    });
    lua.remove_hook();
    // The scope's functions are gone: the command functions refuse until the next one.
    bridge.run.borrow_mut().take();
    bridge.acl_check.set(false);
    bridge.argv.borrow_mut().take();
    if bridge.abandoned.get() {
        return Err(Abandoned);
    }
    for tally in tallies.into_inner() {
        match tally {
            Tally::Count(info, usec, failed) => host.count(info, usec, failed),
            Tally::Error(refused, text) => host.count_error(refused, &text),
        }
    }
    Ok(result.unwrap_or_else(|e| Reply::Error(format!("ERR Error running script: {}", lua_message(&e)))))
}

/// Whether a command a script runs publishes (the server's own commands it may run are
/// PUBLISH, SPUBLISH, TIME and INFO).
fn publishes(argv: &[Bytes]) -> bool {
    argv[0].eq_ignore_ascii_case(b"publish") || argv[0].eq_ignore_ascii_case(b"spublish")
}

/// Ends the running invocation with `error`: from now on every line fails, as Redis stops a
/// killed script (a pcall catches one error, the next line outside it ends the script).
fn stop(lua: &Lua, error: mlua::Error) -> mlua::Error {
    let again = error.clone();
    lua.set_hook(HookTriggers::EVERY_LINE, move |_, _| Err(again.clone()));
    error
}

/// The error an attempt on the event loop stops with when it gives up.
fn abandoned() -> mlua::Error {
    mlua::Error::RuntimeError("ERR the script runs on the script thread".into())
}

/// What a command that may grow memory answers when `maxmemory` is exceeded.
const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The error a killed script stops with.
fn killed() -> mlua::Error {
    mlua::Error::RuntimeError("Script killed by user with SCRIPT KILL...".into())
}

/// The checks Redis makes on a command a script runs; `Ok(None)` for a command the server
/// answers itself.
fn check_command(
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

/// A failed script's reply: the error table's text, with Redis' `script: …, on
/// @user_script:N.` suffix when the error has a place.
fn error_reply(value: &Value) -> Reply {
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
fn lua_to_reply(value: &Value, resp3: bool) -> Reply {
    lua_to_reply_at(value, resp3, 0)
}

/// Nesting past which a reply ends in Redis' "reached lua stack limit" error (a table that
/// holds itself would never end).
const MAX_REPLY_DEPTH: usize = 1000;

fn lua_to_reply_at(value: &Value, resp3: bool, depth: usize) -> Reply {
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
fn resp_to_lua(lua: &Lua, bytes: &[u8], at: &mut usize) -> mlua::Result<Value> {
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

/// Lua BitOp's `bit` library, as Redis ships it (32-bit results).
fn bit_library(lua: &Lua) -> mlua::Result<Table> {
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

/// `cjson.encode` / `cjson.decode`, as Redis' lua-cjson converts (tables with a sequence are
/// arrays, others objects; numbers print as `%.14g`).
fn cjson_library(lua: &Lua) -> mlua::Result<Table> {
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
struct CjsonConfig {
    encode_max_depth: i64,
    decode_max_depth: i64,
    /// 0: NaN and Inf are errors; 1: written as `nan`/`inf`; 2: written as `null`.
    invalid_numbers: u8,
    /// Kept for `encode_keep_buffer`'s answer; buffers are not kept between calls here.
    keep_buffer: bool,
}

impl Default for CjsonConfig {
    fn default() -> Self {
        CjsonConfig { encode_max_depth: 1000, decode_max_depth: 1000, invalid_numbers: 0, keep_buffer: true }
    }
}

fn cjson_config(lua: &Lua) -> CjsonConfig {
    lua.app_data_ref::<CjsonConfig>().map(|c| c.clone()).unwrap_or_default()
}

/// An on/off (or enumerated) setting: a boolean, or one of `options` by name.
fn cjson_switch(lua: &Lua, v: &Value, name: &str, options: &[&str]) -> mlua::Result<u8> {
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

fn encode_json(v: &Value, out: &mut String, depth: usize, config: &CjsonConfig) -> Result<(), String> {
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

fn skip_ws(b: &[u8], at: &mut usize) {
    while *at < b.len() && b[*at].is_ascii_whitespace() {
        *at += 1;
    }
}

fn decode_json(lua: &Lua, b: &[u8], at: &mut usize, depth: usize, max_depth: i64) -> Result<Value, String> {
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

/// SCRIPT subcommands.
pub fn script_command(argv: &[Bytes], scripts: &Scripts) -> Reply {
    if let Some(wrong) = crate::acl::arity_error(argv) {
        return wrong;
    }
    let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    match (sub.as_slice(), argv.len()) {
        (b"load", 3) => {
            let sha = sha1_hex(&argv[2]);
            let skip = match shebang_flags(&argv[2]) {
                Ok(found) => found.map_or(0, |(_, len)| len),
                Err(e) => return Reply::Error(format!("ERR {e}")),
            };
            let compiled = with_vm(scripts, |vm| {
                vm.lua
                    .load(&argv[2][skip..])
                    .set_name("@user_script")
                    .set_mode(mlua::ChunkMode::Text)
                    .into_function()
                    .map(|_| ())
                    .map_err(|e| {
                        Reply::Error(format!(
                            "ERR Error compiling script (new function): {}",
                            lua_message(&e)
                        ))
                    })
            });
            if let Err(e) = compiled {
                return e;
            }
            lock(&scripts.cache).insert(sha.clone(), argv[2].clone());
            Reply::Bulk(sha.into())
        }
        (b"exists", n) if n >= 3 => {
            let cache = lock(&scripts.cache);
            Reply::Array(
                argv[2..]
                    .iter()
                    .map(|s| {
                        Reply::Integer(
                            cache.contains_key(&String::from_utf8_lossy(s).to_ascii_lowercase()) as i64
                        )
                    })
                    .collect(),
            )
        }
        (b"flush", 2 | 3) => {
            if let Some(mode) = argv.get(2)
                && !mode.eq_ignore_ascii_case(b"sync")
                && !mode.eq_ignore_ascii_case(b"async")
            {
                return Reply::Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option".into());
            }
            lock(&scripts.cache).clear();
            scripts.changed();
            Reply::OK
        }
        (b"kill", 2) => scripts.kill(true),
        (b"help", 2) => Reply::Array(
            [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed.",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::status(s))
            .collect(),
        ),
        (b"load" | b"exists" | b"flush" | b"kill" | b"help", _) if argv.len() >= 2 => Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&argv[1])
        )),
        _ if argv.len() < 2 => Reply::Error("ERR wrong number of arguments for 'script' command".into()),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
            String::from_utf8_lossy(&argv[1])
        )),
    }
}

/// FUNCTION subcommands. `save` is called after a change, to keep libraries with the data.
pub fn function_command(argv: &[Bytes], scripts: &Scripts, save: &dyn Fn(&Scripts)) -> Reply {
    let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    let syntax = || {
        Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
            String::from_utf8_lossy(&argv[1])
        ))
    };
    if argv.len() < 2 {
        return Reply::Error("ERR wrong number of arguments for 'function' command".into());
    }
    if let Some(wrong) = crate::acl::arity_error(argv) {
        return wrong;
    }
    let reply = match sub.as_slice() {
        b"load" => {
            let mut replace = false;
            let mut i = 2;
            while i + 1 < argv.len() {
                if argv[i].eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    i += 1;
                } else {
                    return Reply::Error(format!(
                        "ERR Unknown option given: {}",
                        String::from_utf8_lossy(&argv[i])
                    ));
                }
            }
            let Some(code) = argv.get(i) else { return Reply::Error("ERR Function code is missing".into()) };
            match scripts.load_library(&String::from_utf8_lossy(code), replace) {
                Ok(name) => Reply::Bulk(name.into()),
                Err(e) => return Reply::Error(format!("ERR {e}")),
            }
        }
        b"delete" if argv.len() == 3 => {
            let name = String::from_utf8_lossy(&argv[2]).into_owned();
            if lock(&scripts.libraries).remove(&name).is_none() {
                return Reply::Error("ERR Library not found".into());
            }
            scripts.changed();
            Reply::OK
        }
        b"flush" if argv.len() <= 3 => {
            if let Some(mode) = argv.get(2)
                && !mode.eq_ignore_ascii_case(b"sync")
                && !mode.eq_ignore_ascii_case(b"async")
            {
                return Reply::Error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into());
            }
            lock(&scripts.libraries).clear();
            scripts.changed();
            Reply::OK
        }
        b"kill" if argv.len() == 2 => return scripts.kill(false),
        b"list" => {
            let (mut pattern, mut with_code) = (None, false);
            let mut i = 2;
            while i < argv.len() {
                // Each option once, as Redis: a repeat is an unknown argument.
                if argv[i].eq_ignore_ascii_case(b"withcode") && !with_code {
                    with_code = true;
                } else if argv[i].eq_ignore_ascii_case(b"libraryname") && pattern.is_none() {
                    let Some(p) = argv.get(i + 1) else {
                        return Reply::Error("ERR library name argument was not given".into());
                    };
                    pattern = Some(rediskv::commands::args::Glob::new(p));
                    i += 1;
                } else {
                    return Reply::Error(format!(
                        "ERR Unknown argument {}",
                        String::from_utf8_lossy(&argv[i])
                    ));
                }
                i += 1;
            }
            let libs = lock(&scripts.libraries);
            let pair = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
            let items = libs
                .iter()
                .filter(|(name, _)| pattern.as_ref().is_none_or(|g| g.matches(name.as_bytes())))
                .map(|(name, lib)| {
                    let functions = lib
                        .functions
                        .iter()
                        .map(|f| {
                            Reply::Map(vec![
                                pair("name", Reply::bulk(f.name.as_bytes())),
                                pair(
                                    "description",
                                    f.description.as_ref().map_or(Reply::Nil, |d| Reply::bulk(d.as_bytes())),
                                ),
                                pair(
                                    "flags",
                                    Reply::Set(
                                        f.flags.iter().map(|s| Reply::Status(s.clone().into())).collect(),
                                    ),
                                ),
                            ])
                        })
                        .collect();
                    let mut fields = vec![
                        pair("library_name", Reply::bulk(name.as_bytes())),
                        pair("engine", Reply::bulk(b"LUA")),
                        pair("functions", Reply::Array(functions)),
                    ];
                    if with_code {
                        fields.push(pair("library_code", Reply::bulk(lib.code.as_bytes())));
                    }
                    Reply::Map(fields)
                })
                .collect();
            return Reply::Array(items);
        }
        b"stats" if argv.len() == 2 => {
            let pair = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
            let running = lock(&scripts.running);
            let script = match running.as_ref() {
                Some(r) => Reply::Map(vec![
                    pair("name", Reply::bulk(r.function.as_deref().unwrap_or("").as_bytes())),
                    pair("command", Reply::Array(r.command.iter().cloned().map(Reply::Bulk).collect())),
                    pair("duration_ms", Reply::Integer(r.since.elapsed().as_millis() as i64)),
                ]),
                None => Reply::Nil,
            };
            let libs = lock(&scripts.libraries);
            let functions: usize = libs.values().map(|l| l.functions.len()).sum();
            return Reply::Map(vec![
                pair("running_script", script),
                pair(
                    "engines",
                    Reply::Map(vec![pair(
                        "LUA",
                        Reply::Map(vec![
                            pair("libraries_count", Reply::Integer(libs.len() as i64)),
                            pair("functions_count", Reply::Integer(functions as i64)),
                        ]),
                    )]),
                ),
            ]);
        }
        b"help" if argv.len() == 2 => {
            return Reply::Array(FUNCTION_HELP.iter().map(|s| Reply::status(s)).collect());
        }
        b"dump" if argv.len() == 2 => {
            let libs = lock(&scripts.libraries);
            return Reply::Bulk(
                rediskv::codec::rdb::dump_functions(libs.values().map(|l| l.code.as_bytes())).into(),
            );
        }
        b"restore" if argv.len() <= 4 => {
            let policy = match argv.get(3).map(|p| p.to_ascii_lowercase()) {
                None => Policy::Append,
                Some(p) if p == b"append" => Policy::Append,
                Some(p) if p == b"replace" => Policy::Replace,
                Some(p) if p == b"flush" => Policy::Flush,
                Some(_) => {
                    return Reply::Error(
                        "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
                            .into(),
                    );
                }
            };
            match scripts.restore(&argv[2], policy) {
                Ok(()) => Reply::OK,
                Err(e) => return Reply::Error(format!("ERR {e}")),
            }
        }
        b"delete" | b"flush" | b"kill" | b"stats" | b"help" | b"dump" | b"restore" => return syntax(),
        _ => {
            return Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try FUNCTION HELP.",
                String::from_utf8_lossy(&argv[1])
            ));
        }
    };
    save(scripts);
    reply
}

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Marks a script as running from now on, as `eval` does before it runs one.
    fn start(scripts: &Scripts) {
        *lock(&scripts.running) = Some(Running {
            since: Instant::now(),
            function: None,
            command: Vec::new(),
            wrote: false,
            oom: false,
        });
        scripts.active.store(true, Relaxed);
    }

    /// Commands arriving during a script wait and get BUSY at the threshold, wherever the
    /// threshold falls among their checks: never let through while the script runs. Eight
    /// threads wait on each of 1,000 scripts.
    #[test]
    fn commands_during_a_script_wait_for_busy() {
        let scripts = Scripts::default();
        let ping = [Bytes::from_static(b"PING")];
        for _ in 0..1000 {
            start(&scripts);
            std::thread::scope(|s| {
                for _ in 0..8 {
                    s.spawn(|| {
                        let reply = scripts.wait_or_busy(1, &ping);
                        assert!(
                            matches!(&reply, Some(Reply::Error(e)) if e.starts_with("BUSY ")),
                            "{reply:?}"
                        );
                    });
                }
            });
        }
        // SCRIPT KILL goes through; once the script ends, everything does.
        assert!(
            scripts.wait_or_busy(1, &[Bytes::from_static(b"SCRIPT"), Bytes::from_static(b"KILL")]).is_none()
        );
        scripts.end_running();
        assert!(scripts.wait_or_busy(1, &ping).is_none());
    }

    /// Commands waiting for a script go on once it has ended, never while it runs; a wait
    /// that missed the script's end would hold them a minute each.
    #[test]
    fn commands_waiting_for_a_script_go_on_at_its_end() {
        let scripts = Scripts::default();
        let ping = [Bytes::from_static(b"PING")];
        for _ in 0..100 {
            start(&scripts);
            let ended = AtomicBool::new(false);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        assert!(scripts.wait_or_busy(60_000, &ping).is_none());
                        assert!(ended.load(Relaxed), "let through while the script ran");
                    });
                }
                std::thread::yield_now();
                ended.store(true, Relaxed);
                scripts.end_running();
            });
        }
    }
}
