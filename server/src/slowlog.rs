//! SLOWLOG: the commands that ran for at least `slowlog-log-slower-than` µs (negative: none),
//! newest first, at most `slowlog-max-len` of them, kept as Redis 7.0 keeps them: at most 32
//! arguments (the last one says how many more there were), each cut to 128 bytes, AUTH's and
//! HELLO … AUTH's credentials redacted.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use bytes::Bytes;
use rediskv::Reply;

use crate::config::Config;
use crate::sync::lock;

/// Redis' `SLOWLOG_ENTRY_MAX_ARGC` and `SLOWLOG_ENTRY_MAX_STRING`.
const MAX_ARGS: usize = 32;
const MAX_STRING: usize = 128;

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

/// One logged command.
struct Entry {
    id: u64,
    unix_secs: u64,
    usec: u64,
    argv: Vec<Bytes>,
    addr: String,
    name: Bytes,
}

/// The log and its two parameters, kept as atomics so that a command's check reads no config.
#[derive(Default)]
pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
    slower_than: AtomicI64,
    max_len: AtomicU64,
}

impl SlowLog {
    /// Takes `slowlog-log-slower-than` and `slowlog-max-len` from `config` (at start and
    /// after CONFIG SET), dropping the oldest entries past a smaller length.
    pub fn configure(&self, config: &Config) {
        self.slower_than.store(config.number("slowlog-log-slower-than"), Relaxed);
        let max_len = config.number("slowlog-max-len").max(0) as u64;
        self.max_len.store(max_len, Relaxed);
        lock(&self.entries).truncate(max_len as usize);
    }

    /// Whether a command that ran `usec` µs is logged.
    pub fn wants(&self, usec: u64) -> bool {
        let threshold = self.slower_than.load(Relaxed);
        threshold >= 0 && usec >= threshold as u64
    }

    /// Logs a command (see [`SlowLog::wants`]) of the client at `addr` named `name`.
    pub fn record(&self, argv: &[Bytes], usec: u64, unix_secs: u64, addr: &str, name: Option<Bytes>) {
        let entry = Entry {
            id: self.next_id.fetch_add(1, Relaxed),
            unix_secs,
            usec,
            argv: kept_arguments(argv),
            addr: addr.to_string(),
            name: name.unwrap_or_default(),
        };
        let mut entries = lock(&self.entries);
        entries.push_front(entry);
        entries.truncate(self.max_len.load(Relaxed) as usize);
    }

    /// `SLOWLOG GET|LEN|RESET|HELP` (argv includes `SLOWLOG`).
    pub fn command(&self, argv: &[Bytes]) -> Reply {
        if argv.len() < 2 {
            return Reply::Error("ERR wrong number of arguments for 'slowlog' command".into());
        }
        let sub = String::from_utf8_lossy(&argv[1]).to_ascii_lowercase();
        match (sub.as_str(), argv.len()) {
            ("help", 2) => Reply::Array(HELP.iter().map(|l| Reply::status(l)).collect()),
            ("reset", 2) => {
                lock(&self.entries).clear();
                Reply::OK
            }
            ("len", 2) => Reply::Integer(lock(&self.entries).len() as i64),
            ("get", 2 | 3) => {
                let count = match argv.get(2).map(|c| rediskv::server::args::parse_i64(c)) {
                    None => 10,
                    Some(Some(n)) if n >= -1 => n,
                    Some(_) => return Reply::Error("ERR count should be greater than or equal to -1".into()),
                };
                let entries = lock(&self.entries);
                let count = if count == -1 { entries.len() } else { count as usize };
                Reply::Array(entries.iter().take(count).map(entry_reply).collect())
            }
            // Redis checks these subcommands' fixed arity before running them, and GET's
            // optional count itself.
            ("help" | "reset" | "len", _) => {
                Reply::Error(format!("ERR wrong number of arguments for 'slowlog|{sub}' command"))
            }
            ("get", _) => Reply::Error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(&argv[1])
            )),
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try SLOWLOG HELP.",
                String::from_utf8_lossy(&argv[1])
            )),
        }
    }
}

fn entry_reply(e: &Entry) -> Reply {
    Reply::Array(vec![
        Reply::Integer(e.id as i64),
        Reply::Integer(e.unix_secs as i64),
        Reply::Integer(e.usec as i64),
        Reply::Array(e.argv.iter().cloned().map(Reply::Bulk).collect()),
        Reply::bulk(e.addr.as_bytes()),
        Reply::Bulk(e.name.clone()),
    ])
}

/// Whether argument `i` of `argv` is a credential Redis hides as `(redacted)` in the slow log
/// and MONITOR: AUTH's arguments, HELLO's `AUTH username password`, and everything after
/// ACL SETUSER.
pub fn redacted(argv: &[Bytes], i: usize) -> bool {
    let Some(name) = argv.first() else { return false };
    if name.eq_ignore_ascii_case(b"auth") {
        return i >= 1;
    }
    if name.eq_ignore_ascii_case(b"acl") && argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"setuser")) {
        return i >= 2;
    }
    // HELLO [protover [AUTH username password] [SETNAME clientname]]
    name.eq_ignore_ascii_case(b"hello")
        && (2..argv.len().saturating_sub(2))
            .any(|a| argv[a].eq_ignore_ascii_case(b"auth") && (i == a + 1 || i == a + 2))
}

/// The arguments as Redis keeps them: credentials redacted, at most [`MAX_ARGS`], each cut
/// to [`MAX_STRING`] bytes. Copied, so an entry does not hold a connection's read buffer.
fn kept_arguments(argv: &[Bytes]) -> Vec<Bytes> {
    let shown = if argv.len() > MAX_ARGS { MAX_ARGS - 1 } else { argv.len() };
    let mut kept: Vec<Bytes> = argv[..shown]
        .iter()
        .enumerate()
        .map(|(i, arg)| {
            if redacted(argv, i) {
                Bytes::from_static(b"(redacted)")
            } else if arg.len() > MAX_STRING {
                let more = format!("... ({} more bytes)", arg.len() - MAX_STRING);
                Bytes::from([&arg[..MAX_STRING], more.as_bytes()].concat())
            } else {
                Bytes::copy_from_slice(arg)
            }
        })
        .collect();
    if argv.len() > MAX_ARGS {
        kept.push(Bytes::from(format!("... ({} more arguments)", argv.len() - shown)));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<Bytes> {
        args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    /// Redis 7.0's own entries for these commands (read from a redis-server's SLOWLOG GET).
    #[test]
    fn arguments_are_cut_and_redacted_as_redis_keeps_them() {
        let numbers: Vec<String> = (1..=40).map(|i| i.to_string()).collect();
        let mut rpush = vec!["rpush", "l"];
        rpush.extend(numbers.iter().map(String::as_str));
        let kept = kept_arguments(&argv(&rpush));
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[30], "29");
        assert_eq!(kept[31], "... (11 more arguments)");
        let long = "x".repeat(130);
        let kept = kept_arguments(&argv(&["set", "a", &long]));
        assert_eq!(kept[2], format!("{}... (2 more bytes)", "x".repeat(128)));
        assert_eq!(
            kept_arguments(&argv(&["auth", "foo", "bar"])),
            argv(&["auth", "(redacted)", "(redacted)"])
        );
        assert_eq!(
            kept_arguments(&argv(&["hello", "2", "auth", "default", "pw", "setname", "x"])),
            argv(&["hello", "2", "auth", "(redacted)", "(redacted)", "setname", "x"])
        );
        assert_eq!(kept_arguments(&argv(&["hello", "3"])), argv(&["hello", "3"]));
    }
}
