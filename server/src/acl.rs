//! ACL users, as Redis 7.0 has them: who may run which commands, on which keys and channels.
//!
//! Users are made and changed by `ACL SETUSER` (every rule of Redis 7.0, selectors
//! included), checked by [`User::check`] in the server's gate before a command runs, and
//! listed, saved and loaded in Redis' own text form. The commands rules name, and their
//! categories, are the command table's rows ([`rediskv::server::table`]: Redis 7.0's
//! categories, and Redis' commands the server does not run; rediskv's own admin commands
//! COMPACT, FSCK and NAMESPACE are `@admin @slow @dangerous`). Passwords are kept as
//! SHA-256 hashes and compared in constant time.
//!
//! One rule is rediskv's: `namespace:<ns>` confines a user to the tenant namespace `ns`, as
//! logging in with that namespace's token does (its own keyspace, no admin-only commands);
//! `resetnamespace` (or `reset`) frees it again.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::args::{Glob, parse_i64};
use rediskv::server::table::{self, CommandInfo, flag};
use sha2::{Digest, Sha256};

use crate::sync::lock;

/// Redis' command categories, in its order (`ACL CAT`, and the order `ACL LIST` tries them).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Words of the command bitmap: room for 512 commands and subcommands.
const WORDS: usize = 8;

/// One command or subcommand that rules name.
struct Command {
    /// `get`, `config|get`.
    name: &'static str,
    /// Category bits, by [`CATEGORIES`] index.
    categories: u32,
    /// Redis arity.
    arity: i32,
    /// The container of a subcommand.
    parent: Option<usize>,
    /// A container's subcommands.
    subs: Vec<usize>,
    /// Every user may run it whatever its rules (its row's `no_auth` flag).
    no_auth: bool,
}

/// Every command rules can name, with a dense id for the bitmaps: the command table's rows
/// and Redis' commands the server does not run, by name.
struct Commands {
    list: Vec<Command>,
    by_name: HashMap<&'static str, usize>,
}

fn commands() -> &'static Commands {
    static COMMANDS: OnceLock<Commands> = OnceLock::new();
    COMMANDS.get_or_init(|| {
        let mut rows: Vec<&CommandInfo> = table::all().iter().chain(table::unserved()).collect();
        rows.sort_by_key(|info| info.name);
        let mut list: Vec<Command> = Vec::new();
        let mut by_name: HashMap<&'static str, usize> = HashMap::new();
        for info in rows {
            let categories = info
                .acl
                .split(' ')
                .filter_map(|c| CATEGORIES.iter().position(|k| c.strip_prefix('@') == Some(*k)))
                .fold(0, |bits, i| bits | 1 << i);
            let parent = info.name.split_once('|').and_then(|(container, _)| by_name.get(container).copied());
            let id = list.len();
            if let Some(p) = parent {
                list[p].subs.push(id);
            }
            by_name.insert(info.name, id);
            list.push(Command {
                name: info.name,
                categories,
                arity: info.arity,
                parent,
                subs: Vec::new(),
                no_auth: info.has(flag::NO_AUTH),
            });
        }
        assert!(list.len() < WORDS * 64, "the ACL command bitmap is too small");
        Commands { list, by_name }
    })
}

/// Looks up a command as a rule or DRYRUN names it: `get`, `config|get` (any case).
fn lookup(name: &[u8]) -> Option<usize> {
    let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
    if name.split('|').count() > 2 {
        return None;
    }
    commands().by_name.get(name.as_str()).copied()
}

/// The command `argv` runs, as Redis resolves it: `Err(Some(container))` for a container
/// whose subcommand is unknown, `Err(None)` for an unknown command.
pub fn resolve(argv: &[Bytes]) -> Result<usize, Option<usize>> {
    let id = lookup(&argv[0]).ok_or(None)?;
    match argv.get(1) {
        Some(sub) if !commands().list[id].subs.is_empty() => {
            let mut full = argv[0].to_vec();
            full.push(b'|');
            full.extend_from_slice(sub);
            lookup(&full).ok_or(Some(id))
        }
        _ => Ok(id),
    }
}

/// Redis' wrong-arity error for `argv`, by Redis 7.0's arity of its command or subcommand
/// (`None` when the count is right or the command is unknown here).
pub fn arity_error(argv: &[Bytes]) -> Option<Reply> {
    let id = resolve(argv).ok()?;
    let cmd = &commands().list[id];
    let argc = argv.len() as i32;
    let ok = if cmd.arity >= 0 { argc == cmd.arity } else { argc >= -cmd.arity };
    (!ok).then(|| Reply::Error(format!("ERR wrong number of arguments for '{}' command", cmd.name)))
}

/// The full name of a command id (`config|get`).
pub fn command_name(id: usize) -> &'static str {
    commands().list[id].name
}

/// Why a rule was refused: Redis' texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleError {
    Syntax,
    Unknown,
    KeysAfterAll,
    ChannelsAfterAll,
    NoSuchPassword,
    BadHash,
    SubcommandFirstArg,
}

impl RuleError {
    fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeysAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have \
                 any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelsAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not \
                 have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

const READ: u8 = 1;
const WRITE: u8 = 2;

/// `~pattern` (read and write), `%R~pattern`, `%W~pattern`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyPattern {
    pattern: Vec<u8>,
    perms: u8,
}

