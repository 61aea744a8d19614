//! The command table: every command's arity, flags and key specs as Redis 7.0's
//! `COMMAND INFO` reports them, in one place, with the key extraction an engine locks or
//! routes by ([`keys`]) and the `COMMAND` replies built from it (`command_reply`).
//!
//! The rows live in `table_data.rs`, generated from a real redis-server by
//! `scripts/gen_command_table.py`; the `command_table` test compares them with one.

use bytes::Bytes;

use super::Reply;
pub(super) use super::table_data::{TABLE, UNSERVED};

/// Command flags (Redis' `CMD_*`), bits a row has or not ([`CommandInfo::has`]).
pub mod flag {
    /// Modifies data.
    pub const WRITE: u32 = 1;
    /// Only reads data.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory use.
    pub const DENYOOM: u32 = 1 << 2;
    /// A module command.
    pub const MODULE: u32 = 1 << 3;
    /// An administrative command.
    pub const ADMIN: u32 = 1 << 4;
    /// A pub/sub command.
    pub const PUBSUB: u32 = 1 << 5;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u32 = 1 << 6;
    /// May block the client.
    pub(crate) const BLOCKING: u32 = 1 << 7;
    /// Allowed while loading.
    pub(crate) const LOADING: u32 = 1 << 8;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 9;
    /// Not shown by MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 10;
    /// Not logged by SLOWLOG.
    pub const SKIP_SLOWLOG: u32 = 1 << 11;
    /// Cluster ASKING.
    pub const ASKING: u32 = 1 << 12;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 13;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 14;
    /// May replicate (Redis' EVAL, EVALSHA, FCALL, PFCOUNT, PUBLISH, SPUBLISH): held by
    /// CLIENT PAUSE WRITE, refused in read-only scripts. Redis' COMMAND INFO does not show it.
    pub const MAY_REPLICATE: u32 = 1 << 15;
    /// Sentinel.
    pub const SENTINEL: u32 = 1 << 16;
    /// Keys are optional.
    pub(crate) const NO_MANDATORY_KEYS: u32 = 1 << 18;
    /// Refused while the server loads its data asynchronously.
    pub(crate) const NO_ASYNC_LOADING: u32 = 1 << 19;
    /// Protected.
    pub const PROTECTED: u32 = 1 << 20;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 22;
    /// Key positions depend on the arguments (key specs say how).
    pub(crate) const MOVABLEKEYS: u32 = 1 << 23;
    /// Allowed while a script is busy.
    pub const ALLOW_BUSY: u32 = 1 << 24;

    /// The flag names in the order `COMMAND INFO` lists them, bit `i` named `NAMES[i]`.
    pub(crate) const NAMES: [&str; 25] = [
        "write",
        "readonly",
        "denyoom",
        "module",
        "admin",
        "pubsub",
        "noscript",
        "blocking",
        "loading",
        "stale",
        "skip_monitor",
        "skip_slowlog",
        "asking",
        "fast",
        "no_auth",
        "may_replicate",
        "sentinel",
        "only_sentinel",
        "no_mandatory_keys",
        "no_async_loading",
        "protected",
        "module_no_cluster",
        "no_multi",
        "movablekeys",
        "allow_busy",
    ];
}

/// The engine's and the server's own attributes of a command ([`CommandInfo::is`]), beside
/// Redis' [`flag`]s (which `COMMAND INFO` reports; these it
/// does not).
pub mod attr {
    /// Refused to a client logged in with a namespace token: Kvrocks' admin commands (not
    /// Redis' `admin` flag: FLUSHALL is one, CLIENT UNBLOCK is not).
    pub const TENANT_DENIED: u32 = 1;
    /// A read whose reply tells whether its key was found (INFO `keyspace_hits/misses`): a
    /// nil or empty reply is a miss, any other non-error reply a hit; MGET counts each key.
    pub const KEYED_READ: u32 = 1 << 1;
    /// Allowed to a RESP2 client while it subscribes to something.
    pub const SUBSCRIBED: u32 = 1 << 2;
    /// Not a Redis command: Kvrocks' (NAMESPACE) or this project's own (FSCK, COMPACT).
    pub const OWN: u32 = 1 << 3;
    /// Redis' `LOOKUP_NOTOUCH`: its lookups leave the keys' last-use time (OBJECT IDLETIME)
    /// alone.
    pub(crate) const NO_TOUCH: u32 = 1 << 4;
}

