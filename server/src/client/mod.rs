//! One client's commands: where every command a connection sends runs.
//!
//! [`Client::execute`] resolves the command's table row once and takes it through the gate
//! ([`gate`]), the run (the server's own commands by the handler [`dispatch`] maps their row
//! to, everything else in the library's engine), the statistics ([`stats`]), the slow log,
//! MONITOR and the reply. The handlers: the connection commands (AUTH, HELLO, CLIENT, ACL,
//! RESET) in [`connection`], DEBUG in [`debug`], scripts in [`scripts`], pub/sub in
//! [`subscribe`], FLUSHALL in [`flush`], a cluster node's own keyspace in [`keyspace`], replication in [`replicas`], the server's
//! administration in [`server`] (over [`crate::admin`]).

mod connection;
mod debug;
mod dispatch;
mod flush;
mod gate;
mod keyspace;
mod replicas;
mod scripts;
mod server;
mod stats;
mod subscribe;

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::Bytes;
use rediskv::server::args::parse_i64;
use rediskv::server::table::{self, CommandInfo, Family, attr, flag};
use rediskv::{Protocol, Reply, Session};

use crate::acl;
use crate::blocking::Parking;
use crate::client_info::ClientInfo;
use crate::clock::unix_micros;
use crate::pubsub::Subscriptions;
use crate::state::{SharedEngine, State};
use crate::sync::lock;

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
    /// The slot the running command was routed to (cluster mode).
    routed: std::cell::Cell<Option<u16>>,
    /// ASKING was sent: the next command (or transaction) may use a slot being imported.
    asking: std::cell::Cell<bool>,
    /// When the last command of the requests being run ended (unix µs): the next one starts
    /// then (one clock read per command; its time includes its parse, a fraction of a µs).
    /// `None` between batches of requests.
    last_end: Option<u64>,
    /// The row of the last command it sent that its name alone finds (neither a container
    /// nor a subcommand), and that name's bytes as sent (`last_name[..last_len]`, names of
    /// up to 16 bytes): a pipeline mostly repeats one command, and a compare of its name's
    /// bytes costs a fraction of a lookup.
    last_row: Option<&'static CommandInfo>,
    last_name: [u8; 16],
    last_len: usize,
    /// `last_row`'s [`stats::batched`] row.
    last_batched: Option<usize>,
    /// The link to this server's primary: its commands are the replication stream.
    master: bool,
    /// The reply being counted is a script's error that a command of the script answered,
    /// counted in INFO errorstats already.
    error_counted: std::cell::Cell<bool>,
    /// What it said of itself with REPLCONF, should it become a replica.
    replica_hello: crate::replication::ReplicaHello,
    /// Whether it holds back the counts of its data commands and the publication of the
    /// last one it ran until [`Client::flush_counts`] (a client of an event loop, which
    /// flushes at the end of each batch of requests), or publishes them at once.
    defers: bool,
    /// The counts it holds back.
    pending: crate::counters::PendingCounts,
    /// The data command it ran last and when it ended, not yet published in its
    /// [`ClientInfo`].
    unpublished: Option<(&'static CommandInfo, u64)>,
}

