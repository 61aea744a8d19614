//! Running a script command: EVAL, EVALSHA, FCALL and their read-only forms, from the
//! arguments to the reply, atomically in the engine, on the event loop or the script thread
//! (see [`Caller::inline_until`]), with what the run owes its client ([`RunFacts`]).

use super::*;

/// A script to run on the script thread for a parked client.
pub struct Job {
    /// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL or FCALL_RO, and its arguments.
    pub argv: Vec<Bytes>,
    /// The command's lowercase name.
    pub name: String,
    /// The client's session, handed back with the answer.
    pub session: rediskv::Session,
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
    /// The script gave up on the client's event loop while it ran ([`RunFacts::handing`]).
    pub handed: bool,
    /// Where the answer goes when the client waits for it in place (a script queued in a
    /// transaction, whose reply is a slot of EXEC's) rather than parked.
    pub answer: Option<std::sync::mpsc::Sender<Answer>>,
}

/// A script's reply, the invalidation pushes it owes its client, and the client's session.
pub type Answer = (Reply, Vec<u8>, Box<rediskv::Session>);

/// How long a script may run on the event loop that received it before it gives up and runs
/// on the script thread: the most a script holds up the other clients of its loop.
pub const INLINE_BUDGET: Duration = Duration::from_millis(2);

/// The stack of a thread that runs scripts: Lua's C recursion and deep replies need more than
/// a default thread's 2 MB.
pub const STACK_SIZE: usize = 64 << 20;

/// Lua instructions between two looks at SCRIPT KILL and the inline budget.
pub(super) const HOOK_EVERY: u32 = 10_000;

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
    /// Counts a command a script ran in INFO commandstats, as a client's, in counter lane
    /// `lane` ([`Caller::lane`]).
    fn count(&self, lane: usize, info: &table::CommandInfo, usec: u64, failed: bool);
    /// Counts an error a command a script ran answered or was refused with (INFO
    /// errorstats), and a refused command's `rejected_calls`.
    fn count_error(&self, refused: Option<&table::CommandInfo>, error: &str);
    /// Whether a script may run `info`, a command the server answers itself (its family is
    /// [`table::Family::Server`]).
    fn runs_for_scripts(&self, info: &table::CommandInfo) -> bool;
    /// Runs such a command for a script.
    fn server_command(&self, info: &'static table::CommandInfo, argv: &[Bytes]) -> Reply;
    /// Whether a PUBLISH a script ran reaches the replicas (not in cluster mode, as Redis).
    fn replicates_publish(&self) -> bool;
}

/// What the scripting commands need of the client that runs them.
pub struct Caller<'a> {
    /// The server around the script.
    pub host: &'a dyn Host,
    /// The engine of its namespace.
    pub engine: &'a SharedEngine,
    /// Its session (database, MULTI).
    pub session: &'a mut rediskv::Session,
    /// Its ACL check for each command a script runs: `Err(text)` refuses it.
    pub acl: &'a dyn Fn(&[Bytes]) -> Result<(), String>,
    /// `Some(deadline)` on the client's event loop: the script gives up, having written
    /// nothing, published nothing and counted nothing, when another script runs, when it
    /// would publish, or at `deadline` (then [`RunFacts::abandoned`] is set and the reply
    /// means nothing). `None` on the script thread: it waits its turn and runs to its end.
    pub inline_until: Option<Instant>,
    /// On the script thread: the script gave up on its event loop while it ran
    /// ([`RunFacts::handing`]), and starts here as the script on its way.
    pub handed: bool,
    /// The counter lane of the thread it runs on (INFO commandstats): its event loop's index,
    /// or any past the loops' for the script thread.
    pub lane: usize,
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
    /// It gave up while it ran (not for another script that ran): until the script thread
    /// starts it again, other clients see a script running.
    pub handing: Cell<bool>,
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
    let sha = if by_sha {
        match ShaKey::parse(&argv[1]) {
            Some(sha) => sha,
            None => return noscript(),
        }
    } else {
        ShaKey::of(&argv[1])
    };
    let found = with_vm(scripts, |vm| {
        if let Some(compiled) = vm.scripts.get(&sha) {
            return Ok(compiled.flags);
        }
        // First run on this thread: the code from the shared cache (EVALSHA) or the command.
        let body = if by_sha {
            match lock(&scripts.cache).get(sha.as_str()) {
                Some(body) => body.clone(),
                None => return Err(noscript()),
            }
        } else {
            argv[1].clone()
        };
        let compiled = compile(&vm.lua, &body)?;
        let flags = compiled.flags;
        vm.scripts.insert(sha, compiled);
        Ok(flags)
    });
    let flags = match found {
        Ok(flags) => flags,
        Err(e) => return e,
    };
    if read_only && flags.declared && !flags.no_writes {
        return Reply::Error("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    if !by_sha {
        lock(&scripts.cache).entry(sha.as_str().to_string()).or_insert_with(|| argv[1].clone());
    }
    run(
        caller,
        Target::Script(sha),
        keys,
        args,
        read_only || (flags.declared && flags.no_writes),
        flags.allow_oom,
        argv,
    )
}