/// Which file implements a command (the session layer answers [`Family::Session`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Keys, expiry, databases, connection.
    Keyspace,
    /// Strings.
    String,
    /// Hashes.
    Hash,
    /// Sets.
    Set,
    /// Lists.
    List,
    /// Sorted sets.
    Zset,
    /// DUMP and RESTORE.
    Dump,
    /// Introspection and the rest (OBJECT, TOUCH, WAIT, LCS…).
    Generic,
    /// SORT and SORT_RO.
    Sort,
    /// Bitmaps (SETBIT, BITFIELD…).
    Bitmap,
    /// HyperLogLog (PFADD, PFCOUNT, PFMERGE).
    Hll,
    /// Geo (GEOADD, GEOSEARCH…) on sorted sets.
    Geo,
    /// Answered by a server, not the library (CONFIG, CLIENT, INFO, scripting, pub/sub…):
    /// rows so that `COMMAND` describes them and a server's gate reads their flags.
    Server,
    /// Streams (XADD, XREADGROUP…).
    Stream,
    /// MULTI/EXEC/WATCH and COMMAND: per-connection state, answered by
    /// [`super::Engine::execute`].
    Session,
}

/// Where a key spec's search starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// At this argument index.
    Index(usize),
    /// After the first argument equal (ASCII case-insensitively) to `keyword`, searching from
    /// `startfrom` (negative: from the end, backwards).
    Keyword {
        /// The keyword.
        keyword: &'static str,
        /// Where to start looking.
        startfrom: i32,
    },
    /// Redis cannot say (SORT's BY/GET and STORE keys): [`key_positions`] knows the command.
    Unknown,
}

/// How a key spec finds the keys after its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Find {
    /// Keys up to `lastkey` (relative to the start; negative counts from the end), every
    /// `step`; `limit` divides the remaining arguments when `lastkey` is -1.
    Range {
        /// Last key, relative.
        lastkey: i32,
        /// Distance between keys.
        step: usize,
        /// Divisor of the remaining arguments (0: none).
        limit: usize,
    },
    /// The argument at `keynumidx` (relative) holds the number of keys; they start at
    /// `firstkey` (relative), every `step`.
    Keynum {
        /// Where the count is.
        keynumidx: usize,
        /// Where the first key is, relative to the start.
        firstkey: usize,
        /// Distance between keys.
        step: usize,
    },
    /// Redis cannot say (see [`Begin::Unknown`]).
    Unknown,
}

/// One key spec (Redis 7.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpec {
    /// Redis' explanatory note, when it has one.
    pub(crate) notes: Option<&'static str>,
    /// Access flags (`RW`, `RO`, `OW`, `RM`, `access`, `update`, `insert`, `delete`).
    pub flags: &'static [&'static str],
    /// Where the search starts.
    pub(crate) begin: Begin,
    /// How keys are found from there.
    pub(crate) find: Find,
}

/// A command's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandInfo {
    /// Lowercase name.
    pub name: &'static str,
    /// The file that implements it.
    pub family: Family,
    /// Redis arity: `n > 0` exactly n arguments including the name, `-n` at least n.
    pub arity: i32,
    /// [`flag`] bits.
    pub(crate) flags: u32,
    /// The legacy `(first key, last key, step)` of `COMMAND INFO`.
    pub(crate) legacy: (i32, i32, i32),
    /// ACL categories, space-separated.
    pub acl: &'static str,
    /// Key specs.
    pub(crate) keys: &'static [KeySpec],
    /// A container (OBJECT, COMMAND): its subcommands have rows of their own, named
    /// `container|subcommand`, with their own arity, flags and key specs.
    pub(crate) has_subcommands: bool,
    /// [`attr`] bits.
    pub(crate) attrs: u32,
}

