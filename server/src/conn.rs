//! The event loop and connection I/O: accept, read, parse, dispatch, write.

use std::collections::HashMap;
use std::io::{self, Read, Write};

use bytes::{Bytes, BytesMut};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use rediskv::backend::MemoryBackend;
use rediskv::commands::{Db, Reply};

use crate::admin::{self, Client};
use crate::resp::{Parsed, parse};
use crate::{config, info};

const LISTENER: Token = Token(usize::MAX);

/// One event loop thread owning the database, like redis-server.
pub struct Server {
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
    /// A server listening on `listener` (already bound to `port`).
    ///
    /// # Errors
    /// Creating the poller or registering the listener failed.
    pub fn new(mut listener: TcpListener, port: u16) -> io::Result<Server> {
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

    /// Serves until polling fails.
    ///
    /// # Errors
    /// The poller failed.
    pub fn run(mut self) -> io::Result<()> {
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
    /// What the connection-level commands know about this client.
    client: Client,
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
            client: Client::new(),
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
        let client = &mut self.client;
        let reply = if is("quit") {
            Reply::OK.write_resp(&mut self.out);
            return Next::Close;
        } else if is("hello") {
            client.hello(argv)
        } else if is("client") {
            client.client(argv)
        } else if is("command") {
            admin::command(argv)
        } else if is("info") {
            info::info(port)
        } else if is("config") {
            config::config(argv)
        } else {
            if db.index() != client.index {
                let _ = db.select(client.index);
            }
            let reply = db.execute(argv);
            client.index = db.index();
            reply
        };
        reply.write_resp(&mut self.out);
        Next::Continue
    }
}
