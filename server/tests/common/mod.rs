//! Shared helpers for the server tests: start `rediskv-server` (or a real `redis-server`) on a
//! free loopback port, and a small RESP2 client.
#![allow(dead_code)]

#[path = "../../../tests/support/missing_tool.rs"]
mod missing_tool;
pub use missing_tool::missing_tool;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A RESP2 value as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `+text`.
    Status(String),
    /// `-text`.
    Error(String),
    /// `:n`.
    Int(i64),
    /// `$n` (None for `$-1`).
    Bulk(Option<Vec<u8>>),
    /// `*n` (None for `*-1`).
    Array(Option<Vec<Value>>),
    /// RESP3 `>n`.
    Push(Vec<Value>),
    /// RESP3 `%n`.
    Map(Vec<(Value, Value)>),
    /// RESP3 `~n`.
    Set(Vec<Value>),
    /// RESP3 `_`.
    Null,
    /// RESP3 `,` (as sent).
    Double(String),
    /// RESP3 `#t` / `#f`.
    Bool(bool),
    /// RESP3 `(` (as sent).
    Big(String),
    /// RESP3 `=`: the format and the text.
    Verbatim(Vec<u8>),
}

impl Value {
    /// The text of a bulk or status reply.
    pub fn text(&self) -> String {
        match self {
            Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Value::Status(s) | Value::Error(s) => s.clone(),
            other => panic!("not text: {other:?}"),
        }
    }

    /// The texts of an array of bulk strings.
    pub fn texts(&self) -> Vec<String> {
        match self {
            Value::Array(Some(items)) => items.iter().map(Value::text).collect(),
            other => panic!("not an array: {other:?}"),
        }
    }
}

/// A connection speaking RESP2.
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    /// Connects to 127.0.0.1:`port`.
    pub fn connect(port: u16) -> Client {
        Client::try_connect(port).expect("connect")
    }

    /// Connects to 127.0.0.1:`port`; `None` when refused (a server killed by the test).
    pub fn try_connect(port: u16) -> Option<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Some(Client { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream })
    }

    /// Waits at most `timeout` for each read from now on.
    pub fn set_read_timeout(&mut self, timeout: Duration) {
        self.writer.set_read_timeout(Some(timeout)).unwrap();
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// Sends raw bytes; an error when the server has closed the connection.
    pub fn try_send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// Sends one command as a multibulk request.
    pub fn send(&mut self, args: &[&[u8]]) {
        let mut req = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        self.send_raw(&req);
    }

    /// Sends a command given as strings and reads its reply.
    pub fn cmd(&mut self, args: &[&str]) -> Value {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.read()
    }

    /// Sends a command given as strings and reads its reply; None when the connection
    /// closed or no reply came within the read timeout.
    pub fn cmd_or_none(&mut self, args: &[&str]) -> Option<Value> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.send(&args);
        self.try_read()
    }

    /// Reads a full sync's RDB payload, as a replica does: `$len` and that many bytes, or
    /// `$EOF:<mark>`, the bytes, and the mark again; newlines sent while the primary prepares
    /// it are skipped.
    pub fn read_rdb_payload(&mut self) -> Vec<u8> {
        let mut line = Vec::new();
        while line.is_empty() || line == b"\n" {
            line.clear();
            self.reader.read_until(b'\n', &mut line).expect("the payload's header");
        }
        let header = String::from_utf8_lossy(&line).trim_end().to_string();
        if let Some(mark) = header.strip_prefix("$EOF:") {
            let mut payload = Vec::new();
            while !payload.ends_with(mark.as_bytes()) {
                let mut byte = [0u8];
                self.reader.read_exact(&mut byte).expect("the payload");
                payload.push(byte[0]);
            }
            payload.truncate(payload.len() - mark.len());
            return payload;
        }
        let len: usize = header.strip_prefix('$').and_then(|n| n.parse().ok()).expect("a payload length");
        let mut payload = vec![0; len];
        self.reader.read_exact(&mut payload).expect("the payload");
        payload
    }

    /// Reads one reply.
    pub fn read(&mut self) -> Value {
        self.try_read().expect("a reply")
    }

    /// Reads one reply; None when the server closed the connection.
    pub fn try_read(&mut self) -> Option<Value> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).ok()?;
        if line.is_empty() {
            return None;
        }
        assert!(line.ends_with(b"\r\n"), "line without CRLF: {line:?}");
        let body = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
        let n = || body.parse::<i64>().unwrap();
        Some(match line[0] {
            b'+' => Value::Status(body),
            b'-' => Value::Error(body),
            b':' => Value::Int(n()),
            b'$' if n() < 0 => Value::Bulk(None),
            b'$' => {
                let mut data = vec![0; n() as usize + 2];
                self.reader.read_exact(&mut data).unwrap();
                data.truncate(data.len() - 2);
                Value::Bulk(Some(data))
            }
            b'*' if n() < 0 => Value::Array(None),
            b'*' => Value::Array(Some((0..n()).map(|_| self.read()).collect())),
            b'>' => Value::Push((0..n()).map(|_| self.read()).collect()),
            b'~' => Value::Set((0..n()).map(|_| self.read()).collect()),
            b'%' => Value::Map((0..n()).map(|_| (self.read(), self.read())).collect()),
            b'_' => Value::Null,
            b',' => Value::Double(body),
            b'#' => Value::Bool(body == "t"),
            b'(' => Value::Big(body),
            b'=' => {
                let mut data = vec![0; n() as usize + 2];
                self.reader.read_exact(&mut data).unwrap();
                data.truncate(data.len() - 2);
                Value::Verbatim(data)
            }
            other => panic!("unknown reply type {other}"),
        })
    }
}