/// EVALSHA's error for a script not in the cache.
fn noscript() -> Reply {
    Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into())
}

/// A script compiled in a thread's Lua state, with what its `#!lua` line declares.
pub(super) struct Compiled {
    /// The compiled chunk, in the registry.
    pub(super) raw: RawRef,
    pub(super) flags: ScriptFlags,
    /// The one line all its code is on, if it is (see [`single_line`]).
    pub(super) line: Option<i32>,
}

/// What a script's `#!lua flags=…` line declares (Redis 7.0); without one, compat mode.
#[derive(Clone, Copy, Default)]
pub(super) struct ScriptFlags {
    /// It has the line.
    pub(super) declared: bool,
    pub(super) no_writes: bool,
    pub(super) allow_oom: bool,
}

/// Compiles a script's code with its flags, or Redis' error for its `#!lua` line or its code.
fn compile(lua: &Lua, body: &[u8]) -> Result<Compiled, Reply> {
    let (flags, shebang_len) = match shebang_flags(body) {
        Ok(found) => found.unwrap_or_default(),
        Err(e) => return Err(Reply::Error(format!("ERR {e}"))),
    };
    let flags = ScriptFlags {
        declared: shebang_len > 0,
        no_writes: flags.iter().any(|f| f == "no-writes"),
        allow_oom: flags.iter().any(|f| f == "allow-oom"),
    };
    // The shebang line goes, its line feed stays: line numbers are the user's.
    let function = lua
        .load(&body[shebang_len..])
        .set_name(SCRIPT_CHUNK)
        .set_mode(mlua::ChunkMode::Text)
        .into_function()
        .map_err(|e| {
            Reply::Error(format!("ERR Error compiling script (new function): {}", lua_message(&e)))
        })?;
    set_fast_env(lua, &function).map_err(|e| Reply::Error(format!("ERR {e}")))?;
    let (_, raw) = raw_ref(lua, &function).map_err(|e| Reply::Error(format!("ERR {e}")))?;
    Ok(Compiled { raw, flags, line: single_line(&body[shebang_len..]) })
}

/// A script's SHA1 as 40 lowercase hex digits, the key of the threads' compiled scripts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct ShaKey([u8; 40]);

/// Hashed by its first 16 hex digits (see [`ShaHasher`]).
impl std::hash::Hash for ShaKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let word = |at: usize| u64::from_le_bytes(head_of(&self.0[at..at + 8]));
        state.write_u64(word(0) ^ word(8).rotate_left(29));
    }
}

impl ShaKey {
    /// The SHA1 EVALSHA names (any case); `None` for what no script's SHA1 is.
    pub(super) fn parse(text: &[u8]) -> Option<ShaKey> {
        let mut key = [0; 40];
        if text.len() != 40 || !text.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        for (k, c) in key.iter_mut().zip(text) {
            *k = c.to_ascii_lowercase();
        }
        Some(ShaKey(key))
    }

