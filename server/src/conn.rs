//! The event loop and connection I/O: accept, read, parse, hand each command to its
//! [`Client`], write the replies; and a 100 ms tick (Redis' `hz 10`) that closes idle
//! (`timeout`) and killed connections and resumes paused ones.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use rediskv::commands::Reply;

use crate::admin::{Client, Next};
use crate::resp::{Limits, Parsed, parse};
use crate::state::State;

const LISTENER: Token = Token(usize::MAX);
/// How often the event loop looks at timeouts, kills and pauses.
const TICK: Duration = Duration::from_millis(100);

/// One event loop thread owning the database, like redis-server.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    state: Arc<State>,
    conns: HashMap<usize, Connection>,
    next_token: usize,
    /// Shared read buffer: bytes go from the socket here, then into a connection's buffer.
    chunk: Vec<u8>,
    /// When [`Server::tick`] last ran.
    last_tick: Instant,
}

impl Server {
    /// A server listening on `listener`, sharing `state`.
    ///
    /// # Errors
    /// Creating the poller or registering the listener failed.
    pub fn new(mut listener: TcpListener, state: Arc<State>) -> io::Result<Server> {
        let poll = Poll::new()?;
        poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Server {
            poll,
            listener,
            state,
            conns: HashMap::new(),
            next_token: 0,
            chunk: vec![0; 64 * 1024],
            last_tick: Instant::now(),
        })
    }

    /// Serves until polling fails.
    ///
    /// # Errors
    /// The poller failed.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            if let Err(e) = self.poll.poll(&mut events, Some(TICK)) {
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
                let keep = conn.on_event(&self.state, &mut self.chunk);
                self.settle(token, keep);
            }
            if self.last_tick.elapsed() >= TICK || self.state.kills_pending.load(Relaxed) {
                self.last_tick = Instant::now();
                self.tick();
            }
        }
    }

    /// Updates a connection's interest after it ran, or closes it.
    fn settle(&mut self, token: usize, keep: bool) {
        let Some(conn) = self.conns.get_mut(&token) else { return };
        let keep = keep && conn.update_interest(self.poll.registry(), Token(token)).is_ok();
        if !keep {
            if let Some(mut conn) = self.conns.remove(&token) {
                let _ = self.poll.registry().deregister(&mut conn.stream);
                conn.client.close();
                self.state.disconnect(conn.client.info.id);
            }
        }
    }

    /// Closes killed and idle connections, and runs the requests a pause held back.
    fn tick(&mut self) {
        self.state.sample();
        let kills = self.state.kills_pending.swap(false, Relaxed);
        let timeout = self.state.config().number("timeout").max(0) as u64;
        let tokens: Vec<usize> = self.conns.keys().copied().collect();
        for token in tokens {
            let Some(conn) = self.conns.get_mut(&token) else { continue };
            let info = &conn.client.info;
            let idle = timeout > 0 && info.idle() >= timeout && conn.out.len() == conn.written;
            if (kills && info.killed.load(Relaxed)) || idle {
                self.settle(token, false);
            } else if conn.pending.is_some() {
                conn.run_requests(&self.state);
                let keep = conn.finish(&self.state);
                self.settle(token, keep);
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let max = self.state.config().number("maxclients").max(1) as usize;
                    if self.conns.len() >= max {
                        // Redis answers this and closes.
                        let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
                        self.state.stats.rejected_connections.fetch_add(1, Relaxed);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let token = self.next_token;
                    self.next_token = self.next_token.wrapping_add(1) % (usize::MAX - 1);
                    if self.poll.registry().register(&mut stream, Token(token), Interest::READABLE).is_ok() {
                        let laddr = stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
                        let info = self.state.connect(peer.to_string(), laddr, i64::from(stream.as_raw_fd()));
                        let client = Client::new(info, &self.state, peer.ip().is_loopback());
                        self.conns.insert(token, Connection::new(stream, client));
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
    /// The client's own state and commands.
    client: Client,
    buf: BytesMut,
    out: Vec<u8>,
    /// How much of `out` is already written.
    written: usize,
    /// QUIT, a kill or a protocol error: close once `out` is flushed.
    closing: bool,
    writable_interest: bool,
    ranges: Vec<std::ops::Range<usize>>,
    argv: Vec<Bytes>,
    /// A request CLIENT PAUSE holds back.
    pending: Option<Vec<Bytes>>,
}

impl Connection {
    fn new(stream: TcpStream, client: Client) -> Self {
        Connection {
            stream,
            client,
            buf: BytesMut::with_capacity(16 * 1024),
            out: Vec::new(),
            written: 0,
            closing: false,
            writable_interest: false,
            ranges: Vec::new(),
            argv: Vec::new(),
            pending: None,
        }
    }

    /// Handles readiness: reads everything available, runs every complete request, writes
    /// the replies. Returns false when the connection is done.
    fn on_event(&mut self, state: &State, chunk: &mut [u8]) -> bool {
        if !self.closing {
            let limit = state.config().number("client-query-buffer-limit").max(1) as usize;
            loop {
                match self.stream.read(chunk) {
                    Ok(0) => return false,
                    Ok(n) => {
                        state.stats.net_input.fetch_add(n as u64, Relaxed);
                        self.buf.extend_from_slice(&chunk[..n]);
                        if self.buf.len() > limit {
                            // Redis closes such a client without a reply.
                            eprintln!("server: closing client that reached max query buffer length");
                            return false;
                        }
                        if n < chunk.len() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return false,
                }
            }
            self.run_requests(state);
        }
        self.finish(state)
    }

    /// Writes what it can and publishes the buffer sizes; false when the connection is done.
    fn finish(&mut self, state: &State) -> bool {
        let info = self.client.info.clone();
        info.qbuf.store(self.buf.len(), Relaxed);
        let flushed = self.flush();
        if let Ok(sent) = flushed {
            state.stats.net_output.fetch_add(sent as u64, Relaxed);
        }
        info.omem.store(self.out.len() - self.written, Relaxed);
        flushed.is_ok() && !(self.closing && self.written == self.out.len())
    }

    fn run_requests(&mut self, state: &State) {
        if let Some(argv) = self.pending.take() {
            if !self.run_one(argv, state) {
                return;
            }
        }
        let max_bulk = state.config().number("proto-max-bulk-len");
        while !self.closing {
            let limits = Limits { max_bulk, authenticated: self.client.authenticated() };
            let parsed = match parse(&self.buf, &mut self.ranges, limits) {
                Ok(p) => p,
                Err(e) => {
                    let reply = Reply::Error(e.text());
                    state.stats.error(&e.text());
                    reply.write_resp(&mut self.out);
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
            if !self.run_one(argv, state) {
                break;
            }
        }
    }

    /// Runs one request; false when later requests must wait (a pause) or the connection closes.
    fn run_one(&mut self, mut argv: Vec<Bytes>, state: &State) -> bool {
        if argv.is_empty() {
            self.argv = argv;
            return true;
        }
        match self.client.execute(&argv, state, &mut self.out) {
            Next::Continue => {}
            Next::Close => self.closing = true,
            Next::Wait => {
                self.client.info.blocked.store(true, Relaxed);
                self.pending = Some(argv);
                return false;
            }
        }
        self.client.info.blocked.store(false, Relaxed);
        argv.clear();
        self.argv = argv;
        !self.closing
    }
    /// Writes what it can of `out`; returns how many bytes went out.
    fn flush(&mut self) -> io::Result<usize> {
        let mut sent = 0;
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    sent += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(sent),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written = 0;
        // A huge reply's buffer is not kept for the next small ones.
        if self.out.capacity() > 1 << 20 {
            self.out.shrink_to(16 * 1024);
        }
        Ok(sent)
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
}