impl CommandInfo {
    /// The name the family knows the command by: the container's for a subcommand.
    #[inline]
    pub fn container(&self) -> &'static str {
        // Only these families have subcommand rows: a data command is its own container.
        if !matches!(self.family, Family::Server | Family::Session | Family::Generic | Family::Stream) {
            return self.name;
        }
        // A byte search: `str::find` with a char pattern costs more on names this short.
        match self.name.bytes().position(|b| b == b'|') {
            Some(bar) => &self.name[..bar],
            None => self.name,
        }
    }

    /// Whether [`find`] gives this row for any argv whose first argument names it, whatever
    /// follows: neither a container (its subcommand picks the row) nor a subcommand.
    #[inline]
    pub fn named_alone(&self) -> bool {
        !self.has_subcommands && self.container().len() == self.name.len()
    }

    /// Whether `argc` arguments (the name included) satisfy the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = i64::from(self.arity);
        if arity >= 0 { argc == arity } else { argc >= -arity }
    }

    /// Whether the command has the [`flag`] bit(s) `bits`.
    pub fn has(&self, bits: u32) -> bool {
        self.flags & bits != 0
    }

    /// Whether the command has the [`attr`] bit(s) `bits`.
    pub fn is(&self, bits: u32) -> bool {
        self.attrs & bits != 0
    }

    /// Where the row is in [`all`] (a dense index for per-command counters kept in an
    /// array), without hashing its name; `None` for a row that is not the table's.
    pub fn position(&self) -> Option<usize> {
        let offset = (self as *const Self as usize).wrapping_sub(TABLE.as_ptr() as usize);
        let row = offset / std::mem::size_of::<CommandInfo>();
        TABLE.get(row).filter(|r| std::ptr::eq(*r, self)).map(|_| row)
    }

    /// The argument index of the command's one key when its only key spec is one argument
    /// at a fixed index (GET, SET, LPUSH, HSET…: most commands), the key [`key_positions`]
    /// finds there, told without allocating; `None` for every other shape.
    pub(crate) fn fixed_key(&self) -> Option<usize> {
        match self.keys {
            [KeySpec { begin: Begin::Index(i), find: Find::Range { lastkey: 0, .. }, .. }] => Some(*i),
            _ => None,
        }
    }

    /// Whether it may modify data.
    pub fn is_write(&self) -> bool {
        self.has(flag::WRITE)
    }

    /// Whether it works on the whole keyspace rather than on named keys (FLUSHDB, SCAN,
    /// DBSIZE…): a data command without key specs.
    pub(crate) fn is_keyspace_wide(&self) -> bool {
        self.keys.is_empty() && self.has(flag::WRITE | flag::READONLY)
    }

    /// Whether this call reads keys named by the data it reads (SORT's `BY w_*` and
    /// `GET h_*->f`), which no lock taken beforehand can name: the engine runs such a call
    /// alone, as it runs FLUSHALL.
    pub(crate) fn reads_derived_keys(&self, argv: &[Bytes]) -> bool {
        let derived = |spec: &KeySpec| spec.begin == Begin::Unknown && spec.flags.contains(&"RO");
        if !self.keys.iter().any(derived) {
            return false;
        }
        argv.windows(2).skip(2).any(|w| {
            (w[0].eq_ignore_ascii_case(b"by") && w[1].contains(&b'*'))
                || (w[0].eq_ignore_ascii_case(b"get") && w[1].as_ref() != b"#")
        })
    }
}

/// Every command and subcommand (`container|sub`), sorted by name.
pub fn all() -> &'static [CommandInfo] {
    TABLE
}

/// Redis 7.0's commands and subcommands that neither the engine nor the server runs (MODULE
/// LOAD, RESTORE-ASKING…), as Redis reports them: ACL rules may name them, as Redis' do.
/// Neither [`find`] nor `COMMAND` sees them.
pub fn unserved() -> &'static [CommandInfo] {
    UNSERVED
}

/// The top-level commands, as `COMMAND` and `COMMAND COUNT` list them.
fn top_level() -> impl Iterator<Item = &'static CommandInfo> {
    TABLE.iter().filter(|c| !c.name.contains('|'))
}

/// The row `argv` runs: the command's, or for a container its subcommand's (`argv[1]`,
/// any case). `Err(Some(info))` names a container whose subcommand is unknown; `Err(None)`
/// an unknown command. Allocates nothing: a name is compared in place ignoring case, and a
/// subcommand's `container|sub` is built on the stack.
pub fn find(argv: &[Bytes]) -> Result<&'static CommandInfo, Option<&'static CommandInfo>> {
    // A subcommand's row is named `container|sub`; as a command name that is unknown.
    let info = argv.first().filter(|n| !n.contains(&b'|')).and_then(|n| lookup_bytes(n)).ok_or(None)?;
    match argv.get(1) {
        Some(sub) if info.has_subcommands => {
            let mut buf = [0u8; 64];
            let (head, rest) = buf.split_at_mut(info.name.len());
            head.copy_from_slice(info.name.as_bytes());
            rest[0] = b'|';
            let name = rest.get_mut(1..1 + sub.len()).ok_or(Some(info))?;
            name.copy_from_slice(sub);
            lookup_bytes(&buf[..info.name.len() + 1 + sub.len()]).ok_or(Some(info))
        }
        _ => Ok(info),
    }
}

/// [`find`] that first tries `last`, the row an earlier call found for the same caller: a
/// pipeline mostly repeats one command, and its name compared in place costs a fifth of
/// its lookup in the index. Only a command that is neither a container nor a subcommand
/// (whose name `find` never takes) is taken from `last`.
pub fn find_repeated(
    argv: &[Bytes],
    last: Option<&'static CommandInfo>,
) -> Result<&'static CommandInfo, Option<&'static CommandInfo>> {
    if let (Some(info), Some(name)) = (last, argv.first())
        && info.named_alone()
        && name.eq_ignore_ascii_case(info.name.as_bytes())
    {
        return Ok(info);
    }
    find(argv)
}

