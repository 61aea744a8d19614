//! A real redis-server child process and a minimal blocking RESP2/RESP3 client for it.

use std::io::{self, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use rediskv::{Protocol, Reply};

#[path = "../support/missing_tool.rs"]
mod missing_tool;

/// Reports that `test` compares nothing because redis-server is missing (fails under `CI=true`).
pub fn missing_redis(test: &str) {
    missing_tool::missing_tool(test, "redis-server", "apt-get install redis-server");
}

/// A `redis-server` on a free loopback port, killed on drop.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    /// Its own directory, removed on drop: it loads no dump.rdb another server left.
    dir: std::path::PathBuf,
}

impl RedisServer {
    /// Whether `redis-server` can be run at all.
    pub fn available() -> bool {
        Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    }

    /// Starts one (a few attempts, in case another process grabs the port first).
    pub fn start() -> io::Result<RedisServer> {
        RedisServer::start_with(&[])
    }

    /// [`RedisServer::start`] with extra command-line arguments.
    pub fn start_with(extra: &[&str]) -> io::Result<RedisServer> {
        let mut last = io::Error::other("redis-server did not start");
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let dir = std::env::temp_dir().join(format!("rediskv-test-redis-{}-{port}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            let mut child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .args(extra)
                .args(["--daemonize", "no", "--logfile", "", "--dir"])
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .inspect_err(|_| {
                    let _ = std::fs::remove_dir_all(&dir);
                })?;
            // Its own log, not a probe connection, says it listens: a probe could reach
            // another process that took the port while this one failed to bind and exited.
            if ready(&mut child) {
                return Ok(RedisServer { child, port, dir });
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
            last = io::Error::other(format!("redis-server did not come up on port {port}"));
        }
        Err(last)
    }

    /// A started server, or `None` (after a loud note naming `test`) when `redis-server` is
    /// not installed; under `CI=true` a missing server is a failure.
    pub fn start_or_skip(test: &str) -> Option<RedisServer> {
        if !RedisServer::available() {
            missing_redis(test);
            return None;
        }
        Some(RedisServer::start().expect("start redis-server"))
    }

    /// A client connection to it.
    pub fn connect(&self) -> io::Result<Client> {
        Client::connect(self.port)
    }
}

/// Reads the child's log until redis-server says it accepts connections (true) or exits
/// (false); then keeps draining the log so the pipe never fills.
fn ready(child: &mut Child) -> bool {
    use std::io::BufRead;
    let mut log = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    while log.read_line(&mut line).unwrap_or(0) > 0 {
        if line.contains("Ready to accept connections") {
            std::thread::spawn(move || io::copy(&mut log, &mut io::sink()));
            return true;
        }
        line.clear();
    }
    false
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A blocking client: one request, one reply (RESP2 until [`Client::hello3`]).
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    out: Vec<u8>,
}

impl Client {
    pub fn connect(port: u16) -> io::Result<Client> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client { reader: BufReader::new(stream.try_clone()?), writer: stream, out: Vec::new() })
    }

    /// Sends `argv` as a multibulk request and reads the reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> io::Result<Reply> {
        self.send(argv)?;
        self.read_reply()
    }

    /// Sends `argv` without reading a reply (a blocking command whose reply comes later).
    pub fn send<A: AsRef<[u8]>>(&mut self, argv: &[A]) -> io::Result<()> {
        self.out.clear();
        self.out.extend_from_slice(format!("*{}\r\n", argv.len()).as_bytes());
        for a in argv {
            let a = a.as_ref();
            self.out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            self.out.extend_from_slice(a);
            self.out.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(&self.out)
    }

    /// How long [`Client::read_reply`] waits (30 s by default).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.writer.set_read_timeout(timeout).expect("set the read timeout");
    }

    /// Reads the next value the server sends (a reply, or a pub/sub message).
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        read_reply(&mut self.reader)
    }

    /// Switches the connection to RESP3 (`HELLO 3`), checking the reply is a map.
    pub fn hello3(&mut self) -> io::Result<()> {
        match self.call(&["HELLO", "3"])? {
            Reply::Map(_) => Ok(()),
            other => Err(io::Error::other(format!("HELLO 3 answered {other:?}"))),
        }
    }
}

/// A reply as a client speaking `protocol` reads it: encoded, then parsed back. In RESP2
/// maps are flat arrays, doubles bulk strings and so on; in RESP3 the kinds stay typed but
/// pairs become plain arrays, exactly as a reply read from redis-server.
pub fn fold(reply: &Reply, protocol: Protocol) -> Reply {
    let mut bytes = Vec::new();
    reply.write(protocol, &mut bytes);
    read_reply(&mut io::Cursor::new(bytes)).expect("every reply encodes to one value")
}

/// [`fold`] to RESP2.
pub fn fold_resp2(reply: &Reply) -> Reply {
    fold(reply, Protocol::Resp2)
}

fn line<R: io::BufRead>(reader: &mut R) -> io::Result<Vec<u8>> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-reply"));
    }
    line.truncate(line.len() - 2);
    Ok(line)
}

/// `n` values.
fn read_items<R: io::BufRead>(reader: &mut R, n: i64) -> io::Result<Vec<Reply>> {
    (0..n).map(|_| read_reply(reader)).collect()
}

/// `n` bytes and the CRLF after them.
fn read_bytes<R: io::BufRead>(reader: &mut R, n: i64) -> io::Result<Vec<u8>> {
    let mut data = vec![0; n as usize + 2];
    io::Read::read_exact(reader, &mut data)?;
    data.truncate(n as usize);
    Ok(data)
}

/// Reads one RESP2 or RESP3 value into the [`Reply`] kind it names.
pub fn read_reply<R: io::BufRead>(reader: &mut R) -> io::Result<Reply> {
    let line = line(reader)?;
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "bad RESP");
    let (&kind, rest) = line.split_first().ok_or_else(bad)?;
    let text = String::from_utf8_lossy(rest).into_owned();
    let int = || text.parse::<i64>().map_err(|_| bad());
    Ok(match kind {
        b'+' => Reply::Status(text.clone().into()),
        b'-' => Reply::Error(text.clone()),
        b':' => Reply::Integer(int()?),
        b'$' if int()? < 0 => Reply::Nil,
        b'$' => Reply::Bulk(Bytes::from(read_bytes(reader, int()?)?)),
        b'*' if int()? < 0 => Reply::NilArray,
        b'*' => Reply::Array(read_items(reader, int()?)?),
        b'_' => Reply::Nil,
        b'~' => Reply::Set(read_items(reader, int()?)?),
        b'>' => Reply::Push(read_items(reader, int()?)?),
        b'%' => {
            let items = read_items(reader, 2 * int()?)?;
            let mut it = items.into_iter();
            Reply::Map(std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect())
        }
        // The text as sent, so that replies compare digit for digit.
        b',' => Reply::DoubleText(Bytes::from(text.clone())),
        b'#' => Reply::Boolean(text == "t"),
        b'(' => Reply::BigNumber(text.clone()),
        b'=' => {
            let data = read_bytes(reader, int()?)?;
            let format = data.get(..3).and_then(|f| f.try_into().ok()).ok_or_else(bad)?;
            Reply::Verbatim { format, text: Bytes::copy_from_slice(data.get(4..).ok_or_else(bad)?) }
        }
        _ => return Err(bad()),
    })
}
