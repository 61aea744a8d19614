//! The server's log, in redis-server's line format:
//!
//! ```text
//! 4242:M 06 Dec 2026 20:23:52.134 * Ready to accept connections
//! ```
//!
//! the pid, the role (`M`: this server is always a primary), the time (UTC), the level's
//! character (`.` debug, `-` verbose, `*` notice, `#` warning) and the message. `loglevel`
//! drops the lines below it (CONFIG SET changes it at once); `logfile ""` writes to standard
//! output, a path appends to that file. As Redis, the file is opened for each line, so a
//! rotation that renames it (logrotate without `copytruncate`) needs no signal: the next line
//! creates the file again.
//!
//! With `syslog-enabled yes` each line's message also goes to the local syslog daemon
//! (`/dev/log`) under `syslog-ident` and `syslog-facility`, as Redis sends it.
//!
//! Log with [`warning!`], [`notice!`] and [`verbose!`], which take `format!`'s arguments and
//! format nothing when their level is off; debug lines come from scripts (`redis.log`).

use std::fmt::Arguments;
use std::io::Write;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// A line's level, in Redis' order: a `loglevel` keeps its own and the ones above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `.`: what only a developer reads.
    Debug = 0,
    /// `-`: connections and other frequent events.
    Verbose = 1,
    /// `*`: the server's life: start, shutdown, background work.
    Notice = 2,
    /// `#`: failures and what an operator must see.
    Warning = 3,
}

impl Level {
    /// The level `loglevel` names (`debug`, `verbose`, `notice` or `warning`).
    pub fn named(name: &str) -> Option<Level> {
        match name.to_ascii_lowercase().as_str() {
            "debug" => Some(Level::Debug),
            "verbose" => Some(Level::Verbose),
            "notice" => Some(Level::Notice),
            "warning" => Some(Level::Warning),
            _ => None,
        }
    }

    /// A script's `redis.log` level (`redis.LOG_DEBUG` is 0 … `redis.LOG_WARNING` 3).
    pub fn from_number(n: i64) -> Option<Level> {
        [Level::Debug, Level::Verbose, Level::Notice, Level::Warning].get(usize::try_from(n).ok()?).copied()
    }

    fn mark(self) -> char {
        b".-*#"[self as usize] as char
    }

    /// syslog's severity for the level, as Redis maps it (debug, info, notice, warning).
    fn severity(self) -> u8 {
        [7, 6, 5, 4][self as usize]
    }
}

/// The `syslog-facility` values, in the order of their codes: `user` is 1, `local0`–`local7`
/// are 16–23.
pub const SYSLOG_FACILITIES: [&str; 9] =
    ["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"];

/// Where a line's message goes besides the log, with `syslog-enabled yes`.
struct Syslog {
    socket: UnixDatagram,
    /// `<facility * 8>` of the priority.
    facility: u8,
    ident: String,
}

impl Syslog {
    /// A socket to the syslog daemon listening at `path`; None when there is none (Redis'
    /// `openlog` goes on without it too).
    fn connect(path: &Path, ident: &str, facility: &str) -> Option<Syslog> {
        let socket = UnixDatagram::unbound().ok()?;
        socket.connect(path).ok()?;
        let facility = match SYSLOG_FACILITIES.iter().position(|f| f.eq_ignore_ascii_case(facility)) {
            Some(0) => 1,
            Some(n) => 15 + n as u8,
            None => 16,
        };
        Some(Syslog { socket, facility, ident: ident.to_string() })
    }

    /// `<priority>ident[pid]: message`, the form syslog(3) sends without its timestamp.
    fn send(&self, level: Level, message: &str) {
        let priority = self.facility * 8 + level.severity();
        let datagram = format!("<{priority}>{}[{}]: {message}", self.ident, std::process::id());
        let _ = self.socket.send(datagram.as_bytes());
    }
}

/// The lowest level written: notice, Redis' default, until the configuration says.
static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);

/// The `logfile`, set once at start (None: standard output).
static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The syslog daemon, with `syslog-enabled yes` (set once at start).
static SYSLOG: OnceLock<Option<Syslog>> = OnceLock::new();

/// Sets the lowest level written (`loglevel`); an unknown name changes nothing.
pub fn set_level(name: &str) {
    if let Some(level) = Level::named(name) {
        LEVEL.store(level as u8, Relaxed);
    }
}

/// Whether lines of `level` are written now.
pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Relaxed)
}

