//! One client's commands: the AUTH/NOAUTH gate, tenants (Kvrocks namespaces), CLIENT PAUSE
//! and maxmemory gates, the connection-level commands (AUTH, HELLO, CLIENT, RESET, TIME,
//! LASTSAVE, DEBUG, NAMESPACE, CONFIG, INFO, SELECT, FLUSHALL), the counters INFO reports,
//! and CLIENT REPLY. Everything else goes to the library's `Db::execute`.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rediskv::backend::{KvBackend, WriteBatch};
use rediskv::codec::{ColumnFamily, KeyRange};
use rediskv::commands::args::parse_i64;
use rediskv::commands::table::{self, flag};
use rediskv::commands::{Protocol, Reply, Session};

use crate::acl;
use crate::blocking::Parking;
use crate::pubsub::{self, Kind, Subscriptions};
use crate::scripting;
use crate::state::{ClientInfo, DEFAULT_NAMESPACE, Pause, SharedEngine, State, lock, unix_micros};
use crate::tracking;
use crate::{config, info};

/// Commands a tenant (namespace token) may not run: Kvrocks' admin commands. Not the same
/// set as Redis' `admin` flag ([`crate::monitor::ADMIN_SERVER_COMMANDS`]): FLUSHALL is
/// refused to tenants but not admin in Redis.
const ADMIN_ONLY: &[&str] = &[
    "flushall",
    "fsck",
    "compact",
    "save",
    "bgsave",
    "bgrewriteaof",
    "module",
    "config",
    "namespace",
    "debug",
    "shutdown",
    "slowlog",
    "latency",
    "monitor",
    "client|kill",
    "client|list",
    "client|pause",
    "client|unpause",
    "acl|deluser",
    "acl|dryrun",
    "acl|getuser",
    "acl|list",
    "acl|load",
    "acl|log",
    "acl|save",
    "acl|setuser",
    "acl|users",
];

/// Commands a client may send before AUTH.
const NO_AUTH: &[&str] = &["auth", "hello", "quit", "reset"];

/// Commands with subcommands, counted in INFO commandstats as `name|sub`.
const CONTAINERS: &[&str] = &[
    "acl",
    "script",
    "function",
    "client",
    "config",
    "command",
    "object",
    "memory",
    "module",
    "namespace",
    "debug",
    "pubsub",
    "slowlog",
    "latency",
];

/// Read commands whose reply tells whether their key was found (INFO keyspace_hits/misses):
/// a nil or empty reply counts as a miss, any other non-error reply as a hit; MGET counts
/// each key. Sorted.
const KEYED_READS: &[&str] = &[
    "dump",
    "get",
    "getex",
    "getrange",
    "hget",
    "hgetall",
    "hkeys",
    "hlen",
    "hmget",
    "hstrlen",
    "hvals",
    "lindex",
    "llen",
    "lrange",
    "mget",
    "scard",
    "smembers",
    "srandmember",
    "strlen",
    "zcard",
    "zrange",
    "zrangebyscore",
    "zrank",
    "zrevrange",
    "zrevrank",
    "zscore",
];

/// At most this many INFO commandstats entries (and errorstats codes, as Redis' 128).
pub const MAX_STAT_ENTRIES: usize = 1024;

/// CLIENT REPLY mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyMode {
    On,
    Off,
    /// Skip the next command's reply.
    Skip,
}

/// What the connection does after a command.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Go on with the next request.
    Continue,
    /// Flush the replies, then close (QUIT, CLIENT KILL of itself).
    Close,
    /// CLIENT PAUSE holds this command: keep it and try again later.
    Wait,
    /// A blocking command waits for its keys: run nothing more until its answer arrives
    /// through the loop's mailbox.
    Parked,
}

/// What the server knows about one connected client, beyond what others see.
pub struct Client {
    /// The part CLIENT LIST and CLIENT KILL see.
    pub info: Arc<ClientInfo>,
    /// AUTH done, or the default user needs no password.
    authenticated: bool,
    /// The ACL user it runs as.
    user: Arc<acl::User>,
    /// The ACL generation `user` was read at: a change looks the user up again.
    acl_generation: u64,
    /// Whether the gate checks `user`'s permissions (not for a user that may run anything).
    restricted: bool,
    /// CLIENT TRACKING is on (its options are in `info.tracking`).
    tracking: bool,
    /// CLIENT CACHING yes|no, for the next command or transaction.
    caching: bool,
    /// Invalidation pushes for this client, written after the reply of the command that
    /// caused them (as Redis defers its own client's).
    pushes: Vec<u8>,
    /// Whether it logged in with a namespace token (confined, no admin commands).
    tenant: bool,
    /// The engine of its namespace: the default one, or its tenant's.
    engine: Arc<SharedEngine>,
    /// Its selected database, MULTI queue and WATCHes.
    session: Session,
    reply: ReplyMode,
    /// The peer is on loopback (`enable-debug-command local`).
    local: bool,
    /// Its pub/sub subscriptions.
    subs: Subscriptions,
    /// Replies after the first of a command that answers several (SUBSCRIBE a b c).
    more: Vec<Reply>,
    /// Commands queued in the open MULTI.
    multi_len: usize,
    /// Parked by a blocking command, until then (`Some(None)`: no timeout).
    parked_until: Option<Option<Instant>>,
    /// Connection commands queued in the open MULTI, with their place in EXEC's reply.
    multi_server: Vec<(usize, Vec<Bytes>)>,
    /// EXEC runs those: a script among them answers in place, not parked.
    in_exec: bool,
}

impl Client {
    /// A client just connected: authenticated when no password is set.
    pub fn new(info: Arc<ClientInfo>, state: &State, local: bool) -> Self {
        let acl_generation = state.acl.generation();
        let user = state.acl.default_user();
        let session = Session::new(info.id);
        Client {
            info,
            authenticated: user.open(),
            restricted: !user.unrestricted(),
            user,
            tracking: false,
            caching: false,
            pushes: Vec::new(),
            acl_generation,
            tenant: false,
            engine: state.engine.clone(),
            session,
            reply: ReplyMode::On,
            local,
            subs: Subscriptions::default(),
            more: Vec::new(),
            multi_len: 0,
            multi_server: Vec::new(),
            in_exec: false,
            parked_until: None,
        }
    }

    /// Ends the session (forgets its WATCHes and subscriptions): call it when the
    /// connection closes.
    pub fn close(&mut self, state: &State) {
        if let Some((session, _)) = state.blocked.cancel(self.info.id) {
            self.session = session;
        }
        self.engine.close(&mut self.session);
        self.subs.clear(state, &self.info);
        state.tracking.disable(&self.info);
    }

    /// Whether it subscribes to anything.
    pub fn subscribed(&self) -> bool {
        self.subs.any()
    }

