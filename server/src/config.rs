//! The parameter table, the redis.conf-style config file, and CONFIG GET/SET/RESETSTAT/REWRITE.
//!
//! Every parameter redis-server 7.0.15 lists under `CONFIG GET *` is here, with Redis'
//! default and what CONFIG SET accepts (`redis_config.tsv`, generated once from a real server
//! by `tools/gen_config_table.py`). The server honours port, bind, databases, requirepass,
//! maxmemory and its policies (the memory engine: see `evict`), timeout, proto-max-bulk-len,
//! client-query-buffer-limit, maxclients, dir, enable-debug-command, loglevel and logfile
//! (see `log`) and the `tls-*` parameters (see `tls`); the others are
//! validated and stored like Redis would (appendfsync, notify-keyspace-events, save, …), so
//! clients that read or set them are not surprised.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::args::Glob;

use crate::resp::split_args;

/// The Redis version the server answers as (INFO, HELLO, `redis.REDIS_VERSION` in scripts).
pub const REDIS_VERSION: &str = "7.0.15";

/// Parameters naming files whose content may change under the same name: setting one to
/// its value applies it again (Redis' `VOLATILE_CONFIG`), so that a renewed certificate is
/// read.
const VOLATILE: &[&str] = &[
    "tls-cert-file",
    "tls-key-file",
    "tls-client-cert-file",
    "tls-client-key-file",
    "tls-dh-params-file",
    "tls-ca-cert-file",
    "tls-ca-cert-dir",
];

/// Parameters whose value is several words, written unquoted by CONFIG REWRITE.
const MULTI_WORD: &[&str] =
    &["save", "bind", "client-output-buffer-limit", "oom-score-adj-values", "replicaof"];

/// What CONFIG SET accepts for a parameter.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Bool,
    Int(i64, i64),
    Memory(i64, i64),
    Enum(Vec<String>),
    Str,
    Immutable,
    Protected,
}

impl Kind {
    fn parse(s: &str) -> Kind {
        let mut parts = s.split(':');
        let tag = parts.next().unwrap_or("");
        let mut num = || parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        match tag {
            "bool" => Kind::Bool,
            "int" => Kind::Int(num(), num()),
            "mem" => Kind::Memory(num(), num()),
            "enum" => Kind::Enum(s[5..].split(',').map(str::to_string).collect()),
            "immutable" => Kind::Immutable,
            "protected" => Kind::Protected,
            _ => Kind::Str,
        }
    }