/// The metadata of the command named `name` (lowercase).
///
/// One FNV-1a hash of the name and one compare, in an open-addressed index built on first
/// use: every command passes here once or twice, and a binary search over the table's 240
/// names cost eight string compares (about 5% of a pipelined LPUSH through the server).
pub fn lookup(name: &str) -> Option<&'static CommandInfo> {
    position(name).map(|row| &TABLE[row])
}

/// Where the command named `name` (lowercase) is in [`all`]: a dense index for per-command
/// counters kept in an array.
pub fn position(name: &str) -> Option<usize> {
    position_of(name.as_bytes()).filter(|&row| TABLE[row].name == name)
}

/// [`position`] for a name of any bytes, compared as lowercase: no allocation.
///
/// The index is keyed by a name's first 16 bytes lowercased, held as one `u128`, and its
/// length: one multiply to hash, one compare per probe, and a byte compare only for the
/// few names longer than 16. (A byte-at-a-time hash and compare cost about 150
/// instructions per command, 2% of a pipelined SET.)
fn position_of(name: &[u8]) -> Option<usize> {
    let index = INDEX.get_or_init(build_index);
    let mask = index.len() - 1;
    let head = name_head(name);
    let mut slot = slot_of(head, name.len()) & mask;
    loop {
        let entry = &index[slot];
        if entry.len == 0 {
            return None;
        }
        if entry.head == head && usize::from(entry.len) == name.len() {
            let row = usize::from(entry.row);
            if name.len() <= 16 || TABLE[row].name.as_bytes()[16..].eq_ignore_ascii_case(&name[16..]) {
                return Some(row);
            }
        }
        slot = (slot + 1) & mask;
    }
}

/// A slot of [`INDEX`]: a row's name's [`name_head`] and length (0: an empty slot).
#[derive(Clone, Copy, Default)]
struct Slot {
    head: u128,
    len: u8,
    row: u16,
}

/// Open addressing over [`TABLE`]: a power of two at least twice the rows.
static INDEX: std::sync::OnceLock<Vec<Slot>> = std::sync::OnceLock::new();

fn build_index() -> Vec<Slot> {
    let mut index = vec![Slot::default(); (TABLE.len() * 2).next_power_of_two()];
    let mask = index.len() - 1;
    for (row, info) in TABLE.iter().enumerate() {
        let name = info.name.as_bytes();
        let mut slot = slot_of(name_head(name), name.len()) & mask;
        while index[slot].len != 0 {
            slot = (slot + 1) & mask;
        }
        let len = u8::try_from(name.len()).expect("command names are short");
        index[slot] = Slot { head: name_head(name), len, row: row as u16 };
    }
    index
}

/// The first 16 bytes of `name`, lowercased, zero-padded, as one number.
fn name_head(name: &[u8]) -> u128 {
    let mut head = [0u8; 16];
    for (to, from) in head.iter_mut().zip(name) {
        *to = from.to_ascii_lowercase();
    }
    u128::from_le_bytes(head)
}

/// The index slot (before masking) of a name's head and length.
fn slot_of(head: u128, len: usize) -> usize {
    let folded = (head as u64) ^ ((head >> 64) as u64).rotate_left(29) ^ len as u64;
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
}

/// [`lookup`] for a name in any case; `None` for unknown names.
pub(crate) fn lookup_bytes(name: &[u8]) -> Option<&'static CommandInfo> {
    position_of(name).map(|row| &TABLE[row])
}

/// Why [`key_positions`] found no valid key positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidKeys;

/// The argument indexes of `argv`'s keys, by the command's key specs, in spec order (a key
/// named twice appears twice), as Redis 7.0's `COMMAND GETKEYS` finds them.
///
/// # Errors
/// [`InvalidKeys`] when a spec points outside `argv` or its key count is not a
/// non-negative integer (the command itself will reject those arguments).
pub fn key_positions(info: &CommandInfo, argv: &[Bytes]) -> Result<Vec<usize>, InvalidKeys> {
    Ok(key_refs(info, argv)?.into_iter().map(|(i, _)| i).collect())
}

