//! The registry: the script cache, the function libraries (FUNCTION LOAD, RESTORE, their
//! metadata and flags), the running script's slot with BUSY and SCRIPT/FUNCTION KILL, and
//! what a script command declares (its `#!lua` flags, its function's flags) for the gate.

use super::*;

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
pub(super) struct Running {
    pub(super) since: Instant,
    /// It is a function (FCALL): the command's second argument names it.
    pub(super) function: bool,
    /// The command that started it (FUNCTION STATS), packed by [`pack_command`].
    pub(super) command: Vec<u8>,
}

/// A command's arguments in one buffer, each after its length (8 bytes, little-endian): one
/// copy, where shared `Bytes` would cost a locked instruction for each clone and each drop.
pub(super) fn pack_command(argv: &[Bytes]) -> Vec<u8> {
    let mut packed = Vec::with_capacity(argv.iter().map(|a| a.len() + 8).sum());
    for arg in argv {
        packed.extend_from_slice(&(arg.len() as u64).to_le_bytes());
        packed.extend_from_slice(arg);
    }
    packed
}

/// The arguments [`pack_command`] packed.
pub(super) fn unpack_command(mut packed: &[u8]) -> Vec<&[u8]> {
    let mut argv = Vec::new();
    while let Some((len, rest)) = packed.split_first_chunk::<8>() {
        let len = (u64::from_le_bytes(*len) as usize).min(rest.len());
        argv.push(&rest[..len]);
        packed = &rest[len..];
    }
    argv
}

/// The script cache, the function libraries and the running script, shared by every thread.
#[derive(Default)]
pub struct Scripts {
    pub(super) cache: Mutex<HashMap<String, Bytes>>,
    pub(super) libraries: Mutex<BTreeMap<String, Library>>,
    /// Bumped by SCRIPT FLUSH and every library change: thread states rebuild.
    pub(super) generation: AtomicU64,
    pub(super) running: Mutex<Option<Running>>,
    /// Signalled when `running` empties, for the commands waiting in the gate (counted by
    /// `waiting`, under `running`'s lock, so that a script's end wakes no one in vain).
    pub(super) ended: Condvar,
    pub(super) waiting: AtomicUsize,
    /// A script runs, or is on its way from its event loop to the script thread (the gate
    /// checks for BUSY only then).
    pub(super) active: AtomicBool,
    /// Scripts that gave up on their event loop while they ran and that the script thread
    /// has not started again yet: meanwhile a script is running, as far as other clients
    /// can tell (changed under `running`'s lock).
    pub(super) handing: AtomicUsize,
    pub(super) kill: Arc<AtomicBool>,
    /// The running script ran a write command: it cannot be killed (set by the thread that
    /// runs it, without `running`'s lock; cleared when a script claims `running`).
    pub(super) wrote: AtomicBool,
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

pub(super) const FLAGS: [&str; 5] =
    ["no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys"];

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
            let Some(since) = running.as_ref().map(|r| r.since) else {
                if self.handing.load(Relaxed) == 0 {
                    return None;
                }
                // A script on its way to the script thread: wait for it to start there.
                self.waiting.fetch_add(1, Relaxed);
                running = self.ended.wait_timeout(running, threshold).unwrap_or_else(|e| e.into_inner()).0;
                self.waiting.fetch_sub(1, Relaxed);
                continue;
            };
            let left = threshold.checked_sub(since.elapsed());
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
    /// script runs (and, on an event loop, none is on its way to the script thread);
    /// otherwise after the running one ends when `wait`, else not (`false`). `handed`: the
    /// script gave up on its event loop while it ran (see [`Scripts::end_running`]).
    pub(super) fn claim(&self, running: Running, wait: bool, handed: bool) -> bool {
        let mut slot = lock(&self.running);
        while slot.is_some() || (!wait && self.handing.load(Relaxed) > 0) {
            if !wait {
                return false;
            }
            self.waiting.fetch_add(1, Relaxed);
            slot = self.ended.wait(slot).unwrap_or_else(|e| e.into_inner());
            self.waiting.fetch_sub(1, Relaxed);
        }
        if handed {
            self.handing.fetch_sub(1, Relaxed);
        }
        self.kill.store(false, Relaxed);
        self.wrote.store(false, Relaxed);
        *slot = Some(running);
        self.active.store(true, Relaxed);
        // Commands waiting for a script on its way here time it from now.
        if self.waiting.load(Relaxed) > 0 {
            self.ended.notify_all();
        }
        true
    }