    /// What CONFIG SET accepts, in words (docs/configuration.md).
    #[cfg(test)]
    fn accepts(&self) -> String {
        let range = |lo: i64, hi: i64| match (lo, hi) {
            (lo, i64::MAX) => format!("{lo} or more"),
            (lo, hi) => format!("{lo} to {hi}"),
        };
        match self {
            Kind::Bool => "yes, no".into(),
            Kind::Int(lo, hi) => format!("an integer, {}", range(*lo, *hi)),
            Kind::Memory(lo, hi) => format!("bytes (or 1kb, 5mb…), {}", range(*lo, *hi)),
            Kind::Enum(words) => words.join(", "),
            Kind::Str => "a string".into(),
            Kind::Immutable | Kind::Protected => "set at start only".into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Param {
    kind: Kind,
    default: String,
    value: String,
    /// Listed by CONFIG GET only when asked for by its exact name.
    hidden: bool,
}

impl Param {
    /// A parameter of `kind` (as the table spells it) at its default `value`.
    fn new(kind: &str, value: &str, hidden: bool) -> Param {
        Param { kind: Kind::parse(kind), default: value.to_string(), value: value.to_string(), hidden }
    }
}

/// Redis 7.0's hidden parameters (its `HIDDEN_CONFIG` debug knobs), with their kinds and
/// defaults: validated and stored, and used by nothing here (this server has no RDB load
/// or save to slow down, no watchdog, no panic exit).
const HIDDEN: [(&str, &str, &str); 5] = [
    ("use-exit-on-panic", "bool", "no"),
    ("rdb-key-save-delay", "int:-2147483648:2147483647", "0"),
    ("key-load-delay", "int:-2147483648:2147483647", "0"),
    ("watchdog-period", "int:0:2147483647", "0"),
    ("loading-process-events-interval-bytes", "int:1024:2147483647", "2097152"),
];

/// The server's configuration: every Redis parameter with its current value.
#[derive(Debug, Clone)]
pub struct Config {
    params: BTreeMap<String, Param>,
    /// The config file the server was started with (CONFIG REWRITE writes it).
    file: Option<PathBuf>,
    /// Namespace → token, Kvrocks' `namespace.<ns> <token>` lines.
    pub namespaces: BTreeMap<String, String>,
}

/// Why a value was refused: the text after Redis' `possibly related to argument` prefix.
type Refusal = String;

impl Config {
    /// Redis 7.0.15's defaults, with `dir` the working directory and this server's own
    /// listening defaults (port 6380, bind 127.0.0.1).
    pub fn new() -> Config {
        let mut params = BTreeMap::new();
        for line in include_str!("redis_config.tsv").lines() {
            let mut cols = line.splitn(3, '\t');
            let (Some(name), Some(kind), Some(value)) = (cols.next(), cols.next(), cols.next()) else {
                continue;
            };
            params.insert(name.to_string(), Param::new(kind, value, false));
        }
        for (name, kind, value) in HIDDEN {
            params.insert(name.to_string(), Param::new(kind, value, true));
        }
        let mut config = Config { params, file: None, namespaces: BTreeMap::new() };
        let cwd = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| ".".into());
        for (name, value) in [("port", "6380"), ("bind", "127.0.0.1"), ("dir", cwd.as_str())] {
            if let Some(p) = config.params.get_mut(name) {
                p.default = value.to_string();
                p.value = value.to_string();
            }
        }
        config
    }

    /// Every parameter as (name, default, what CONFIG SET accepts, hidden), in name order:
    /// docs/configuration.md is generated from this.
    #[cfg(test)]
    pub fn described(&self) -> Vec<(&str, &str, String, bool)> {
        self.params
            .iter()
            .map(|(name, p)| (name.as_str(), p.default.as_str(), p.kind.accepts(), p.hidden))
            .collect()
    }

    fn put(&mut self, name: &str, value: &str) {
        // Redis 7.0 keeps an older name as an alias of the same setting.
        let alias = match name {
            "lua-time-limit" => "busy-reply-threshold",
            "busy-reply-threshold" => "lua-time-limit",
            "slaveof" => "replicaof",
            "replicaof" => "slaveof",
            _ => name,
        };
        for name in [name, alias] {
            if let Some(p) = self.params.get_mut(name) {
                p.value = value.to_string();
            }
        }
        if name == "loglevel" {
            crate::log::set_level(value);
        }
    }

    /// A class (`pubsub`, `replica` alias `slave`) of `client-output-buffer-limit`. A
    /// replica's hard limit is at least `repl-backlog-size`, as Redis takes it (a replica
    /// dropped short of it could continue from the backlog, and be dropped again).
    pub fn output_limit(&self, class: &str) -> OutputLimit {
        let words: Vec<&str> = self.get("client-output-buffer-limit").split_whitespace().collect();
        let named = |w: &&str| {
            w.eq_ignore_ascii_case(class) || (class == "replica" && w.eq_ignore_ascii_case("slave"))
        };
        let Some(at) = words.iter().position(named) else { return OutputLimit::default() };
        let size = |i: usize| words.get(at + i).and_then(|w| memory(w)).map_or(0, |n| n.max(0) as u64);
        let mut hard = size(1);
        if class == "replica" && hard > 0 {
            hard = hard.max(self.number("repl-backlog-size").max(0) as u64);
        }
        OutputLimit {
            hard,
            soft: size(2),
            soft_seconds: words.get(at + 3).and_then(|w| w.parse().ok()).unwrap_or(0),
        }
    }

    /// The current value of a parameter ("" for an unknown name).
    pub fn get(&self, name: &str) -> &str {
        self.params.get(name).map_or("", |p| p.value.as_str())
    }

    /// A numeric parameter's value (0 when not a number).
    pub fn number(&self, name: &str) -> i64 {
        self.get(name).parse().unwrap_or(0)
    }

    /// The config file the server was started with.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Reads a redis.conf-style file: `name value…` lines, `#` comments, quoting as in
    /// redis-cli; `namespace.<ns> <token>` lines add Kvrocks namespaces.
    ///
    /// # Errors
    /// Redis' fatal config error text, naming the line.
    pub fn load_file(&mut self, path: &Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("Fatal error, can't open config file '{}': {e}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let fail = |why: &str| {
                format!(
                    "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line {}\n>>> '{line}'\n{why}",
                    n + 1
                )
            };
            let Some(words) = split_args(line.trim().as_bytes()) else {
                return Err(fail("Unbalanced quotes in configuration line"));
            };
            if words.is_empty() || words[0].first() == Some(&b'#') {
                continue;
            }
            let name = String::from_utf8_lossy(&words[0]).to_ascii_lowercase();
            let value = words[1..].iter().map(|w| String::from_utf8_lossy(w)).collect::<Vec<_>>().join(" ");
            if let Some(ns) = name.strip_prefix("namespace.") {
                self.namespaces.insert(ns.to_string(), value);
                continue;
            }
            if words.len() < 2 {
                return Err(fail("Bad directive or wrong number of arguments"));
            }
            self.set_one(&name, &value, true).map_err(|e| fail(&e))?;
        }
        self.file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        Ok(())
    }

    /// Sets one parameter from the command line or the config file (`starting`: immutable
    /// and protected ones too), or from CONFIG SET.
    ///
    /// # Errors
    /// Redis' reason text when the name is unknown or the value is refused.
    pub fn set_one(&mut self, name: &str, value: &str, starting: bool) -> Result<(), Refusal> {
        let Some(param) = self.params.get(name) else {
            return Err("Bad directive or wrong number of arguments".into());
        };
        let value = check(name, &param.kind, value, starting)?;
        self.put(name, &value);
        Ok(())
    }

    /// Records what REPLICAOF set (`host port`, or empty for NO ONE), so that CONFIG
    /// REWRITE keeps the role across a restart, as Redis does (Sentinel rewrites the config
    /// of every server it reconfigures).
    pub fn set_replicaof(&mut self, value: &str) {
        self.put("replicaof", value);
    }

    /// Writes the configuration back into its file: known directives get their current
    /// value in place, changed parameters missing from the file and the namespaces are
    /// appended, repeated directives dropped; comments and blank lines stay.
    ///
    /// # Errors
    /// Redis' text for a server without a config file, or the I/O error.
    pub fn rewrite(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("ERR The server is running without a config file".into());
        };
        let old = std::fs::read_to_string(path).unwrap_or_default();
        let mut written = std::collections::BTreeSet::new();
        let mut out = String::new();
        for line in old.lines() {
            let first = split_args(line.trim().as_bytes()).and_then(|w| w.into_iter().next());
            let name = first.map(|w| String::from_utf8_lossy(&w).to_ascii_lowercase()).unwrap_or_default();
            let name = if name == "slaveof" { "replicaof".to_string() } else { name };
            let known = self.params.contains_key(&name) || name.starts_with("namespace.");
            if name.is_empty() || name.starts_with('#') || !known {
                out.push_str(line);
                out.push('\n');
            } else if written.insert(name.clone()) {
                if name == "replicaof" {
                    // A primary has no replicaof line, as Redis rewrites it.
                    if !self.get(&name).is_empty() {
                        out.push_str(&self.directive(&name));
                    }
                } else if let Some(ns) = name.strip_prefix("namespace.") {
                    if let Some(token) = self.namespaces.get(ns) {
                        let _ = writeln!(out, "{name} {}", quote(token));
                    }
                } else {
                    out.push_str(&self.directive(&name));
                }
            }
        }
        for (name, p) in &self.params {
            // `replicaof` is immutable but follows REPLICAOF ([`Config::set_replicaof`]).
            let rewritable = !matches!(p.kind, Kind::Immutable) || name == "replicaof";
            if p.value != p.default && !written.contains(name) && rewritable {
                out.push_str(&self.directive(name));
            }
        }
        for (ns, token) in &self.namespaces {
            if !written.contains(&format!("namespace.{ns}")) {
                let _ = writeln!(out, "namespace.{ns} {}", quote(token));
            }
        }
        let tmp = path.with_extension("rewrite.tmp");
        std::fs::write(&tmp, out)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| format!("ERR Rewriting config file: {e}"))
    }

    fn directive(&self, name: &str) -> String {
        let value = self.get(name);
        if MULTI_WORD.contains(&name) && !value.is_empty() {
            format!("{name} {value}\n")
        } else {
            format!("{name} {}\n", quote(value))
        }
    }

    /// CONFIG GET pattern…: name/value pairs of every parameter matching a pattern, each
    /// once: the patterns in the order given, each one's matches in name order; a hidden
    /// parameter ([`HIDDEN`]) only for its exact name. (Redis 7.0
    /// answers in the order of a hash table seeded randomly at start, so no order is Redis'
    /// own; this one is stable.)
    fn matching(&self, patterns: &[Bytes]) -> Vec<(Reply, Reply)> {
        let mut seen = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for pattern in patterns {
            let pattern = pattern.to_ascii_lowercase();
            // A hidden parameter answers its exact name only, as in Redis.
            let exact = !pattern.iter().any(|b| matches!(b, b'*' | b'?' | b'['));
            let glob = Glob::new(&pattern);
            for (name, p) in &self.params {
                if (exact || !p.hidden) && glob.matches(name.as_bytes()) && seen.insert(name.as_str()) {
                    out.push((Reply::bulk(name.as_bytes()), Reply::bulk(p.value.as_bytes())));
                }
            }
        }
        out
    }

    /// Whether the configuration asks for TLS: a `tls-port`, or TLS links to replicas or the
    /// cluster.
    pub fn wants_tls(&self) -> bool {
        self.number("tls-port") != 0
            || self.get("tls-replication") == "yes"
            || self.get("tls-cluster") == "yes"
    }

    /// Which deletions the replication stream names UNLINK (`lazyfree-lazy-expire`,
    /// `lazyfree-lazy-eviction`, `lazyfree-lazy-user-del`).
    pub fn lazy_deletes(&self) -> rediskv::server::LazyDeletes {
        let on = |name| self.get(name) == "yes";
        rediskv::server::LazyDeletes {
            expire: on("lazyfree-lazy-expire"),
            eviction: on("lazyfree-lazy-eviction"),
            user_del: on("lazyfree-lazy-user-del"),
        }
    }

    /// The AUTH a link to another server sends (to its primary, to a cluster node):
    /// `AUTH [masteruser] masterauth`, when `masterauth` is set.
    pub fn link_auth(&self) -> Option<Vec<String>> {
        let (user, pass) = (self.get("masteruser"), self.get("masterauth"));
        match (user, pass) {
            (_, "") => None,
            ("", pass) => Some(vec!["AUTH".into(), pass.into()]),
            (user, pass) => Some(vec!["AUTH".into(), user.into(), pass.into()]),
        }
    }

    /// CONFIG SET name value [name value …]: every pair checked first, then all applied.
    /// What the change means beyond the table goes through `apply` first ([`Effect`]): new
    /// TLS contexts when a `tls-*` parameter changes and TLS is wanted, a listener for a new
    /// `port`, `tls-port` or `bind`. When one fails, nothing is applied (Redis' rollback).
    fn set_many(&mut self, pairs: &[Bytes], apply: &mut dyn Apply) -> Reply {
        let mut staged: Vec<(String, String)> = Vec::new();
        for pair in pairs.chunks(2) {
            let name = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
            let value = String::from_utf8_lossy(&pair[1]);
            let failed = |why: &str| {
                Reply::Error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"))
            };
            let Some(param) = self.params.get(&name) else {
                return Reply::Error(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                ));
            };
            if staged.iter().any(|(n, _)| *n == name) {
                return failed("duplicate parameter");
            }
            match check(&name, &param.kind, &value, false) {
                Ok(v) => staged.push((name, v)),
                Err(why) => return failed(&why),
            }
        }
        let failed = |name: &str, why: &str| {
            Reply::Error(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"))
        };
        let changed: Vec<&str> = staged
            .iter()
            .filter(|(n, v)| v != self.get(n) || VOLATILE.contains(&n.as_str()))
            .map(|(n, _)| n.as_str())
            .collect();
        let mut next = self.clone();
        for (name, value) in &staged {
            next.put(name, value);
        }
        // What the change asks of the running server, once each, in the order of the
        // arguments (Redis runs its apply functions so); on a failure, what ran is undone.
        let mut effects: Vec<(Effect, &str)> = Vec::new();
        for name in changed {
            if let Some(e) = effect(name).filter(|e| !effects.iter().any(|(x, _)| x == e)) {
                effects.push((e, name));
            }
        }
        for (at, &(effect, name)) in effects.iter().enumerate() {
            if let Err((reply, why)) = run(effect, &next, apply) {
                crate::log::warning!("CONFIG SET {name}: {why}");
                for &(undo, _) in effects[..at].iter().rev() {
                    let _ = run(undo, self, apply);
                }
                return failed(name, reply);
            }
        }
        *self = next;
        Reply::OK
    }
}