    /// The SHA1 of a script's code.
    pub(super) fn of(body: &[u8]) -> ShaKey {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut key = [0; 40];
        for (pair, b) in key.chunks_mut(2).zip(Sha1::digest(body)) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 15)];
        }
        ShaKey(key)
    }

    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("hex digits")
    }
}

/// Eight bytes of `bytes` (at most; zeros after).
fn head_of(bytes: &[u8]) -> [u8; 8] {
    let mut head = [0; 8];
    let n = bytes.len().min(8);
    head[..n].copy_from_slice(&bytes[..n]);
    head
}

/// The hasher of [`ShaKey`]s: a SHA1's digits are evenly spread, so the 64 bits the key hands
/// it are the hash.
#[derive(Default)]
pub(super) struct ShaHasher(u64);

impl std::hash::Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            self.0 = self.0.rotate_left(29) ^ u64::from_le_bytes(head_of(chunk));
        }
    }
}

/// A thread's compiled scripts by SHA1.
pub(super) type CompiledScripts = HashMap<ShaKey, Compiled, std::hash::BuildHasherDefault<ShaHasher>>;

/// FCALL function numkeys key… arg… (and FCALL_RO).
pub fn fcall(argv: &[Bytes], caller: &mut Caller<'_>, read_only: bool) -> Reply {
    // Function names are found whatever their case; the name, then the key count, is checked
    // (Redis' order, and its FCALL wording for a count that is not a number).
    // This thread's state holds every library's functions with their flags.
    let found = with_vm(caller.host.scripts(), |vm| {
        let named = vm.functions.iter().find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(&argv[1]));
        let function = named.map(|(_, f)| {
            (Target::Function(f.name.clone(), f.raw, f.line, f.lends), f.no_writes, f.allow_oom)
        });
        function.ok_or_else(|| Reply::Error("ERR Function not found".into()))
    });
    let (target, no_writes, allow_oom) = match found {
        Ok(found) => found,
        Err(e) => return e,
    };
    let Some(n) = parse_i64(&argv[2]) else { return Reply::Error("ERR Bad number of keys provided".into()) };
    if n > (argv.len() - 3) as i64 {
        return Reply::Error("ERR Number of keys can't be greater than number of args".into());
    }
    let (keys, args) = match split_keys(argv) {
        Ok(split) => split,
        Err(e) => return e,
    };
    if read_only && !no_writes {
        return Reply::Error("ERR Can not execute a script with write flag using *_ro command.".into());
    }
    run(caller, target, keys, args, read_only || no_writes, allow_oom, argv)
}

/// numkeys, keys and arguments of EVAL/FCALL, or Redis' errors.
pub fn split_keys(argv: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), Reply> {
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
    Ok((&argv[3..3 + n], &argv[3 + n..]))
}

pub(super) enum Target {
    Script(ShaKey),
    /// A function found in the thread's state: its name as registered, the function, the
    /// one line all its library's code is on, if it is, and whether it gets the state's
    /// tables (see [`VmFunction::lends`]).
    Function(Rc<str>, RawRef, Option<i32>, bool),
}