/// A server process, killed on drop (and its own directory, if it has one, removed).
pub struct Server {
    child: Child,
    /// Its port.
    pub port: u16,
    dir: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Server {
    /// `kill -9`, and waits for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit by itself (after SHUTDOWN).
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.child.wait().expect("wait for the server")
    }

    /// `kill -STOP`, and waits until every thread of the process is stopped (the signal is
    /// delivered to each thread when it next runs: a thread busy on another core could
    /// still read a request sent right after `kill` returned).
    pub fn pause(&self) {
        self.signal("-STOP");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.stopped() {
            assert!(std::time::Instant::now() < deadline, "pid {} did not stop", self.pid());
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Whether every thread of the process is stopped (after [`Server::pause`], until
    /// [`Server::resume`] or a `SIGCONT` from elsewhere: the kernel sends one to a process
    /// group left orphaned with a stopped process in it).
    pub fn stopped(&self) -> bool {
        let tasks = format!("/proc/{}/task", self.pid());
        std::fs::read_dir(&tasks).unwrap().flatten().all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // The state follows the command's name, which may hold spaces.
            stat.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        })
    }

    /// `kill -CONT` after [`Server::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill").args([signal, &self.pid().to_string()]).status();
        assert!(sent.expect("run kill").success(), "kill {signal} {}", self.pid());
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its own directory, if it has one.
    pub fn dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// A client connected to this server.
    pub fn client(&self) -> Client {
        Client::connect(self.port)
    }
}

/// Starts rediskv-server on a free port with extra arguments.
pub fn rediskv(args: &[&str]) -> Server {
    start(&[], None, args)
}

/// Starts rediskv-server on the disk engine `engine` in a temporary directory of its own
/// (removed with it), with extra arguments.
pub fn rediskv_on_disk(engine: &str, args: &[&str]) -> Server {
    static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rediskv-test-{engine}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_arg = dir.to_str().expect("a UTF-8 temporary directory");
    let mut server = start(&[], None, &[&["--engine", engine, "--dir", dir_arg][..], args].concat());
    server.dir = Some(dir);
    server
}

/// Starts a rediskv-server node over the etcd `endpoints` (comma-separated) under `prefix`,
/// with the test cluster's limits, 2 threads and `extra` arguments.
#[cfg(feature = "etcd")]
pub fn rediskv_over_etcd(endpoints: &str, prefix: &str, extra: &[&str]) -> Server {
    use rediskv_etcd::testkit::{MAX_REQUEST_BYTES, MAX_TXN_OPS};
    let (ops, bytes) = (MAX_TXN_OPS.to_string(), MAX_REQUEST_BYTES.to_string());
    let mut args = vec![
        "--engine",
        "etcd",
        "--etcd-endpoints",
        endpoints,
        "--etcd-prefix",
        prefix,
        "--etcd-max-txn-ops",
        &ops,
        "--etcd-max-request-bytes",
        &bytes,
        "--threads",
        "2",
    ];
    args.extend_from_slice(extra);
    rediskv(&args)
}

/// Starts rediskv-server with a config file as its first argument, on a free port.
pub fn rediskv_with_file(file: &str) -> Server {
    start(&[file], None, &[])
}

/// Starts rediskv-server in a directory of its own holding `redis.conf` with `config` (its
/// first argument: CONFIG REWRITE writes it, and it goes away with the server), with extra
/// arguments.
pub fn rediskv_with_config(config: &str, args: &[&str]) -> Server {
    start(&["redis.conf"], Some(config), args)
}

/// Starts rediskv-server on a free port with extra arguments and environment variables.
pub fn rediskv_with_env(env: &[(&str, &str)], args: &[&str]) -> Server {
    start_with_env(&[], None, args, env)
}

/// Starts rediskv-server with `before` (a config file) and `args`; `config_text`, if any, is
/// written to the file `before` names, in the server's own directory.
fn start(before: &[&str], config_text: Option<&str>, args: &[&str]) -> Server {
    start_with_env(before, config_text, args, &[])
}

/// [`start`], with environment variables `env` set for the server.
fn start_with_env(before: &[&str], config_text: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Server {
    // The memory engine unless a test picks one (the default, fjall, would write ./data).
    let engine: &[&str] = if args.contains(&"--engine") { &[] } else { &["--engine", "memory"] };
    // A directory of its own, unless the test names one: a SAVE writes its dump.rdb there, and
    // no other server loads it. A server given a config file runs in it instead of being told
    // `--dir` (which CONFIG REWRITE would keep): its default `dir`, `./`, is that directory.
    let config_file = !before.is_empty() || args.contains(&"--config");
    let dir = (!args.contains(&"--dir")).then(|| {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rediskv-test-server-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        dir
    });
    let mut command = Command::new(env!("CARGO_BIN_EXE_rediskv-server"));
    if let Some(dir) = dir.as_ref().filter(|_| config_file) {
        command.current_dir(dir);
        if let (Some(text), Some(file)) = (config_text, before.first()) {
            std::fs::write(dir.join(file), text).expect("write the config file");
        }
    }
    let mut child = command
        .envs(env.iter().copied())
        .args(before)
        .args(["--port", "0"])
        .args(engine)
        .args(args)
        .args(
            dir.iter().filter(|_| !config_file).flat_map(|d| [std::ffi::OsStr::new("--dir"), d.as_os_str()]),
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("start rediskv-server");
    // Its log (standard output, as redis-server's without a logfile) names the port it got,
    // then says when it serves.
    let mut log = BufReader::new(child.stdout.take().unwrap());
    let mut port = None;
    let mut line = String::new();
    while log.read_line(&mut line).unwrap_or(0) > 0 {
        if let Some(rest) = line.split_once("port=").map(|(_, rest)| rest) {
            port = rest.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().ok();
        }
        if line.contains("Ready to accept connections") {
            let port = port.unwrap_or_else(|| panic!("no port in the log before {line:?}"));
            // Keep draining its log so the pipe never fills.
            std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
            return Server { child, port, dir };
        }
        line.clear();
    }
    panic!("rediskv-server exited before it was ready: {:?}", child.wait());
}

/// Starts a real redis-server on a free port; None (after a loud note) when it is not
/// installed, a panic under `CI=true`.
pub fn redis(args: &[&str]) -> Option<Server> {
    redis_family("redis-server", "Ready to accept connections", |port, dir| {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(args)
            .args(["--logfile", ""])
            .arg("--dir")
            .arg(dir);
        command
    })
}

/// Starts a real redis-sentinel on a free port with the `sentinel …` lines of `config`
/// (its config file, which it rewrites, is in a directory of its own); None (after a loud
/// note) when it is not installed, a panic under `CI=true`.
pub fn sentinel(config: &str) -> Option<Server> {
    redis_family("redis-sentinel", "Sentinel ID is", |port, dir| {
        let file = dir.join("sentinel.conf");
        let text = format!("port {port}\nbind 127.0.0.1\nlogfile \"\"\ndir {}\n{config}\n", dir.display());
        std::fs::write(&file, text).expect("write sentinel.conf");
        let mut command = Command::new("redis-sentinel");
        command.arg(file);
        command
    })
}

/// Starts `program` (redis-server or redis-sentinel) as `command(port, dir)` makes it, on a
/// free port, in a directory of its own, once its log says `ready`.
fn redis_family(
    program: &str,
    ready: &str,
    command: impl Fn(u16, &std::path::Path) -> Command,
) -> Option<Server> {
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // A directory of its own: it loads no dump.rdb another server left, and whatever a
        // test makes it save goes away with it.
        let dir = std::env::temp_dir().join(format!("rediskv-test-{program}-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        let child = command(port, &dir).stdout(Stdio::piped()).spawn();
        let Ok(mut child) = child else {
            let _ = std::fs::remove_dir_all(&dir);
            missing_tool(&test_name(), program, &format!("apt-get install {program}"));
            return None;
        };
        // Its own log, not a probe connection, says it listens: a probe could reach another
        // process that took the port while this one failed to bind and exited.
        let mut log = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while log.read_line(&mut line).unwrap_or(0) > 0 {
            if line.contains(ready) {
                std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
                return Some(Server { child, port, dir: Some(dir) });
            }
            line.clear();
        }
        let _ = child.wait(); // exited: the port was taken; try another
        let _ = std::fs::remove_dir_all(&dir);
    }
    panic!("{program} did not start");
}

/// Runs `script` on a real redis-server, then on rediskv-server with 1 and 3 event loops,
/// and asserts every reply equal (nothing when redis-server is missing outside CI).
pub fn same_as_redis(script: fn(&Server) -> Vec<Value>) {
    let Some(redis) = redis(&[]) else { return };
    let theirs = script(&redis);
    for threads in ["1", "3"] {
        let ours = script(&rediskv(&["--threads", threads]));
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "reply {i} with {threads} threads");
        }
        assert_eq!(ours.len(), theirs.len());
    }
}

/// The running test's name (the harness names each test's thread after it).
pub fn test_name() -> String {
    std::thread::current().name().unwrap_or("a test").to_string()
}