/// What a changed parameter asks of the running server (Redis' apply functions).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Effect {
    /// New TLS contexts, when TLS is wanted.
    Tls,
    /// The TLS listener (and TLS contexts, when none were made yet).
    TlsPort,
    /// The plaintext listener.
    Port,
    /// Both listeners on the new address.
    Bind,
}

fn effect(name: &str) -> Option<Effect> {
    match name {
        "port" => Some(Effect::Port),
        "bind" => Some(Effect::Bind),
        "tls-port" => Some(Effect::TlsPort),
        // Read at each accept: no new context.
        "tls-auth-clients" => None,
        n if n.starts_with("tls-") => Some(Effect::Tls),
        _ => None,
    }
}

/// Runs `effect` for `config`; the error is Redis' reply text and what the log says.
fn run(effect: Effect, config: &Config, apply: &mut dyn Apply) -> Result<(), (&'static str, String)> {
    const TLS: &str = "Unable to update TLS configuration. Check server logs.";
    const PORT: &str = "Unable to listen on this port. Check server logs.";
    const BIND: &str = "Failed to bind to specified addresses.";
    let bind = config.get("bind");
    let listen = |apply: &mut dyn Apply, tls: bool, reply: &'static str| {
        let port = config.get(if tls { "tls-port" } else { "port" });
        apply
            .listen(tls, bind, port)
            .map_err(|e| (reply, format!("cannot listen on {bind} port {port}: {e}")))
    };
    match effect {
        Effect::Tls if config.wants_tls() => apply.tls(config).map_err(|e| (TLS, e)),
        Effect::Tls => Ok(()),
        Effect::TlsPort => {
            if config.number("tls-port") != 0 && !apply.tls_configured() {
                apply.tls(config).map_err(|e| (TLS, e))?;
            }
            listen(apply, true, PORT)
        }
        Effect::Port => listen(apply, false, PORT),
        Effect::Bind => listen(apply, false, BIND).and_then(|()| listen(apply, true, BIND)),
    }
}

