//! A RESP2 server over the rediskv engine, for redis-cli, redis-benchmark and client libraries.
//!
//! ```text
//! cargo run --release --example server -- [--port 6380] [--bind 127.0.0.1]
//! redis-cli -p 6380
//! ```
//!
//! One thread per connection; all connections share one `Db<MemoryBackend>` behind a mutex,
//! each remembering its own `SELECT`ed database. Every complete request in the input buffer
//! is parsed and executed (the lock is taken once per batch) and all replies go out in one
//! write, so pipelining is cheap. Connection-level commands (QUIT, HELLO, CLIENT, COMMAND,
//! INFO, CONFIG) are answered here; everything else goes to `Db::execute`.

mod resp;

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Bytes, BytesMut};
use rediskv::backend::MemoryBackend;
use rediskv::commands::args::{glob_match, parse_i64};
use rediskv::commands::{Db, Reply};

use resp::{Parsed, parse};

type SharedDb = Arc<Mutex<Db<MemoryBackend>>>;

static NEXT_CLIENT_ID: AtomicU64 = AtomicU64::new(1);

struct Options {
    bind: String,
    port: u16,
}

fn options() -> Result<Options, String> {
    let mut opts = Options { bind: "127.0.0.1".into(), port: 6380 };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--port" | "-p" => opts.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--bind" | "-b" => opts.bind = value()?,
            "--help" | "-h" => {
                println!("usage: server [--port 6380] [--bind 127.0.0.1]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown flag {other} (try --help)")),
        }
    }
    Ok(opts)
}

fn main() {
    let opts = options().unwrap_or_else(|e| {
        eprintln!("server: {e}");
        std::process::exit(2);
    });
    let listener = TcpListener::bind((opts.bind.as_str(), opts.port)).unwrap_or_else(|e| {
        eprintln!("server: cannot listen on {}:{}: {e}", opts.bind, opts.port);
        std::process::exit(1);
    });
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(opts.port);
    eprintln!("rediskv server listening on {}:{port} (RESP2)", opts.bind);
    let db: SharedDb = Arc::new(Mutex::new(Db::new(MemoryBackend::new())));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let db = db.clone();
        let spawned = std::thread::Builder::new().name("conn".into()).spawn(move || {
            let _ = Connection::new(db, port).serve(stream);
        });
        if let Err(e) = spawned {
            eprintln!("server: cannot spawn a connection thread: {e}");
        }
    }
}

struct Connection {
    db: SharedDb,
    id: u64,
    port: u16,
    /// The database this client has SELECTed.
    index: usize,
    name: Option<Bytes>,
}

/// What to do after a request.
enum Next {
    Continue,
    Close,
}