    /// Whether big requests are allowed (the parser's unauthenticated limits).
    pub fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// Runs one command and appends its reply to `out` (unless CLIENT REPLY says not to).
    pub fn execute(&mut self, argv: &[Bytes], state: &State, out: &mut Vec<u8>) -> Next {
        if self.info.killed.load(Relaxed) {
            // CLIENT KILL or ACL DELUSER from another connection: run nothing more.
            return Next::Close;
        }
        // Command names are short: lowercase on the stack, not in a new String.
        let mut buf = [0u8; 32];
        let lowered;
        let name: &str = match buf.get_mut(..argv[0].len()) {
            Some(buf) if argv[0].is_ascii() => {
                buf.copy_from_slice(&argv[0]);
                buf.make_ascii_lowercase();
                std::str::from_utf8(buf).unwrap_or("")
            }
            _ => {
                lowered = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
                &lowered
            }
        };
        let stat_name: Cow<'_, str> = match argv.get(1) {
            Some(sub) if CONTAINERS.contains(&name) => {
                format!("{name}|{}", String::from_utf8_lossy(sub).to_ascii_lowercase()).into()
            }
            _ => name.into(),
        };
        // One table lookup for the gate, the slow log and MONITOR: None for the commands this
        // crate answers itself.
        let info = table::lookup(name);
        if self.acl_generation != state.acl.generation() {
            self.reload_user(state);
        }
        if let Some(refusal) = self.refusal(info, name, &stat_name, argv, state) {
            let Some(mut refusal) = refusal else { return Next::Wait };
            if refusal.is_error() {
                self.session.flag_transaction();
            }
            if let (Reply::Error(e), "exec") = (&refusal, name) {
                // A refused EXEC ends the transaction, as Redis' execCommandAbort.
                refusal = Reply::Error(format!("EXECABORT Transaction discarded because of: {e}"));
                if self.session.in_multi() {
                    self.engine.execute(&mut self.session, &[Bytes::from_static(b"DISCARD")]);
                    self.multi_len = 0;
                    self.multi_server.clear();
                }
            }
            self.count(state, &stat_name, None, &refusal);
            self.send(refusal, out, name);
            return Next::Continue;
        }
        let started = Instant::now();
        // CLIENT INFO/LIST show the running command, as Redis does.
        self.info.ran(started, Some(&stat_name));
        // EXEC runs the queue inside the engine: MONITOR shows its commands first, as Redis.
        let queued: Vec<Vec<Bytes>> = if name == "exec" && state.monitors.any() {
            self.session.queued().map(<[Bytes]>::to_vec).collect()
        } else {
            Vec::new()
        };
        let (reply, next) = self.run(name, argv, state);
        let ended = Instant::now();
        let usec = ended.duration_since(started).as_micros() as u64;
        if state.monitors.any() {
            self.monitor(info, name, &stat_name, argv, &queued, &reply, state);
        }
        if next == Next::Parked {
            self.count(state, &stat_name, Some(usec), &reply);
            return next;
        }
        self.count(state, &stat_name, Some(usec), &reply);
        let fast = info.is_some_and(|i| i.has(flag::FAST));
        state.latency.observe(if fast { "fast-command" } else { "command" }, usec);
        if state.slowlog.wants(usec)
            && !info.is_some_and(|i| i.has(flag::SKIP_SLOWLOG))
            && !refused_before_running(&reply)
        {
            let client_name = lock(&self.info.name).clone();
            state.slowlog.record(argv, usec, unix_micros() / 1_000_000, &self.info.addr, client_name);
        }
        if KEYED_READS.binary_search(&name).is_ok() {
            keyspace_hits(state, &reply);
        }
        self.info.ran(ended, None);
        self.send(reply, out, name);
        if !self.pushes.is_empty() {
            out.append(&mut self.pushes);
        }
        if self.caching && !self.session.in_multi() && name != "client" {
            self.caching = false;
        }
        if self.info.killed.load(Relaxed) {
            return Next::Close;
        }
        next
    }

    /// Shows a command that ran to the MONITOR clients, unless Redis would not: admin
    /// commands, commands refused before running, commands queued by MULTI (shown by EXEC).
    #[allow(clippy::too_many_arguments)]
    fn monitor(
        &self,
        info: Option<&table::CommandInfo>,
        name: &str,
        stat_name: &str,
        argv: &[Bytes],
        queued: &[Vec<Bytes>],
        reply: &Reply,
        state: &State,
    ) {
        let admin = info.is_some_and(|i| i.has(flag::ADMIN))
            || [name, stat_name].iter().any(|n| crate::monitor::ADMIN_SERVER_COMMANDS.contains(n));
        // A script command is shown before its script runs (see `script`).
        let script = matches!(name, "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro");
        if admin
            || script
            || refused_before_running(reply)
            || matches!(reply, Reply::Status(s) if s == "QUEUED")
        {
            return;
        }
        let (now, db) = (unix_micros(), self.session.db());
        if matches!(reply, Reply::Array(_)) {
            for command in queued {
                state.monitors.feed(state, command, now, db, &self.info.addr);
            }
        }
        state.monitors.feed(state, argv, now, db, &self.info.addr);
    }

    /// Writes a reply unless CLIENT REPLY OFF/SKIP holds it back.
    fn send(&mut self, reply: Reply, out: &mut Vec<u8>, name: &str) {
        let more = std::mem::take(&mut self.more);
        for reply in std::iter::once(reply).chain(more) {
            self.send_one(reply, out, name);
        }
    }

    fn send_one(&mut self, reply: Reply, out: &mut Vec<u8>, name: &str) {
        // Pushes (subscribe confirmations and messages, in RESP2 too) are not replies: CLIENT
        // REPLY OFF/SKIP does not hold them back, as in Redis (its CLIENT_PUSHING).
        let push = matches!(reply, Reply::Push(_));
        match self.reply {
            ReplyMode::On if self.session.resp() == 3 => return reply.write(Protocol::Resp3, out),
            ReplyMode::On => return write_consuming(reply, out),
            // CLIENT REPLY SKIP skips the command after itself.
            ReplyMode::Skip if name != "client" => self.reply = ReplyMode::On,
            _ => {}
        }
        if push {
            let protocol = if self.session.resp() == 3 { Protocol::Resp3 } else { Protocol::Resp2 };
            reply.write(protocol, out);
        }
    }

    /// INFO commandstats/errorstats and totals for one command.
    fn count(&self, state: &State, stat_name: &str, usec: Option<u64>, reply: &Reply) {
        let stats = &state.stats;
        if let Reply::Error(text) = reply {
            stats.error(text);
        }
        let known = usec.is_some() || is_command(stat_name.split('|').next().unwrap_or(""));
        if !known {
            return;
        }
        // A made-up subcommand is refused before running, as in Redis: not counted, and
        // never an entry, so the table stays small whatever clients send.
        if matches!(reply, Reply::Error(e) if e.starts_with("ERR unknown subcommand")) {
            return;
        }
        stats.commands_processed.fetch_add(1, Relaxed);
        stats.commands.count(stat_name, usec, reply.is_error(), MAX_STAT_ENTRIES);
    }

    /// Why a command may not run now: `Some(Some(error))` to answer, `Some(None)` to wait
    /// for a CLIENT PAUSE, `None` to run it.
    fn refusal(
        &self,
        info: Option<&table::CommandInfo>,
        name: &str,
        stat_name: &str,
        argv: &[Bytes],
        state: &State,
    ) -> Option<Option<Reply>> {
        if info.is_none() && !SERVER_COMMANDS.contains(&name) {
            // The library's resolver words the unknown-command error.
            return Some(Some(rediskv::commands::resolve(argv).err().unwrap_or(Reply::NilArray)));
        }
        let has = |bits| info.is_some_and(|i| i.has(bits));
        if !self.authenticated && !NO_AUTH.contains(&name) {
            return Some(Some(Reply::Error("NOAUTH Authentication required.".into())));
        }
        if self.restricted {
            if let Some(denied) = self.acl_refusal(argv, state) {
                return Some(Some(denied));
            }
        }
        // Redis' no-multi commands (the server's SAVE and SHUTDOWN among them).
        if self.session.in_multi() && has(flag::NO_MULTI) {
            return Some(Some(Reply::Error("ERR Command not allowed inside a transaction".into())));
        }
        if state.scripts.active() {
            let threshold = state.config().number("busy-reply-threshold").max(0) as u64;
            if let Some(busy) = state.scripts.wait_or_busy(threshold, argv) {
                return Some(Some(busy));
            }
        }
        if self.subs.any() && self.session.resp() == 2 && !SUBSCRIBED_MODE.contains(&name) {
            return Some(Some(Reply::Error(format!(
                "ERR Can't execute '{stat_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            ))));
        }
        if self.tenant && (ADMIN_ONLY.contains(&name) || ADMIN_ONLY.contains(&stat_name)) {
            return Some(Some(Reply::Error("ERR admin permission required to perform the command".into())));
        }
        if name == "swapdb" && state.store.shared() {
            // Each node keeps its own database mapping: a swap on one would not reach the others.
            return Some(Some(Reply::Error(
                "ERR SWAPDB is not supported when several server nodes share the store".into(),
            )));
        }
        if state.pause_active.load(Relaxed) {
            // CLIENT PAUSE WRITE holds what may write or replicate (an EXEC whose queue
            // does too); a script only when its flags let it write.
            let may_write = |info: Option<&table::CommandInfo>| {
                info.is_some_and(|i| i.has(flag::WRITE | flag::MAY_REPLICATE))
            };
            // A script queued in the transaction counts by its flags too.
            let queued_write = |c: &[Bytes]| {
                scripting::script_may_write(&state.scripts, c)
                    .unwrap_or_else(|| may_write(table::find(c).ok()))
            };
            let write = scripting::script_may_write(&state.scripts, argv).unwrap_or_else(|| may_write(info))
                || (name == "exec"
                    && (self.session.queued().any(queued_write)
                        || self.multi_server.iter().any(|(_, c)| queued_write(c))));
            let data = info.is_some_and(|i| i.family != table::Family::Server);
            // A wrong number of arguments is answered at once, as Redis checks arity first.
            let bad_arity = info.is_some_and(|i| {
                let n = i.arity.unsigned_abs() as usize;
                if i.arity < 0 { argv.len() < n } else { argv.len() != n }
            });
            if (data || write) && !bad_arity && state.paused(write).is_some() {
                return Some(None);
            }
        }
        // As Redis 7.0: EXEC is checked for the queued commands (memory may have run out
        // since they were queued), and inside MULTI every command but EXEC, DISCARD, QUIT and
        // RESET is, since queueing takes memory too.
        let in_multi = self.session.in_multi();
        let denyoom = |c: &[Bytes]| table::find(c).is_ok_and(|i| i.has(flag::DENYOOM));
        // A container's subcommand has its own flags (FUNCTION LOAD is deny-oom, FUNCTION
        // LIST is not); a script command's come from the script's declared flags.
        let checked = || {
            denyoom(argv)
                || scripting::denies_oom(&state.scripts, name, argv)
                || (in_multi && !matches!(name, "exec" | "discard" | "quit" | "reset"))
                || (in_multi && name == "exec" && self.session.queued().any(denyoom))
        };
        // Nothing to look at without a maxmemory (the usual case).
        let limited = state.maxmemory.load(Relaxed) > 0;
        if limited && checked() && out_of_memory(state) && !self.info.no_evict.load(Relaxed) {
            return Some(Some(Reply::Error(
                "OOM command not allowed when used memory > 'maxmemory'.".into(),
            )));
        }
        None
    }

    /// Runs a command that passed the gates.
    fn run(&mut self, name: &str, argv: &[Bytes], state: &State) -> (Reply, Next) {
        if self.session.in_multi() && SERVER_COMMANDS.contains(&name) && !matches!(name, "quit" | "reset") {
            return (self.queue_server_command(argv), Next::Continue);
        }
        let reply = match name {
            "quit" => return (Reply::OK, Next::Close),
            "auth" => self.auth(argv, state),
            "hello" => self.hello(argv, state),
            "client" => return self.client(argv, state),
            "acl" => self.acl(argv, state),
            "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
                return self.script(name, argv, state);
            }
            "script" => scripting::script_command(argv, &state.scripts),
            "function" => scripting::function_command(argv, &state.scripts, &|scripts| {
                if let Err(e) = state.store.save_functions(&scripts.dump_codes()) {
                    eprintln!("server: cannot save the function libraries: {e}");
                }
            }),
            "reset" if argv.len() == 1 => self.reset(state),
            "reset" => arity(argv, 1, || Reply::OK),
            "time" => arity(argv, 1, || {
                let micros = unix_micros();
                Reply::Array(vec![
                    Reply::bulk_int((micros / 1_000_000) as i64),
                    Reply::bulk_int((micros % 1_000_000) as i64),
                ])
            }),
            "lastsave" => arity(argv, 1, || Reply::Integer(state.last_save.load(Relaxed) as i64)),
            "bgsave" | "bgrewriteaof" => background_save(name, argv, state),
            "role" => arity(argv, 1, || {
                Reply::Array(vec![Reply::bulk(b"master"), Reply::Integer(0), Reply::Array(vec![])])
            }),
            "lolwut" => lolwut(argv),
            "module" => module(argv),
            "debug" => self.debug(argv, state),
            "namespace" => namespace(argv, state),
            "config" => {
                let mut config = state.config_mut();
                let requirepass = config.get("requirepass").to_string();
                let reply = config::config(argv, &mut config, || state.stats.reset(), &mut |bind, port| {
                    state.listen.rebind(bind, port)
                });
                if config.get("requirepass") != requirepass {
                    state.acl.set_default_password(Some(config.get("requirepass").as_bytes()));
                }
                state.maxmemory.store(config.number("maxmemory").max(0) as u64, Relaxed);
                state.max_bulk.store(config.number("proto-max-bulk-len"), Relaxed);
                state.slowlog.configure(&config);
                state.latency.configure(&config);
                state.stats.commands.tracking.store(config.get("latency-tracking") == "yes", Relaxed);
                let max_keys = config.number("tracking-table-max-keys").max(0) as usize;
                drop(config);
                crate::notify::configure(state);
                if state.tracking.active() {
                    let mut own = Vec::new();
                    state.tracking.limit(
                        state,
                        max_keys,
                        &mut tracking::Delivery { me: None, own: &mut own },
                    );
                }
                reply
            }
            "slowlog" => state.slowlog.command(argv),
            "latency" => state.latency.command(argv, state, unix_secs()),
            "memory"
                if argv.get(1).is_some_and(|s| {
                    [&b"stats"[..], b"doctor", b"malloc-stats", b"purge"]
                        .iter()
                        .any(|n| s.eq_ignore_ascii_case(n))
                }) =>
            {
                info::memory(argv, state, self.engine.layout().namespace())
            }
            "monitor" => arity(argv, 1, || {
                state.monitors.add(&self.info);
                Reply::OK
            }),
            "info" => info::info(argv, state, self.engine.layout().namespace()),
            "subscribe" | "psubscribe" | "ssubscribe" | "unsubscribe" | "punsubscribe" | "sunsubscribe" => {
                self.subscriptions(name, argv, state)
            }
            "publish" | "spublish" => arity(argv, 3, || {
                Reply::Integer(state.pubsub.publish(state, &argv[1], &argv[2], name == "spublish") as i64)
            }),
            "pubsub" => pubsub::pubsub_command(argv, state),
            "ping" if self.subs.any() && self.session.resp() == 2 && argv.len() <= 2 => {
                // In RESP2 subscribed mode PING answers a two-element array.
                Reply::Array(vec![
                    Reply::bulk(b"pong"),
                    Reply::Bulk(argv.get(1).cloned().unwrap_or_default()),
                ])
            }
            "flushall" if !self.tenant => {
                let reply = self.flush_everything(argv, state);
                if !reply.is_error() {
                    state.blocked.wake_all(state);
                    state.maint.garbage_hint.fetch_add(1, Relaxed);
                }
                // Also with no client tracking now: FLUSHALL frees the keys clients that
                // turned tracking off left in the table, as Redis does.
                if !reply.is_error() {
                    let mut to = crate::tracking::Delivery { me: Some(&self.info), own: &mut self.pushes };
                    state.tracking.flush(state, &mut to);
                }
                reply
            }
            "fsck" => arity(argv, 1, || fsck(state)),
            "compact" => arity(argv, 1, || compact(state)),
            "save" => arity(argv, 1, || match state.store.sync() {
                Ok(()) => {
                    state.last_save.store(unix_secs(), Relaxed);
                    state.dirty.store(0, Relaxed);
                    Reply::OK
                }
                Err(e) => Reply::Error(format!("ERR {e}")),
            }),
            "shutdown" => {
                if let Some(refusal) = shutdown_refusal(&argv[1..]) {
                    return (Reply::Error(refusal.into()), Next::Continue);
                }
                // Every write is in the store already; make it durable, then stop. Redis
                // answers nothing when it goes down.
                if let Err(e) = state.store.sync() {
                    return (
                        Reply::Error(format!("ERR Errors trying to SHUTDOWN. Check logs. ({e})")),
                        Next::Continue,
                    );
                }
                eprintln!("server: SHUTDOWN from client {}", self.info.id);
                std::process::exit(0);
            }
            _ => {
                if name == "select"
                    && parse_i64(argv.get(1).map_or(&[][..], |a| a))
                        .is_some_and(|i| i >= state.config().number("databases"))
                {
                    return (Reply::Error("ERR DB index is out of range".into()), Next::Continue);
                }
                let was_in_multi = self.session.in_multi();
                let reads = if self.tracking { self.tracked_reads(name, argv) } else { Vec::new() };
                let flushes = self.flushes(name);
                let reply = self.engine.execute(&mut self.session, argv);
                if flushes && !reply.is_error() {
                    // A flush leaves every collection's records as garbage, with no per-key
                    // event to say so: start a collector pass.
                    state.maint.garbage_hint.fetch_add(1, Relaxed);
                }
                if state.tracking.active() {
                    self.invalidate(&reads, flushes && !reply.is_error(), &reply, state);
                }
                self.info.db.store(self.session.db(), Relaxed);
                after_writes(state, &self.engine, &self.session);
                if let Some(block) = self.session.take_block() {
                    return self.park(argv, block, state);
                }
                let flushed = matches!(name, "flushdb" | "flushall") && !reply.is_error();
                // An EXEC's queued connection commands run first: Redis serves the clients
                // its writes unblock after the whole transaction.
                let (reply, next) = if was_in_multi {
                    self.after_multi_command(name, reply, state)
                } else {
                    (reply, Next::Continue)
                };
                state.blocked.wake(state, &self.engine, &self.session);
                if flushed {
                    let db = (name == "flushdb").then(|| self.session.db());
                    state.blocked.wake_flushed(state, &self.engine, db);
                }
                return (reply, next);
            }
        };
        (reply, Next::Continue)
    }

    /// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO: the client parks and the script
    /// thread runs the script atomically in the engine, with this client's ACL user checking
    /// each command it runs; its answer comes back through the loop's mailbox.
    fn script(&mut self, name: &str, argv: &[Bytes], state: &State) -> (Reply, Next) {
        if argv.len() < 3 {
            return (
                Reply::Error(format!("ERR wrong number of arguments for '{name}' command")),
                Next::Continue,
            );
        }
        if state.monitors.any() && !self.session.in_multi() {
            // MONITOR shows the script command, then the commands it runs (as `[db lua]`).
            state.monitors.feed(state, argv, unix_micros(), self.session.db(), &self.info.addr);
        }
        // A script queued in a transaction answers into EXEC's reply: wait for it here.
        let (answer, answered) = if self.in_exec {
            let (tx, rx) = std::sync::mpsc::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let session = std::mem::replace(&mut self.session, Session::new(self.info.id));
        let job = scripting::Job {
            argv: argv.to_vec(),
            name: name.to_string(),
            session,
            engine: self.engine.clone(),
            info: self.info.clone(),
            user: self.user.clone(),
            restricted: self.restricted,
            tracks_reads: self.tracking && self.remembers_reads(),
            answer,
        };
        match state.scripts.submit(job) {
            Ok(()) if answered.is_some() => {
                let fresh = || Box::new(Session::new(self.info.id));
                let (reply, pushes, session) = answered.and_then(|rx| rx.recv().ok()).unwrap_or_else(|| {
                    (Reply::Error("ERR the script thread stopped".into()), Vec::new(), fresh())
                });
                self.session = *session;
                self.pushes.extend_from_slice(&pushes);
                (reply, Next::Continue)
            }
            Ok(()) => {
                self.parked_until = Some(None);
                (Reply::NilArray, Next::Parked)
            }
            Err(mut job) => {
                // No script thread: run it here.
                let (reply, pushes) = scripting::run_command(state, &mut job);
                self.session = job.session;
                self.pushes.extend_from_slice(&pushes);
                (reply, Next::Continue)
            }
        }
    }

    /// Hands the session to the blocked-client registry; the connection waits for its answer.
    fn park(&mut self, argv: &[Bytes], block: rediskv::commands::Block, state: &State) -> (Reply, Next) {
        let session = std::mem::replace(&mut self.session, Session::new(self.info.id));
        match state.blocked.park(state, &self.info, &self.engine, session, argv.to_vec(), block) {
            Parking::Served(session, reply) => {
                self.session = *session;
                (reply, Next::Continue)
            }
            Parking::Parked(deadline) => {
                self.parked_until = Some(deadline);
                (Reply::NilArray, Next::Parked)
            }
        }
    }

    /// A parked client's answer arrived (or its deadline passed): it has its session back.
    pub fn resume(&mut self, session: Session) {
        self.session = session;
        self.parked_until = None;
    }

    /// The deadline of a parked client: `Some(None)` waits forever; `None` is not parked.
    pub fn parked_until(&self) -> Option<Option<Instant>> {
        self.parked_until
    }

    /// A connection command inside MULTI: the engine queues a PING in its place (so EXEC's
    /// reply has a slot for it, and a queue-time error elsewhere still aborts), and the
    /// command runs after the transaction's commit, its reply put in that slot.
    fn queue_server_command(&mut self, argv: &[Bytes]) -> Reply {
        let reply = self.engine.execute(&mut self.session, &[Bytes::from_static(b"PING")]);
        if reply == Reply::status("QUEUED") {
            self.multi_server.push((self.multi_len, argv.to_vec()));
            self.multi_len += 1;
        }
        reply
    }

    /// Bookkeeping of a command run while MULTI was open: counts queued commands; at EXEC
    /// runs the queued connection commands into their slots; forgets them at DISCARD.
    fn after_multi_command(&mut self, name: &str, reply: Reply, state: &State) -> (Reply, Next) {
        if reply == Reply::status("QUEUED") {
            self.multi_len += 1;
            return (reply, Next::Continue);
        }
        if self.session.in_multi() {
            return (reply, Next::Continue);
        }
        self.multi_len = 0;
        let queued = std::mem::take(&mut self.multi_server);
        let mut replies = match reply {
            Reply::Array(replies) if name == "exec" => replies,
            other => return (other, Next::Continue),
        };
        let mut next = Next::Continue;
        for (slot, argv) in queued {
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            let started = Instant::now();
            self.in_exec = true;
            let (r, n) = self.run(&name, &argv, state);
            self.in_exec = false;
            // Each command of a transaction is logged, EXEC itself is not (as Redis).
            let usec = started.elapsed().as_micros() as u64;
            let skip = table::lookup(&name).is_some_and(|i| i.has(flag::SKIP_SLOWLOG));
            if state.slowlog.wants(usec) && !skip && !refused_before_running(&r) {
                let client_name = lock(&self.info.name).clone();
                state.slowlog.record(&argv, usec, unix_micros() / 1_000_000, &self.info.addr, client_name);
            }
            if n == Next::Close {
                next = Next::Close;
            }
            if let Some(place) = replies.get_mut(slot) {
                *place = r;
            }
        }
        (Reply::Array(replies), next)
    }

    /// (P|S)SUBSCRIBE and (P|S)UNSUBSCRIBE: one confirmation per name, all but the first
    /// kept in `more`.
    fn subscriptions(&mut self, name: &str, argv: &[Bytes], state: &State) -> Reply {
        let kind = match name {
            "psubscribe" | "punsubscribe" => Kind::Pattern,
            "ssubscribe" | "sunsubscribe" => Kind::Shard,
            _ => Kind::Channel,
        };
        let on = !name.contains("unsub");
        if on && argv.len() < 2 {
            return Reply::Error(format!("ERR wrong number of arguments for '{name}' command"));
        }
        let mut replies = if on {
            self.subs.subscribe(state, &self.info, kind, &argv[1..])
        } else {
            self.subs.unsubscribe(state, &self.info, kind, &argv[1..])
        };
        let first = replies.remove(0);
        self.more = replies;
        first
    }

    /// AUTH `[user] password`: an ACL user, or with the default user's name a namespace
    /// token (a tenant). Passwords are compared in constant time.
    fn auth(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let (user, password) = match argv {
            [_, password] => (None, password),
            [_, user, password] => (Some(user), password),
            [_] => return Reply::Error("ERR wrong number of arguments for 'auth' command".into()),
            _ => return Reply::Error("ERR syntax error".into()),
        };
        if user.is_none() && state.acl.default_user().open() {
            return Reply::Error(
                "ERR AUTH <password> called without any password configured for the default user. \
                 Are you sure your configuration is correct?"
                    .into(),
            );
        }
        match self.login(user.map(|u| &u[..]), password, &argv[0], state) {
            Ok(()) => Reply::OK,
            Err(e) => e,
        }
    }

    /// Checks a user and password and switches the client to what they grant: the ACL
    /// user, or (as `default`) the tenant whose namespace token the password is. A failure
    /// goes to the ACL log, under `command` (AUTH or HELLO, as sent).
    fn login(
        &mut self,
        user: Option<&[u8]>,
        password: &[u8],
        command: &[u8],
        state: &State,
    ) -> Result<(), Reply> {
        let name = user.unwrap_or(b"default");
        if let Some(user) = state.acl.authenticate(name, password) {
            let ns = user.namespace().map(String::from);
            self.become_user(user, ns, state);
            return Ok(());
        }
        if name == b"default" {
            // Look at every token so the time taken does not tell which one matched.
            let config = state.config();
            let mut found = None;
            for (ns, token) in &config.namespaces {
                if acl::constant_time_eq(password, token.as_bytes()) {
                    found = Some(ns.clone());
                }
            }
            drop(config);
            if let Some(ns) = found {
                self.become_user(state.acl.default_user(), Some(ns), state);
                return Ok(());
            }
        }
        let max = state.config().number("acllog-max-len").max(0) as usize;
        state.acl.log("auth", self.session.in_multi(), command, name, self.info.line(), max);
        Err(Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into()))
    }

    /// Runs as `user`, confined to namespace `ns` (a tenant) or not (`None`). A fresh
    /// session (database 0, no MULTI or WATCH) in the engine of `ns`.
    fn become_user(&mut self, user: Arc<acl::User>, ns: Option<String>, state: &State) {
        self.authenticated = true;
        self.engine.close(&mut self.session);
        self.engine = ns.as_deref().map_or_else(|| state.engine.clone(), |ns| state.tenant_engine(ns));
        self.tenant = ns.is_some();
        let resp = self.session.resp();
        self.session = Session::new(self.info.id);
        self.session.set_resp(resp);
        self.info.db.store(0, Relaxed);
        *lock(&self.info.namespace) = ns;
        *lock(&self.info.user) = user.name().to_vec();
        self.acl_generation = state.acl.generation();
        self.restricted = !user.unrestricted();
        self.user = user;
    }

    /// The users changed: takes this client's user's new rules. A deleted user's client
    /// (closed by ACL DELUSER) may run nothing more.
    fn reload_user(&mut self, state: &State) {
        self.acl_generation = state.acl.generation();
        let user = state
            .acl
            .user(self.user.name())
            .unwrap_or_else(|| Arc::new(acl::User::deleted(self.user.name())));
        self.restricted = !user.unrestricted();
        self.user = user;
    }

    /// The NOPERM error when the client's user may not run `argv` (logged in the ACL log).
    fn acl_refusal(&self, argv: &[Bytes], state: &State) -> Option<Reply> {
        // An unknown subcommand is refused as unknown, before any ACL check (as in Redis).
        let id = acl::resolve(argv).ok()?;
        let denied = self.user.check(id, argv).err()?;
        let (reason, object) = match denied {
            acl::Denied::Command => ("command", acl::command_name(id).as_bytes()),
            acl::Denied::Key(at) => ("key", &argv[at][..]),
            acl::Denied::Channel(at) => ("channel", &argv[at][..]),
        };
        let max = state.config().number("acllog-max-len").max(0) as usize;
        state.acl.log(reason, self.session.in_multi(), object, self.user.name(), self.info.line(), max);
        Some(denied.error(id))
    }

    /// The ACL command; ACL DELUSER closes the deleted users' connections.
    fn acl(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let config = state.config();
        let ctx = acl::Context {
            user: self.user.name(),
            allchannels: config.get("acl-pubsub-default") == "allchannels",
            aclfile: config.get("aclfile"),
        };
        let (reply, deleted) = acl::command(argv, &state.acl, &ctx);
        drop(config);
        if !deleted.is_empty() {
            for c in lock(&state.clients).values() {
                if deleted.contains(&*lock(&c.user)) {
                    kill_client(c, state);
                }
            }
        }
        reply
    }

    /// HELLO [protover [AUTH user pass] [SETNAME name]]: switches to RESP2 or RESP3 and
    /// answers the server's map.
    fn hello(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let mut auth = None;
        let mut name = None;
        let mut resp = self.session.resp();
        if let Some(ver) = argv.get(1) {
            match parse_i64(ver) {
                None => return Reply::Error("ERR Protocol version is not an integer or out of range".into()),
                Some(v @ (2 | 3)) => resp = v as u8,
                Some(_) => return Reply::Error("NOPROTO unsupported protocol version".into()),
            }
            let mut i = 2;
            while i < argv.len() {
                let opt = &argv[i];
                if opt.eq_ignore_ascii_case(b"setname") && i + 1 < argv.len() {
                    name = Some(&argv[i + 1]);
                    i += 2;
                } else if opt.eq_ignore_ascii_case(b"auth") && i + 2 < argv.len() {
                    auth = Some((&argv[i + 1], &argv[i + 2]));
                    i += 3;
                } else {
                    return Reply::Error(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(opt)
                    ));
                }
            }
        }
        if let Some((user, password)) = auth {
            if let Err(e) = self.login(Some(user), password, &argv[0], state) {
                return e;
            }
        }
        if !self.authenticated {
            return Reply::Error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH \
                 <user> <pass> option can be used to authenticate the client and select the RESP protocol \
                 version at the same time"
                    .into(),
            );
        }
        if let Some(name) = name {
            if let Err(e) = self.set_name(name) {
                return e;
            }
        }
        self.session.set_resp(resp);
        self.info.resp.store(resp, Relaxed);
        let pairs: [(&str, Reply); 7] = [
            ("server", Reply::bulk(b"redis")),
            ("version", Reply::bulk(crate::info::REDIS_VERSION.as_bytes())),
            ("proto", Reply::Integer(i64::from(resp))),
            ("id", Reply::Integer(self.info.id as i64)),
            ("mode", Reply::bulk(b"standalone")),
            ("role", Reply::bulk(b"master")),
            ("modules", Reply::Array(Vec::new())),
        ];
        Reply::Map(pairs.into_iter().map(|(k, v)| (Reply::bulk(k.as_bytes()), v)).collect())
    }

    fn set_name(&mut self, name: &Bytes) -> Result<(), Reply> {
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err(Reply::Error(
                "ERR Client names cannot contain spaces, newlines or special characters.".into(),
            ));
        }
        *lock(&self.info.name) = if name.is_empty() { None } else { Some(name.clone()) };
        Ok(())
    }

    /// RESET: database 0, no name, replies on, not a tenant, authenticated only when no
    /// password is set.
    fn reset(&mut self, state: &State) -> Reply {
        self.reply = ReplyMode::On;
        state.tracking.disable(&self.info);
        self.tracking = false;
        self.caching = false;
        state.monitors.remove(self.info.id);
        self.subs.clear(state, &self.info);
        self.multi_len = 0;
        self.multi_server.clear();
        *lock(&self.info.name) = None;
        self.info.no_evict.store(false, Relaxed);
        let default = state.acl.default_user();
        let open = default.open();
        self.become_user(default, None, state);
        self.authenticated = open;
        self.session.set_resp(2);
        self.info.resp.store(2, Relaxed);
        Reply::status("RESET")
    }

    /// CLIENT subcommands.
    fn client(&mut self, argv: &[Bytes], state: &State) -> (Reply, Next) {
        let Some(sub) = argv.get(1) else {
            return (
                Reply::Error("ERR wrong number of arguments for 'client' command".into()),
                Next::Continue,
            );
        };
        let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
        let wrong_arity =
            || Reply::Error(format!("ERR wrong number of arguments for 'client|{sub}' command"));
        let reply = match (sub.as_str(), argv.len()) {
            ("id", 2) => Reply::Integer(self.info.id as i64),
            ("getname", 2) => Reply::bulk_or_nil(lock(&self.info.name).clone()),
            ("setname", 3) => self.set_name(&argv[2]).map_or_else(|e| e, |()| Reply::OK),
            ("info", 2) => Reply::Verbatim { format: *b"txt", text: Bytes::from(self.info.line() + "\n") },
            ("list", _) => client_list(&argv[2..], state),
            ("kill", n) if n >= 3 => return self.kill(&argv[2..], state),
            ("reply", 3) => match String::from_utf8_lossy(&argv[2]).to_ascii_lowercase().as_str() {
                "on" => {
                    self.reply = ReplyMode::On;
                    Reply::OK
                }
                "off" => {
                    self.reply = ReplyMode::Off;
                    Reply::OK
                }
                "skip" => {
                    if self.reply == ReplyMode::On {
                        self.reply = ReplyMode::Skip;
                    }
                    Reply::OK
                }
                _ => Reply::Error("ERR syntax error".into()),
            },
            ("no-evict", 3) => match String::from_utf8_lossy(&argv[2]).to_ascii_lowercase().as_str() {
                "on" => {
                    self.info.no_evict.store(true, Relaxed);
                    Reply::OK
                }
                "off" => {
                    self.info.no_evict.store(false, Relaxed);
                    Reply::OK
                }
                _ => Reply::Error("ERR syntax error".into()),
            },
            ("pause", 3 | 4) => client_pause(&argv[2..], state),
            ("unpause", 2) => {
                *lock(&state.pause) = None;
                state.pause_active.store(false, Relaxed);
                state.hold_expiry();
                state.kick();
                Reply::OK
            }
            ("unblock", 3 | 4) => client_unblock(&argv[2..], state),
            ("tracking", n) if n >= 3 => {
                let reply = tracking::client_tracking(&argv[2..], &self.info, state);
                self.tracking = lock(&self.info.tracking).is_some();
                // A pending CLIENT CACHING belongs to the mode it was given in.
                if !reply.is_error() {
                    self.caching = false;
                }
                reply
            }
            ("caching", 3) => self.caching(&argv[2]),
            ("getredir", 2) => {
                Reply::Integer(lock(&self.info.tracking).as_ref().map_or(-1, |m| m.redirect as i64))
            }
            ("trackinginfo", 2) => tracking::tracking_info(&self.info, self.caching),
            ("help", 2) => Reply::Array(CLIENT_HELP.iter().map(|s| Reply::status(s)).collect()),
            (
                "id" | "getname" | "setname" | "info" | "kill" | "reply" | "no-evict" | "pause" | "unpause"
                | "unblock" | "help" | "tracking" | "caching" | "getredir" | "trackinginfo",
                _,
            ) => wrong_arity(),
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&argv[1])
            )),
        };
        (reply, Next::Continue)
    }

    /// CLIENT CACHING yes|no: whether the next command's reads are tracked (OPTIN/OPTOUT).
    fn caching(&mut self, arg: &Bytes) -> Reply {
        let mode = lock(&self.info.tracking).clone();
        let Some(mode) = mode else {
            return Reply::Error(
                "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
                    .into(),
            );
        };
        match arg.to_ascii_lowercase().as_slice() {
            b"yes" if mode.optin => self.caching = true,
            b"yes" => {
                return Reply::Error(
                    "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.".into(),
                );
            }
            b"no" if mode.optout => self.caching = true,
            b"no" => {
                return Reply::Error(
                    "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.".into(),
                );
            }
            _ => return Reply::Error("ERR syntax error".into()),
        }
        Reply::OK
    }

    /// The keys a read-only command (or each read-only command of an EXEC) about to run
    /// names, when this client's tracking mode remembers them.
    /// Whether this client's tracking mode remembers what its next command reads.
    fn remembers_reads(&self) -> bool {
        match lock(&self.info.tracking).as_ref() {
            Some(m) if m.optin => self.caching,
            Some(m) if m.optout => !self.caching,
            Some(m) => !m.bcast,
            None => false,
        }
    }

    fn tracked_reads(&self, name: &str, argv: &[Bytes]) -> Vec<Bytes> {
        if !self.remembers_reads() || (self.session.in_multi() && name != "exec") {
            return Vec::new();
        }
        let reads = |cmd: &[Bytes]| match table::find(cmd) {
            Ok(info) if info.has(flag::READONLY) && !info.has(flag::PUBSUB) => table::keys(cmd),
            _ => Vec::new(),
        };
        if name == "exec" { self.session.queued().flat_map(reads).collect() } else { reads(argv) }
    }

    /// Whether the command about to run (or a command of the EXEC about to run) is FLUSHDB
    /// or FLUSHALL.
    /// Whether running `name` now empties databases: a FLUSHDB or FLUSHALL outside MULTI (one
    /// inside is only queued), or an EXEC whose queue holds one.
    fn flushes(&self, name: &str) -> bool {
        let flush = |n: &[u8]| n.eq_ignore_ascii_case(b"flushdb") || n.eq_ignore_ascii_case(b"flushall");
        if self.session.in_multi() {
            return name == "exec" && self.session.queued().any(|c| flush(&c[0]));
        }
        flush(name.as_bytes())
    }

    /// After a command ran in the engine: remembers what it read for this client, and
    /// invalidates what it wrote (everything, after FLUSHDB or FLUSHALL) for every client.
    fn invalidate(&mut self, reads: &[Bytes], flushed: bool, reply: &Reply, state: &State) {
        let ns = self.engine.layout().namespace().to_vec();
        let mut to = tracking::Delivery { me: Some(&self.info), own: &mut self.pushes };
        let written: Vec<Bytes> = self
            .session
            .touched()
            .iter()
            .filter_map(|t| self.engine.touched_key(t))
            .map(|(_, k)| k)
            .collect();
        // A flush invalidates everything with one message (null), as Redis: no message per
        // key it deleted.
        if flushed {
            state.tracking.flush(state, &mut to);
        } else if !written.is_empty() {
            state.tracking.invalidate(state, &ns, &written, &mut to);
        }
        if !reads.is_empty() && !reply.is_error() {
            let max = state.config().number("tracking-table-max-keys").max(0) as usize;
            state.tracking.remember(state, &ns, reads, self.info.id, max, &mut to);
        }
    }

    /// CLIENT KILL ip:port | CLIENT KILL [ID id] [ADDR a] [LADDR a] [USER u] [SKIPME yes/no].
    fn kill(&mut self, args: &[Bytes], state: &State) -> (Reply, Next) {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        if let [addr] = args {
            let addr = text(addr);
            let victim = lock(&state.clients).values().find(|c| c.addr == addr).cloned();
            return match victim {
                Some(c) => {
                    kill_client(&c, state);
                    (Reply::OK, Next::Continue)
                }
                None => (Reply::Error("ERR No such client".into()), Next::Continue),
            };
        }
        if args.len() % 2 == 1 {
            return (Reply::Error("ERR syntax error".into()), Next::Continue);
        }
        let mut filter = KillFilter { skipme: true, ..KillFilter::default() };
        for pair in args.chunks(2) {
            let value = text(&pair[1]);
            match text(&pair[0]).to_ascii_lowercase().as_str() {
                "id" => match value.parse::<u64>() {
                    Ok(0) | Err(_) => {
                        return (
                            Reply::Error("ERR client-id should be greater than 0".into()),
                            Next::Continue,
                        );
                    }
                    Ok(id) => filter.id = Some(id),
                },
                "addr" => filter.addr = Some(value),
                "laddr" => filter.laddr = Some(value),
                "user" => {
                    if state.acl.user(&pair[1]).is_none() {
                        return (Reply::Error(format!("ERR No such user '{value}'")), Next::Continue);
                    }
                    filter.user = Some(pair[1].to_vec());
                }
                "type" => match value.to_ascii_lowercase().as_str() {
                    "normal" => {}
                    "master" | "slave" | "replica" | "pubsub" => filter.none = true,
                    _ => return (Reply::Error(format!("ERR Unknown client type '{value}'")), Next::Continue),
                },
                "skipme" => match value.to_ascii_lowercase().as_str() {
                    "yes" => filter.skipme = true,
                    "no" => filter.skipme = false,
                    _ => return (Reply::Error("ERR syntax error".into()), Next::Continue),
                },
                _ => return (Reply::Error("ERR syntax error".into()), Next::Continue),
            }
        }
        let victims: Vec<Arc<ClientInfo>> =
            lock(&state.clients).values().filter(|c| filter.matches(c, self.info.id)).cloned().collect();
        for c in &victims {
            kill_client(c, state);
        }
        (Reply::Integer(victims.len() as i64), Next::Continue)
    }

    /// DEBUG: SLEEP, OBJECT, ERROR, LOG, SET-ACTIVE-EXPIRE, HELP when enable-debug-command
    /// allows it; everything else (RELOAD, SEGFAULT, …) is refused.
    fn debug(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let allowed = match state.config().get("enable-debug-command") {
            "yes" => true,
            "local" => self.local,
            _ => false,
        };
        if !allowed {
            return Reply::Error(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run \
                 it from a local connection, otherwise you need to set this option in the configuration file, and \
                 then restart the server."
                    .into(),
            );
        }
        let Some(sub) = argv.get(1) else {
            return Reply::Error("ERR wrong number of arguments for 'debug' command".into());
        };
        let sub_name = String::from_utf8_lossy(sub).to_ascii_lowercase();
        match (sub_name.as_str(), argv.len()) {
            ("sleep", 3) => {
                let secs = String::from_utf8_lossy(&argv[2]).parse::<f64>().unwrap_or(0.0);
                if secs > 0.0 && secs.is_finite() {
                    std::thread::sleep(Duration::from_secs_f64(secs.min(3600.0)));
                }
                Reply::OK
            }
            ("error", 3) => Reply::Error(String::from_utf8_lossy(&argv[2]).into_owned()),
            ("log", 3) => {
                eprintln!("DEBUG LOG: {}", String::from_utf8_lossy(&argv[2]));
                Reply::OK
            }
            ("set-active-expire", 3) => {
                state.active_expire.store(&argv[2][..] != b"0", Relaxed);
                Reply::OK
            }
            ("object", 3) => {
                debug_object(self.engine.run(&mut self.session, &[&b"object"[..], b"encoding", &argv[2]]))
            }
            ("help", 2) => Reply::Array(DEBUG_HELP.iter().map(|s| Reply::status(s)).collect()),
            _ => Reply::Error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                String::from_utf8_lossy(sub)
            )),
        }
    }
}

