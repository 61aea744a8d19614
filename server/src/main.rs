//! A RESP2 server over the rediskv engine, for redis-cli, redis-benchmark and client libraries.
//!
//! ```text
//! cargo run --release -p rediskv-server -- [--port 6380] [--bind 127.0.0.1]
//! redis-cli -p 6380
//! ```
//!
//! One event-loop thread (mio/epoll) serves every connection and owns the
//! `Db<MemoryBackend>`, like redis-server; each connection remembers its own `SELECT`ed
//! database. Every complete request in the input buffer is parsed and executed and all
//! replies go out in one write, so pipelining is cheap. Connection-level commands (QUIT, HELLO, CLIENT, COMMAND,
//! INFO, CONFIG) are answered here; everything else goes to `Db::execute`.

mod resp;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use rediskv::backend::MemoryBackend;
use rediskv::commands::args::{glob_match, parse_i64};
use rediskv::commands::{Db, Reply};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use resp::{Parsed, parse};

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
                println!("usage: rediskv-server [--port 6380] [--bind 127.0.0.1]");
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
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(opts.bind.as_str(), opts.port))
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| {
            eprintln!("server: cannot resolve {}:{}", opts.bind, opts.port);
            std::process::exit(1);
        });
    let listener = TcpListener::bind(addr).unwrap_or_else(|e| {
        eprintln!("server: cannot listen on {addr}: {e}");
        std::process::exit(1);
    });
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(opts.port);
    eprintln!("rediskv server listening on {}:{port} (RESP2)", opts.bind);
    if let Err(e) = Server::new(listener, port).and_then(Server::run) {
        eprintln!("server: {e}");
        std::process::exit(1);
    }
}

const LISTENER: Token = Token(usize::MAX);

/// One event loop thread owning the database, like redis-server.
struct Server {
    poll: Poll,
    listener: TcpListener,
    db: Db<'static, MemoryBackend>,
    port: u16,
    conns: HashMap<usize, Connection>,
    next_token: usize,
    /// Shared read buffer: bytes go from the socket here, then into a connection's buffer.
    chunk: Vec<u8>,
}

impl Server {
    fn new(mut listener: TcpListener, port: u16) -> io::Result<Server> {
        let poll = Poll::new()?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Server {
            poll,
            listener,
            db: Db::new(MemoryBackend::new()),
            port,
            conns: HashMap::new(),
            next_token: 0,
            chunk: vec![0; 64 * 1024],
        })
    }

    fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            if let Err(e) = self.poll.poll(&mut events, None) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for event in events.iter() {
                if event.token() == LISTENER {
                    self.accept();
                    continue;
                }
                let token = event.token().0;
                let Some(conn) = self.conns.get_mut(&token) else { continue };
                let keep = conn.on_event(&mut self.db, &mut self.chunk, self.port);
                let keep = keep && conn.update_interest(self.poll.registry(), Token(token)).is_ok();
                if !keep {
                    if let Some(mut conn) = self.conns.remove(&token) {
                        let _ = self.poll.registry().deregister(&mut conn.stream);
                    }
                }
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let token = self.next_token;
                    self.next_token = self.next_token.wrapping_add(1) % (usize::MAX - 1);
                    if self.poll.registry().register(&mut stream, Token(token), Interest::READABLE).is_ok() {
                        self.conns.insert(token, Connection::new(stream));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of file descriptors and such: keep serving the others.
                    eprintln!("server: accept: {e}");
                    return;
                }
            }
        }
    }
}

struct Connection {
    stream: TcpStream,
    id: u64,
    /// The database this client has SELECTed.
    index: usize,
    name: Option<Bytes>,
    buf: BytesMut,
    out: Vec<u8>,
    /// How much of `out` is already written.
    written: usize,
    /// QUIT or a protocol error: close once `out` is flushed.
    closing: bool,
    writable_interest: bool,
    ranges: Vec<std::ops::Range<usize>>,
    argv: Vec<Bytes>,
}