/// Runs a script or function atomically and converts its result.
pub(super) fn run(
    caller: &mut Caller<'_>,
    target: Target,
    keys: &[Bytes],
    args: &[Bytes],
    read_only: bool,
    allow_oom: bool,
    argv: &[Bytes],
) -> Reply {
    let host = caller.host;
    let scripts = host.scripts();
    let db = caller.session.db();

    let (acl, engine, facts, until, handed, lane) =
        (caller.acl, caller.engine, &caller.facts, caller.inline_until, caller.handed, caller.lane);
    let result = with_vm(scripts, |vm| {
        let lua = &vm.lua;
        let (f, line) = match &target {
            Target::Script(sha) => match vm.scripts.get(sha) {
                Some(compiled) => (compiled.raw, compiled.line),
                None => return Err(noscript()),
            },
            Target::Function(_, raw, line, _) => (*raw, *line),
        };
        // Running before the engine's whole-keyspace lock is asked for: from then on a
        // command of another client waits in the gate for the script's end or BUSY, never
        // for that lock (one script runs at a time).
        let running = Running {
            since: Instant::now(),
            function: matches!(target, Target::Function(..)),
            command: pack_command(argv),
        };
        // Out of memory when it starts, and not allowed to ignore it (`allow-oom`): its first
        // command that may grow memory fails with OOM, as in Redis.
        let oom = !allow_oom && host.out_of_memory();
        if !scripts.claim(running, until.is_none(), handed) {
            facts.abandoned.set(true);
            return Ok(Reply::Nil);
        }
        let reply = engine.atomically_or_abandon(caller.session, |call| {
            // A store's conflict runs the script again from the start, with nothing written.
            scripts.wrote.store(false, Relaxed);
            facts.read_any.set(false);
            let run = Run {
                bridge: &vm.bridge,
                main: vm.main,
                globals: (vm.handler, vm.fast),
                tables: match &target {
                    Target::Script(_) => Some(vm.tables),
                    Target::Function(.., true) => Some(vm.function_tables),
                    Target::Function(..) => None,
                },
                f,
                line,
                target: &target,
                keys,
                args,
            };
            run_once(lua, run, (read_only, oom, db, lane), acl, host, until, facts, call)
        });
        let gave_up = matches!(reply, Ok(Err(Abandoned)));
        scripts.end_running(gave_up);
        reply.map(|run| {
            run.unwrap_or_else(|Abandoned| {
                facts.abandoned.set(true);
                facts.handing.set(true);
                Reply::Nil
            })
        })
    });
    let reply = result.unwrap_or_else(|e| e);
    // The `script: …` suffix names the script by its SHA1 or the function by its name.
    match reply {
        Reply::Error(e) => {
            let label = match &target {
                Target::Script(sha) => sha.as_str(),
                Target::Function(name, ..) => name,
            };
            Reply::Error(e.replace("\u{0}LABEL\u{0}", label))
        }
        other => other,
    }
}

/// What one attempt calls: the script or function under the error handler, with its keys
/// and arguments.
pub(super) struct Run<'a> {
    /// The state's bridge.
    pub(super) bridge: &'a Rc<Bridge>,
    /// The state's main thread.
    pub(super) main: MainState,
    /// The error handler and the globals' table (see [`Vm`]).
    pub(super) globals: (RawRef, RawRef),
    /// The state's tables for the keys and arguments, if the script or function gets them.
    pub(super) tables: Option<(RawRef, RawRef)>,
    pub(super) f: RawRef,
    /// The one line all the code of `f`'s chunk is on, if it is.
    pub(super) line: Option<i32>,
    pub(super) target: &'a Target,
    pub(super) keys: &'a [Bytes],
    pub(super) args: &'a [Bytes],
}

/// An attempt on the event loop gave up (see [`Caller::inline_until`]).
pub(super) struct Abandoned;