impl KeyPattern {
    fn describe(&self) -> String {
        let prefix = match self.perms {
            READ => "%R~",
            WRITE => "%W~",
            _ => "~",
        };
        format!("{prefix}{}", String::from_utf8_lossy(&self.pattern))
    }
}

/// What one selector allows: commands, keys and channels.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Selector {
    /// Every command (`+@all` and no `-` since): the bitmap need not be read.
    allcommands: bool,
    /// `+@all` was the last `@all` rule: commands added later are allowed too.
    future: bool,
    allowed: [u64; WORDS],
    /// `+select|0`: first arguments allowed for a command whose bit is off.
    firstargs: BTreeMap<usize, Vec<String>>,
    allkeys: bool,
    keys: Vec<KeyPattern>,
    allchannels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(allchannels: bool) -> Selector {
        Selector {
            allcommands: false,
            future: false,
            allowed: [0; WORDS],
            firstargs: BTreeMap::new(),
            allkeys: false,
            keys: Vec::new(),
            allchannels,
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.allcommands = false;
        }
    }

    /// Allows or denies one command, and a container's subcommands with it.
    fn change(&mut self, id: usize, on: bool) {
        self.set_bit(id, on);
        self.firstargs.remove(&id);
        for &sub in &commands().list[id].subs {
            self.set_bit(sub, on);
        }
    }

    fn change_category(&mut self, category: usize, on: bool) {
        for (id, cmd) in commands().list.iter().enumerate() {
            if cmd.categories & (1 << category) != 0 {
                self.change(id, on);
            }
        }
    }

    fn all_commands(&mut self, on: bool) {
        self.allowed = if on { [u64::MAX; WORDS] } else { [0; WORDS] };
        self.allcommands = on;
        self.future = on;
        self.firstargs.clear();
    }

    /// Applies one selector rule (`~k*`, `+get`, `-@write`, `&ch`, `allkeys`…).
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_slice() {
            b"allkeys" | b"~*" => {
                self.allkeys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.allkeys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.allchannels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.allchannels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => self.all_commands(true),
            b"nocommands" | b"-@all" => self.all_commands(false),
            [b'~' | b'%', ..] => {
                if self.allkeys {
                    return Err(RuleError::KeysAfterAll);
                }
                let (perms, pattern) = if op[0] == b'%' {
                    let mut perms = 0;
                    let mut at = 1;
                    while at < op.len() {
                        match op[at].to_ascii_uppercase() {
                            b'R' if perms & READ == 0 => perms |= READ,
                            b'W' if perms & WRITE == 0 => perms |= WRITE,
                            b'~' => {
                                at += 1;
                                break;
                            }
                            _ => return Err(RuleError::Syntax),
                        }
                        at += 1;
                    }
                    (perms, &op[at.min(op.len())..])
                } else {
                    (READ | WRITE, &op[1..])
                };
                if perms == 0 || has_spaces(pattern) {
                    return Err(RuleError::Syntax);
                }
                match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                    Some(k) => k.perms |= perms,
                    None => self.keys.push(KeyPattern { pattern: pattern.to_vec(), perms }),
                }
            }
            [b'&', ..] => {
                if self.allchannels {
                    return Err(RuleError::ChannelsAfterAll);
                }
                if has_spaces(&op[1..]) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == &op[1..]) {
                    self.channels.push(op[1..].to_vec());
                }
            }
            [sign @ (b'+' | b'-'), b'@', category @ ..] => {
                let c = CATEGORIES.iter().position(|c| c.as_bytes() == category).ok_or(RuleError::Unknown)?;
                self.change_category(c, *sign == b'+');
            }
            [b'+', name @ ..] => match name.iter().rposition(|&c| c == b'|') {
                None => self.change(lookup(name).ok_or(RuleError::Unknown)?, true),
                Some(bar) => {
                    let id = lookup(&name[..bar]).ok_or(RuleError::Unknown)?;
                    let cmd = &commands().list[id];
                    if cmd.parent.is_some() {
                        return Err(RuleError::SubcommandFirstArg);
                    }
                    let first = &lower[bar + 2..];
                    if first.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if cmd.subs.is_empty() {
                        let first = String::from_utf8_lossy(first).into_owned();
                        let allowed = self.firstargs.entry(id).or_default();
                        if !allowed.contains(&first) {
                            allowed.push(first);
                        }
                    } else {
                        self.change(lookup(name).ok_or(RuleError::Unknown)?, true);
                    }
                }
            },
            [b'-', name @ ..] => self.change(lookup(name).ok_or(RuleError::Unknown)?, false),
            _ => return Err(RuleError::Syntax),
        }
        Ok(())
    }

    /// Whether this selector lets `argv` run: `Err` says why not.
    fn check(&self, id: usize, argv: &[Bytes], keys: &mut Option<KeyRefs>) -> Result<(), Denied> {
        let cmd = &commands().list[id];
        if !self.allcommands && !cmd.no_auth && !self.bit(id) {
            let at = if cmd.parent.is_some() { 2 } else { 1 };
            let first = argv.get(at).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase());
            let allowed = self.firstargs.get(&id).is_some_and(|f| first.is_some_and(|a| f.contains(&a)));
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for &(at, read, write) in keys.get_or_insert_with(|| key_refs(argv)).iter() {
                let need = if read { READ } else { 0 } | if write { WRITE } else { 0 };
                let ok = self
                    .keys
                    .iter()
                    .any(|k| k.perms & need == need && Glob::new(&k.pattern).matches(&argv[at]));
                if !ok {
                    return Err(Denied::Key(at));
                }
            }
        }
        if !self.allchannels {
            let name = cmd.name;
            let (from, pattern) = match name {
                "publish" | "spublish" => (1..argv.len().min(2), false),
                "subscribe" | "ssubscribe" => (1..argv.len(), false),
                "psubscribe" => (1..argv.len(), true),
                _ => (0..0, false),
            };
            for at in from {
                let channel = &argv[at];
                let ok = self
                    .channels
                    .iter()
                    .any(|c| if pattern { c == channel } else { Glob::new(c).matches(channel) });
                if !ok {
                    return Err(Denied::Channel(at));
                }
            }
        }
        Ok(())
    }

    /// Redis' short form of the command rules: `+@all` or `-@all`, then the categories
    /// that fit best, then single commands.
    fn describe_commands(&self) -> String {
        let cmds = &commands().list;
        let additive = !self.future;
        let mut rules = vec![if additive { "-@all".to_string() } else { "+@all".to_string() }];
        let mut fake = Selector::new(false);
        fake.all_commands(!additive);
        let mut temp = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (c, _) in CATEGORIES.iter().enumerate().filter(|(c, _)| !applied[*c]) {
                let (mut on, mut off) = (0, 0);
                for (id, cmd) in cmds.iter().enumerate() {
                    if cmd.categories & (1 << c) != 0 {
                        if temp.bit(id) { on += 1 } else { off += 1 }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(c);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(c) = best else { break };
            fake.change_category(c, additive);
            temp.change_category(c, !additive);
            rules.push(format!("{}@{}", if additive { '+' } else { '-' }, CATEGORIES[c]));
            applied[c] = true;
        }
        for (id, cmd) in cmds.iter().enumerate() {
            let on = self.bit(id);
            if on != fake.bit(id) {
                rules.push(format!("{}{}", if on { '+' } else { '-' }, cmd.name));
                fake.change(id, on);
            }
            if !on {
                for first in self.firstargs.get(&id).into_iter().flatten() {
                    rules.push(format!("+{}|{first}", cmd.name));
                }
            }
        }
        rules.join(" ")
    }

    fn describe_keys(&self) -> String {
        if self.allkeys {
            "~*".into()
        } else {
            self.keys.iter().map(KeyPattern::describe).collect::<Vec<_>>().join(" ")
        }
    }

    fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        let channels = self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c)));
        channels.collect::<Vec<_>>().join(" ")
    }

    /// The selector as ACL LIST writes it.
    fn describe(&self) -> String {
        let mut out = String::new();
        if !self.describe_keys().is_empty() {
            out.push_str(&self.describe_keys());
            out.push(' ');
        }
        if self.allchannels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push_str(&format!("&{} ", String::from_utf8_lossy(c)));
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    /// Its fields in ACL GETUSER: commands, keys, channels.
    fn reply_fields(&self) -> Vec<(Reply, Reply)> {
        vec![
            (Reply::bulk(b"commands"), Reply::Bulk(self.describe_commands().into())),
            (Reply::bulk(b"keys"), Reply::Bulk(self.describe_keys().into())),
            (Reply::bulk(b"channels"), Reply::Bulk(self.describe_channels().into())),
        ]
    }
}