/// Encodes a reply in RESP2 like `Reply::write_resp`, freeing each element of an array
/// (set, map, push) as soon as its bytes are out, so a huge reply (KEYS, LRANGE 0 -1,
/// SMEMBERS) never sits in memory twice: at any moment it is the encoded part plus the rest.
fn write_consuming(reply: Reply, out: &mut Vec<u8>) {
    let header = |out: &mut Vec<u8>, n: usize| {
        out.push(b'*');
        out.extend_from_slice(n.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    };
    match reply {
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => {
            header(out, items.len());
            for item in items {
                write_consuming(item, out);
            }
        }
        Reply::Map(pairs) | Reply::Pairs(pairs) => {
            header(out, pairs.len() * 2);
            for (k, v) in pairs {
                write_consuming(k, out);
                write_consuming(v, out);
            }
        }
        leaf => leaf.write_resp(out),
    }
}

/// `+Value at:… encoding:… ` from OBJECT ENCODING's answer.
fn debug_object(encoding: Reply) -> Reply {
    match encoding {
        Reply::Bulk(enc) => Reply::Status(
            format!(
                "Value at:0x0 refcount:1 encoding:{} serializedlength:0 lru:0 lru_seconds_idle:0",
                String::from_utf8_lossy(&enc)
            )
            .into(),
        ),
        Reply::Nil => Reply::Error("ERR no such key".into()),
        other => other,
    }
}

#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    skipme: bool,
    /// Logged in as this ACL user.
    user: Option<Vec<u8>>,
    /// A client type this server never has (master, replica, pubsub).
    none: bool,
}