/// [`key_positions`] with the key spec that found each key: its flags say whether the
/// command reads the key's value (`access`) or writes it (`insert`, `update`, `delete`),
/// which is what ACL key patterns (`%R~`, `%W~`) are checked against.
///
/// # Errors
/// As [`key_positions`].
pub fn key_refs(info: &CommandInfo, argv: &[Bytes]) -> Result<Vec<(usize, &'static KeySpec)>, InvalidKeys> {
    if info.name == "migrate" && info.keys.len() == 2 {
        return Ok(migrate_keys(argv).into_iter().map(|i| (i, &info.keys[usize::from(i != 3)])).collect());
    }
    let argc = argv.len() as i64;
    let mut out = Vec::new();
    for spec in info.keys {
        let first = match spec.begin {
            Begin::Index(i) => i as i64,
            Begin::Keyword { keyword, startfrom } => match find_keyword(argv, keyword, startfrom) {
                Some(i) => i as i64 + 1,
                None => continue,
            },
            Begin::Unknown => {
                // SORT's STORE destination is the only such key written; BY/GET keys are
                // derived from the sorted values and cannot be known beforehand.
                if info.name == "sort" && spec.flags.contains(&"OW") {
                    out.extend(sort_store_key(argv).map(|i| (i, spec)));
                }
                continue;
            }
        };
        let (first, last, step) = match spec.find {
            Find::Range { lastkey, step, limit } => {
                let last = if lastkey >= 0 {
                    first + i64::from(lastkey)
                } else if limit == 0 {
                    argc + i64::from(lastkey)
                } else {
                    first + ((argc - first) / limit as i64 + i64::from(lastkey))
                };
                (first, last, step as i64)
            }
            Find::Keynum { keynumidx, firstkey, step } => {
                let at = first + keynumidx as i64;
                let numkeys = usize::try_from(at)
                    .ok()
                    .and_then(|at| argv.get(at))
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|n| *n >= 0)
                    .ok_or(InvalidKeys)?;
                if numkeys == 0 {
                    // No keys (EVAL … 0): valid; whether a command may have none is its
                    // NO_MANDATORY_KEYS flag's business.
                    continue;
                }
                let first = first + firstkey as i64;
                (first, first + numkeys - 1, step as i64)
            }
            Find::Unknown => continue,
        };
        if last >= argc || last < first || first >= argc {
            return Err(InvalidKeys);
        }
        let spec =
            if spec.flags.contains(&"variable_flags") { variable_flags(info, argv, spec) } else { spec };
        let mut i = first;
        while i <= last {
            out.push((i as usize, spec));
            i += step.max(1);
        }
    }
    Ok(out)
}

/// MIGRATE's keys (Redis' `migrateGetKeys`): the key argument, or with the KEYS option the
/// keys after it (none when the key argument is not empty then, a syntax error).
fn migrate_keys(argv: &[Bytes]) -> Vec<usize> {
    let mut i = 6;
    while i < argv.len() {
        let word = argv[i].to_ascii_lowercase();
        match word.as_slice() {
            b"keys" if argv[3].is_empty() => return (i + 1..argv.len()).collect(),
            b"keys" => return Vec::new(),
            b"auth" => i += 1,
            b"auth2" => i += 2,
            _ => {}
        }
        i += 1;
    }
    if argv.len() > 3 { vec![3] } else { Vec::new() }
}

/// The key spec with the flags this call's arguments give a `variable_flags` key (Redis'
/// `setGetKeys` and `bitfieldGetKeys`): SET writes blindly unless GET reads the old value;
/// BITFIELD only reads while it has GET and OVERFLOW alone.
fn variable_flags(info: &CommandInfo, argv: &[Bytes], spec: &'static KeySpec) -> &'static KeySpec {
    const fn with(flags: &'static [&'static str]) -> KeySpec {
        KeySpec {
            notes: None,
            flags,
            begin: Begin::Index(1),
            find: Find::Range { lastkey: 0, step: 1, limit: 0 },
        }
    }
    static OW_UPDATE: KeySpec = with(&["OW", "update"]);
    static RW_ACCESS_UPDATE: KeySpec = with(&["RW", "access", "update"]);
    static RO_ACCESS: KeySpec = with(&["RO", "access"]);
    match info.name {
        "set" if argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) => &RW_ACCESS_UPDATE,
        "set" => &OW_UPDATE,
        "bitfield" => {
            let mut i = 2;
            while i < argv.len() {
                let more = argv.len() - i - 1;
                let a = &argv[i];
                if a.eq_ignore_ascii_case(b"get") && more >= 2 {
                    i += 3;
                } else if a.eq_ignore_ascii_case(b"overflow") && more >= 1 {
                    i += 2;
                } else {
                    return &RW_ACCESS_UPDATE;
                }
            }
            &RO_ACCESS
        }
        _ => spec,
    }
}