/// A count an attempt owes INFO commandstats and errorstats, made when it does not give up.
pub(super) enum Tally {
    Count(&'static table::CommandInfo, u64, bool),
    Error(Option<&'static table::CommandInfo>, String),
}

/// One attempt: KEYS/ARGV (see [`call_runner`]), the hook for SCRIPT KILL (and the inline deadline `until`),
/// the command functions bound to `call` (lent to the state's bridge for the attempt, see
/// [`Bridge::lend`]), which runs a command by the row [`check_command`] found.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_once(
    lua: &Lua,
    Run { bridge, main, globals, tables, f, line, target, keys, args: arguments }: Run<'_>,
    (read_only, oom, db, lane): (bool, bool, usize, usize),
    acl: &dyn Fn(&[Bytes]) -> Result<(), String>,
    host: &dyn Host,
    until: Option<Instant>,
    facts: &RunFacts,
    call: &mut dyn FnMut(&'static table::CommandInfo, &[Bytes]) -> Reply,
) -> Result<Reply, Abandoned> {
    let scripts = host.scripts();
    bridge.resp3.set(false);
    // Known from the start, the place a mark would note (see `CallSite::begin`).
    bridge.site.begin(
        Some(match target {
            Target::Script(_) => SCRIPT_CHUNK,
            Target::Function(..) => FUNCTION_CHUNK,
        }),
        line,
    );
    bridge.abandoned.set(false);
    let call = RefCell::new(call);
    // This attempt ran a write command ([`Scripts::wrote`]).
    let wrote = Cell::new(false);
    // The state's buffer, kept from run to run.
    let tallies = RefCell::new(std::mem::take(&mut *bridge.tallies.borrow_mut()));
    let count_error = |refused: Option<&'static table::CommandInfo>, text: &str| {
        tallies.borrow_mut().push(Tally::Error(refused, text.to_string()));
    };
    // redis.acl_check_cmd: whether the script's user may run the command.
    let acl_check_cmd = |lua: &Lua, argv: Argv| -> mlua::Result<bool> {
        // Errors are raised as Redis raises them: the error reply as the script's error.
        let raise = |text: &str| -> mlua::Error {
            match error_table(lua, text)
                .and_then(|t| lua.set_named_registry_value("__redis_pending_error", t))
            {
                Ok(()) => mlua::Error::RuntimeError(text.trim_start_matches("ERR ").into()),
                Err(e) => e,
            }
        };
        let argv = argv.map_err(raise)?;
        if crate::acl::resolve(&argv).is_err() {
            return Err(raise("ERR Invalid command passed to redis.acl_check_cmd()"));
        }
        Ok(acl(&argv).is_ok())
    };
    let command = |argv: Argv| -> Outcome {
        let argv = match argv {
            Ok(argv) => argv,
            Err(text) => return Outcome::Refused(text.into(), false),
        };
        let info = match check_command(&argv, &bridge.rows, read_only, acl, host) {
            Ok(info) => info,
            Err(text) => {
                // Refused before running, as Redis counts it.
                let text = format!("ERR {text}");
                count_error(table::find(&argv).ok(), &text);
                return Outcome::Refused(text.into(), true);
            }
        };
        host.monitor(&argv, db);
        if info.family == table::Family::Server {
            // A publish cannot be taken back: an attempt on the event loop gives up before it.
            if until.is_some() && info.has(flag::PUBSUB) {
                bridge.abandoned.set(true);
                return Outcome::Abandon;
            }
            let reply = host.server_command(info, &argv);
            // A PUBLISH joins the script's replication stream, as Redis' does outside
            // cluster mode.
            if info.has(flag::MAY_REPLICATE) && !reply.is_error() && host.replicates_publish() {
                (call.borrow_mut())(info, &argv);
            }
            return Outcome::Reply(reply, false);
        }
        if info.has(flag::READONLY) {
            facts.read_any.set(true);
        }
        if oom && !wrote.get() && info.has(flag::DENYOOM) {
            count_error(Some(info), OOM);
            return Outcome::Refused(OOM.into(), true);
        }
        if info.is_write() {
            if let Some(refusal) = host.write_refusal() {
                count_error(Some(info), &refusal);
                return Outcome::Refused(refusal.into(), true);
            }
            // The running script's first write makes it unkillable.
            if !wrote.replace(true) {
                scripts.wrote.store(true, Relaxed);
            }
        }
        // Counted in INFO commandstats like a client's command, as Redis.
        let started = Instant::now();
        let reply = (call.borrow_mut())(info, &argv);
        let usec = started.elapsed().as_micros() as u64;
        tallies.borrow_mut().push(Tally::Count(info, usec, reply.is_error()));
        let counted = match &reply {
            Reply::Error(e) => {
                count_error(None, e);
                true
            }
            _ => false,
        };
        Outcome::Reply(reply, counted)
    };
    let invocation = Invocation {
        command: &command,
        acl_check: &acl_check_cmd,
        known: Known { keys, args: arguments, names: Some(&bridge.names) },
    };
    let result = bridge.lend(&invocation, || -> mlua::Result<Reply> {
        // The run's hook, installed once and kept while no other replaces it.
        bridge.until.set(until);
        if !bridge.kill.borrow().as_ref().is_some_and(|kill| Arc::ptr_eq(kill, &scripts.kill)) {
            *bridge.kill.borrow_mut() = Some(scripts.kill.clone());
        }
        if !bridge.hooked.replace(true) {
            let b = bridge.clone();
            lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |lua, _| {
                if b.kill.borrow().as_ref().is_some_and(|kill| kill.load(Relaxed)) {
                    return Err(stop(lua, killed()));
                }
                if b.until.get().is_some_and(|until| Instant::now() >= until) {
                    b.abandoned.set(true);
                    return Err(stop(lua, abandoned()));
                }
                Ok(VmState::Continue)
            });
        }
        let is_script = matches!(target, Target::Script(_));
        let (ok, value) =
            match call_runner(lua, main, (globals, f), (keys, arguments), tables, is_script, bridge)? {
                Ran::Reply(reply) => {
                    facts.error_counted.set(false);
                    return Ok(reply);
                }
                Ran::Value(ok, value) => (ok, value),
            };
        let counted = matches!(&value, Value::Table(t) if t.raw_get::<bool>(COUNTED).unwrap_or(false));
        facts.error_counted.set(counted);
        Ok(if ok { lua_to_reply(&value, bridge.resp3.get()) } else { error_reply(&value) })
    });
    bridge.until.set(None);
    if !bridge.hooked.get() {
        // `stop`'s hook.
        lua.remove_hook();
    }
    // The invocation is taken back: the command functions refuse until the next run.
    if bridge.abandoned.get() {
        return Err(Abandoned);
    }
    let mut tallies = tallies.into_inner();
    for tally in tallies.drain(..) {
        match tally {
            Tally::Count(info, usec, failed) => host.count(lane, info, usec, failed),
            Tally::Error(refused, text) => host.count_error(refused, &text),
        }
    }
    *bridge.tallies.borrow_mut() = tallies;
    Ok(result.unwrap_or_else(|e| Reply::Error(format!("ERR Error running script: {}", lua_message(&e)))))
}