impl KillFilter {
    fn matches(&self, c: &ClientInfo, me: u64) -> bool {
        !self.none
            && self.id.is_none_or(|id| id == c.id)
            && self.addr.as_ref().is_none_or(|a| *a == c.addr)
            && self.laddr.as_ref().is_none_or(|a| *a == c.laddr)
            && self.user.as_ref().is_none_or(|u| *u == *lock(&c.user))
            && !(self.skipme && c.id == me)
    }
}

fn kill_client(c: &ClientInfo, state: &State) {
    c.killed.store(true, Relaxed);
    state.kick();
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: a parked client answers its timeout reply, or the
/// UNBLOCKED error; 1 if it was parked.
fn client_unblock(args: &[Bytes], state: &State) -> Reply {
    let Some(id) = parse_i64(&args[0]) else {
        return Reply::Error("ERR value is not an integer or out of range".into());
    };
    let error = match args.get(1).map(|a| a.to_ascii_lowercase()) {
        None => false,
        Some(m) if m == b"timeout" => false,
        Some(m) if m == b"error" => true,
        Some(_) => return Reply::Error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR".into()),
    };
    let Some(info) = lock(&state.clients).get(&(id as u64)).cloned() else { return Reply::Integer(0) };
    let Some((session, timeout_reply)) = state.blocked.cancel(info.id) else { return Reply::Integer(0) };
    let answer = if error {
        Reply::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into())
    } else {
        timeout_reply
    };
    crate::blocking::send_answer(state, &info, session, &answer, &[]);
    Reply::Integer(1)
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id…].
fn client_list(args: &[Bytes], state: &State) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut none = false;
    match args.first().map(|a| a.to_ascii_lowercase()) {
        None => {}
        Some(k) if k == b"type" && args.len() == 2 => match args[1].to_ascii_lowercase().as_slice() {
            b"normal" => {}
            b"master" | b"replica" | b"slave" | b"pubsub" => none = true,
            _ => {
                return Reply::Error(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(&args[1])
                ));
            }
        },
        Some(k) if k == b"id" && args.len() >= 2 => {
            let mut list = Vec::new();
            for a in &args[1..] {
                match parse_i64(a) {
                    Some(id) if id > 0 => list.push(id as u64),
                    Some(_) => {}
                    None => return Reply::Error("ERR Invalid client ID".into()),
                }
            }
            ids = Some(list);
        }
        Some(_) => return Reply::Error("ERR syntax error".into()),
    }
    let clients = lock(&state.clients);
    let mut text = String::new();
    for c in clients.values() {
        if none || ids.as_ref().is_some_and(|ids| !ids.contains(&c.id)) {
            continue;
        }
        text.push_str(&c.line());
        text.push('\n');
    }
    Reply::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