impl Client {
    /// A client just connected: authenticated when no password is set.
    pub fn new(info: Arc<ClientInfo>, state: &State, local: bool) -> Self {
        let acl_generation = state.acl.generation();
        let user = state.acl.default_user();
        let session = Session::new(info.id);
        let defers = info.loop_index < state.stats.commands.lanes() - 1;
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
            routed: std::cell::Cell::new(None),
            asking: std::cell::Cell::new(false),
            last_end: None,
            last_row: None,
            last_name: [0; 16],
            last_len: 0,
            last_batched: None,
            master: false,
            error_counted: std::cell::Cell::new(false),
            replica_hello: Default::default(),
            defers,
            pending: Default::default(),
            unpublished: None,
        }
    }

    /// The client a replica runs its primary's stream as: logged in, never refused by ACLs
    /// or the read-only gate.
    pub fn master(info: Arc<ClientInfo>, state: &State) -> Self {
        let mut client = Client::new(info, state, true);
        client.authenticated = true;
        client.restricted = false;
        client.master = true;
        client
    }

    /// Ends the session (forgets its WATCHes and subscriptions): call it when the
    /// connection closes.
    pub fn close(&mut self, state: &State) {
        if let Some((session, _)) = state.blocked.cancel(self.info.id) {
            self.session = session;
        }
        self.engine.close(&mut self.session);
        state.replication.remove(self.info.id);
        self.subs.clear(&state.pubsub, &self.info);
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

    /// Starts or ends a batch of requests read together: within one, a command's start is the
    /// previous one's end. Publishes what the batch held back ([`Client::flush_counts`]).
    pub fn batch(&mut self, state: &State) {
        self.last_end = None;
        self.flush_counts(state);
    }

    /// Runs one command and appends its reply to `out` (unless CLIENT REPLY says not to).
    pub fn execute(&mut self, argv: &[Bytes], state: &State, out: &mut Vec<u8>) -> Next {
        if self.info.killed.load(Relaxed) {
            // CLIENT KILL or ACL DELUSER from another connection: run nothing more.
            return Next::Close;
        }
        // The command's row, found once (a subcommand's own, or its container's when the
        // subcommand is unknown): the gate, the run, the engine, the statistics, the slow log
        // and MONITOR all read it.
        let repeated = self.repeated(argv);
        let found = match repeated {
            Some(info) => Ok(info),
            None => table::find(argv).inspect(|info| self.remember_name(argv, info)),
        };
        let info = match found {
            Ok(info) => info,
            Err(Some(info)) => info,
            Err(None) => {
                // As Redis, an unknown command is refused before AUTH and every other check.
                let refusal = rediskv::server::resolve(argv).err().unwrap_or(Reply::NilArray);
                self.session.flag_transaction();
                self.count_error(state, &refusal);
                self.send(refusal, out, None);
                return Next::Continue;
            }
        };
        // A data command's counts may wait; anything else runs with them up to date.
        let row = match (self.defers, repeated) {
            (false, _) => None,
            (true, Some(_)) => self.last_batched,
            (true, None) => stats::batched(info),
        };
        let deferred = row.is_some();
        if !deferred {
            self.flush_counts(state);
        }
        if self.acl_generation != state.acl.generation() {
            self.reload_user(state);
        }
        // Keys evicted on the way leave this client's invalidations before the reply.
        let refusal = self.refusal(info, argv, state, out);
        if let Some(refusal) = refusal {
            let Some(mut refusal) = refusal else { return Next::Wait };
            if refusal.is_error() {
                self.session.flag_transaction();
            }
            if let (Reply::Error(_), "exec") = (&refusal, info.name) {
                // A refused EXEC ends the transaction, as Redis' execCommandAbort (a cluster
                // redirection is answered as it is).
                if !crate::cluster::is_redirection(&refusal) {
                    refusal = rediskv::server::exec_abort(refusal);
                }
                if self.session.in_multi() {
                    self.engine.execute(&mut self.session, &[Bytes::from_static(b"DISCARD")]);
                    self.multi_len = 0;
                    self.multi_server.clear();
                }
            }
            self.count(state, info, None, None, &refusal);
            self.send(refusal, out, Some(info));
            return Next::Continue;
        }
        // One reading of the wall clock times the command and is the time its expiry checks
        // see, as Redis' `call`.
        let started = self.last_end.take().unwrap_or_else(unix_micros);
        // CLIENT INFO/LIST show the running command, as Redis does (a data command's
        // is published with its end, when the batch ends: nothing reads it meanwhile).
        if !deferred {
            self.info.ran(started, Some(info));
        }
        self.session.set_time(started / 1000);
        // EXEC runs the queue inside the engine: MONITOR shows its commands first, as Redis.
        let queued: Vec<Vec<Bytes>> = if info.name == "exec" && state.monitors.any() {
            self.session.queued().map(<[Bytes]>::to_vec).collect()
        } else {
            Vec::new()
        };
        let (reply, next) = self.run(info, argv, state);
        let reply = match (self.routed.take(), state.cluster.get()) {
            // The slot table moved after the command was routed: nothing was committed.
            (Some(slot), Some(cluster)) if crate::cluster::fenced(&reply) => {
                cluster.after_fence(&state.store, slot, self.info.tls.load(Relaxed))
            }
            _ => reply,
        };
        self.session.set_time(0);
        let ended = unix_micros();
        let usec = ended.saturating_sub(started);
        if state.monitors.any() {
            self.monitor(info, argv, &queued, &reply, state);
        }
        if deferred {
            self.unpublished = Some((info, ended));
        }
        self.count(state, info, row, Some(usec), &reply);
        if next == Next::Parked {
            return next;
        }
        state.latency.observe(if info.has(flag::FAST) { "fast-command" } else { "command" }, usec);
        if state.slowlog.wants(usec) && !info.has(flag::SKIP_SLOWLOG) && !refused_before_running(&reply) {
            let client_name = lock(&self.info.name).clone();
            state.slowlog.record(argv, usec, unix_micros() / 1_000_000, &self.info.addr, client_name);
        }
        if info.is(attr::KEYED_READ) {
            stats::keyspace_hits(self, state, &reply);
        }
        if !deferred {
            self.info.ran(ended, None);
        }
        self.last_end = Some(ended);
        self.send(reply, out, Some(info));
        if !self.pushes.is_empty() {
            out.append(&mut self.pushes);
        }
        if self.caching && !self.session.in_multi() && info.container() != "client" {
            self.caching = false;
        }
        if self.info.killed.load(Relaxed) {
            return Next::Close;
        }
        next
    }

    /// The row of the last command when `argv` names it by the same bytes (see
    /// [`Client::last_row`]).
    #[inline]
    fn repeated(&self, argv: &[Bytes]) -> Option<&'static CommandInfo> {
        let name = argv.first()?;
        let len = self.last_len;
        if name.len() == len && name[..] == self.last_name[..len] { self.last_row } else { None }
    }

    /// Remembers the row `find` gave for `argv` when its name alone finds it, under that
    /// name's bytes.
    fn remember_name(&mut self, argv: &[Bytes], info: &'static CommandInfo) {
        self.last_row = None;
        self.last_len = 0;
        let Some(name) = argv.first() else { return };
        if !info.named_alone() || name.len() > self.last_name.len() {
            return;
        }
        self.last_name[..name.len()].copy_from_slice(name);
        self.last_len = name.len();
        self.last_row = Some(info);
        self.last_batched = stats::batched(info);
    }

    /// Shows a command that ran to the MONITOR clients, unless Redis would not: admin
    /// commands, commands refused before running, commands queued by MULTI (shown by EXEC).
    fn monitor(
        &self,
        info: &CommandInfo,
        argv: &[Bytes],
        queued: &[Vec<Bytes>],
        reply: &Reply,
        state: &State,
    ) {
        // A script command is shown before its script runs (see `script`).
        if info.has(flag::ADMIN | flag::SKIP_MONITOR)
            || refused_before_running(reply)
            || matches!(reply, Reply::Status(s) if s == "QUEUED")
        {
            return;
        }
        let (now, db) = (unix_micros(), self.session.db());
        if matches!(reply, Reply::Array(_)) {
            for command in queued {
                state.monitors.feed(&state.loops, command, now, db, &self.info.addr);
            }
        }
        state.monitors.feed(&state.loops, argv, now, db, &self.info.addr);
    }

    /// Writes a reply unless CLIENT REPLY OFF/SKIP holds it back (`info`: the command that
    /// answers it, `None` for an unknown one).
    #[inline(always)]
    fn send(&mut self, reply: Reply, out: &mut Vec<u8>, info: Option<&CommandInfo>) {
        if self.reply == ReplyMode::On && self.more.is_empty() {
            // The commonest replies, the same in RESP2 and RESP3, written at once (OK and an
            // integer hold nothing to free: forgotten, no drop to run).
            return match reply {
                Reply::Status(std::borrow::Cow::Borrowed("OK")) | Reply::Integer(_) => {
                    reply.write_resp(out);
                    std::mem::forget(reply);
                }
                Reply::Bulk(_) => reply.write_resp(out),
                reply => self.send_other(reply, out),
            };
        }
        self.send_held(reply, out, info);
    }

    /// [`Client::send`] of a reply other than OK, an integer or a bulk string, replies on.
    #[inline(never)]
    fn send_other(&mut self, reply: Reply, out: &mut Vec<u8>) {
        if self.session.resp() == 3 {
            reply.write(Protocol::Resp3, out);
        } else {
            write_consuming(reply, out);
        }
    }

    /// [`Client::send`] while CLIENT REPLY OFF/SKIP may hold the reply back, or a command
    /// answers several.
    #[inline(never)]
    fn send_held(&mut self, reply: Reply, out: &mut Vec<u8>, info: Option<&CommandInfo>) {
        // CLIENT REPLY SKIP skips the command after itself, not itself.
        let client = self.reply != ReplyMode::On && info.is_some_and(|i| i.container() == "client");
        self.send_one(reply, out, client);
        if !self.more.is_empty() {
            for reply in std::mem::take(&mut self.more) {
                self.send_one(reply, out, client);
            }
        }
    }

    fn send_one(&mut self, reply: Reply, out: &mut Vec<u8>, client: bool) {
        // Pushes (subscribe confirmations and messages, in RESP2 too) are not replies: CLIENT
        // REPLY OFF/SKIP does not hold them back, as in Redis (its CLIENT_PUSHING).
        let push = matches!(reply, Reply::Push(_));
        match self.reply {
            ReplyMode::On if self.session.resp() == 3 => return reply.write(Protocol::Resp3, out),
            ReplyMode::On => return write_consuming(reply, out),
            ReplyMode::Skip if !client => self.reply = ReplyMode::On,
            _ => {}
        }
        if push {
            let protocol = if self.session.resp() == 3 { Protocol::Resp3 } else { Protocol::Resp2 };
            reply.write(protocol, out);
        }
    }

    /// Runs a command that passed the gates.
    ///
    /// Every command runs from here: the server's own by their handlers
    /// ([`dispatch::handler`]), the rest in the engine.
    #[inline(always)]
    fn run(&mut self, info: &'static CommandInfo, argv: &[Bytes], state: &State) -> (Reply, Next) {
        // A type's own commands have no handler (those are server, session, keyspace and
        // generic rows): straight to the engine, past the names.
        if !matches!(info.family, Family::Server | Family::Session | Family::Keyspace | Family::Generic) {
            return self.run_in_engine(info, argv, state);
        }
        let name = info.container();
        if self.session.in_multi() && info.family == Family::Server && !matches!(name, "quit" | "reset") {
            return (self.queue_server_command(argv), Next::Continue);
        }
        match dispatch::handler(info) {
            Some(handler) => handler(self, info, argv, state),
            None => self.run_in_engine(info, argv, state),
        }
    }

    /// A data command (or MULTI, EXEC, WATCH…): the engine runs it, then what follows its
    /// writes (client tracking, notifications, blocked clients, the collector's hints).
    fn run_in_engine(&mut self, info: &'static CommandInfo, argv: &[Bytes], state: &State) -> (Reply, Next) {
        let name = info.container();
        if info.family == Family::Keyspace
            && name == "select"
            && parse_i64(argv.get(1).map_or(&[][..], |a| a))
                .is_some_and(|i| i >= state.config().number("databases"))
        {
            return (Reply::Error("ERR DB index is out of range".into()), Next::Continue);
        }
        let was_in_multi = self.session.in_multi();
        let reads = if self.tracking { self.tracked_reads(name, argv) } else { Vec::new() };
        // FLUSHDB and FLUSHALL are keyspace rows, EXEC a session row: no other row flushes.
        let flushes = matches!(info.family, Family::Keyspace | Family::Session) && self.flushes(name);
        // Every command reaches here past the gate, which checked its arity
        // (`check_row`); the connection commands a transaction queued, when they were queued.
        let reply = self.engine.execute_checked(&mut self.session, info, argv);
        if flushes && !reply.is_error() {
            // A flush leaves every collection's records as garbage, with no per-key
            // event to say so: start a collector pass.
            state.maint.garbage_hint.fetch_add(1, Relaxed);
            state.maint.flushes.fetch_add(1, Relaxed);
        }
        if state.tracking.active() {
            self.invalidate(&reads, flushes && !reply.is_error(), &reply, state);
        }
        self.info.db.store(self.session.db(), Relaxed);
        crate::maint::after_writes(state, self.info.loop_index, &self.engine, &self.session);
        if let Some(block) = self.session.take_block() {
            return self.park(argv, block, state);
        }
        let succeeded = !reply.is_error();
        // An EXEC's queued connection commands run first: Redis serves the clients
        // its writes unblock after the whole transaction.
        let (reply, next) =
            if was_in_multi { self.after_multi_command(name, reply, state) } else { (reply, Next::Continue) };
        if state.blocked.any() {
            state.blocked.wake(state, &self.engine, &self.session);
        }
        if succeeded && info.family == Family::Keyspace {
            self.wake_flushed(name, state);
        }
        (reply, next)
    }

    /// Hands the session to the blocked-client registry; the connection waits for its answer.
    fn park(&mut self, argv: &[Bytes], block: rediskv::server::Block, state: &State) -> (Reply, Next) {
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
            // Queued after its row was found: it has one.
            let (Ok(info) | Err(Some(info))) = table::find(&argv) else { continue };
            let started = Instant::now();
            self.in_exec = true;
            let (r, n) = self.run(info, &argv, state);
            self.in_exec = false;
            // Each command of a transaction is logged, EXEC itself is not (as Redis).
            let usec = started.elapsed().as_micros() as u64;
            let skip = info.has(flag::SKIP_SLOWLOG);
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

/// Whether Redis would have refused the command before running it (its command lookup and
/// arity check), so that it never reaches its slow log or MONITOR: here those checks answer
/// from inside the command.
fn refused_before_running(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(e) if ["ERR wrong number of arguments for '", "ERR unknown subcommand '", "ERR unknown command '"]
        .iter()
        .any(|p| e.starts_with(p)))
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

#[cfg(test)]
mod tests {
    use super::*;

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