/// What [`call_runner`] got back.
enum Ran {
    /// A result it converted itself (a string, a number, a boolean, nil).
    Reply(Reply),
    /// Whether the call succeeded, and the result or error value, for [`lua_to_reply`] or
    /// [`error_reply`].
    Value(bool, Value),
}

/// Calls `f(KEYS, ARGV)` under the error handler (as Redis' `lua_pcall` with its handler),
/// KEYS and ARGV tables of `keys` and `args`: `tables`, the state's, emptied first, for a
/// script (which keeps nothing past its run: it can neither make globals nor change a
/// library's tables, and its result is converted before the next run; they are also its
/// globals `KEYS` and `ARGV`) and for a function that keeps neither
/// ([`VmFunction::lends`]); new ones for another function. Reusing the tables saves about
/// 600 instructions a script, and about 700 a function call, calling `f` without a Lua
/// function around it about 800 (`TESTS=evalsha benches/callgrind_commands.sh`). Answers
/// whether the call succeeded, and the result or the error table: converted here when it is
/// a result of a plain type (in the protocol the bridge's `resp3` holds once it ran), else as
/// an mlua value. The call is made on the main thread's stack, without mlua's handle for each
/// value, its protected-call closures and its conversion of the arguments and results: about
/// 2,000 instructions less a script.
fn call_runner(
    lua: &Lua,
    main: MainState,
    ((handler, fast), f): ((RawRef, RawRef), RawRef),
    (keys, args): (&[Bytes], &[Bytes]),
    tables: Option<(RawRef, RawRef)>,
    script: bool,
    bridge: &Bridge,
) -> mlua::Result<Ran> {
    use mlua::ffi;
    let state = main.0;
    let registry = |state, slot: RawRef| {
        // SAFETY: as below.
        unsafe { ffi::lua_rawgeti(state, ffi::LUA_REGISTRYINDEX, slot.0 as ffi::lua_Integer) };
    };
    // SAFETY: `state` is the main thread of `lua`, alive with it, and no Lua code runs on it
    // now (a script command runs from the event loop, not from Lua), so its stack is mlua's
    // between its calls: this leaves it as it found it. Until `lua_pcall` nothing raises a
    // Lua error (pushes and table stores only; mlua's allocator aborts rather than fail, no
    // memory limit being set); the script's errors end in `lua_pcall`. The `RawRef`s are
    // registry slots `raw_ref` filled in this state.
    let ok = unsafe {
        let top = ffi::lua_gettop(state);
        if ffi::lua_checkstack(state, 8) == 0 {
            return Err(mlua::Error::StackError);
        }
        if let (true, false, Some(tables)) = (script, bridge.keys_set.get(), tables) {
            registry(state, fast);
            for (name, table) in [(c"KEYS", tables.0), (c"ARGV", tables.1)] {
                ffi::lua_pushstring(state, name.as_ptr());
                registry(state, table);
                ffi::lua_rawset(state, -3);
            }
            ffi::lua_settop(state, top);
            bridge.keys_set.set(true);
        }
        registry(state, handler);
        registry(state, f);
        for (items, kept) in [(keys, tables.map(|t| t.0)), (args, tables.map(|t| t.1))] {
            match kept {
                // The state's table, emptied of what the last run left.
                Some(kept) => {
                    registry(state, kept);
                    let table = ffi::lua_gettop(state);
                    ffi::lua_pushnil(state);
                    while ffi::lua_next(state, table) != 0 {
                        ffi::lua_pop(state, 1);
                        ffi::lua_pushvalue(state, -1);
                        ffi::lua_pushnil(state);
                        ffi::lua_rawset(state, table);
                    }
                    ffi::lua_pushnil(state);
                    ffi::lua_setmetatable(state, table);
                }
                None => ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as std::ffi::c_int, 0),
            }
            for (i, item) in items.iter().enumerate() {
                ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
                ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
            }
        }
        let ok = ffi::lua_pcall(state, 2, 1, top + 1) == 0;
        let reply = match ffi::lua_type(state, -1) {
            _ if !ok => None,
            ffi::LUA_TSTRING => {
                let mut len = 0;
                let text = ffi::lua_tolstring(state, -1, &mut len);
                Some(Reply::Bulk(Bytes::copy_from_slice(std::slice::from_raw_parts(text.cast::<u8>(), len))))
            }
            ffi::LUA_TNUMBER => Some(Reply::Integer(ffi::lua_tonumber(state, -1) as i64)),
            // The protocol `redis.setresp` left.
            ffi::LUA_TBOOLEAN => Some(match (ffi::lua_toboolean(state, -1) != 0, bridge.resp3.get()) {
                (b, true) => Reply::Boolean(b),
                (true, false) => Reply::Integer(1),
                (false, false) => Reply::Nil,
            }),
            ffi::LUA_TTABLE => None,
            _ => Some(Reply::Nil),
        };
        if let Some(reply) = reply {
            ffi::lua_settop(state, top);
            return Ok(Ran::Reply(reply));
        }
        // The result or the error, for mlua to take below.
        ffi::lua_setfield(state, ffi::LUA_REGISTRYINDEX, RESULT.as_ptr());
        ffi::lua_settop(state, top);
        ok
    };
    let name = RESULT.to_str().expect("an ASCII name");
    let value: Value = lua.named_registry_value(name)?;
    lua.unset_named_registry_value(name)?;
    Ok(Ran::Value(ok, value))
}

/// Ends the running invocation with `error`: from now on every line fails, as Redis stops a
/// killed script (a pcall catches one error, the next line outside it ends the script).
pub(super) fn stop(lua: &Lua, error: mlua::Error) -> mlua::Error {
    let again = error.clone();
    if let Some(bridge) = lua.app_data_ref::<Rc<Bridge>>() {
        bridge.hooked.set(false);
    }
    lua.set_hook(HookTriggers::EVERY_LINE, move |_, _| Err(again.clone()));
    error
}

/// The error an attempt on the event loop stops with when it gives up.
pub(super) fn abandoned() -> mlua::Error {
    mlua::Error::RuntimeError("ERR the script runs on the script thread".into())
}

/// What a command that may grow memory answers when `maxmemory` is exceeded.
pub(super) const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The error a killed script stops with.
pub(super) fn killed() -> mlua::Error {
    mlua::Error::RuntimeError("Script killed by user with SCRIPT KILL...".into())
}