/// CLIENT PAUSE timeout [WRITE|ALL].
fn client_pause(args: &[Bytes], state: &State) -> Reply {
    let Some(ms) = parse_i64(&args[0]) else {
        return Reply::Error("ERR timeout is not an integer or out of range".into());
    };
    if ms < 0 {
        return Reply::Error("ERR timeout is negative".into());
    }
    let writes_only = match args.get(1).map(|a| a.to_ascii_lowercase()) {
        None => false,
        Some(m) if m == b"all" => false,
        Some(m) if m == b"write" => true,
        Some(_) => return Reply::Error("ERR CLIENT PAUSE mode must be WRITE or ALL".into()),
    };
    let until = Instant::now() + Duration::from_millis(ms as u64);
    let mut pause = lock(&state.pause);
    // A later or stricter pause wins, as in Redis.
    let keep = pause.is_some_and(|p| p.until > until && (!p.writes_only || writes_only));
    if !keep {
        *pause = Some(Pause { until, writes_only });
    }
    drop(pause);
    state.pause_active.store(true, Relaxed);
    state.hold_expiry();
    Reply::OK
}

/// NAMESPACE GET ns|* / SET ns token / ADD ns token / DEL ns, with Kvrocks' replies.
fn namespace(argv: &[Bytes], state: &State) -> Reply {
    if argv.len() < 3 {
        return Reply::Error("ERR wrong number of arguments for 'namespace' command".into());
    }
    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let sub = text(&argv[1]).to_ascii_lowercase();
    let ns = text(&argv[2]);
    let mut config = state.config_mut();
    let result = match (sub.as_str(), argv.len()) {
        ("get", 3) if ns == "*" => {
            let mut items: Vec<Reply> = Vec::new();
            for (ns, token) in &config.namespaces {
                items.push(Reply::bulk(ns.as_bytes()));
                items.push(Reply::bulk(token.as_bytes()));
            }
            items.push(Reply::bulk(DEFAULT_NAMESPACE.as_bytes()));
            items.push(Reply::bulk(config.get("requirepass").as_bytes()));
            return Reply::Array(items);
        }
        ("get", 3) => return Reply::bulk_or_nil(config.namespaces.get(&ns).map(|t| Bytes::from(t.clone()))),
        ("add" | "set", 4) => {
            let token = text(&argv[3]);
            let existing = config.namespaces.get(&ns);
            if sub == "add" && existing.is_some_and(|t| *t == token) {
                return Reply::OK;
            }
            if sub == "add" && existing.is_some() {
                Err("the namespace already exists")
            } else if config.namespaces.iter().any(|(n, t)| *t == token && *n != ns) {
                Err("the token already exists")
            } else if ns.len() > 255 {
                return Reply::Error("ERR size exceed limit 255".into());
            } else if config.get("requirepass").is_empty() {
                Err("forbidden to add namespace when requirepass was empty")
            } else if ns == DEFAULT_NAMESPACE {
                Err("forbidden to add the default namespace")
            } else if state.engine.layout().kind() != rediskv::codec::LayoutKind::Kvrocks {
                Err("the store's layout has no namespaces")
            } else if token == config.get("requirepass") || token == config.get("masterauth") {
                Err("the token is duplicated with requirepass or masterauth")
            } else {
                config.namespaces.insert(ns, token);
                Ok(())
            }
        }
        ("del", 3) => {
            if ns == DEFAULT_NAMESPACE {
                Err("forbidden to delete the default namespace")
            } else if config.namespaces.remove(&ns).is_none() {
                Err("the namespace was not found")
            } else {
                Ok(())
            }
        }
        _ => Err("NAMESPACE subcommand must be one of GET, SET, DEL, ADD"),
    };
    match result {
        Err(e) => Reply::Error(format!("ERR {e}")),
        // Like Kvrocks, a server started with a config file keeps the tokens there.
        Ok(()) if config.file().is_some() => config.rewrite().map_or_else(Reply::Error, |()| Reply::OK),
        Ok(()) => Reply::OK,
    }
}