/// `(argument index, read, write)` of each key the command names.
type KeyRefs = Vec<(usize, bool, bool)>;

fn key_refs(argv: &[Bytes]) -> KeyRefs {
    let Ok(info) = table::find(argv) else { return Vec::new() };
    let refs = table::key_refs(info, argv).unwrap_or_default();
    let has = |spec: &table::KeySpec, f: &[&str]| spec.flags.iter().any(|x| f.contains(x));
    refs.into_iter()
        .map(|(at, spec)| (at, has(spec, &["access"]), has(spec, &["insert", "update", "delete"])))
        .collect()
}

fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|c| c.is_ascii_whitespace() || *c == 0 || *c == 0x0b)
}

/// Why a command was refused, with the argument that was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// The command (or subcommand).
    Command,
    /// The key at this argument index.
    Key(usize),
    /// The channel at this argument index.
    Channel(usize),
}

impl Denied {
    /// Redis' order of relevance across selectors: command, key, channel.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(at) => (2, at),
            Denied::Channel(at) => (4, at),
        }
    }

    /// The error the gate answers (Redis' `-NOPERM …`).
    pub fn error(self, id: usize) -> Reply {
        Reply::Error(match self {
            Denied::Command => {
                format!("NOPERM this user has no permissions to run the '{}' command", command_name(id))
            }
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments".into()
            }
            Denied::Channel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments".into()
            }
        })
    }
}

/// One ACL user.
#[derive(Debug, Clone)]
pub struct User {
    name: Vec<u8>,
    enabled: bool,
    nopass: bool,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false), when set.
    sanitize: Option<bool>,
    /// SHA-256 hashes, lowercase hex.
    passwords: Vec<String>,
    /// The root selector first, then the `(…)` ones.
    selectors: Vec<Selector>,
    /// `namespace:<ns>`: confined to a tenant namespace.
    namespace: Option<String>,
}