impl Connection {
    fn new(db: SharedDb, port: u16) -> Self {
        Connection { db, id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed), port, index: 0, name: None }
    }

    fn serve(mut self, mut stream: TcpStream) -> io::Result<()> {
        stream.set_nodelay(true)?;
        let db = self.db.clone();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let mut chunk = vec![0u8; 64 * 1024];
        let mut out = Vec::with_capacity(16 * 1024);
        let mut ranges = Vec::new();
        let mut argv: Vec<Bytes> = Vec::new();
        loop {
            let n = match stream.read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            buf.extend_from_slice(&chunk[..n]);
            let mut next = Next::Continue;
            let mut guard = None;
            loop {
                let parsed = match parse(&buf, &mut ranges) {
                    Ok(p) => p,
                    Err(e) => {
                        Reply::Error(e.text()).write_resp(&mut out);
                        next = Next::Close;
                        break;
                    }
                };
                argv.clear();
                match parsed {
                    Parsed::Incomplete => break,
                    Parsed::Command { consumed } => {
                        let frame = buf.split_to(consumed).freeze();
                        argv.extend(ranges.iter().map(|r| frame.slice(r.clone())));
                    }
                    Parsed::Inline { consumed, args } => {
                        let _ = buf.split_to(consumed);
                        argv.extend(args.into_iter().map(Bytes::from));
                    }
                }
                if argv.is_empty() {
                    continue;
                }
                if let Next::Close = self.dispatch(&argv, &db, &mut guard, &mut out) {
                    next = Next::Close;
                    break;
                }
            }
            drop(guard);
            // Release the last request's bytes so the buffer can be reused in place.
            argv.clear();
            if !out.is_empty() {
                stream.write_all(&out)?;
                out.clear();
                if out.capacity() > 1 << 20 {
                    out.shrink_to(16 * 1024);
                }
            }
            if let Next::Close = next {
                return Ok(());
            }
        }
    }

    /// Runs one command, appending its reply. The database lock is taken on the first
    /// command that needs it and kept for the rest of the batch.
    fn dispatch<'a>(
        &mut self,
        argv: &[Bytes],
        db: &'a Mutex<Db<MemoryBackend>>,
        guard: &mut Option<MutexGuard<'a, Db<MemoryBackend>>>,
        out: &mut Vec<u8>,
    ) -> Next {
        let name = &argv[0];
        let is = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
        let reply = if is("quit") {
            Reply::OK.write_resp(out);
            return Next::Close;
        } else if is("hello") {
            self.hello(argv)
        } else if is("client") {
            self.client(argv)
        } else if is("command") {
            command(argv)
        } else if is("info") {
            self.info()
        } else if is("config") {
            config(argv)
        } else {
            let db = guard.get_or_insert_with(|| db.lock().unwrap_or_else(|p| p.into_inner()));
            if db.index() != self.index {
                let _ = db.select(self.index);
            }
            let reply = db.execute(argv);
            self.index = db.index();
            reply
        };
        reply.write_resp(out);
        Next::Continue
    }

    fn hello(&mut self, argv: &[Bytes]) -> Reply {
        if let Some(ver) = argv.get(1) {
            match parse_i64(ver) {
                None => return Reply::Error("ERR Protocol version is not an integer or out of range".into()),
                Some(2) => {}
                Some(_) => return Reply::Error("NOPROTO unsupported protocol version".into()),
            }
            let mut i = 2;
            while i < argv.len() {
                let opt = &argv[i];
                if opt.eq_ignore_ascii_case(b"setname") && i + 1 < argv.len() {
                    if let Err(e) = self.set_name(&argv[i + 1]) {
                        return e;
                    }
                    i += 2;
                } else if opt.eq_ignore_ascii_case(b"auth") && i + 2 < argv.len() {
                    i += 3;
                } else {
                    return Reply::Error(format!(
                        "ERR Syntax error in HELLO option '{}'",
                        String::from_utf8_lossy(opt)
                    ));
                }
            }
        }
        let pairs: [(&str, Reply); 7] = [
            ("server", Reply::bulk(b"redis")),
            ("version", Reply::bulk(b"7.0.15")),
            ("proto", Reply::Integer(2)),
            ("id", Reply::Integer(self.id as i64)),
            ("mode", Reply::bulk(b"standalone")),
            ("role", Reply::bulk(b"master")),
            ("modules", Reply::Array(Vec::new())),
        ];
        Reply::Array(pairs.into_iter().flat_map(|(k, v)| [Reply::bulk(k.as_bytes()), v]).collect())
    }

    fn set_name(&mut self, name: &Bytes) -> Result<(), Reply> {
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err(Reply::Error(
                "ERR Client names cannot contain spaces, newlines or special characters.".into(),
            ));
        }
        self.name = if name.is_empty() { None } else { Some(name.clone()) };
        Ok(())
    }

    fn client(&mut self, argv: &[Bytes]) -> Reply {
        let Some(sub) = argv.get(1) else {
            return Reply::Error("ERR wrong number of arguments for 'client' command".into());
        };
        let sub_is = |s: &str| sub.eq_ignore_ascii_case(s.as_bytes());
        match argv.len() {
            3 if sub_is("setname") => match self.set_name(&argv[2]) {
                Ok(()) => Reply::OK,
                Err(e) => e,
            },
            2 if sub_is("getname") => Reply::bulk_or_nil(self.name.clone()),
            2 if sub_is("id") => Reply::Integer(self.id as i64),
            4 if sub_is("setinfo") => Reply::OK,
            2 if sub_is("info") => Reply::Bulk(Bytes::from(format!(
                "id={} name={} db={} resp=2\n",
                self.id,
                self.name.as_deref().map(String::from_utf8_lossy).unwrap_or_default(),
                self.index
            ))),
            _ if ["setname", "getname", "id", "setinfo", "info"].iter().any(|s| sub_is(s)) => {
                Reply::Error(format!(
                    "ERR wrong number of arguments for 'client|{}' command",
                    sub.to_ascii_lowercase().escape_ascii()
                ))
            }
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(sub)
            )),
        }
    }

    fn info(&self) -> Reply {
        Reply::Bulk(Bytes::from(format!(
            "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nos:rediskv\r\narch_bits:64\r\n\
             process_id:{}\r\ntcp_port:{}\r\n\r\n# Clients\r\nconnected_clients:1\r\n\r\n\
             # Persistence\r\nloading:0\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
            std::process::id(),
            self.port
        )))
    }
}

/// COMMAND: no per-command documentation is served; clients fall back gracefully.
fn command(argv: &[Bytes]) -> Reply {
    match argv.get(1) {
        None => Reply::Array(Vec::new()),
        Some(sub) if sub.eq_ignore_ascii_case(b"count") => Reply::Integer(0),
        Some(sub) if sub.eq_ignore_ascii_case(b"docs") || sub.eq_ignore_ascii_case(b"info") => {
            Reply::Array(Vec::new())
        }
        Some(sub) => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        )),
    }
}

/// CONFIG GET answers the few parameters tools ask about; CONFIG SET/RESETSTAT accept.
fn config(argv: &[Bytes]) -> Reply {
    const PARAMS: &[(&str, &str)] = &[("save", ""), ("appendonly", "no"), ("databases", "16")];
    let Some(sub) = argv.get(1) else {
        return Reply::Error("ERR wrong number of arguments for 'config' command".into());
    };
    if sub.eq_ignore_ascii_case(b"get") && argv.len() >= 3 {
        let mut items = Vec::new();
        for (name, value) in PARAMS {
            if argv[2..].iter().any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes())) {
                items.push(Reply::bulk(name.as_bytes()));
                items.push(Reply::bulk(value.as_bytes()));
            }
        }
        Reply::Array(items)
    } else if (sub.eq_ignore_ascii_case(b"set") && argv.len() >= 4 && argv.len() % 2 == 0)
        || (sub.eq_ignore_ascii_case(b"resetstat") && argv.len() == 2)
    {
        Reply::OK
    } else {
        Reply::Error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(sub)
        ))
    }
}