    /// Marks the running script ended and wakes the commands waiting for it; `handing`: it
    /// gave up on its event loop and goes on to the script thread, where [`Scripts::claim`]
    /// takes it (until then a script still runs, as other clients see it).
    pub(super) fn end_running(&self, handing: bool) {
        let mut running = lock(&self.running);
        *running = None;
        if handing {
            self.handing.fetch_add(1, Relaxed);
        }
        self.active.store(self.handing.load(Relaxed) > 0, Relaxed);
        if self.waiting.load(Relaxed) > 0 {
            self.ended.notify_all();
        }
    }

    pub(super) fn allowed_while_busy(&self, argv: &[Bytes]) -> bool {
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
        let text = if r.function {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        } else {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        };
        Some(Reply::Error(text.into()))
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL.
    pub(super) fn kill(&self, eval: bool) -> Reply {
        let running = lock(&self.running);
        let Some(r) = running.as_ref() else {
            return Reply::Error("NOTBUSY No scripts in execution right now.".into());
        };
        if self.wrote.load(Relaxed) {
            return Reply::Error(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.".into(),
            );
        }
        match (eval, r.function) {
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

    /// The code of the cached script of SHA1 `sha` (any case).
    pub(super) fn cached(&self, sha: &[u8]) -> Option<Bytes> {
        let sha = ShaKey::parse(sha)?;
        lock(&self.cache).get(sha.as_str()).cloned()
    }

    pub(super) fn changed(&self) {
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
    pub(super) fn load_library(&self, code: &str, replace: bool) -> Result<String, String> {
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
pub(super) fn build_library(code: &str) -> Result<(String, Library), String> {
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
pub(super) enum Policy {
    Flush,
    Append,
    Replace,
}

impl Scripts {
    /// FUNCTION RESTORE: joins the payload's libraries to the current ones under `policy`,
    /// all or nothing, with Redis' errors.
    pub(super) fn restore(&self, payload: &[u8], policy: Policy) -> Result<(), String> {
        let codes = rediskv::rdb::restore_functions(payload).map_err(|e| match e {
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

/// `#!lua name=<lib>` → (name, code after the first line).
pub(super) fn library_metadata(code: &str) -> Result<(String, String), String> {
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

/// The SHA1 of `bytes`, lowercase hex (SCRIPT LOAD, `redis.sha1hex`).
pub fn sha1_hex(bytes: &[u8]) -> String {
    ShaKey::of(bytes).as_str().to_string()
}

/// The flags of an EVAL script's `#!lua flags=a,b` first line, and that line's length;
/// `None` for a script without one.
///
/// # Errors
/// Redis' texts for a bad shebang.
pub(super) fn shebang_flags(body: &[u8]) -> Result<Option<(Vec<String>, usize)>, String> {
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
pub(super) fn declared(
    scripts: &Scripts,
    name: &str,
    argv: &[Bytes],
    test: impl Fn(&[String]) -> bool,
) -> bool {
    match name {
        "eval" | "eval_ro" => {
            matches!(argv.get(1).map(|b| shebang_flags(b)), Some(Ok(Some((flags, _)))) if test(&flags))
        }
        "evalsha" | "evalsha_ro" => {
            let body = argv.get(1).and_then(|sha| scripts.cached(sha));
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
        argv.get(1).and_then(|sha| scripts.cached(sha))
    } else {
        argv.get(1).cloned()
    };
    match body.map(|b| shebang_flags(&b)) {
        Some(Ok(Some((flags, _)))) => !flags.iter().any(|f| f == "no-writes"),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packed command gives back its arguments, empty and binary ones included.
    #[test]
    fn packed_commands_unpack() {
        let argv: Vec<Bytes> = [&b"fcall"[..], b"f", b"", b"\x00\xff\r\n", b"1"]
            .iter()
            .map(|a| Bytes::copy_from_slice(a))
            .collect();
        let packed = pack_command(&argv);
        let unpacked = unpack_command(&packed);
        assert_eq!(unpacked, argv.iter().map(|a| &a[..]).collect::<Vec<_>>());
        assert!(unpack_command(&pack_command(&[])).is_empty());
    }

    /// A chunk assigns a global when its code or a function it defines has `SETGLOBAL`, in a
    /// dump stripped or not; reads, locals, table fields and upvalues assign none; bytes that
    /// are not a whole Lua 5.1 dump answer nothing.
    #[test]
    fn assigns_globals_reads_the_bytecode() {
        let lua = Lua::new();
        let assigns = |code: &str, strip: bool| {
            let f = lua.load(code).into_function().expect("compiles");
            assigns_globals(&f.dump(strip))
        };
        for strip in [true, false] {
            let reads = "local v = redis.call('get', KEYS[1]) return redis.call('incr', KEYS[1])";
            assert_eq!(assigns(reads, strip), Some(false));
            assert_eq!(assigns("local t = {x = 1, 2.5, 'a', true} t.y = nil return t", strip), Some(false));
            assert_eq!(assigns("local u = 1 local function f() u = 2 end f() return u", strip), Some(false));
            assert_eq!(assigns("x = 1", strip), Some(true));
            assert_eq!(
                assigns("local function f() return function() y = 2 end end return f", strip),
                Some(true)
            );
        }
        let dump = lua.load("return KEYS[1]").into_function().expect("compiles").dump(false);
        assert_eq!(assigns_globals(&dump[..dump.len() - 1]), None);
        assert_eq!(assigns_globals(&[dump.as_slice(), b"x"].concat()), None);
        assert_eq!(assigns_globals(b"return 1"), None);
        assert_eq!(assigns_globals(&[]), None);
    }

    /// A function keeps or passes on its first two arguments when its own code copies,
    /// calls, returns or captures them, uses them as keys, `self` or operands, or takes
    /// `...`; indexing, length, tests, comparisons and stores into them keep nothing.
    #[test]
    fn keeps_arguments_reads_the_bytecode() {
        let lua = Lua::new();
        let keeps = |code: &str| {
            let chunk = format!("return {code}");
            let f: mlua::Function = lua.load(chunk).eval().expect("a function");
            keeps_arguments(&f.dump(true))
        };
        for code in [
            "function(keys) local v = redis.call('get', keys[1]) return redis.call('incr', keys[1]) end",
            "function(keys, args) for i = 1, #keys do redis.call('set', keys[i], args[i]) end return #args end",
            "function(k, a) if k and k == a then k[1] = a[2] end local t = {k[1], a[1]} return t end",
            "function() local t = {} return t end",
        ] {
            assert_eq!(keeps(code), Some(false), "{code}");
        }
        for code in [
            "function(keys) return keys end",
            "function(keys, args) return args end",
            "function(keys) local k = keys return k[1] end",
            "function(keys) saved = keys end",
            "function(keys) local t = {} t.k = keys end",
            "function(keys) local t = {} t[keys] = 1 end",
            "function(keys) local t = {} return t[keys] end",
            "function(keys) return {keys} end",
            "function(keys) return redis.call('get', unpack(keys)) end",
            "function(keys) return keys:find() end",
            "function(keys) return function() return keys end end",
            "function(keys, args) local x = args or 1 return x end",
            "function(keys) return 1 + keys end",
            "function(keys) for k, v in pairs(keys) do end end",
            "function(...) local keys = ... return keys[1] end",
            // Its register is read as a whole, whatever it holds by then.
            "function(keys) keys = {} return keys end",
        ] {
            assert_eq!(keeps(code), Some(true), "{code}");
        }
        assert_eq!(keeps_arguments(b"function"), None);
    }

    /// The one line a chunk's code is on: after leading line feeds, before trailing white
    /// space; none for code on two lines, or with a carriage return (a line break to Lua).
    #[test]
    fn single_line_finds_the_code_line() {
        assert_eq!(single_line(b"return redis.call('get', KEYS[1])"), Some(1));
        assert_eq!(single_line(b"\nreturn 1\n\n"), Some(2));
        assert_eq!(single_line(b"\n \n\treturn 1 "), Some(3));
        assert_eq!(single_line(b"local x = 1\nreturn x"), None);
        assert_eq!(single_line(b"local x = 1\rreturn x"), None);
        assert_eq!(single_line(b"\r\nreturn 1"), None);
        assert_eq!(single_line(b"return [[a\nb]]"), None);
        assert_eq!(single_line(b" \n "), None);
        assert_eq!(single_line(b""), None);
    }

    /// Marks a script as running from now on, as `eval` does before it runs one.
    fn start(scripts: &Scripts) {
        *lock(&scripts.running) =
            Some(Running { since: Instant::now(), function: false, command: Vec::new() });
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
        scripts.end_running(false);
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
                scripts.end_running(false);
            });
        }
    }
}