impl User {
    fn new(name: &[u8], allchannels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(allchannels)],
            namespace: None,
        }
    }

    /// Redis' `default` user: on, no password, every command, key and channel.
    fn default_user() -> User {
        let mut user = User::new(b"default", false);
        for rule in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = user.apply(rule.as_bytes(), false);
        }
        user
    }

    /// What a client of a deleted user runs as until its connection closes: nothing.
    pub fn deleted(name: &[u8]) -> User {
        User::new(name, false)
    }

    /// Its name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The tenant namespace it is confined to.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// Whether it may run anything: the gate skips its checks.
    pub fn unrestricted(&self) -> bool {
        let root = &self.selectors[0];
        root.allcommands && root.allkeys && root.allchannels
    }

    /// Whether a new connection is logged in as this user without AUTH.
    pub fn open(&self) -> bool {
        self.enabled && self.nopass
    }

    /// Applies one SETUSER rule.
    fn apply(&mut self, op: &[u8], allchannels: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = op.to_ascii_lowercase();
        match lower.as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"skip-sanitize-payload" => self.sanitize = Some(false),
            b"sanitize-payload" => self.sanitize = Some(true),
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"clearselectors" => self.selectors.truncate(1),
            b"resetnamespace" => self.namespace = None,
            b"reset" => {
                for rule in [
                    "resetpass",
                    "resetkeys",
                    "resetchannels",
                    "off",
                    "sanitize-payload",
                    "clearselectors",
                    "-@all",
                ] {
                    self.apply(rule.as_bytes(), allchannels)?;
                }
                if allchannels {
                    self.apply(b"allchannels", allchannels)?;
                }
                self.namespace = None;
            }
            [b'>' | b'#', ..] => {
                let hash = if op[0] == b'>' { hash_password(&op[1..]) } else { valid_hash(&op[1..])? };
                if !self.passwords.contains(&hash) {
                    self.passwords.push(hash);
                }
                self.nopass = false;
            }
            [b'<' | b'!', ..] => {
                let hash = if op[0] == b'<' { hash_password(&op[1..]) } else { valid_hash(&op[1..])? };
                let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
                self.passwords.remove(at);
            }
            [b'(', .., b')'] => {
                let mut selector = Selector::new(allchannels);
                for rule in op[1..op.len() - 1].split(|c| *c == b' ').filter(|r| !r.is_empty()) {
                    selector.apply(rule)?;
                }
                self.selectors.push(selector);
            }
            _ if lower.starts_with(b"namespace:") => {
                let ns = &op["namespace:".len()..];
                if ns.is_empty() || has_spaces(ns) {
                    return Err(RuleError::Syntax);
                }
                self.namespace = Some(String::from_utf8_lossy(ns).into_owned());
            }
            _ => self.selectors[0].apply(op)?,
        }
        Ok(())
    }

    /// Whether `password` logs in as this user.
    fn accepts(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = hash_password(password);
        // Compare with every hash so the time taken does not tell which one matched.
        self.passwords.iter().fold(false, |found, p| constant_time_eq(p.as_bytes(), hash.as_bytes()) | found)
    }

    /// Whether this user may run `argv` (command id `id`): Redis' rule across selectors is
    /// that one selector allowing it is enough, and otherwise the most relevant refusal is
    /// reported (a key or channel over the command, the last argument over earlier ones).
    pub fn check(&self, id: usize, argv: &[Bytes]) -> Result<(), Denied> {
        let mut keys = None;
        let mut worst = Denied::Command;
        for selector in &self.selectors {
            match selector.check(id, argv, &mut keys) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// The user as ACL LIST and the ACL file write it (without `user <name> `).
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (on, flag) in [
            (self.enabled, "on"),
            (!self.enabled, "off"),
            (self.nopass, "nopass"),
            (self.sanitize == Some(false), "skip-sanitize-payload"),
            (self.sanitize == Some(true), "sanitize-payload"),
        ] {
            if on {
                parts.push(flag.to_string());
            }
        }
        if let Some(ns) = &self.namespace {
            parts.push(format!("namespace:{ns}"));
        }
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        parts.push(self.selectors[0].describe());
        parts.extend(self.selectors[1..].iter().map(|s| format!("({})", s.describe())));
        parts.join(" ")
    }

    fn flags(&self) -> Vec<Reply> {
        let mut flags = vec![Reply::bulk(if self.enabled { b"on".as_slice() } else { b"off" })];
        if self.nopass {
            flags.push(Reply::bulk(b"nopass"));
        }
        match self.sanitize {
            Some(false) => flags.push(Reply::bulk(b"skip-sanitize-payload")),
            Some(true) => flags.push(Reply::bulk(b"sanitize-payload")),
            None => {}
        }
        flags
    }

    /// ACL GETUSER's map.
    fn reply(&self) -> Reply {
        let mut fields = vec![
            (Reply::bulk(b"flags"), Reply::Set(self.flags())),
            (
                Reply::bulk(b"passwords"),
                Reply::Array(self.passwords.iter().map(|p| Reply::bulk(p.as_bytes())).collect()),
            ),
        ];
        fields.extend(self.selectors[0].reply_fields());
        let selectors = self.selectors[1..].iter().map(|s| Reply::Map(s.reply_fields())).collect();
        fields.push((Reply::bulk(b"selectors"), Reply::Array(selectors)));
        if let Some(ns) = &self.namespace {
            fields.push((Reply::bulk(b"namespace"), Reply::bulk(ns.as_bytes())));
        }
        Reply::Map(fields)
    }
}