/// What to do after a request.
enum Next {
    Continue,
    Close,
}

impl Connection {
    fn new(stream: TcpStream) -> Self {
        Connection {
            stream,
            id: NEXT_CLIENT_ID.fetch_add(1, Ordering::Relaxed),
            index: 0,
            name: None,
            buf: BytesMut::with_capacity(16 * 1024),
            out: Vec::new(),
            written: 0,
            closing: false,
            writable_interest: false,
            ranges: Vec::new(),
            argv: Vec::new(),
        }
    }

    /// Handles readiness: reads everything available, runs every complete request, writes
    /// the replies. Returns false when the connection is done.
    fn on_event(&mut self, db: &mut Db<MemoryBackend>, chunk: &mut [u8], port: u16) -> bool {
        if !self.closing {
            loop {
                match self.stream.read(chunk) {
                    Ok(0) => return false,
                    Ok(n) => {
                        self.buf.extend_from_slice(&chunk[..n]);
                        if n < chunk.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return false,
                }
            }
            self.run_requests(db, port);
        }
        match self.flush() {
            Ok(()) => !(self.closing && self.written == self.out.len()),
            Err(_) => false,
        }
    }

    fn run_requests(&mut self, db: &mut Db<MemoryBackend>, port: u16) {
        while !self.closing {
            let parsed = match parse(&self.buf, &mut self.ranges) {
                Ok(p) => p,
                Err(e) => {
                    Reply::Error(e.text()).write_resp(&mut self.out);
                    self.closing = true;
                    break;
                }
            };
            let mut argv = std::mem::take(&mut self.argv);
            argv.clear();
            match parsed {
                Parsed::Incomplete => {
                    self.argv = argv;
                    break;
                }
                Parsed::Command { consumed } => {
                    let frame = self.buf.split_to(consumed).freeze();
                    argv.extend(self.ranges.iter().map(|r| frame.slice(r.clone())));
                }
                Parsed::Inline { consumed, args } => {
                    let _ = self.buf.split_to(consumed);
                    argv.extend(args.into_iter().map(Bytes::from));
                }
            }
            if !argv.is_empty() {
                if let Next::Close = self.dispatch(&argv, db, port) {
                    self.closing = true;
                }
            }
            argv.clear();
            self.argv = argv;
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written = 0;
        if self.out.capacity() > 1 << 20 {
            self.out.shrink_to(16 * 1024);
        }
        Ok(())
    }

    /// Asks for WRITABLE events only while replies are waiting to be written.
    fn update_interest(&mut self, registry: &mio::Registry, token: Token) -> io::Result<()> {
        let want = self.written < self.out.len();
        if want != self.writable_interest {
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            registry.reregister(&mut self.stream, token, interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }

    /// Runs one command, appending its reply to `out`.
    fn dispatch(&mut self, argv: &[Bytes], db: &mut Db<MemoryBackend>, port: u16) -> Next {
        let name = &argv[0];
        let is = |s: &str| name.eq_ignore_ascii_case(s.as_bytes());
        let reply = if is("quit") {
            Reply::OK.write_resp(&mut self.out);
            return Next::Close;
        } else if is("hello") {
            self.hello(argv)
        } else if is("client") {
            self.client(argv)
        } else if is("command") {
            command(argv)
        } else if is("info") {
            info(port)
        } else if is("config") {
            config(argv)
        } else {
            if db.index() != self.index {
                let _ = db.select(self.index);
            }
            let reply = db.execute(argv);
            self.index = db.index();
            reply
        };
        reply.write_resp(&mut self.out);
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
}

/// INFO: a minimal server section.
fn info(port: u16) -> Reply {
    Reply::Bulk(Bytes::from(format!(
        "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nos:rediskv\r\narch_bits:64\r\n\
         process_id:{}\r\ntcp_port:{}\r\n\r\n# Clients\r\nconnected_clients:1\r\n\r\n\
         # Persistence\r\nloading:0\r\n\r\n# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
        std::process::id(),
        port
    )))
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
