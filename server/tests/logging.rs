//! The server's log: redis-server's line format, `logfile`, `loglevel` and CONFIG SET
//! loglevel, and nothing on standard error or standard output while a logfile is set.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Client, Value};

/// Whether `line` is `<pid>:M <dd> <Mon> <yyyy> <hh:mm:ss.mmm> <level> <message>` with
/// `pid` and one of Redis' level characters.
fn redis_log_line(line: &str, pid: u32) -> bool {
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let mut words = line.splitn(7, ' ');
    let mut next = || words.next().unwrap_or("");
    let (who, day, month, year, time, level, message) =
        (next(), next(), next(), next(), next(), next(), next());
    let time_ok = time.len() == 12
        && time.split(['.', ':']).zip([2, 2, 2, 3]).all(|(part, n)| digits(part, n))
        && time.split(['.', ':']).count() == 4;
    who == format!("{pid}:M")
        && digits(day, 2)
        && MONTHS.contains(&month)
        && digits(year, 4)
        && time_ok
        && [".", "-", "*", "#"].contains(&level)
        && !message.is_empty()
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log).unwrap_or_default().lines().map(str::to_string).collect()
}

/// The line whose message is `message`, and its level character.
fn level_of(log: &Path, message: &str) -> Option<String> {
    lines(log)
        .iter()
        .find(|l| l.ends_with(&format!(" {message}")))
        .map(|l| l.split(' ').nth(5).unwrap().to_string())
}

fn log_from_script(client: &mut Client, level: &str, message: &str) {
    let script = format!("redis.log(redis.{level}, '{message}') return 1");
    assert_eq!(client.cmd(&["EVAL", &script, "0"]), Value::Int(1));
}

#[test]
fn log_lines_have_redis_format_and_follow_loglevel() {
    let dir = std::env::temp_dir().join(format!("rediskv-logging-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("server.log");
    std::fs::write(&log, "kept line\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
        .args(["--engine", "memory", "--port", &port.to_string(), "--loglevel", "notice"])
        .arg("--logfile")
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    for _ in 0..1000 {
        if lines(&log).iter().any(|l| l.ends_with("Ready to accept connections")) {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the server exited: {:?}", lines(&log));
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = lines(&log);
    assert_eq!(started[0], "kept line", "a logfile is appended to");
    for line in &started[1..] {
        assert!(redis_log_line(line, pid), "{line:?}");
    }
    assert_eq!(level_of(&log, "Ready to accept connections").as_deref(), Some("*"));
    assert_eq!(level_of(&log, &format!("Running mode=standalone, port={port}.")).as_deref(), Some("*"));
    assert!(started.iter().any(|l| l.contains("Redis version=7.0.15")), "{started:?}");

    let mut c = Client::connect(port);
    assert_eq!(c.cmd(&["CONFIG", "GET", "loglevel"]).texts(), ["loglevel", "notice"]);
    log_from_script(&mut c, "LOG_NOTICE", "notice one");
    log_from_script(&mut c, "LOG_VERBOSE", "verbose one");
    assert_eq!(level_of(&log, "notice one").as_deref(), Some("*"));
    assert_eq!(level_of(&log, "verbose one"), None, "below notice");

    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "warning"]), Value::Status("OK".into()));
    log_from_script(&mut c, "LOG_NOTICE", "notice two");
    log_from_script(&mut c, "LOG_WARNING", "warning two");
    assert_eq!(level_of(&log, "notice two"), None, "below warning");
    assert_eq!(level_of(&log, "warning two").as_deref(), Some("#"));

    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "debug"]), Value::Status("OK".into()));
    log_from_script(&mut c, "LOG_DEBUG", "debug three");
    assert_eq!(level_of(&log, "debug three").as_deref(), Some("."));
    let other = Client::connect(port);
    let mut other = other;
    assert_eq!(other.cmd(&["PING"]), Value::Status("PONG".into()));
    assert!(
        lines(&log).iter().any(|l| l.contains(" - Accepted 127.0.0.1:")),
        "a verbose line per connection"
    );
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "loglevel", "nothing"]),
        Value::Error("ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning".into())
    );

    c.send(&[b"SHUTDOWN"]);
    assert_eq!(c.try_read(), None, "SHUTDOWN answers nothing");
    assert!(child.wait().unwrap().success());
    assert_eq!(level_of(&log, "User requested shutdown...").as_deref(), Some("#"));
    let all = lines(&log);
    assert!(all.last().unwrap().ends_with("# rediskv is now ready to exit, bye bye..."), "{all:?}");
    for line in &all[1..] {
        assert!(redis_log_line(line, pid), "{line:?}");
    }
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!((out.as_str(), err.as_str()), ("", ""), "with a logfile, nothing else is written");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_logfile_that_cannot_be_opened_stops_the_start_as_in_redis() {
    let out = Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
        .args(["--engine", "memory", "--port", "0", "--logfile", "/nonexistent-dir/server.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // redis-server 7.0.15's words for the same start.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nCan't open the log file: No such file or directory\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn without_a_logfile_the_log_goes_to_standard_output() {
    // The shared helper finds the port and the ready line on standard output.
    let server = common::rediskv(&[]);
    assert_eq!(server.client().cmd(&["CONFIG", "GET", "logfile"]).texts(), ["logfile", ""]);
}

#[test]
fn syslog_parameters_are_checked_as_redis_checks_them() {
    // redis-server 7.0.15's reasons for the same values.
    for (name, value, why) in [
        (
            "--syslog-facility",
            "bogus",
            "argument(s) must be one of the following: user, local0, local1, local2, local3, local4, local5, local6, local7",
        ),
        ("--syslog-enabled", "maybe", "argument must be 'yes' or 'no'"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_rediskv-server"))
            .args(["--engine", "memory", "--port", "0", name, value])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(why),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Without a syslog daemon the server starts and logs as usual.
    let server = common::rediskv(&["--syslog-enabled", "yes", "--syslog-facility", "LOCAL3"]);
    assert_eq!(
        server.client().cmd(&["CONFIG", "GET", "syslog-facility"]).texts(),
        ["syslog-facility", "local3"]
    );
}