/// The position of SORT's STORE destination, parsing the options as Redis'
/// `sortGetKeys` does (LIMIT takes two arguments, GET/BY one; the last STORE wins).
fn sort_store_key(argv: &[Bytes]) -> Option<usize> {
    let mut found = None;
    let mut i = 2;
    while i < argv.len() {
        let skip = match argv[i].to_ascii_lowercase().as_slice() {
            b"limit" => 2,
            b"get" | b"by" => 1,
            b"store" if i + 1 < argv.len() => {
                found = Some(i + 1);
                1
            }
            _ => 0,
        };
        i += 1 + skip;
    }
    found
}

fn find_keyword(argv: &[Bytes], keyword: &str, startfrom: i32) -> Option<usize> {
    let argc = argv.len() as i64;
    let start = if startfrom > 0 { i64::from(startfrom) } else { argc + i64::from(startfrom) };
    let hit = |i: &i64| argv[*i as usize].eq_ignore_ascii_case(keyword.as_bytes());
    let found = if startfrom > 0 {
        (start.max(1)..argc).find(hit)
    } else {
        (1..=start.min(argc - 1)).rev().find(hit)
    };
    found.map(|i| i as usize)
}

/// The keys of `argv` (an engine locks or routes by them): [`key_positions`] as bytes,
/// empty for an unknown command or invalid arguments.
pub fn keys(argv: &[Bytes]) -> Vec<Bytes> {
    let Ok(info) = find(argv) else {
        return Vec::new();
    };
    key_positions(info, argv)
        .map(|pos| pos.into_iter().map(|i| argv[i].clone()).collect())
        .unwrap_or_default()
}

/// The `COMMAND INFO` entry of one command: name, arity, flags, first, last, step, ACL
/// categories, tips (none), key specs, subcommands (none). Flags, categories, tips, key
/// specs and subcommands are RESP3 sets, each key spec a map (as Redis 7.0 sends them).
pub(crate) fn info_reply(info: &CommandInfo) -> Reply {
    let flags = flag::NAMES
        .iter()
        .enumerate()
        // Redis keeps may_replicate to itself: COMMAND INFO never shows it.
        .filter(|(i, _)| info.flags & (1 << i) != 0 && 1 << i != flag::MAY_REPLICATE)
        .map(|(_, name)| Reply::status(name))
        .collect();
    let (first, last, step) = info.legacy;
    Reply::Array(vec![
        Reply::bulk(info.name.as_bytes()),
        Reply::Integer(info.arity.into()),
        Reply::Set(flags),
        Reply::Integer(first.into()),
        Reply::Integer(last.into()),
        Reply::Integer(step.into()),
        Reply::Set(info.acl.split(' ').filter(|c| !c.is_empty()).map(Reply::status).collect()),
        Reply::Set(Vec::new()),
        Reply::Set(info.keys.iter().map(spec_reply).collect()),
        Reply::Set(Vec::new()),
    ])
}

fn spec_reply(spec: &KeySpec) -> Reply {
    let pair = |name: &'static str, value: Reply| (Reply::bulk(name.as_bytes()), value);
    let int = |n: i64| Reply::Integer(n);
    let begin = match spec.begin {
        Begin::Index(i) => ("index", vec![pair("index", int(i as i64))]),
        Begin::Keyword { keyword, startfrom } => (
            "keyword",
            vec![pair("keyword", Reply::bulk(keyword.as_bytes())), pair("startfrom", int(startfrom.into()))],
        ),
        Begin::Unknown => ("unknown", Vec::new()),
    };
    let find = match spec.find {
        Find::Range { lastkey, step, limit } => (
            "range",
            vec![
                pair("lastkey", int(lastkey.into())),
                pair("keystep", int(step as i64)),
                pair("limit", int(limit as i64)),
            ],
        ),
        Find::Keynum { keynumidx, firstkey, step } => (
            "keynum",
            vec![
                pair("keynumidx", int(keynumidx as i64)),
                pair("firstkey", int(firstkey as i64)),
                pair("keystep", int(step as i64)),
            ],
        ),
        Find::Unknown => ("unknown", Vec::new()),
    };
    let search = |(ty, spec): (&'static str, Vec<(Reply, Reply)>)| {
        Reply::Map(vec![pair("type", Reply::bulk(ty.as_bytes())), pair("spec", Reply::Map(spec))])
    };
    let notes = spec.notes.map(|n| pair("notes", Reply::bulk(n.as_bytes())));
    Reply::Map(
        notes
            .into_iter()
            .chain([
                pair("flags", Reply::Set(spec.flags.iter().map(|f| Reply::status(f)).collect())),
                pair("begin_search", search(begin)),
                pair("find_keys", search(find)),
            ])
            .collect(),
    )
}