impl Client {
    /// FLUSHALL from the admin: every record of every namespace, in one batch. (Inside
    /// MULTI, and for a bad argument, the engine answers: it queues or refuses.)
    fn flush_everything(&mut self, argv: &[Bytes], state: &State) -> Reply {
        let mode_ok = match argv {
            [_] => true,
            [_, mode] => mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync"),
            _ => false,
        };
        if !mode_ok || self.session.in_multi() {
            return self.engine.execute(&mut self.session, argv);
        }
        // Every namespace's engine: no command runs meanwhile, and the WATCHes on keys that
        // exist are flagged before they go, as Redis' FLUSHALL does.
        let engines = state.engines();
        let _locks: Vec<_> = engines.iter().map(|e| e.locks().lock(true, std::iter::empty())).collect();
        for engine in &engines {
            engine.touch_all_watched();
        }
        flush_backend(state)
    }
}

/// FSCK (an extension): the library's consistency check over every namespace of the store,
/// one line per problem; an empty array when the data is consistent.
fn fsck(state: &State) -> Reply {
    let backend = state.store.backend();
    match rediskv::fsck::check(&backend, state.engine.layout(), state.engine.now_ms()) {
        Ok(problems) => {
            Reply::Array(problems.iter().map(|p| Reply::bulk(p.to_string().as_bytes())).collect())
        }
        Err(e) => Reply::Error(format!("ERR {e}")),
    }
}