fn hash_password(password: &[u8]) -> String {
    Sha256::digest(password).iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(hash: &[u8]) -> Result<String, RuleError> {
    let ok = hash.len() == 64 && hash.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    if ok { Ok(String::from_utf8_lossy(hash).into_owned()) } else { Err(RuleError::BadHash) }
}

/// Whether `a == b`, in a time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// Groups `(…)` selector arguments split on spaces back into one rule each, as Redis does.
fn merge_selectors(args: &[Bytes]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::new();
    let mut open: Option<(Vec<u8>, &Bytes)> = None;
    for arg in args {
        if let Some((sel, _)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(arg);
            if arg.last() == Some(&b')') {
                out.push(open.take().map(|(s, _)| s).unwrap_or_default());
            }
        } else if arg.first() == Some(&b'(') && arg.last() != Some(&b')') {
            open = Some((arg.to_vec(), arg));
        } else {
            out.push(arg.to_vec());
        }
    }
    match open {
        Some((_, start)) => Err(start.to_vec()),
        None => Ok(out),
    }
}

/// One ACL LOG entry.
struct LogEntry {
    count: u64,
    reason: &'static str,
    context: &'static str,
    object: Vec<u8>,
    username: Vec<u8>,
    millis: u64,
    client_info: String,
}

/// Every user, the ACL log, and a generation that changes with every change to the users.
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    generation: AtomicU64,
    log: Mutex<VecDeque<LogEntry>>,
}

impl Default for Acl {
    fn default() -> Self {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::default_user()));
        Acl { users: RwLock::new(users), generation: AtomicU64::new(0), log: Mutex::new(VecDeque::new()) }
    }
}

fn now_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Acl {
    /// Changes with every change to any user: a client holding a user compares it to know
    /// when to look its user up again.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Relaxed);
    }

    /// The user named `name`.
    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    /// The `default` user.
    pub fn default_user(&self) -> Arc<User> {
        self.user(b"default").unwrap_or_else(|| Arc::new(User::default_user()))
    }

    /// `requirepass`: the default user's only password (`None` or empty: `nopass`).
    pub fn set_default_password(&self, password: Option<&[u8]>) {
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        let mut user = users.get(b"default".as_slice()).map_or_else(User::default_user, |u| (**u).clone());
        let _ = user.apply(b"resetpass", false);
        match password.filter(|p| !p.is_empty()) {
            Some(p) => user.passwords.push(hash_password(p)),
            None => user.nopass = true,
        }
        users.insert(b"default".to_vec(), Arc::new(user));
        drop(users);
        self.changed();
    }

    /// The user `name` if `password` logs in as it.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        self.user(name).filter(|u| u.accepts(password))
    }

    /// Records a refusal in the ACL log (entries alike within a minute are counted as one).
    #[allow(clippy::too_many_arguments)]
    pub fn log(
        &self,
        reason: &'static str,
        in_multi: bool,
        object: &[u8],
        username: &[u8],
        client_info: String,
        max: usize,
    ) {
        let millis = now_millis();
        let context = if in_multi { "multi" } else { "toplevel" };
        let mut log = lock(&self.log);
        let alike = log.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.millis.abs_diff(millis) <= 60_000
                && e.object == object
                && e.username == username
        });
        if let Some(at) = alike {
            let mut entry = log.remove(at).expect("found above");
            entry.count += 1;
            entry.millis = millis;
            entry.client_info = client_info;
            log.push_front(entry);
            return;
        }
        log.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            millis,
            client_info,
        });
        log.truncate(max);
    }

    /// Replaces every user by those of an ACL file's text (`user <name> <rules>…` lines),
    /// all or nothing.
    ///
    /// # Errors
    /// Redis' texts for every line that is wrong, as one string.
    pub fn load(&self, text: &str, file: &str, allchannels: bool) -> Result<(), String> {
        let mut users = BTreeMap::new();
        let mut errors = String::new();
        for (i, line) in text.split('\n').enumerate() {
            let line = line.trim_matches([' ', '\t', '\r', '\n']);
            if line.is_empty() {
                continue;
            }
            let n = i + 1;
            let argv: Vec<Bytes> = line.split(' ').map(|w| Bytes::copy_from_slice(w.as_bytes())).collect();
            if argv[0] != "user" || argv.len() < 2 {
                errors += &format!("{file}:{n} should start with user keyword followed by the username. ");
                continue;
            }
            if has_spaces(&argv[1]) || argv[1].is_empty() {
                errors +=
                    &format!("'{file}:{n}: username '{}' contains invalid characters. ", lossy(&argv[1]));
                continue;
            }
            if users.contains_key(argv[1].as_ref()) {
                errors += &format!("WARNING: Duplicate user '{}' found on line {n}. ", lossy(&argv[1]));
                continue;
            }
            let mut user = User::new(&argv[1], allchannels);
            let Ok(rules) = merge_selectors(&argv[2..]) else {
                errors += &format!("{file}:{n}: Unmatched parenthesis in selector definition.");
                continue;
            };
            let mut syntax = false;
            for rule in rules {
                match user.apply(&rule, allchannels) {
                    Ok(()) => {}
                    Err(e @ RuleError::Unknown) => {
                        errors += &format!(
                            "{file}:{n}: Error in applying operation '{}': {}. ",
                            lossy(&rule),
                            e.text()
                        )
                    }
                    Err(e) if !syntax => {
                        errors += &format!("{file}:{n}: {}. ", e.text());
                        syntax = true;
                    }
                    Err(_) => {}
                }
            }
            users.insert(argv[1].to_vec(), Arc::new(user));
        }
        if !errors.is_empty() {
            errors +=
                "WARNING: ACL errors detected, no change to the previously active ACL rules was performed";
            return Err(errors);
        }
        users.entry(b"default".to_vec()).or_insert_with(|| Arc::new(User::default_user()));
        *self.users.write().unwrap_or_else(|e| e.into_inner()) = users;
        self.changed();
        Ok(())
    }

    /// Every user, as an ACL file holds them.
    pub fn save(&self) -> String {
        let users = self.users.read().unwrap_or_else(|e| e.into_inner());
        users.values().map(|u| format!("user {} {}\n", lossy(&u.name), u.describe())).collect()
    }
}

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// What the ACL command needs to know of the server and the calling client.
pub struct Context<'a> {
    /// The calling client's user.
    pub user: &'a [u8],
    /// `acl-pubsub-default` is `allchannels`.
    pub allchannels: bool,
    /// The `aclfile` directive (empty: none).
    pub aclfile: &'a str,
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Prints this help.",
];

