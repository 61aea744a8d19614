//! The connection commands: AUTH, HELLO, RESET, ACL, CLIENT, and what client tracking
//! remembers and invalidates around each command.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rediskv::server::args::parse_i64;
use rediskv::server::table::{self, flag};
use rediskv::{Reply, Session};

use super::{Client, Next, ReplyMode};
use crate::acl;
use crate::client_info::ClientInfo;
use crate::state::{Pause, State};
use crate::sync::lock;
use crate::tracking;

impl Client {
    /// AUTH `[user] password`: an ACL user, or with the default user's name a namespace
    /// token (a tenant). Passwords are compared in constant time.
    pub(super) fn auth(&mut self, argv: &[Bytes], state: &State) -> Reply {
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
    pub(super) fn reload_user(&mut self, state: &State) {
        self.acl_generation = state.acl.generation();
        let user = state
            .acl
            .user(self.user.name())
            .unwrap_or_else(|| Arc::new(acl::User::deleted(self.user.name())));
        self.restricted = !user.unrestricted();
        self.user = user;
    }

    /// The ACL command; ACL DELUSER closes the deleted users' connections.
    pub(super) fn acl(&mut self, argv: &[Bytes], state: &State) -> Reply {
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
    pub(super) fn hello(&mut self, argv: &[Bytes], state: &State) -> Reply {
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
        if let Some((user, password)) = auth
            && let Err(e) = self.login(Some(user), password, &argv[0], state)
        {
            return e;
        }
        if !self.authenticated {
            return Reply::Error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH \
                 <user> <pass> option can be used to authenticate the client and select the RESP protocol \
                 version at the same time"
                    .into(),
            );
        }
        if let Some(name) = name
            && let Err(e) = self.set_name(name)
        {
            return e;
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
    pub(super) fn reset(&mut self, argv: &[Bytes], state: &State) -> Reply {
        if argv.len() != 1 {
            return super::arity(argv, 1, || Reply::OK);
        }
        self.reply = ReplyMode::On;
        state.tracking.disable(&self.info);
        self.tracking = false;
        self.caching = false;
        state.monitors.remove(self.info.id);
        self.subs.clear(&state.pubsub, &self.info);
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
    pub(super) fn client(&mut self, argv: &[Bytes], state: &State) -> (Reply, Next) {
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
                state.loops.kick();
                Reply::OK
            }
            ("unblock", 3 | 4) => client_unblock(&argv[2..], state),
            ("tracking", n) if n >= 3 => {
                let reply = tracking::client_tracking(&argv[2..], &self.info, &state.tracking, state.peers());
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
    pub(super) fn remembers_reads(&self) -> bool {
        match lock(&self.info.tracking).as_ref() {
            Some(m) if m.optin => self.caching,
            Some(m) if m.optout => !self.caching,
            Some(m) => !m.bcast,
            None => false,
        }
    }

    pub(super) fn tracked_reads(&self, name: &str, argv: &[Bytes]) -> Vec<Bytes> {
        if !self.remembers_reads() || (self.session.in_multi() && name != "exec") {
            return Vec::new();
        }
        let reads = |cmd: &[Bytes]| match table::find(cmd) {
            Ok(info) if info.has(flag::READONLY) && !info.has(flag::PUBSUB) => table::keys(cmd),
            _ => Vec::new(),
        };
        if name == "exec" { self.session.queued().flat_map(reads).collect() } else { reads(argv) }
    }

    /// After a command ran in the engine: remembers what it read for this client, and
    /// invalidates what it wrote (everything, after FLUSHDB or FLUSHALL) for every client.
    pub(super) fn invalidate(&mut self, reads: &[Bytes], flushed: bool, reply: &Reply, state: &State) {
        let ns = self.engine.layout().namespace().to_vec();
        let mut to = tracking::Delivery { me: Some(&self.info), own: &mut self.pushes };
        let written = self.engine.modified_keys(self.session.touched());
        // A flush invalidates everything with one message (null), as Redis: no message per
        // key it deleted.
        if flushed {
            state.tracking.flush(state.peers(), &mut to);
        } else if !written.is_empty() {
            state.tracking.invalidate(state.peers(), &ns, &written, &mut to);
        }
        if !reads.is_empty() && !reply.is_error() {
            let max = state.config().number("tracking-table-max-keys").max(0) as usize;
            state.tracking.remember(state.peers(), &ns, reads, self.info.id, max, &mut to);
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
                "type" => match ClientKind::named(value.as_bytes()) {
                    Some(kind) => filter.kind = Some(kind),
                    None => {
                        return (Reply::Error(format!("ERR Unknown client type '{value}'")), Next::Continue);
                    }
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
}

#[derive(Default)]
struct KillFilter {
    id: Option<u64>,
    addr: Option<String>,
    laddr: Option<String>,
    skipme: bool,
    /// Logged in as this ACL user.
    user: Option<Vec<u8>>,
    /// CLIENT KILL TYPE.
    kind: Option<ClientKind>,
}

/// The client types of CLIENT KILL and CLIENT LIST (Redis' `getClientType`; a subscriber
/// counts as normal here).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    Normal,
    Master,
    Replica,
    PubSub,
}

impl ClientKind {
    /// The type named after TYPE (`None`: unknown).
    fn named(name: &[u8]) -> Option<ClientKind> {
        match name.to_ascii_lowercase().as_slice() {
            b"normal" => Some(ClientKind::Normal),
            b"master" => Some(ClientKind::Master),
            b"slave" | b"replica" => Some(ClientKind::Replica),
            b"pubsub" => Some(ClientKind::PubSub),
            _ => None,
        }
    }

    fn of(c: &ClientInfo) -> ClientKind {
        if c.master.load(Relaxed) {
            ClientKind::Master
        } else if c.replica.load(Relaxed) {
            ClientKind::Replica
        } else {
            ClientKind::Normal
        }
    }
}

impl KillFilter {
    fn matches(&self, c: &ClientInfo, me: u64) -> bool {
        self.kind.is_none_or(|k| k == ClientKind::of(c))
            && self.id.is_none_or(|id| id == c.id)
            && self.addr.as_ref().is_none_or(|a| *a == c.addr)
            && self.laddr.as_ref().is_none_or(|a| *a == c.laddr)
            && self.user.as_ref().is_none_or(|u| *u == *lock(&c.user))
            && !(self.skipme && c.id == me)
    }
}

fn kill_client(c: &ClientInfo, state: &State) {
    c.killed.store(true, Relaxed);
    state.loops.kick();
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
    crate::blocking::send_answer(&state.loops, &info, session, &answer, &[]);
    Reply::Integer(1)
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id…].
fn client_list(args: &[Bytes], state: &State) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut kind = None;
    match args.first().map(|a| a.to_ascii_lowercase()) {
        None => {}
        Some(k) if k == b"type" && args.len() == 2 => match ClientKind::named(&args[1]) {
            Some(named) => kind = Some(named),
            None => {
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
        if kind.is_some_and(|k| k != ClientKind::of(c))
            || ids.as_ref().is_some_and(|ids| !ids.contains(&c.id))
        {
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
