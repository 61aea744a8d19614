//! The server's administration commands: NAMESPACE (Kvrocks' tenants), FSCK, COMPACT,
//! SHUTDOWN, BGSAVE/BGREWRITEAOF, LOLWUT, MODULE, and the store-wide flush FLUSHALL runs.

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::args::parse_i64;
use rediskv::{ColumnFamily, KeyRange};
use rediskv::{KvBackend, WriteBatch};

use crate::state::{DEFAULT_NAMESPACE, State};
use crate::{config, tracking};

/// NAMESPACE GET ns|* / SET ns token / ADD ns token / DEL ns, with Kvrocks' replies.
pub fn namespace(argv: &[Bytes], state: &State) -> Reply {
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
            } else if state.engine.layout().kind() != rediskv::LayoutKind::Kvrocks {
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

/// FSCK (an extension): the library's consistency check over every namespace of the store,
/// one line per problem; an empty array when the data is consistent.
pub fn fsck(state: &State) -> Reply {
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
pub fn compact(state: &State) -> Reply {
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
pub fn flush_backend(state: &State) -> Reply {
    let mut batch = WriteBatch::new();
    let backend = state.store.backend();
    for cf in ColumnFamily::ALL {
        let scan = match backend.scan(cf, &KeyRange::prefix(Vec::new()), rediskv::Direction::Forward) {
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

/// Redis 7.0's answer to SHUTDOWN's arguments when it does not shut down: any of NOSAVE,
/// SAVE, NOW, FORCE (NOSAVE and SAVE not together), or ABORT alone (no shutdown is ever in
/// progress here, since one never waits for replicas).
pub fn shutdown_refusal(args: &[Bytes]) -> Option<&'static str> {
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

/// BGSAVE \[SCHEDULE\] ([`crate::rdb::background_save`]) and BGREWRITEAOF (a disk
/// engine's memtables flushed to tables on a thread of its own), with Redis' replies.
pub fn background_save(name: &str, argv: &[Bytes], state: &State) -> Reply {
    let schedule = match (name, argv) {
        ("bgsave", [_]) | ("bgrewriteaof", [_]) => false,
        ("bgsave", [_, option]) if option.eq_ignore_ascii_case(b"schedule") => true,
        ("bgsave", _) => return Reply::Error("ERR syntax error".into()),
        _ => return Reply::Error(format!("ERR wrong number of arguments for '{name}' command")),
    };
    if name == "bgrewriteaof" {
        let sync = state.store.syncer();
        std::thread::spawn(move || {
            if let Err(e) = sync() {
                crate::log::warning!("Background flush failed: {e}");
            }
        });
        return Reply::status("Background append only file rewriting started");
    }
    match crate::rdb::background_save(state) {
        Ok(true) => Reply::status("Background saving started"),
        Ok(false) if schedule => {
            state.rdb.scheduled.store(true, Relaxed);
            Reply::status("Background saving scheduled")
        }
        Ok(false) => Reply::Error("ERR Background save already in progress".into()),
        Err(e) => Reply::Error(format!("ERR {e}")),
    }
}

/// LOLWUT [VERSION n]: the version line Redis 7.0 ends its answer with (without the art of
/// versions 5 and 6).
pub fn lolwut(argv: &[Bytes]) -> Reply {
    if let [_, word, n, ..] = argv
        && word.eq_ignore_ascii_case(b"version")
        && parse_i64(n).is_none()
    {
        return Reply::Error("ERR value is not an integer or out of range".into());
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
pub fn module(argv: &[Bytes]) -> Reply {
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

/// The running server, as CONFIG SET changes it.
struct Running<'a>(&'a State);

impl config::Apply for Running<'_> {
    fn listen(&mut self, tls: bool, bind: &str, port: &str) -> Result<(), String> {
        let side = if tls { crate::listen::Side::Tls } else { crate::listen::Side::Plain };
        self.0.listen.rebind(side, bind, port)
    }

    fn tls(&mut self, config: &config::Config) -> Result<(), String> {
        self.0.tls.configure(config)
    }

    fn tls_configured(&self) -> bool {
        self.0.tls.configured()
    }
}

/// CONFIG: the parameters, and what a change to them changes in the running server.
pub fn config(argv: &[Bytes], state: &State) -> Reply {
    let mut config = state.config_mut();
    let requirepass = config.get("requirepass").to_string();
    let reset = || {
        state.stats.reset();
        state.eviction.reset_stats();
    };
    let reply = config::config(argv, &mut config, reset, &mut Running(state));
    if config.get("requirepass") != requirepass {
        state.acl.set_default_password(Some(config.get("requirepass").as_bytes()));
    }
    state.keep_params(&config);
    state.replication.configure(&config);
    state.slowlog.configure(&config);
    state.latency.configure(&config);
    state.stats.commands.tracking.store(config.get("latency-tracking") == "yes", Relaxed);
    let max_keys = config.number("tracking-table-max-keys").max(0) as usize;
    drop(config);
    crate::notify::configure(state);
    crate::evict::configure(state);
    // As Redis after CONFIG SET: evict now if memory is over a (lower) maxmemory.
    let mut own = Vec::new();
    crate::evict::perform(state, None, &mut own);
    if state.tracking.active() {
        let mut own = Vec::new();
        state.tracking.limit(state.peers(), max_keys, &mut tracking::Delivery { me: None, own: &mut own });
    }
    reply
}