/// The ACL command. Returns its reply and the users whose connections must close (DELUSER).
pub fn command(argv: &[Bytes], acl: &Acl, ctx: &Context<'_>) -> (Reply, Vec<Vec<u8>>) {
    let err = |s: String| (Reply::Error(s), Vec::new());
    if argv.len() < 2 {
        return err("ERR wrong number of arguments for 'acl' command".into());
    }
    let sub = argv[1].to_ascii_lowercase();
    let sub_name = String::from_utf8_lossy(&sub).into_owned();
    let Some(id) = lookup(format!("acl|{sub_name}").as_bytes()) else {
        return err(format!("ERR unknown subcommand '{}'. Try ACL HELP.", lossy(&argv[1])));
    };
    let arity = commands().list[id].arity;
    let argc = argv.len() as i32;
    if (arity > 0 && argc != arity) || argc < -arity {
        return err(format!("ERR wrong number of arguments for 'acl|{sub_name}' command"));
    }
    let syntax = || {
        (
            Reply::Error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
                lossy(&argv[1])
            )),
            Vec::new(),
        )
    };
    let users = || acl.users.read().unwrap_or_else(|e| e.into_inner());
    let reply = match (sub.as_slice(), argv.len()) {
        (b"setuser", _) => {
            let name = &argv[2];
            if has_spaces(name) {
                return err("ERR Usernames can't contain spaces or null characters".into());
            }
            let rules = match merge_selectors(&argv[3..]) {
                Ok(rules) => rules,
                Err(start) => {
                    return err(format!(
                        "ERR Unmatched parenthesis in acl selector starting at '{}'.",
                        lossy(&start)
                    ));
                }
            };
            let mut all = acl.users.write().unwrap_or_else(|e| e.into_inner());
            let mut user =
                all.get(name.as_ref()).map_or_else(|| User::new(name, ctx.allchannels), |u| (**u).clone());
            for rule in &rules {
                if let Err(e) = user.apply(rule, ctx.allchannels) {
                    return err(format!("ERR Error in ACL SETUSER modifier '{}': {}", lossy(rule), e.text()));
                }
            }
            all.insert(name.to_vec(), Arc::new(user));
            drop(all);
            acl.changed();
            Reply::OK
        }
        (b"deluser", _) => {
            if argv[2..].iter().any(|n| n.as_ref() == b"default") {
                return err("ERR The 'default' user cannot be removed".into());
            }
            let mut all = acl.users.write().unwrap_or_else(|e| e.into_inner());
            let gone: Vec<Vec<u8>> =
                argv[2..].iter().filter_map(|n| all.remove(n.as_ref()).map(|u| u.name.clone())).collect();
            drop(all);
            acl.changed();
            return (Reply::Integer(gone.len() as i64), gone);
        }
        (b"getuser", 3) => users().get(argv[2].as_ref()).map_or(Reply::Nil, |u| u.reply()),
        (b"list", 2) => Reply::Array(
            users()
                .values()
                .map(|u| Reply::Bulk(format!("user {} {}", lossy(&u.name), u.describe()).into()))
                .collect(),
        ),
        (b"users", 2) => {
            Reply::Array(users().keys().map(|n| Reply::Bulk(Bytes::copy_from_slice(n))).collect())
        }
        (b"whoami", 2) => Reply::Bulk(Bytes::copy_from_slice(ctx.user)),
        (b"load" | b"save", _) if ctx.aclfile.is_empty() => {
            return err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.".into());
        }
        (b"load", 2) => {
            let text = match std::fs::read_to_string(ctx.aclfile) {
                Ok(text) => text,
                Err(e) => return err(format!("ERR Error loading ACLs, opening file '{}': {e}", ctx.aclfile)),
            };
            match acl.load(&text, ctx.aclfile, ctx.allchannels) {
                Ok(()) => Reply::OK,
                Err(e) => return err(format!("ERR {e}")),
            }
        }
        (b"save", 2) => match save_file(ctx.aclfile, &acl.save()) {
            Ok(()) => Reply::OK,
            Err(_) => {
                return err(
                    "ERR There was an error trying to save the ACLs. Please check the server logs for more information"
                        .into(),
                );
            }
        },
        (b"cat", 2) => Reply::Array(CATEGORIES.iter().map(|c| Reply::bulk(c.as_bytes())).collect()),
        (b"cat", 3) => {
            let cat = argv[2].to_ascii_lowercase();
            let Some(c) = CATEGORIES.iter().position(|k| k.as_bytes() == cat) else {
                return err(format!("ERR Unknown category '{}'", lossy(&argv[2][..argv[2].len().min(128)])));
            };
            let names = commands().list.iter().filter(|cmd| cmd.categories & (1 << c) != 0);
            Reply::Array(names.map(|cmd| Reply::bulk(cmd.name.as_bytes())).collect())
        }
        (b"genpass", 2 | 3) => {
            let bits = match argv.get(2) {
                None => 256,
                Some(a) => match parse_i64(a) {
                    Some(n) => n,
                    None => return err("ERR value is not an integer or out of range".into()),
                },
            };
            if !(1..=4096).contains(&bits) {
                return err(
                    "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"
                        .into(),
                );
            }
            let chars = (bits as usize).div_ceil(4);
            let mut hex = random_hex(chars);
            hex.truncate(chars);
            Reply::Bulk(hex.into())
        }
        (b"log", 2 | 3) => {
            let mut count = 10;
            if let Some(arg) = argv.get(2) {
                if arg.eq_ignore_ascii_case(b"reset") {
                    lock(&acl.log).clear();
                    return (Reply::OK, Vec::new());
                }
                match parse_i64(arg) {
                    Some(n) => count = n.max(0) as usize,
                    None => return err("ERR value is not an integer or out of range".into()),
                }
            }
            let now = now_millis();
            let log = lock(&acl.log);
            let entries = log.iter().take(count).map(|e| {
                let pair = |k: &str, v: Reply| (Reply::bulk(k.as_bytes()), v);
                Reply::Map(vec![
                    pair("count", Reply::Integer(e.count as i64)),
                    pair("reason", Reply::bulk(e.reason.as_bytes())),
                    pair("context", Reply::bulk(e.context.as_bytes())),
                    pair("object", Reply::Bulk(Bytes::copy_from_slice(&e.object))),
                    pair("username", Reply::Bulk(Bytes::copy_from_slice(&e.username))),
                    pair("age-seconds", Reply::Double(now.saturating_sub(e.millis) as f64 / 1000.0)),
                    pair("client-info", Reply::Bulk(e.client_info.clone().into())),
                ])
            });
            Reply::Array(entries.collect())
        }
        (b"dryrun", _) => {
            let Some(user) = acl.user(&argv[2]) else {
                return err(format!("ERR User '{}' not found", lossy(&argv[2])));
            };
            let cmd = &argv[3..];
            let Ok(id) = resolve(cmd) else {
                return err(format!("ERR Command '{}' not found", lossy(&argv[3])));
            };
            let info = &commands().list[id];
            let (arity, n) = (info.arity, cmd.len() as i32);
            if (arity > 0 && arity != n) || n < -arity {
                return err(format!("ERR wrong number of arguments for '{}' command", info.name));
            }
            match user.check(id, cmd) {
                Ok(()) => Reply::OK,
                Err(Denied::Command) => Reply::Bulk(
                    format!("This user has no permissions to run the '{}' command", info.name).into(),
                ),
                Err(Denied::Key(at)) => Reply::Bulk(
                    format!("This user has no permissions to access the '{}' key", lossy(&cmd[at])).into(),
                ),
                Err(Denied::Channel(at)) => Reply::Bulk(
                    format!("This user has no permissions to access the '{}' channel", lossy(&cmd[at]))
                        .into(),
                ),
            }
        }
        (b"help", 2) => Reply::Array(HELP.iter().map(|s| Reply::status(s)).collect()),
        _ => return syntax(),
    };
    (reply, Vec::new())
}