/// Sends the log to `logfile` ("" for standard output) from now on, and each message to
/// syslog too when `syslog` names its ident and facility.
///
/// # Errors
/// The file cannot be opened for appending (Redis refuses to start then, too).
pub fn open(logfile: &str, syslog: Option<(&str, &str)>) -> std::io::Result<()> {
    let file = (!logfile.is_empty()).then(|| PathBuf::from(logfile));
    if let Some(path) = &file {
        std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    }
    let _ = FILE.set(file);
    let _ = SYSLOG
        .set(syslog.and_then(|(ident, facility)| Syslog::connect(Path::new("/dev/log"), ident, facility)));
    Ok(())
}

/// Writes one line at `level` if it is enabled. The line goes out in one write, so lines of
/// different threads never interleave; a log that cannot be written is skipped, as in Redis.
pub fn write(level: Level, message: Arguments) {
    if !enabled(level) {
        return;
    }
    let message = message.to_string();
    if let Some(syslog) = SYSLOG.get().and_then(Option::as_ref) {
        syslog.send(level, &message);
    }
    let line = format!("{}:M {} {} {message}\n", std::process::id(), timestamp(now_millis()), level.mark());
    match FILE.get().and_then(Option::as_ref) {
        Some(path) => {
            if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
                let _ = file.write_all(line.as_bytes());
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
        }
    }
}

fn now_millis() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

/// `06 Dec 2026 20:23:52.134` (Redis' `%d %b %Y %H:%M:%S.` and milliseconds), in UTC.
fn timestamp(unix_millis: u64) -> String {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = unix_millis / 1000;
    let (year, month, day) = civil_date(secs / 86_400);
    let time = secs % 86_400;
    format!(
        "{day:02} {} {year} {:02}:{:02}:{:02}.{:03}",
        MONTHS[month as usize - 1],
        time / 3600,
        time / 60 % 60,
        time % 60,
        unix_millis % 1000
    )
}

/// The (year, month 1–12, day 1–31) of a count of days since 1970-01-01, in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Logs at warning level (`#`), with `format!`'s arguments.
macro_rules! warning {
    ($($arg:tt)*) => { $crate::log::write($crate::log::Level::Warning, format_args!($($arg)*)) };
}

/// Logs at notice level (`*`), with `format!`'s arguments.
macro_rules! notice {
    ($($arg:tt)*) => { $crate::log::write($crate::log::Level::Notice, format_args!($($arg)*)) };
}

/// Logs at verbose level (`-`), with `format!`'s arguments.
macro_rules! verbose {
    ($($arg:tt)*) => { $crate::log::write($crate::log::Level::Verbose, format_args!($($arg)*)) };
}

pub(crate) use {notice, verbose, warning};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_redis_format_in_utc() {
        assert_eq!(timestamp(0), "01 Jan 1970 00:00:00.000");
        // date -u -d @1796588632 → Sun Dec  6 20:23:52 UTC 2026
        assert_eq!(timestamp(1_796_588_632_134), "06 Dec 2026 20:23:52.134");
        // A leap day, and the last millisecond of a leap year.
        assert_eq!(timestamp(951_782_400_000), "29 Feb 2000 00:00:00.000");
        assert_eq!(timestamp(1_735_689_599_999), "31 Dec 2024 23:59:59.999");
    }

    #[test]
    fn syslog_gets_the_message_with_redis_priority_and_ident() {
        let path = std::env::temp_dir().join(format!("rediskv-syslog-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let daemon = UnixDatagram::bind(&path).unwrap();
        let mut got = [0u8; 256];
        for (facility, level, priority) in
            [("local0", Level::Notice, 133), ("user", Level::Warning, 12), ("local7", Level::Debug, 191)]
        {
            let syslog = Syslog::connect(&path, "redis", facility).unwrap();
            syslog.send(level, "Ready to accept connections");
            let n = daemon.recv(&mut got).unwrap();
            let expected = format!("<{priority}>redis[{}]: Ready to accept connections", std::process::id());
            assert_eq!(std::str::from_utf8(&got[..n]).unwrap(), expected);
        }
        assert!(Syslog::connect(&path.with_extension("none"), "redis", "local0").is_none());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn levels_read_as_loglevel_and_redis_log_name_them() {
        assert_eq!(Level::named("VERBOSE"), Some(Level::Verbose));
        assert_eq!(Level::named("nothing"), None, "Redis 7.0 has no `nothing`");
        assert_eq!(Level::from_number(3), Some(Level::Warning));
        assert_eq!(Level::from_number(4), None);
        assert_eq!(
            [Level::Debug, Level::Verbose, Level::Notice, Level::Warning].map(Level::mark),
            ['.', '-', '*', '#']
        );
    }
}