/// COMPACT (as Kvrocks): a disk engine compacts fully, its filter dropping garbage; the
/// memory store runs one full collector pass.
fn compact(state: &State) -> Reply {
    if state.store.collects_itself() {
        return state.store.compact().map_or_else(|e| Reply::Error(format!("ERR {e}")), |()| Reply::OK);
    }
    let backend = state.store.backend();
    match rediskv::gc::compact(
        &backend,
        state.engine.layout(),
        state.engine.now_ms(),
        rediskv::gc::DEFAULT_GRACE_MS,
    ) {
        Ok(_) => Reply::OK,
        Err(e) => Reply::Error(format!("ERR {e}")),
    }
}

/// Deletes every record of the store.
fn flush_backend(state: &State) -> Reply {
    let mut batch = WriteBatch::new();
    let backend = state.store.backend();
    for cf in ColumnFamily::ALL {
        let scan = match backend.scan(cf, &KeyRange::prefix(Vec::new()), rediskv::backend::Direction::Forward)
        {
            Ok(scan) => scan,
            Err(e) => return Reply::Error(format!("ERR {e}")),
        };
        for item in scan {
            match item {
                Ok((key, _)) => batch.delete(cf, key),
                Err(e) => return Reply::Error(format!("ERR {e}")),
            }
        }
    }
    match backend.write(batch) {
        Ok(()) => Reply::OK,
        Err(e) => Reply::Error(format!("ERR {e}")),
    }
}

