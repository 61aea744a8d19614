//! The event loop and connection I/O: accept, read, parse, dispatch, write.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use bytes::{Bytes, BytesMut};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use rediskv::backend::MemoryBackend;
use rediskv::commands::{Engine, Reply, Session};

use crate::admin::Client;
use crate::resp::{Parsed, parse};
use crate::{config, info};

/// The engine every event loop shares.
pub type SharedEngine = Arc<Engine<MemoryBackend>>;

const LISTENER: Token = Token(usize::MAX);
const WAKER: Token = Token(usize::MAX - 1);

/// Accepts connections and hands them round-robin to `threads` event loops over one
/// shared [`Engine`]; each loop owns its connections and each connection its [`Session`].
///
/// # Errors
/// Creating a poller or registering the listener failed, or the acceptor's poll failed.
pub fn serve(mut listener: TcpListener, port: u16, threads: usize) -> io::Result<()> {
    let engine: SharedEngine = Arc::new(Engine::new(MemoryBackend::new()));
    let mut loops = Vec::new();
    for i in 0..threads.max(1) {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = channel();
        let event_loop = EventLoop::new(poll, rx, engine.clone(), port);
        std::thread::Builder::new().name(format!("loop-{i}")).spawn(move || {
            if let Err(e) = event_loop.run() {
                eprintln!("server: event loop {i}: {e}");
                std::process::exit(1);
            }
        })?;
        loops.push((tx, waker));
    }
    let mut poll = Poll::new()?;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut events = Events::with_capacity(16);
    let mut next = 0;
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        while let Some(stream) = accept(&listener) {
            let (tx, waker): &(Sender<TcpStream>, Arc<Waker>) = &loops[next % loops.len()];
            next += 1;
            if tx.send(stream).is_ok() {
                waker.wake()?;
            }
        }
    }
}

/// The next pending connection, if any.
fn accept(listener: &TcpListener) -> Option<TcpStream> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return Some(stream);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of file descriptors and such: keep serving the others.
                eprintln!("server: accept: {e}");
                return None;
            }
        }
    }
}

/// One event-loop thread: its connections, their reads, commands and writes.
struct EventLoop {
    poll: Poll,
    incoming: Receiver<TcpStream>,
    engine: SharedEngine,
    port: u16,
    conns: HashMap<usize, Connection>,
    next_token: usize,
    /// Shared read buffer: bytes go from the socket here, then into a connection's buffer.
    chunk: Vec<u8>,
}

impl EventLoop {
    fn new(poll: Poll, incoming: Receiver<TcpStream>, engine: SharedEngine, port: u16) -> Self {
        EventLoop {
            poll,
            incoming,
            engine,
            port,
            conns: HashMap::new(),
            next_token: 0,
            chunk: vec![0; 64 * 1024],
        }
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
                if event.token() == WAKER {
                    self.adopt();
                    continue;
                }
                let token = event.token().0;
                let Some(conn) = self.conns.get_mut(&token) else { continue };
                let keep = conn.on_event(&self.engine, &mut self.chunk, self.port);
                let keep = keep && conn.update_interest(self.poll.registry(), Token(token)).is_ok();
                if !keep {
                    if let Some(mut conn) = self.conns.remove(&token) {
                        let _ = self.poll.registry().deregister(&mut conn.stream);
                        self.engine.close(&mut conn.session);
                    }
                }
            }
        }
    }

    /// Registers the connections the acceptor handed over.
    fn adopt(&mut self) {
        while let Ok(mut stream) = self.incoming.try_recv() {
            let token = self.next_token;
            self.next_token = self.next_token.wrapping_add(1) % (usize::MAX - 2);
            if self.poll.registry().register(&mut stream, Token(token), Interest::READABLE).is_ok() {
                let session = self.engine.session();
                self.conns.insert(token, Connection::new(stream, session));
            }
        }
    }
}

struct Connection {
    stream: TcpStream,
    /// What the connection-level commands know about this client.
    client: Client,
    /// The engine's per-client state: database, MULTI queue, WATCHes.
    session: Session,
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
    fn new(stream: TcpStream, session: Session) -> Self {
        Connection {
            stream,
            client: Client::new(),
            session,
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
    fn on_event(&mut self, engine: &SharedEngine, chunk: &mut [u8], port: u16) -> bool {
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
            self.run_requests(engine, port);
        }
        match self.flush() {
            Ok(()) => !(self.closing && self.written == self.out.len()),
            Err(_) => false,
        }
    }

    fn run_requests(&mut self, engine: &SharedEngine, port: u16) {
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
                if let Next::Close = self.dispatch(&argv, engine, port) {
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
    fn dispatch(&mut self, argv: &[Bytes], engine: &SharedEngine, port: u16) -> Next {
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
        } else if is("info") {
            info::info(port)
        } else if is("config") {
            config::config(argv)
        } else {
            let reply = engine.execute(&mut self.session, argv);
            client.index = self.session.db();
            reply
        };
        reply.write_resp(&mut self.out);
        Next::Continue
    }
}