/// The reply to `COMMAND [INFO name… | COUNT | GETKEYS command arg…]` (argv includes
/// `COMMAND` itself, and passed [`super::resolve`]: subcommand and arity are checked).
pub(crate) fn command_reply(argv: &[Bytes]) -> Reply {
    let Some(sub) = argv.get(1) else {
        return Reply::Array(top_level().map(info_reply).collect());
    };
    match sub.to_ascii_lowercase().as_slice() {
        b"info" if argv.len() == 2 => Reply::Array(top_level().map(info_reply).collect()),
        b"info" => Reply::Array(
            argv[2..].iter().map(|name| lookup_bytes(name).map_or(Reply::Nil, info_reply)).collect(),
        ),
        b"count" => Reply::Integer(top_level().count() as i64),
        b"getkeys" => getkeys_reply(&argv[2..], false),
        b"getkeysandflags" => getkeys_reply(&argv[2..], true),
        b"list" => list_reply(&argv[2..]),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]: every command
/// and subcommand name (`container|sub`) that passes the filter; a pattern is matched
/// without regard to case, as Redis does.
fn list_reply(args: &[Bytes]) -> Reply {
    let keep: Box<dyn Fn(&CommandInfo) -> bool> = match args {
        [] => Box::new(|_| true),
        [filterby, kind, value] if filterby.eq_ignore_ascii_case(b"filterby") => {
            let value = value.to_ascii_lowercase();
            if kind.eq_ignore_ascii_case(b"module") {
                Box::new(|_| false)
            } else if kind.eq_ignore_ascii_case(b"aclcat") {
                let category = format!("@{}", String::from_utf8_lossy(&value).to_ascii_lowercase());
                Box::new(move |info| info.acl.split(' ').any(|c| c == category))
            } else if kind.eq_ignore_ascii_case(b"pattern") {
                Box::new(move |info| super::glob::glob_match(&value, info.name.as_bytes()))
            } else {
                return Reply::Error("ERR syntax error".into());
            }
        }
        _ => return Reply::Error("ERR syntax error".into()),
    };
    Reply::Array(
        TABLE.iter().filter(|info| keep(info)).map(|info| Reply::bulk(info.name.as_bytes())).collect(),
    )
}

/// COMMAND GETKEYS, and with `flags` COMMAND GETKEYSANDFLAGS (each key with its key
/// spec's flags).
fn getkeys_reply(argv: &[Bytes], flags: bool) -> Reply {
    let Ok(info) = find(argv) else {
        return Reply::Error("ERR Invalid command specified".into());
    };
    if info.keys.is_empty() {
        return Reply::Error("ERR The command has no key arguments".into());
    }
    if !info.arity_ok(argv.len()) {
        return Reply::Error("ERR Invalid number of arguments specified for command".into());
    }
    match key_refs(info, argv) {
        Ok(refs) if !refs.is_empty() => Reply::Array(
            refs.into_iter()
                .map(|(i, spec)| match flags {
                    false => Reply::Bulk(argv[i].clone()),
                    true => Reply::Array(vec![
                        Reply::Bulk(argv[i].clone()),
                        Reply::Array(spec.flags.iter().map(|f| Reply::status(f)).collect()),
                    ]),
                })
                .collect(),
        ),
        Ok(_) if info.has(flag::NO_MANDATORY_KEYS) => Reply::Array(Vec::new()),
        _ => Reply::Error("ERR Invalid arguments specified for command".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever row an earlier call found, `find_repeated` answers as `find`: the remembered
    /// row only for its own name (any case), never for a container's subcommand or a name
    /// written as `container|sub`.
    #[test]
    fn find_repeated_answers_as_find() {
        let argv =
            |words: &[&str]| words.iter().map(|w| Bytes::copy_from_slice(w.as_bytes())).collect::<Vec<_>>();
        let requests = [
            argv(&["get", "k"]),
            argv(&["GeT", "k"]),
            argv(&["set", "k", "v"]),
            argv(&["client", "list"]),
            argv(&["CLIENT", "nosuch"]),
            argv(&["client|list"]),
            argv(&["config|get", "x"]),
            argv(&["nosuch"]),
            argv(&["ge", "k"]),
            argv(&[]),
        ];
        let rows = [
            lookup("get"),
            lookup("set"),
            lookup("client"),
            lookup("client|list"),
            lookup("config|get"),
            None,
        ];
        for request in &requests {
            for last in rows {
                let name = |r: Result<&CommandInfo, Option<&CommandInfo>>| match r {
                    Ok(info) => Ok(info.name),
                    Err(info) => Err(info.map(|i| i.name)),
                };
                assert_eq!(
                    name(find_repeated(request, last)),
                    name(find(request)),
                    "{request:?} after {:?}",
                    last.map(|l| l.name)
                );
            }
        }
    }

    #[test]
    fn lookup_finds_every_row_and_nothing_else() {
        for info in TABLE {
            assert_eq!(lookup(info.name).map(|found| found.name), Some(info.name));
        }
        for name in ["", "ge", "gett", "GET", "client|", "x".repeat(40).as_str()] {
            assert!(lookup(name).is_none(), "{name}");
        }
        for info in TABLE {
            let upper = info.name.to_ascii_uppercase();
            assert_eq!(lookup_bytes(upper.as_bytes()).map(|found| found.name), Some(info.name));
        }
        // Same first 16 bytes, or the same bytes but for padding, as a real name.
        assert!(lookup("georadiusbymember_ro").is_some());
        let near = [&b"GET\0"[..], b"georadiusbymember_rx", b"georadiusbymember_r", b"georadiusbymember_roo"];
        for name in [&b"ge"[..], b"GETT", b"G\xc3\x89T", &[b'x'; 80], &[b'x'; 300]].into_iter().chain(near) {
            assert!(lookup_bytes(name).is_none(), "{name:?}");
        }
    }

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ').map(|s| Bytes::copy_from_slice(s.as_bytes())).collect()
    }

    /// `container` looks for the bar only in the families that have subcommand rows.
    #[test]
    fn every_row_names_its_container() {
        for info in TABLE {
            let container = info.name.split('|').next().unwrap_or_default();
            assert_eq!(info.container(), container, "{}", info.name);
            assert!(lookup(container).is_some_and(|c| c.family == info.family), "{}", info.name);
        }
    }

    #[test]
    fn a_subcommand_row_name_is_no_command() {
        // Redis' issue #10070: `CONFIG|GET x` is an unknown command, `CONFIG GET` is not.
        for line in ["config|get x", "get|", "get|set", "get|set|other"] {
            assert!(matches!(find(&argv(line)), Err(None)), "{line}");
        }
        assert_eq!(find(&argv("config get x")).map(|i| i.name), Ok("config|get"));
    }

    /// Wherever a row has a fixed key, `key_positions` finds that one key and no other, for
    /// every argument count from none to past the key; and the common commands have one.
    #[test]
    fn fixed_key_is_the_one_key_positions_find() {
        let mut fixed = 0;
        for info in TABLE {
            let Some(at) = info.fixed_key() else { continue };
            fixed += 1;
            for argc in 0..at + 3 {
                let argv: Vec<Bytes> = (0..argc).map(|i| Bytes::from(i.to_string())).collect();
                let expected = if at < argc { Ok(vec![at]) } else { Err(InvalidKeys) };
                assert_eq!(key_positions(info, &argv), expected, "{} with {argc} arguments", info.name);
            }
        }
        for name in ["get", "set", "lpush", "rpop", "sadd", "hset", "zadd", "incr", "object|encoding"] {
            assert!(lookup(name).is_some_and(|i| i.fixed_key().is_some()), "{name}");
        }
        for name in ["mget", "del", "rename", "eval", "sort", "migrate", "zunionstore", "ping"] {
            assert_eq!(lookup(name).and_then(CommandInfo::fixed_key), None, "{name}");
        }
        assert!(fixed > 100, "{fixed} rows with a fixed key");
    }

    #[test]
    fn table_is_sorted_and_unique() {
        assert!(TABLE.windows(2).all(|w| w[0].name < w[1].name));
        assert!(TABLE.iter().all(|c| c.name.len() <= 32));
    }

    #[test]
    fn keys_follow_the_specs() {
        let k = |line: &str| keys(&argv(line));
        assert_eq!(k("GET a"), argv("a"));
        assert_eq!(k("MSET a 1 b 2"), argv("a b"));
        assert_eq!(k("BLPOP a b 0"), argv("a b"));
        assert_eq!(k("ZUNIONSTORE d 2 a b WEIGHTS 1 2"), argv("d a b"));
        assert_eq!(k("SINTERCARD 2 a b LIMIT 1"), argv("a b"));
        assert_eq!(k("BLMPOP 0 2 a b LEFT"), argv("a b"));
        assert_eq!(k("ZUNIONSTORE d x a"), Vec::<Bytes>::new());
        assert_eq!(k("COPY a b DB 1"), argv("a b"));
        assert_eq!(k("FLUSHDB"), Vec::<Bytes>::new());
    }
}