/// Counts keyspace hits and misses from a read command's reply.
fn keyspace_hits(state: &State, reply: &Reply) {
    let (hits, misses) = match reply {
        Reply::Error(_) => (0, 0),
        Reply::Nil => (0, 1),
        Reply::Array(items) | Reply::Set(items) if items.is_empty() => (0, 1),
        Reply::Map(pairs) if pairs.is_empty() => (0, 1),
        Reply::Array(items) if items.iter().any(|r| matches!(r, Reply::Nil)) => {
            let misses = items.iter().filter(|r| matches!(r, Reply::Nil)).count() as u64;
            (items.len() as u64 - misses, misses)
        }
        Reply::Integer(0) => (0, 1),
        _ => (1, 0),
    };
    state.stats.keyspace_hits.fetch_add(hits, Relaxed);
    state.stats.keyspace_misses.fetch_add(misses, Relaxed);
}

/// Redis 7.0's answer to SHUTDOWN's arguments when it does not shut down: any of NOSAVE,
/// SAVE, NOW, FORCE (NOSAVE and SAVE not together), or ABORT alone (no shutdown is ever in
/// progress here, since one never waits for replicas).
fn shutdown_refusal(args: &[Bytes]) -> Option<&'static str> {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for a in args {
        match a.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"abort" => abort = true,
            b"now" | b"force" => {}
            _ => return Some("ERR syntax error"),
        }
    }
    if (save && nosave) || (abort && args.len() > 1) {
        Some("ERR syntax error")
    } else if abort {
        Some("ERR No shutdown in progress.")
    } else {
        None
    }
}

/// BGSAVE \[SCHEDULE\] and BGREWRITEAOF: the disk engines flush their memtables to tables (and
/// release their journals) on a thread of their own; Redis' replies.
fn background_save(name: &str, argv: &[Bytes], state: &State) -> Reply {
    let schedule = match (name, argv) {
        ("bgsave", [_]) | ("bgrewriteaof", [_]) => false,
        ("bgsave", [_, option]) if option.eq_ignore_ascii_case(b"schedule") => true,
        ("bgsave", _) => return Reply::Error("ERR syntax error".into()),
        _ => return Reply::Error(format!("ERR wrong number of arguments for '{name}' command")),
    };
    if state.bgsave.swap(true, Relaxed) {
        return match (name, schedule) {
            ("bgsave", true) => Reply::status("Background saving scheduled"),
            ("bgsave", false) => Reply::Error("ERR Background save already in progress".into()),
            _ => Reply::status("Background append only file rewriting scheduled"),
        };
    }
    let (sync, running, last_save) = (state.store.syncer(), state.bgsave.clone(), state.last_save.clone());
    let (dirty, before) = (state.dirty.clone(), state.dirty.load(Relaxed));
    std::thread::spawn(move || {
        match sync() {
            Ok(()) => {
                last_save.store(unix_secs(), Relaxed);
                // The changes made while it ran remain (as Redis' dirty_before_bgsave).
                let _ = dirty.fetch_update(Relaxed, Relaxed, |d| Some(d.saturating_sub(before)));
            }
            Err(e) => eprintln!("server: background save failed: {e}"),
        }
        running.store(false, Relaxed);
    });
    Reply::status(if name == "bgsave" {
        "Background saving started"
    } else {
        "Background append only file rewriting started"
    })
}

pub(crate) fn unix_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// LOLWUT [VERSION n]: the version line Redis 7.0 ends its answer with (without the art of
/// versions 5 and 6).
fn lolwut(argv: &[Bytes]) -> Reply {
    if let [_, word, n, ..] = argv {
        if word.eq_ignore_ascii_case(b"version") && parse_i64(n).is_none() {
            return Reply::Error("ERR value is not an integer or out of range".into());
        }
    }
    Reply::Verbatim { format: *b"txt", text: Bytes::from_static(b"Redis ver. 7.0.15\n") }
}

const MODULE_HELP: &[&str] = &[
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
    "HELP",
    "    Prints this help.",
];

/// MODULE LIST (none are loaded: there are no modules) and HELP.
fn module(argv: &[Bytes]) -> Reply {
    let Some(sub) = argv.get(1) else {
        return Reply::Error("ERR wrong number of arguments for 'module' command".into());
    };
    match (sub.to_ascii_lowercase().as_slice(), argv.len()) {
        (b"list", 2) => Reply::Array(Vec::new()),
        (b"help", 2) => Reply::Array(MODULE_HELP.iter().map(|l| Reply::status(l)).collect()),
        (b"list" | b"help", _) => Reply::Error(format!(
            "ERR wrong number of arguments for 'module|{}' command",
            String::from_utf8_lossy(sub).to_ascii_lowercase()
        )),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try MODULE HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// Whether Redis would have refused the command before running it (its command lookup and
/// arity check), so that it never reaches its slow log or MONITOR: here those checks answer
/// from inside the command.
fn refused_before_running(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(e) if ["ERR wrong number of arguments for '", "ERR unknown subcommand '", "ERR unknown command '"]
        .iter()
        .any(|p| e.starts_with(p)))
}

/// The commands this crate answers itself.
const SERVER_COMMANDS: &[&str] = &[
    "quit",
    "acl",
    "eval",
    "evalsha",
    "eval_ro",
    "evalsha_ro",
    "fcall",
    "fcall_ro",
    "script",
    "function",
    "auth",
    "hello",
    "client",
    "reset",
    "time",
    "lastsave",
    "debug",
    "namespace",
    "config",
    "info",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "publish",
    "spublish",
    "pubsub",
    "fsck",
    "compact",
    "save",
    "shutdown",
    "slowlog",
    "latency",
    "monitor",
    "bgsave",
    "bgrewriteaof",
    "role",
    "lolwut",
    "module",
];

/// What a RESP2 client may run while it subscribes to something.
const SUBSCRIBED_MODE: &[&str] = &[
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "ping",
    "quit",
    "reset",
];

/// What follows the writes of a command, an EXEC or a script: keyspace notifications,
/// hints to the maintenance thread, the SWAPDB mapping saved.
pub fn after_writes(state: &State, engine: &SharedEngine, session: &Session) {
    crate::notify::command_events(state, session.events());
    if session.events().iter().any(|e| crate::maint::may_leave_garbage(e.name)) {
        state.maint.garbage_hint.fetch_add(1, Relaxed);
    }
    // SWAPDB may bring keys with TTLs into a database whose sweep backed off.
    if session.events().iter().any(|e| crate::maint::may_set_ttl(e.name)) || !session.swapped_dbs().is_empty()
    {
        state.maint.ttl_hint.fetch_add(1, Relaxed);
    }
    if !session.swapped_dbs().is_empty() {
        let ns = String::from_utf8_lossy(engine.layout().namespace()).into_owned();
        if let Err(e) = state.store.save_db_slots(&ns, &engine.db_slots()) {
            eprintln!("server: cannot save the SWAPDB mapping: {e}");
        }
    }
}

/// Whether the store is past `maxmemory` (the memory engine only: the disk engines' memory is
/// bounded by their caches).
pub fn out_of_memory(state: &State) -> bool {
    let max = state.maxmemory.load(Relaxed);
    max > 0 && state.store.in_memory() && state.used_memory() > max
}

/// Whether rediskv-server answers `name` itself (not the engine).
pub fn is_server_command(name: &str) -> bool {
    SERVER_COMMANDS.contains(&name)
}

fn is_command(name: &str) -> bool {
    SERVER_COMMANDS.contains(&name) || table::lookup(name).is_some()
}

fn arity(argv: &[Bytes], n: usize, run: impl FnOnce() -> Reply) -> Reply {
    if argv.len() == n {
        run()
    } else {
        Reply::Error(format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(&argv[0]).to_ascii_lowercase()
        ))
    }
}

const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are: ID, ADDR, LADDR, USER, TYPE, SKIPME.",
    "LIST [options ...]",
    "    Return information about client connections. Options: TYPE, ID.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "HELP",
    "    Prints this help.",
];

const DEBUG_HELP: &[&str] = &[
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Accepted; expiry here is lazy plus the collector.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "HELP",
    "    Prints this help.",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lists_are_sorted_for_binary_search() {
        assert!(KEYED_READS.windows(2).all(|w| w[0] < w[1]), "{KEYED_READS:?}");
    }

    #[test]
    fn consuming_encoder_writes_what_write_resp_writes() {
        let reply = Reply::Array(vec![
            Reply::bulk(b"a\r\nb"),
            Reply::Set(vec![Reply::Integer(1), Reply::Nil]),
            Reply::Map(vec![(Reply::bulk(b"k"), Reply::Double(1.5))]),
            Reply::Push(vec![Reply::NilArray, Reply::Status("x\ny".into())]),
            Reply::Array(Vec::new()),
        ]);
        let (mut expect, mut got) = (Vec::new(), Vec::new());
        reply.write_resp(&mut expect);
        write_consuming(reply, &mut got);
        assert_eq!(got, expect);
    }
}