impl crate::tls::Params for Config {
    fn param(&self, name: &str) -> &str {
        self.get(name)
    }
}

/// What a CONFIG SET changes in the running server beyond the table.
pub trait Apply {
    /// Opens the plaintext (`tls` false) or TLS listener on `bind` and `port` ("0": closes
    /// it; nothing when they name the address served).
    ///
    /// # Errors
    /// The bind failed.
    fn listen(&mut self, tls: bool, bind: &str, port: &str) -> Result<(), String>;

    /// Makes the TLS contexts of `config` and puts them in force.
    ///
    /// # Errors
    /// Why they cannot be made (a file missing, a bad value).
    fn tls(&mut self, config: &Config) -> Result<(), String>;

    /// Whether TLS contexts were made.
    fn tls_configured(&self) -> bool;
}

/// Quotes a value for the config file when it is empty or has spaces, quotes or controls.
fn quote(value: &str) -> String {
    if !value.is_empty()
        && value.bytes().all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\'' && c != b'\\')
    {
        return value.to_string();
    }
    let mut q = String::from("\"");
    for c in value.bytes() {
        match c {
            b'"' | b'\\' => {
                q.push('\\');
                q.push(c as char);
            }
            b'\n' => q.push_str("\\n"),
            b'\r' => q.push_str("\\r"),
            b'\t' => q.push_str("\\t"),
            c if c.is_ascii_graphic() || c == b' ' => q.push(c as char),
            c => {
                let _ = write!(q, "\\x{c:02x}");
            }
        }
    }
    q.push('"');
    q
}