/// Writes the ACL file through a temporary file and a rename, as Redis does.
fn save_file(path: &str, text: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp-{}-{}", std::process::id(), now_millis());
    let result = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `chars` lowercase hex digits from the system's random source.
fn random_hex(chars: usize) -> String {
    use std::io::Read;
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: the std hasher's per-process random keys, mixed with the time.
        use std::hash::{BuildHasher, RandomState};
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let v = RandomState::new().hash_one((i, now_millis()));
            chunk.copy_from_slice(&v.to_le_bytes()[..chunk.len()]);
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<Bytes> {
        args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    fn user(rules: &[&str]) -> User {
        let mut u = User::new(b"u", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    fn check(u: &User, args: &[&str]) -> Result<(), Denied> {
        let a = argv(args);
        u.check(resolve(&a).unwrap(), &a)
    }

    #[test]
    fn every_command_fits_the_bitmap_and_containers_know_their_subcommands() {
        let cmds = commands();
        assert!(cmds.list.len() > 300 && cmds.list.len() < WORDS * 64);
        let config = lookup(b"CONFIG").unwrap();
        assert!(cmds.list[config].subs.contains(&lookup(b"config|get").unwrap()));
        assert_eq!(command_name(resolve(&argv(&["Config", "GET", "x"])).unwrap()), "config|get");
        assert_eq!(resolve(&argv(&["config", "nosuch"])), Err(Some(config)));
        assert_eq!(resolve(&argv(&["nosuch"])), Err(None));
        assert_eq!(command_name(resolve(&argv(&["namespace", "get", "x"])).unwrap()), "namespace");
    }

    #[test]
    fn rules_decide_commands_keys_and_channels() {
        let u = user(&["on", "~app:*", "%R~ro:*", "&news.*", "+@read", "+set", "-keys", "+publish"]);
        assert_eq!(check(&u, &["GET", "app:1"]), Ok(()));
        assert_eq!(check(&u, &["GET", "ro:1"]), Ok(()));
        assert_eq!(check(&u, &["SET", "ro:1", "v"]), Err(Denied::Key(1)));
        assert_eq!(check(&u, &["MGET", "app:1", "x", "y"]), Err(Denied::Key(2)));
        assert_eq!(check(&u, &["KEYS", "*"]), Err(Denied::Command));
        assert_eq!(check(&u, &["DEL", "app:1"]), Err(Denied::Command));
        assert_eq!(check(&u, &["PUBLISH", "news.a", "m"]), Ok(()));
        assert_eq!(check(&u, &["PUBLISH", "other", "m"]), Err(Denied::Channel(1)));
        assert_eq!(check(&u, &["AUTH", "x"]), Ok(()), "no-auth commands are always allowed");
        // A selector allows what the root does not; the worst refusal is reported.
        let s = user(&["~a*", "+get", "(~b* +set)"]);
        assert_eq!(check(&s, &["SET", "b1", "v"]), Ok(()));
        assert_eq!(check(&s, &["SET", "a1", "v"]), Err(Denied::Key(1)));
        assert_eq!(check(&s, &["DEL", "a1"]), Err(Denied::Command));
        // First arguments of an otherwise denied command.
        let f = user(&["allkeys", "+select|0"]);
        assert_eq!(check(&f, &["SELECT", "0"]), Ok(()));
        assert_eq!(check(&f, &["SELECT", "1"]), Err(Denied::Command));
        // A container's rule covers its subcommands; a subcommand's rule only itself.
        let c = user(&["+config", "-config|set"]);
        assert_eq!(check(&c, &["CONFIG", "GET", "x"]), Ok(()));
        assert_eq!(check(&c, &["CONFIG", "SET", "x", "y"]), Err(Denied::Command));
    }

    #[test]
    fn users_describe_themselves_in_redis_form() {
        // Texts observed from redis-server 7.0.15's ACL LIST.
        assert_eq!(User::default_user().describe(), "on nopass ~* &* +@all");
        assert_eq!(User::new(b"a", false).describe(), "off resetchannels -@all");
        let u = user(&["on", ">pw", "~app:*", "%R~ro:*", "&chan*", "+@read", "+set", "-keys", "(+get ~x*)"]);
        assert_eq!(
            u.describe(),
            "on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~app:* %R~ro:* resetchannels \
             &chan* -@all +@read -keys +set (~x* resetchannels -@all +get)"
        );
        assert_eq!(
            user(&["+@all", "-@dangerous", "~*"]).describe(),
            "off ~* resetchannels +@all -@dangerous"
        );
        assert_eq!(user(&["reset"]).describe(), "off sanitize-payload resetchannels -@all");
        assert_eq!(user(&["+select|0"]).describe(), "off resetchannels -@all +select|0");
    }

    #[test]
    fn bad_rules_get_redis_errors_and_change_nothing() {
        let mut u = user(&["~*", "&*"]);
        let before = u.describe();
        assert_eq!(u.apply(b"bogus", false), Err(RuleError::Syntax));
        assert_eq!(u.apply(b"+nosuch", false), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"~a", false), Err(RuleError::KeysAfterAll));
        assert_eq!(u.apply(b"&a", false), Err(RuleError::ChannelsAfterAll));
        assert_eq!(u.apply(b"#abc", false), Err(RuleError::BadHash));
        assert_eq!(u.apply(b"<nope", false), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(b"+config|get|x", false), Err(RuleError::SubcommandFirstArg));
        assert_eq!(u.apply(b"-select|0", false), Err(RuleError::Unknown));
        assert_eq!(u.describe(), before);
        assert_eq!(user(&[]).apply(b"%X~a", false), Err(RuleError::Syntax));
        assert_eq!(
            merge_selectors(&argv(&["on", "(+get", "~a)", "off"])),
            Ok(vec![b"on".to_vec(), b"(+get ~a)".to_vec(), b"off".to_vec()])
        );
        assert_eq!(merge_selectors(&argv(&["(+get"])), Err(b"(+get".to_vec()));
    }

    #[test]
    fn passwords_are_hashed_and_checked() {
        let mut u = user(&["on", ">secret"]);
        assert_eq!(u.passwords, [hash_password(b"secret")]);
        assert!(u.accepts(b"secret") && !u.accepts(b"Secret"));
        u.apply(b"off", false).unwrap();
        assert!(!u.accepts(b"secret"), "a disabled user cannot log in");
        assert_eq!(hash_password(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn an_acl_file_loads_all_or_nothing() {
        let acl = Acl::default();
        let bad = "user a on >x +get\nuser b on +nosuch\nbogus\n";
        let e = acl.load(bad, "f.acl", false).unwrap_err();
        assert!(e.contains("f.acl:2: Error in applying operation '+nosuch'"), "{e}");
        assert!(e.contains("f.acl:3 should start with user keyword"), "{e}");
        assert!(acl.user(b"a").is_none());
        acl.load("user a on nopass ~* +@all\n", "f.acl", false).unwrap();
        assert!(acl.authenticate(b"a", b"any").is_some());
        assert!(acl.user(b"default").is_some(), "a file without default keeps Redis' default user");
        assert_eq!(
            acl.save(),
            "user a on nopass ~* resetchannels +@all\nuser default on nopass ~* &* +@all\n"
        );
    }
}