/// Validates `value` for a parameter and returns it as CONFIG GET shows it afterwards.
fn check(name: &str, kind: &Kind, value: &str, starting: bool) -> Result<String, Refusal> {
    let value = match kind {
        Kind::Immutable if !starting => return Err("can't set immutable config".into()),
        Kind::Protected if !starting => return Err("can't set protected config".into()),
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => v.to_string(),
            _ => return Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int(lo, hi) => {
            let n: i64 =
                value.parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            in_range(n, *lo, *hi)?
        }
        Kind::Memory(lo, hi) => {
            let n = memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            in_range(n, *lo, *hi)?
        }
        Kind::Enum(words) => {
            let v = value.to_ascii_lowercase();
            if !words.contains(&v) {
                return Err(format!("argument(s) must be one of the following: {}", words.join(", ")));
            }
            v
        }
        _ => value.to_string(),
    };
    special(name, value, starting)
}

fn in_range(n: i64, lo: i64, hi: i64) -> Result<String, Refusal> {
    if n < lo || n > hi {
        return Err(format!("argument must be between {lo} and {hi} inclusive"));
    }
    Ok(n.to_string())
}

/// Redis' `memtoull`: a number with an optional unit (k=1000, kb=1024, m, mb, g, gb).
pub fn memory(value: &str) -> Option<i64> {
    let lower = value.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let mul: i64 = match &lower[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(mul)
}

/// Checks of particular parameters beyond their kind.
fn special(name: &str, value: String, starting: bool) -> Result<String, Refusal> {
    match name {
        "save" => {
            let words: Vec<&str> = value.split_whitespace().collect();
            if words.len() % 2 == 1 || words.iter().any(|w| w.parse::<u64>().is_err()) {
                return Err("Invalid save parameters".into());
            }
            Ok(words.join(" "))
        }
        "notify-keyspace-events" => keyspace_events(&value),
        // A memory value, or a percentage of maxmemory (Redis' `memory or percent` type).
        "maxmemory-clients" => match value.strip_suffix('%') {
            Some(percent) => match percent.parse::<i64>() {
                Ok(p) if p > 100 => Err("percentage argument must be less or equal to 100".into()),
                Ok(p) if p >= 0 => Ok(value),
                _ => Err("argument must be a memory or percent value".into()),
            },
            None => {
                let n = memory(&value).filter(|n| *n >= 0);
                n.map(|n| n.to_string()).ok_or_else(|| "argument must be a memory or percent value".into())
            }
        },
        "databases" => {
            let n: i64 = value.parse().unwrap_or(0);
            if !(1..=rediskv::DATABASES as i64).contains(&n) {
                return Err(format!("argument must be between 1 and {} inclusive", rediskv::DATABASES));
            }
            Ok(value)
        }
        "dir" if starting => {
            let dir = std::fs::canonicalize(&value).map_err(|e| format!("Can't chdir to '{value}': {e}"))?;
            if !dir.is_dir() {
                return Err(format!("Can't chdir to '{value}': not a directory"));
            }
            Ok(dir.display().to_string())
        }
        "syslog-enabled" => match value.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.to_string()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        "syslog-facility" => {
            match crate::log::SYSLOG_FACILITIES.iter().find(|f| f.eq_ignore_ascii_case(&value)) {
                Some(f) => Ok(f.to_string()),
                None => Err(format!(
                    "argument(s) must be one of the following: {}",
                    crate::log::SYSLOG_FACILITIES.join(", ")
                )),
            }
        }
        "enable-debug-command" if !["yes", "no", "local"].contains(&value.as_str()) => {
            Err("argument(s) must be one of the following: no, yes, local".into())
        }
        _ => Ok(value),
    }
}

/// notify-keyspace-events as Redis 7.0 normalises it (the library parses and prints it).
fn keyspace_events(value: &str) -> Result<String, Refusal> {
    rediskv::server::NotifyFlags::parse(value.as_bytes()).map(|f| f.to_string()).map_err(Refusal::from)
}

/// CONFIG GET/SET/RESETSTAT/REWRITE/HELP. `reset_stats` runs for RESETSTAT; `apply` opens
/// the listeners and makes the TLS contexts a CONFIG SET asks for.
pub fn config(
    argv: &[Bytes],
    config: &mut Config,
    reset_stats: impl FnOnce(),
    apply: &mut dyn Apply,
) -> Reply {
    let Some(sub) = argv.get(1) else {
        return Reply::Error("ERR wrong number of arguments for 'config' command".into());
    };
    let sub_name = sub.to_ascii_lowercase();
    let arity = |n: usize, at_least: bool| {
        if argv.len() == n || (at_least && argv.len() > n) {
            None
        } else {
            Some(Reply::Error(format!(
                "ERR wrong number of arguments for 'config|{}' command",
                String::from_utf8_lossy(&sub_name)
            )))
        }
    };
    match sub_name.as_slice() {
        b"get" => arity(3, true).unwrap_or_else(|| Reply::Map(config.matching(&argv[2..]))),
        b"set" => arity(4, true).unwrap_or_else(|| {
            if argv.len() % 2 == 1 {
                return Reply::Error("ERR syntax error".into());
            }
            config.set_many(&argv[2..], apply)
        }),
        b"resetstat" => arity(2, false).unwrap_or_else(|| {
            reset_stats();
            Reply::OK
        }),
        b"rewrite" => arity(2, false).unwrap_or_else(|| match config.rewrite() {
            Ok(()) => Reply::OK,
            Err(e) => Reply::Error(e),
        }),
        b"help" => Reply::Array(
            [
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
                "HELP",
                "    Prints this help.",
            ]
            .iter()
            .map(|s| Reply::status(s))
            .collect(),
        ),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// One class of `client-output-buffer-limit`: the hard and soft limits in bytes (0: none)
/// and the seconds output may stay over the soft one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Output this large closes the client at once.
    pub hard: u64,
    /// Output this large for longer than `soft_seconds` closes the client.
    pub soft: u64,
    /// See `soft`.
    pub soft_seconds: u64,
}

impl OutputLimit {
    /// Whether `pending` bytes of output reach the limit, as Redis'
    /// `checkClientOutputBufferLimits` decides: the hard one, or the soft one continuously
    /// for more than its seconds (`over_soft_since` keeps since when; cleared below it).
    pub fn reached(&self, pending: u64, over_soft_since: &mut Option<std::time::Instant>) -> bool {
        if self.hard > 0 && pending >= self.hard {
            return true;
        }
        if self.soft == 0 || pending < self.soft {
            *over_soft_since = None;
            return false;
        }
        let since = *over_soft_since.get_or_insert_with(std::time::Instant::now);
        since.elapsed().as_secs() > self.soft_seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(c: &mut Config, args: &[&str]) -> Reply {
        let argv: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        c.set_many(&argv, &mut NoServer)
    }

    /// No listener and no TLS to apply a change to.
    struct NoServer;

    impl Apply for NoServer {
        fn listen(&mut self, _: bool, _: &str, _: &str) -> Result<(), String> {
            Err("no listener in this test".into())
        }

        fn tls(&mut self, _: &Config) -> Result<(), String> {
            Err("no TLS in this test".into())
        }

        fn tls_configured(&self) -> bool {
            false
        }
    }

    #[test]
    fn table_has_every_redis_parameter() {
        let c = Config::new();
        // What `CONFIG GET *` lists on redis-server 7.0.15, and its hidden parameters.
        assert_eq!(c.params.iter().filter(|(_, p)| !p.hidden).count(), 192);
        assert_eq!(c.params.len(), 192 + HIDDEN.len());
        assert_eq!(c.get("proto-max-bulk-len"), "536870912");
        assert_eq!(c.get("maxmemory-policy"), "noeviction");
    }

    #[test]
    fn an_alias_and_its_name_are_one_setting() {
        // redis-server 7.0.15: CONFIG SET lua-time-limit 1234, then CONFIG GET
        // busy-reply-threshold answers 1234 (and the other way round).
        let mut c = Config::new();
        assert_eq!(set(&mut c, &["lua-time-limit", "1234"]), Reply::OK);
        assert_eq!(c.get("busy-reply-threshold"), "1234");
        assert_eq!(set(&mut c, &["busy-reply-threshold", "77"]), Reply::OK);
        assert_eq!(c.get("lua-time-limit"), "77");
    }

    #[test]
    fn set_validates_like_redis_and_applies_all_or_nothing() {
        // Texts observed from redis-server 7.0.15.
        let mut c = Config::new();
        assert_eq!(
            set(&mut c, &["foo", "bar"]),
            Reply::Error("ERR Unknown option or number of arguments for CONFIG SET - 'foo'".into())
        );
        assert_eq!(
            set(&mut c, &["timeout", "70", "maxmemory", "abc"]),
            Reply::Error(
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value".into()
            )
        );
        assert_eq!(c.get("timeout"), "0", "nothing applied when one pair fails");
        assert_eq!(set(&mut c, &["timeout", "70", "maxmemory", "10mb"]), Reply::OK);
        assert_eq!((c.get("timeout"), c.get("maxmemory")), ("70", "10485760"));
        assert_eq!(
            set(&mut c, &["timeout", "-1"]),
            Reply::Error("ERR CONFIG SET failed (possibly related to argument 'timeout') - argument must be between 0 and 2147483647 inclusive".into())
        );
        assert_eq!(
            set(&mut c, &["timeout", "1", "TIMEOUT", "2"]),
            Reply::Error(
                "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter".into()
            )
        );
        assert_eq!(
            set(&mut c, &["proto-max-bulk-len", "10"]),
            Reply::Error("ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 9223372036854775807 inclusive".into())
        );
        assert_eq!(
            set(&mut c, &["databases", "3"]),
            Reply::Error("ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config".into())
        );
        assert_eq!(
            set(&mut c, &["dir", "/"]),
            Reply::Error(
                "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
                    .into()
            )
        );
        assert_eq!(
            set(&mut c, &["activedefrag", "maybe"]),
            Reply::Error("ERR CONFIG SET failed (possibly related to argument 'activedefrag') - argument must be 'yes' or 'no'".into())
        );
        assert_eq!(
            set(&mut c, &["appendfsync", "bad"]),
            Reply::Error("ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: everysec, always, no".into())
        );
        assert_eq!(set(&mut c, &["notify-keyspace-events", "KEA"]), Reply::OK);
        assert_eq!(c.get("notify-keyspace-events"), "AKE");
        assert_eq!(
            set(&mut c, &["notify-keyspace-events", "Q"]),
            Reply::Error("ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
        );
        assert_eq!(
            set(&mut c, &["save", "100"]),
            Reply::Error(
                "ERR CONFIG SET failed (possibly related to argument 'save') - Invalid save parameters"
                    .into()
            )
        );
    }

    #[test]
    fn get_matches_globs_once_each() {
        let c = Config::new();
        let argv: Vec<Bytes> = ["maxmemory*", "TIMEOUT", "max*"].iter().map(|s| Bytes::from(*s)).collect();
        let names: Vec<Reply> = c.matching(&argv).into_iter().map(|(name, _)| name).collect();
        let expect = [
            "maxmemory",
            "maxmemory-clients",
            "maxmemory-eviction-tenacity",
            "maxmemory-policy",
            "maxmemory-samples",
            "timeout",
            "maxclients",
        ];
        assert_eq!(names, expect.iter().map(|n| Reply::bulk(n.as_bytes())).collect::<Vec<_>>());
    }

    #[test]
    fn hidden_parameters_answer_only_their_exact_name() {
        let mut c = Config::new();
        let get = |c: &Config, pattern: &str| -> Vec<(Reply, Reply)> {
            c.matching(&[Bytes::from(pattern.to_string())])
        };
        assert_eq!(get(&c, "KEY-LOAD-DELAY"), vec![(Reply::bulk(b"key-load-delay"), Reply::bulk(b"0"))]);
        for pattern in ["*", "key-load-*", "key-load-dela?", "[k]ey-load-delay"] {
            assert!(get(&c, pattern).iter().all(|(n, _)| *n != Reply::bulk(b"key-load-delay")), "{pattern}");
        }
        assert_eq!(set(&mut c, &["watchdog-period", "100"]), Reply::OK);
        assert_eq!(get(&c, "watchdog-period"), vec![(Reply::bulk(b"watchdog-period"), Reply::bulk(b"100"))]);
        assert!(matches!(set(&mut c, &["loading-process-events-interval-bytes", "10"]), Reply::Error(_)));
    }

    #[test]
    fn file_load_and_rewrite_round_trip() {
        let dir = std::env::temp_dir().join(format!("rediskv-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("redis.conf");
        std::fs::write(&file, "# comment\nport 7777\nsave 60 1 30 2\nrequirepass \"a b\"\ntimeout 5\ntimeout 6\nnamespace.ns1 tok1\n")
            .unwrap();
        let mut c = Config::new();
        c.load_file(&file).unwrap();
        assert_eq!(
            (c.get("port"), c.get("save"), c.get("requirepass"), c.get("timeout")),
            ("7777", "60 1 30 2", "a b", "6")
        );
        assert_eq!(c.namespaces.get("ns1").map(String::as_str), Some("tok1"));
        assert_eq!(set(&mut c, &["maxmemory", "1kb", "timeout", "9"]), Reply::OK);
        c.namespaces.insert("ns2".into(), "tok2".into());
        c.rewrite().unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text,
            "# comment\nport 7777\nsave 60 1 30 2\nrequirepass \"a b\"\ntimeout 9\nnamespace.ns1 tok1\nmaxmemory 1024\nnamespace.ns2 tok2\n"
        );
        let mut again = Config::new();
        again.load_file(&file).unwrap();
        assert_eq!((again.get("maxmemory"), again.get("requirepass")), ("1024", "a b"));
        let bad = dir.join("bad.conf");
        std::fs::write(&bad, "port 7777\nnosuch 1\n").unwrap();
        let err = Config::new().load_file(&bad).unwrap_err();
        assert!(
            err.contains("at line 2") && err.contains("Bad directive or wrong number of arguments"),
            "{err}"
        );
        assert_eq!(Config::new().rewrite(), Err("ERR The server is running without a config file".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// REPLICAOF's target is rewritten as Redis writes it: `replicaof host port` in place of
    /// a `slaveof` or `replicaof` line, appended when there is none, removed on NO ONE.
    #[test]
    fn rewrite_keeps_the_replicaof_target() {
        let dir = std::env::temp_dir().join(format!("rediskv-config-replicaof-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("redis.conf");
        std::fs::write(&file, "port 7777\nslaveof 10.0.0.1 6379\n").unwrap();
        let mut c = Config::new();
        c.load_file(&file).unwrap();
        assert_eq!(c.get("replicaof"), "10.0.0.1 6379");
        c.set_replicaof("10.0.0.2 6380");
        c.rewrite().unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "port 7777\nreplicaof 10.0.0.2 6380\n");
        c.set_replicaof("");
        c.rewrite().unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "port 7777\n");
        c.set_replicaof("10.0.0.3 1");
        c.rewrite().unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "port 7777\nreplicaof 10.0.0.3 1\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
