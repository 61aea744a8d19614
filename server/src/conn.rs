//! Threads and connection I/O. One acceptor thread hands each new connection to one of N
//! event loops (mio/epoll), round robin; a loop owns its connections for their whole life:
//! it reads, parses, hands each command to its [`Client`] (which runs it on the shared
//! `Engine`, safe from any thread) and writes the replies. Other threads reach a loop
//! through its [`Mailbox`] (a queue and an eventfd waker): a published message, a blocked
//! client's answer, a CLIENT KILL. Every 100 ms (Redis' `hz 10`) a loop closes idle and
//! killed connections and resumes paused ones.
//!
//! Why loops that own connections rather than a pool that runs commands: a connection's
//! buffers never cross threads, pipelined commands of one client stay in order for free,
//! and with one loop the server is exactly the single-threaded design of redis-server.
//! Commands of different loops meet only in the engine, whose striped key locks make each
//! command atomic.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use rediskv::Reply;
use rustls::{ServerConfig, ServerConnection};

use crate::client::{Client, Next};
use crate::listen::Side;
use crate::mailbox::{Mailbox, Message};
use crate::resp::{BIG_ARG, Limits, Parsed, big_arg_end, parse};
use crate::state::State;

const WAKER: Token = Token(usize::MAX);
/// How often a loop looks at timeouts, kills and pauses.
const TICK: Duration = Duration::from_millis(100);
/// How often writes that failed are tried again (Redis retries its AOF write once a second).
const RETRY: Duration = Duration::from_secs(1);

/// Group commit: persists the store's buffered writes before a round's replies go out.
/// `None` when the replies of a round that began at the store's failure count `since` may
/// go; otherwise the error that replaces each of its commands' replies: the persist failed
/// (the store then drops what it did not persist, [`State::write_failed`]), or another
/// loop's did since the round began, which may have dropped this round's writes.
fn persist_round(state: &State, since: u64) -> Option<String> {
    if let Err(e) = state.store.persist_written() {
        state.write_failed(&e);
    }
    (state.writes.failures() != since).then(|| state.writes.refusal())
}

/// Starts `threads` event loops and accepts connections on the listeners of
/// [`State::listen`] for them; CONFIG SET port/tls-port/bind replaces a listener
/// ([`crate::listen::Listen::rebind`]).
///
/// # Errors
/// A poller or thread could not be created, or polling failed for good.
pub fn serve(state: Arc<State>, threads: usize) -> io::Result<()> {
    let mut loops = Vec::new();
    let mut mailboxes = Vec::new();
    for index in 0..threads.max(1) {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let mailbox = Arc::new(Mailbox::new(waker));
        mailboxes.push(mailbox.clone());
        loops.push(EventLoop::new(index, poll, mailbox, state.clone()));
    }
    state.loops.set(mailboxes);
    for (index, event_loop) in loops.into_iter().enumerate() {
        // Scripts run on the loops.
        let thread = std::thread::Builder::new().name(format!("loop-{index}"));
        thread.stack_size(crate::scripting::STACK_SIZE).spawn(move || {
            if let Err(e) = event_loop.run() {
                crate::log::warning!("Event loop {index}: {e}");
                std::process::exit(1);
            }
        })?;
    }
    let mut poll = Poll::new()?;
    state.listen.watch(poll.registry().try_clone()?)?;
    let mut events = Events::with_capacity(8);
    let mut next = 0;
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for event in events.iter() {
            accept_all(&state, Side::of(event.token()), &mut next, threads.max(1));
        }
    }
}

/// Accepts every connection waiting on `side`'s listener and hands each to a loop, round
/// robin from `next`.
fn accept_all(state: &State, side: Side, next: &mut usize, threads: usize) {
    loop {
        match state.listen.accept(side) {
            Ok((stream, peer)) => {
                let max = state.config().number("maxclients").max(1) as usize;
                if state.connections.load(Relaxed) >= max {
                    // Redis answers this and closes (over TLS, the handshake comes first:
                    // such a client is only closed).
                    let mut stream = stream;
                    if side == Side::Plain {
                        let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
                    }
                    state.stats.rejected_connections.fetch_add(1, Relaxed);
                    continue;
                }
                let tls = match side {
                    Side::Plain => None,
                    Side::Tls => {
                        let auth = state.config().get("tls-auth-clients").to_string();
                        let Some(config) = state.tls.server(&auth) else {
                            crate::log::warning!(
                                "Closing a TLS connection from {peer}: TLS is not configured for tls-auth-clients {auth}"
                            );
                            continue;
                        };
                        Some(config)
                    }
                };
                state.connections.fetch_add(1, Relaxed);
                crate::log::verbose!("Accepted {peer}");
                state.loops.send(*next, Message::Accept(stream, peer, tls));
                *next = (*next + 1) % threads;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
            Err(e) if e.raw_os_error() == Some(24) || e.raw_os_error() == Some(23) => {
                // Out of file descriptors: keep serving the others, try again shortly.
                crate::log::warning!("Accepting client connection: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                crate::log::warning!("Accepting client connection: {e}");
                return;
            }
        }
    }
}

/// One event loop thread and the connections it owns.
struct EventLoop {
    index: usize,
    poll: Poll,
    mailbox: Arc<Mailbox>,
    state: Arc<State>,
    conns: Conns,
    /// Shared read buffer: bytes go from the socket here, then into a connection's buffer
    /// (unless that buffer has room for a big argument: [`Connection::room_for_big_arg`]).
    chunk: Vec<u8>,
    /// When [`EventLoop::tick`] last ran.
    last_tick: Instant,
    /// Connections that ran this round and whose replies go out at its end.
    ready: Vec<usize>,
    /// The store's write failures when this round began ([`persist_round`]).
    round_failures: u64,
    /// When loop 0 last retried the store's writes while they fail.
    last_retry: Instant,
    /// Rounds whose replies wait for the store's writer thread, oldest first
    /// ([`EventLoop::reply_round`]).
    persisting: std::collections::VecDeque<Persisting>,
    /// The number of the next round handed to the writer thread.
    next_round: u64,
    /// A round was queued and neither persisted here nor handed to the writer thread yet
    /// ([`EventLoop::run`]).
    unstarted: bool,
}

/// A round handed to the store's writer thread ([`Store::persist_async`]): its number, the
/// store's failure count when it began, and the connections whose replies wait for it.
///
/// [`Store::persist_async`]: crate::store::Store::persist_async
struct Persisting {
    round: u64,
    since: u64,
    tokens: Vec<usize>,
}

impl EventLoop {
    fn new(index: usize, poll: Poll, mailbox: Arc<Mailbox>, state: Arc<State>) -> Self {
        EventLoop {
            index,
            poll,
            mailbox,
            state,
            conns: Conns::default(),
            chunk: vec![0; 64 * 1024],
            last_tick: Instant::now(),
            ready: Vec::new(),
            round_failures: 0,
            last_retry: Instant::now(),
            persisting: std::collections::VecDeque::new(),
            next_round: 0,
            unstarted: false,
        }
    }

    fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            // With a round queued, a look: requests waiting are served while the writer
            // thread persists the round; with none, the loop persists it itself.
            let timeout = if self.unstarted { Duration::ZERO } else { TICK };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if std::mem::take(&mut self.unstarted) {
                if events.is_empty() {
                    // Its callback wakes the loop for the replies.
                    self.state.store.persist_queued();
                    continue;
                }
                self.state.store.start_persist();
            }
            // One reading of the clock for the round: when its reads happened, and whether
            // the tick is due.
            let now = Instant::now();
            self.round_failures = self.state.writes.failures();
            let mut kicked = false;
            for event in events.iter() {
                if event.token() == WAKER {
                    kicked |= self.read_mailbox();
                    continue;
                }
                let token = event.token().0;
                let Some(conn) = self.conns.get_mut(token) else { continue };
                if !conn.on_event(&self.state, &mut self.chunk, now) {
                    self.settle(token, false);
                } else if !conn.ready {
                    conn.ready = true;
                    self.ready.push(token);
                }
            }
            self.reply_round();
            if kicked || now.saturating_duration_since(self.last_tick) >= TICK {
                self.last_tick = now;
                self.tick();
            }
        }
    }

    /// Sends the replies of every connection that ran this round, as Redis does before it
    /// sleeps: one persist of the store's buffered writes for all of them (group commit), then
    /// the sends back to back, so the client is woken once for the round rather than once per
    /// connection, each of those wake-ups costing a cross-CPU interrupt.
    ///
    /// A disk engine persists on its writer thread when the loop has requests waiting: the
    /// replies then wait (their connections run no more requests) while the loop serves
    /// them, and go out when the writer's [`Message::Persisted`] arrives
    /// ([`EventLoop::persisted`]).
    fn reply_round(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        let waiting = ready
            .iter()
            .any(|&t| self.conns.get(t).is_some_and(|c| c.awaiting.is_none() && c.written < c.out.len()));
        let mut refusal = None;
        if waiting {
            let (round, since) = (self.next_round, self.round_failures);
            let (state, mailbox) = (self.state.clone(), self.mailbox.clone());
            let queued = self.state.store.persist_async(move |persisted| {
                // Recorded before any loop hears of a later round, which a failed one
                // may have dropped.
                if let Err(e) = persisted {
                    state.write_failed(&e);
                }
                mailbox.send(Message::Persisted(round));
            });
            if queued {
                self.next_round += 1;
                self.unstarted = true;
                let mut tokens = Vec::new();
                for &token in &ready {
                    if let Some(conn) = self.conns.get_mut(token)
                        && conn.awaiting.is_none()
                        && conn.unacked.is_some()
                    {
                        conn.awaiting = Some((round, since));
                        tokens.push(token);
                    }
                }
                self.persisting.push_back(Persisting { round, since, tokens });
            } else {
                refusal = persist_round(&self.state, since);
            }
        }
        for token in ready.drain(..) {
            let Some(conn) = self.conns.get_mut(token) else { continue };
            conn.ready = false;
            if conn.awaiting.is_some() {
                continue;
            }
            conn.settle_round(refusal.as_deref(), &self.state);
            let keep = conn.send(&self.state);
            self.settle(token, keep);
        }
        self.ready = ready;
    }

    /// The writer thread persisted every round up to `round`: their replies go out (or
    /// their refusals, when the store failed since they began), and their connections run
    /// what they sent meanwhile, replying at this round's end.
    fn persisted(&mut self, round: u64) {
        while self.persisting.front().is_some_and(|p| p.round <= round) {
            let Some(Persisting { since, tokens, .. }) = self.persisting.pop_front() else { break };
            let refusal = (self.state.writes.failures() != since).then(|| self.state.writes.refusal());
            for token in tokens {
                let Some(conn) = self.conns.get_mut(token) else { continue };
                // (None: a message's persist sent them already, not the requests that came
                // meanwhile.)
                if conn.awaiting.is_some_and(|(r, _)| r > round) {
                    continue;
                }
                conn.awaiting = None;
                conn.settle_round(refusal.as_deref(), &self.state);
                let mut keep = conn.send(&self.state);
                if keep && !conn.parked && !conn.closing && !conn.buf.is_empty() {
                    conn.run_requests(&self.state);
                    if !conn.ready {
                        conn.ready = true;
                        self.ready.push(token);
                    }
                    keep = true;
                }
                self.settle(token, keep);
            }
        }
    }

    /// Handles every queued message; true when asked to look at all connections.
    fn read_mailbox(&mut self) -> bool {
        let messages = self.mailbox.take();
        let mut kicked = false;
        for message in messages {
            match message {
                Message::Accept(stream, peer, tls) => self.accept(stream, peer, tls),
                Message::Deliver { token, client, bytes } => self.deliver(token, client, |_| bytes),
                Message::ShardsLost { token, client, channels } => {
                    self.deliver(token, client, |conn| conn.client.lose_shards(&channels))
                }
                Message::Payload { token, client, bytes } => {
                    let Some(conn) = self.conns.get_mut(token) else { continue };
                    if conn.client.info.id != client {
                        continue;
                    }
                    conn.out.extend_from_slice(&bytes);
                    conn.uncounted = conn.out.len();
                    let keep = conn.finish(&self.state, self.round_failures);
                    self.settle(token, keep);
                }
                Message::Resume { token, client, session, bytes } => {
                    let Some(conn) = self.conns.get_mut(token) else { continue };
                    if conn.client.info.id != client {
                        continue;
                    }
                    conn.resume(*session, &bytes, &self.state);
                    let keep = conn.finish(&self.state, self.round_failures);
                    self.settle(token, keep);
                }
                Message::Kick => kicked = true,
                Message::Persisted(round) => self.persisted(round),
            }
        }
        kicked
    }

    /// Appends what `bytes` makes for the connection at `token` (when it is still `client`'s)
    /// to its output: a message of pub/sub or tracking.
    fn deliver(&mut self, token: usize, client: u64, bytes: impl FnOnce(&mut Connection) -> Vec<u8>) {
        let Some(conn) = self.conns.get_mut(token) else { return };
        if conn.client.info.id != client {
            return;
        }
        let bytes = bytes(conn);
        conn.out.extend_from_slice(&bytes);
        let keep = conn.finish(&self.state, self.round_failures) && conn.within_output_limit(&self.state);
        self.settle(token, keep);
    }

    /// Updates a connection's interest after it ran, or closes it.
    fn settle(&mut self, token: usize, keep: bool) {
        let Some(conn) = self.conns.get_mut(token) else { return };
        let keep = keep && conn.update_interest(self.poll.registry(), Token(token)).is_ok();
        if !keep && let Some(mut conn) = self.conns.remove(token) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            conn.client.close(&self.state);
            self.state.disconnect(conn.client.info.id);
        }
    }

    /// Closes killed and idle connections, and runs the requests a pause held back.
    fn tick(&mut self) {
        if self.index == 0 {
            self.state.sample();
            if self.state.writes.failing() && self.last_retry.elapsed() >= RETRY {
                self.last_retry = Instant::now();
                self.state.retry_writes();
            }
        }
        let timeout = self.state.config().number("timeout").max(0) as u64;
        let tokens = self.conns.tokens();
        for token in tokens {
            let Some(conn) = self.conns.get_mut(token) else { continue };
            conn.resize_query_buffer();
            let info = &conn.client.info;
            let idle = timeout > 0
                && info.idle() >= timeout
                && conn.out.len() == conn.written
                && !conn.parked
                && !conn.client.subscribed()
                && !info.replica.load(Relaxed);
            if info.killed.load(Relaxed) || idle {
                self.settle(token, false);
            } else if conn.client.parked_until().is_some_and(|d| d.is_some_and(|d| d <= Instant::now())) {
                // Its deadline passed: unless a writer served it meanwhile, it times out.
                if let Some((session, reply)) = self.state.blocked.cancel(info.id) {
                    // WAIT answers how many replicas acknowledged, whatever their number.
                    let acked = self.state.replication.end_wait(info.id);
                    let reply = acked.map_or(reply, |n| rediskv::Reply::Integer(n as i64));
                    let mut bytes = Vec::new();
                    reply.write(crate::pubsub::protocol(info), &mut bytes);
                    conn.resume(session, &bytes, &self.state);
                    let keep = conn.finish(&self.state, self.round_failures);
                    self.settle(token, keep);
                }
            } else if conn.pending.is_some() {
                conn.run_requests(&self.state);
                let keep = conn.finish(&self.state, self.round_failures);
                self.settle(token, keep);
            }
        }
    }

    /// Serves a new connection; `tls`: over a TLS session with that configuration.
    fn accept(&mut self, stream: std::net::TcpStream, peer: SocketAddr, tls: Option<Arc<ServerConfig>>) {
        let tls = match tls.map(ServerConnection::new).transpose() {
            Ok(tls) => tls.map(Box::new),
            Err(e) => {
                crate::log::warning!("Closing a TLS connection from {peer}: {e}");
                self.state.connections.fetch_sub(1, Relaxed);
                return;
            }
        };
        if stream.set_nonblocking(true).is_err() {
            self.state.connections.fetch_sub(1, Relaxed);
            return;
        }
        let mut stream = TcpStream::from_std(stream);
        let _ = stream.set_nodelay(true);
        let token = self.conns.vacant();
        if self.poll.registry().register(&mut stream, Token(token), Interest::READABLE).is_ok() {
            let laddr = stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
            let info =
                self.state.connect(peer.to_string(), laddr, i64::from(stream.as_raw_fd()), self.index, token);
            info.tls.store(tls.is_some(), Relaxed);
            let client = Client::new(info, &self.state, peer.ip().is_loopback());
            self.conns.put(token, Connection::new(stream, tls, client));
        } else {
            self.state.connections.fetch_sub(1, Relaxed);
        }
    }
}

/// A loop's connections by token. A token is a place in `places`, taken again once its
/// connection closes (a message for the closed one is told apart by its client id), so a
/// readiness event finds its connection by index rather than by hashing its token.
#[derive(Default)]
struct Conns {
    places: Vec<Option<Connection>>,
    free: Vec<usize>,
}

impl Conns {
    fn get(&self, token: usize) -> Option<&Connection> {
        self.places.get(token)?.as_ref()
    }

    fn get_mut(&mut self, token: usize) -> Option<&mut Connection> {
        self.places.get_mut(token)?.as_mut()
    }

    /// The token the next [`Conns::put`] takes.
    fn vacant(&self) -> usize {
        self.free.last().copied().unwrap_or(self.places.len())
    }

    /// Puts `conn` at `token`, which [`Conns::vacant`] gave.
    fn put(&mut self, token: usize, conn: Connection) {
        if token == self.places.len() {
            self.places.push(Some(conn));
        } else {
            debug_assert_eq!(self.free.last(), Some(&token));
            self.free.pop();
            self.places[token] = Some(conn);
        }
    }

    fn remove(&mut self, token: usize) -> Option<Connection> {
        let conn = self.places.get_mut(token)?.take()?;
        self.free.push(token);
        Some(conn)
    }

    /// The tokens of the open connections.
    fn tokens(&self) -> Vec<usize> {
        self.places.iter().enumerate().filter(|(_, c)| c.is_some()).map(|(t, _)| t).collect()
    }
}

/// [`Connection::room_for_big_arg`] looks for a big argument in a query buffer of at least
/// this many bytes: a client sends one with its headers, and the small requests that are
/// most reads are left alone.
const BIG_ARG_PEEK: usize = 4096;

/// The most a connection keeps of an empty reply buffer: a larger one (a big reply) is
/// given back once empty.
const KEPT_BUFFER: usize = 16 * 1024;

/// The query buffer (CLIENT LIST `qbuf`, and its room beyond them `qbuf-free`): it grows
/// to hold what a read brings, and the loop's tick gives back one idle for
/// [`QUERY_IDLE`] (Redis: 2 s) and shrinks one over [`QUERY_RESIZE`] bytes to its recent
/// peak when it is more than twice that, as Redis' `clientsCronResizeQueryBuffer`. Unlike
/// Redis, a read makes no room for 16 KiB (`PROTO_IOBUF_LEN`): the loop reads into one
/// shared buffer, so that a connection that sent a small request holds a few bytes, not
/// 16 KiB, which under transparent huge pages stayed resident (18 KB per idle
/// connection instead of 1.9 KB in `benches/storage_cost.sh`). Only a buffer with room for
/// a big argument ([`Connection::room_for_big_arg`]) is read into directly.
const QUERY_RESIZE: usize = 32 * 1024;
/// How long a connection keeps spare query buffer room after its last read.
const QUERY_IDLE: Duration = Duration::from_millis(500);
/// A request longer than this (it may hold a value the store keeps as it came, sharing
/// its allocation) is copied out of a query buffer with much more room than it, so that
/// a stored value never pins the buffer's spare room.
const SHARED_REQUEST: usize = 4096;

/// The arguments at `ranges` of a request's `frame`, pushed to `argv`. The last one is the
/// frame itself, narrowed: each reference to the shared buffer costs a locked increment and
/// a locked decrement, and the frame's own would be one more pair per request.
fn argv_of(mut frame: Bytes, ranges: &[std::ops::Range<usize>], argv: &mut Vec<Bytes>) {
    let Some((last, rest)) = ranges.split_last() else { return };
    argv.extend(rest.iter().map(|r| frame.slice(r.clone())));
    frame.truncate(last.end);
    frame.advance(last.start);
    argv.push(frame);
}

/// Replaces what `out` holds from `start` on, the replies of `commands` commands, by as many
/// `error` replies.
fn refuse_replies(out: &mut Vec<u8>, start: usize, commands: usize, error: &str) {
    out.truncate(start);
    for _ in 0..commands {
        Reply::Error(error.into()).write_resp(out);
    }
}

struct Connection {
    stream: TcpStream,
    /// The TLS session of a connection to `tls-port`: what the socket carries is its
    /// records, `buf` and `out` hold the plaintext.
    tls: Option<Box<ServerConnection>>,
    /// The client's own state and commands.
    client: Client,
    buf: BytesMut,
    /// The most `buf` held since the last tick.
    peak: usize,
    /// When it last read a request.
    last_read: Instant,
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
    /// A blocking command waits for its keys: no request runs until its answer arrives.
    parked: bool,
    /// Since when the output passed the soft limit of `client-output-buffer-limit`.
    over_soft_limit: Option<Instant>,
    /// `out` up to here is a replica's full sync payload, not counted as its output
    /// ([`Message::Payload`]).
    uncounted: usize,
    /// Waiting in [`EventLoop::ready`] for the end of the round.
    ready: bool,
    /// Where the replies not yet acknowledged by a persist start in `out`, and how many
    /// commands they answer ([`Connection::settle_round`]).
    unacked: Option<(usize, usize)>,
    /// They wait for the store's writer thread: the round handed to it and the store's
    /// failure count when that round began ([`EventLoop::reply_round`]). No request runs
    /// meanwhile, so that later replies never pass them.
    awaiting: Option<(u64, u64)>,
}

impl Connection {
    fn new(stream: TcpStream, tls: Option<Box<ServerConnection>>, client: Client) -> Self {
        Connection {
            stream,
            tls,
            client,
            buf: BytesMut::new(),
            peak: 0,
            last_read: Instant::now(),
            out: Vec::new(),
            written: 0,
            closing: false,
            writable_interest: false,
            ranges: Vec::new(),
            argv: Vec::new(),
            pending: None,
            parked: false,
            over_soft_limit: None,
            uncounted: 0,
            ready: false,
            unacked: None,
            awaiting: None,
        }
    }

    /// Handles readiness: reads everything available and runs every complete request; the
    /// replies wait in `out` for [`Connection::send`]; a read is dated `now` (the loop's
    /// round). Returns false when the connection is gone (end of stream, a read error, an
    /// oversized query buffer).
    fn on_event(&mut self, state: &State, chunk: &mut [u8], now: Instant) -> bool {
        if !self.closing {
            let limit = state.query_buffer_limit.load(Relaxed) as usize;
            loop {
                // Into the query buffer's own room when it has a big argument's worth of it
                // (made by `room_for_big_arg`): read there, the argument is never copied.
                let room = self.buf.capacity() - self.buf.len();
                let direct = self.tls.is_none() && room >= BIG_ARG;
                let read = if direct { self.read_into_room() } else { self.read(chunk) };
                match read {
                    Ok(0) => return false,
                    Ok(n) => {
                        state.stats.net_input.add(self.client.info.loop_index, n as u64);
                        if !direct {
                            self.buf.extend_from_slice(&chunk[..n]);
                        }
                        self.peak = self.peak.max(self.buf.len());
                        self.last_read = now;
                        if self.buf.len() > limit {
                            // Redis closes such a client without a reply.
                            crate::log::warning!("Closing client that reached max query buffer length");
                            return false;
                        }
                        self.room_for_big_arg(state, limit);
                        // A short read drained the socket; not so a TLS session's, which
                        // gives its plaintext a record at a time.
                        if n < if direct { room } else { chunk.len() } && self.tls.is_none() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        if let Some(tls) =
                            self.tls.as_ref().filter(|_| e.kind() == io::ErrorKind::InvalidData)
                        {
                            // A failed handshake (no client certificate, a plaintext client)
                            // or a bad record: logged, and only this connection closes.
                            let addr = &self.client.info.addr;
                            if tls.is_handshaking() {
                                crate::log::warning!(
                                    "Error accepting a client connection: {e} (addr={addr})"
                                );
                            } else {
                                crate::log::warning!("Closing TLS client {addr}: {e}");
                            }
                        }
                        return false;
                    }
                }
            }
            if !self.parked && self.awaiting.is_none() {
                self.run_requests(state);
            }
            if self.buf.is_empty() {
                // Its whole room again, now that the requests split off it are gone.
                let _ = self.buf.try_reclaim(1);
            } else {
                self.room_for_big_arg(state, state.query_buffer_limit.load(Relaxed) as usize);
            }
            self.publish_query_buffer();
        }
        true
    }

    /// As Redis for an argument of [`BIG_ARG`] bytes or more (`PROTO_MBULK_BIG_ARG`): once the
    /// query buffer holds its header, the buffer gets room for exactly the rest of its
    /// request (at most `limit`, the query buffer limit), so that the reads put the argument
    /// there and the request then leaves the buffer as it is, without a copy to a buffer
    /// with no spare room (see [`SHARED_REQUEST`]). The next request this big finds the
    /// room the last one left ([`Connection::run_batch`]).
    fn room_for_big_arg(&mut self, state: &State, limit: usize) {
        if self.buf.len() < BIG_ARG_PEEK {
            return;
        }
        let limits =
            Limits { max_bulk: state.max_bulk.load(Relaxed), authenticated: self.client.authenticated() };
        let Some(end) = big_arg_end(&self.buf, limits) else { return };
        if self.buf.capacity() < end && end <= limit {
            let mut own = BytesMut::with_capacity(end);
            own.extend_from_slice(&self.buf);
            self.buf = own;
        }
    }

    /// Reads from the socket straight into the query buffer's room, left uninitialized: a
    /// safe read needs the room zeroed first, which under 100 KB SETs on fjall took 3.8% of
    /// the server's CPU (`perf record`, `redis-benchmark -n 20000 -c 10 -d 100000 -t set`).
    fn read_into_room(&mut self) -> io::Result<usize> {
        let n = socket2::SockRef::from(&self.stream).recv(self.buf.spare_capacity_mut())?;
        // SAFETY: `recv` initialized the first `n` bytes of the room, which it never
        // exceeds.
        unsafe { self.buf.set_len(self.buf.len() + n) };
        Ok(n)
    }

    /// Reads what the client sent into `chunk`: from the socket, or the plaintext of the TLS
    /// records it brings. `WouldBlock` when nothing more is there; a TLS error is
    /// `InvalidData` (its alert to the client is sent first).
    fn read(&mut self, chunk: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else { return self.stream.read(chunk) };
        loop {
            match tls.reader().read(chunk) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                read => return read,
            }
            if tls.read_tls(&mut self.stream)? == 0 {
                return Ok(0);
            }
            if let Err(e) = tls.process_new_packets() {
                let _ = tls.write_tls(&mut self.stream);
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        }
    }

    /// CLIENT LIST's `qbuf` and `qbuf-free`.
    fn publish_query_buffer(&self) {
        let info = &self.client.info;
        info.set_buffers(Some(self.buf.len()), None);
        info.qbuf_free.store(self.buf.capacity() - self.buf.len(), Relaxed);
    }

    /// The tick's look at the query buffer (see [`QUERY_RESIZE`]): an idle connection's is
    /// given back, one much bigger than its recent peak shrinks to it.
    fn resize_query_buffer(&mut self) {
        let (len, capacity) = (self.buf.len(), self.buf.capacity());
        if capacity - len > 4096 {
            if self.last_read.elapsed() >= QUERY_IDLE {
                self.buf = if len == 0 { BytesMut::new() } else { BytesMut::from(&self.buf[..]) };
            } else if capacity > QUERY_RESIZE && capacity / 2 > self.peak {
                let mut smaller = BytesMut::with_capacity(self.peak.max(len));
                smaller.extend_from_slice(&self.buf);
                self.buf = smaller;
            }
            self.publish_query_buffer();
        }
        self.peak = self.buf.len();
    }

    /// Gives a parked client its session back with its answer, and goes on with its
    /// pipeline.
    fn resume(&mut self, session: rediskv::Session, answer: &[u8], state: &State) {
        self.client.resume(session);
        let start = self.out.len();
        self.out.extend_from_slice(answer);
        self.answered(start);
        self.parked = false;
        self.client.info.blocked.store(false, Relaxed);
        self.run_requests(state);
    }

    /// Persists the store's buffered writes ([`persist_round`], for a round that began at
    /// failure count `since`), then [`Connection::send`]s; false when the connection is done.
    /// Replies waiting for the writer thread are covered by this persist too, and go.
    fn finish(&mut self, state: &State, since: u64) -> bool {
        if self.written < self.out.len() {
            let since = self.awaiting.take().map_or(since, |(_, began)| began.min(since));
            let refusal = persist_round(state, since);
            self.settle_round(refusal.as_deref(), state);
        }
        self.send(state)
    }

    /// A command's reply was written to `out` from `start` on (nothing for CLIENT REPLY OFF).
    #[inline]
    fn answered(&mut self, start: usize) {
        if self.out.len() > start {
            self.unacked.get_or_insert((start, 0)).1 += 1;
        }
    }

    /// After the persist that decides on the replies not acknowledged yet: they stand, or
    /// each command's is replaced by `refusal` (what else followed them in `out` goes too:
    /// messages and pushes that may show writes the store dropped).
    fn settle_round(&mut self, refusal: Option<&str>, state: &State) {
        let Some((start, commands)) = self.unacked.take() else { return };
        if let Some(error) = refusal {
            refuse_replies(&mut self.out, start, commands, error);
            for _ in 0..commands {
                state.stats.error(error);
            }
        }
    }

    /// Writes what it can and publishes the buffer sizes; false when the connection is done.
    /// The store's writes these replies acknowledge must be persisted already
    /// ([`Connection::settle_round`]).
    fn send(&mut self, state: &State) -> bool {
        self.publish_query_buffer();
        let flushed = self.flush();
        if let Ok(sent) = flushed {
            state.stats.net_output.add(self.client.info.loop_index, sent as u64);
        }
        self.client.info.set_buffers(None, Some(self.counted_output()));
        flushed.is_ok() && !(self.closing && self.flushed())
    }

    /// The output not written yet, but a replica's payload ([`Connection::uncounted`]).
    fn counted_output(&self) -> usize {
        self.out.len().saturating_sub(self.written.max(self.uncounted))
    }

    /// Redis' `client-output-buffer-limit` for the clients fed by other threads (pub/sub
    /// and MONITOR: `pubsub <hard> <soft> <seconds>`; replicas: `replica …`): past the hard
    /// limit, or past the soft one for that long, the client is dropped, so a slow reader
    /// cannot grow the server's memory without bound.
    fn within_output_limit(&mut self, state: &State) -> bool {
        let pending = self.counted_output() as u64;
        let class = if self.client.info.replica.load(Relaxed) { "replica" } else { "pubsub" };
        if state.config().output_limit(class).reached(pending, &mut self.over_soft_limit) {
            self.client.info.set_buffers(None, Some(pending as usize));
            self.client.info.log_output_limit();
            return false;
        }
        true
    }

    /// Runs the complete requests in the query buffer, one after the other.
    fn run_requests(&mut self, state: &State) {
        self.client.batch(state);
        self.run_batch(state);
        self.client.batch(state);
    }

    fn run_batch(&mut self, state: &State) {
        if let Some(argv) = self.pending.take()
            && !self.run_one(argv, state)
        {
            return;
        }
        let max_bulk = state.max_bulk.load(Relaxed);
        // CLIENT LIST shows the query buffer with the running command in it: the batch's
        // requests, from the first one on, as Redis' until it trims them after the batch.
        self.publish_query_buffer();
        while !self.closing && !self.parked {
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
                    let spare = self.buf.capacity() - consumed;
                    let frame = if consumed > SHARED_REQUEST && spare > consumed / 4 {
                        let frame = Bytes::copy_from_slice(&self.buf[..consumed]);
                        let _ = self.buf.split_to(consumed);
                        frame
                    } else {
                        self.buf.split_to(consumed).freeze()
                    };
                    if consumed > QUERY_RESIZE && self.buf.capacity() < consumed {
                        // As Redis after a big argument: room for another request this big,
                        // likely to follow (the tick takes it back otherwise).
                        self.buf.reserve(consumed);
                    }
                    argv_of(frame, &self.ranges, &mut argv);
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

    /// Runs one request; false when later requests must wait (a pause, a blocking command)
    /// or the connection closes.
    #[inline(always)]
    fn run_one(&mut self, mut argv: Vec<Bytes>, state: &State) -> bool {
        if argv.is_empty() {
            self.argv = argv;
            return true;
        }
        let start = self.out.len();
        match self.client.execute(&argv, state, &mut self.out) {
            Next::Continue => self.answered(start),
            Next::Close => {
                self.answered(start);
                self.closing = true;
            }
            Next::Wait => {
                self.client.info.blocked.store(true, Relaxed);
                self.pending = Some(argv);
                return false;
            }
            Next::Parked => {
                self.client.info.blocked.store(true, Relaxed);
                self.parked = true;
                return false;
            }
        }
        self.client.info.blocked.store(false, Relaxed);
        argv.clear();
        self.argv = argv;
        !self.closing
    }

    /// Writes what it can of `out`; returns how many bytes went out (of plaintext, over
    /// TLS: what the session took).
    fn flush(&mut self) -> io::Result<usize> {
        let mut sent = 0;
        loop {
            let pending = &self.out[self.written..];
            // (progress, bytes of `out` taken)
            let wrote = match &mut self.tls {
                // The session takes plaintext up to its buffer's limit, then its records go
                // out.
                Some(tls) if tls.wants_write() => tls.write_tls(&mut self.stream).map(|n| (n, 0)),
                Some(tls) if !pending.is_empty() => match tls.writer().write(pending)? {
                    // Full, in a handshake: the rest goes once it is done.
                    0 => return Ok(sent),
                    n => Ok((n, n)),
                },
                None if !pending.is_empty() => self.stream.write(pending).map(|n| (n, n)),
                _ => break,
            };
            match wrote {
                Ok((0, _)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok((_, taken)) => {
                    self.written += taken;
                    sent += taken;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(sent),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.written = 0;
        self.uncounted = 0;
        if self.out.capacity() > KEPT_BUFFER {
            self.out = Vec::new();
        }
        Ok(sent)
    }

    /// Whether everything for the client went out: the replies, and the TLS records.
    fn flushed(&self) -> bool {
        self.written == self.out.len() && !self.tls.as_ref().is_some_and(|tls| tls.wants_write())
    }

    /// Asks for WRITABLE events only while replies are waiting to be written.
    fn update_interest(&mut self, registry: &mio::Registry, token: Token) -> io::Result<()> {
        let want = !self.flushed();
        if want != self.writable_interest {
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            registry.reregister(&mut self.stream, token, interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused round keeps the replies before it and answers each of its commands with
    /// the error, whatever their replies held (a multi-line one, a message after them).
    #[test]
    fn a_refused_round_answers_each_command_with_the_error() {
        let mut out = b"+OK\r\n".to_vec();
        let start = out.len();
        out.extend_from_slice(
            b"+OK\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nm\r\n",
        );
        refuse_replies(&mut out, start, 2, "MISCONF Errors writing to the AOF file: No space left on device");
        let error = "-MISCONF Errors writing to the AOF file: No space left on device\r\n";
        assert_eq!(String::from_utf8(out).unwrap(), format!("+OK\r\n{error}{error}"));
    }

    /// A request's arguments are its ranges' bytes, whether the frame shares the query
    /// buffer or was copied out of it, and its last argument is the frame narrowed.
    #[test]
    fn arguments_are_the_ranges_of_the_frame() {
        let request = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n";
        let mut ranges = Vec::new();
        let limits = Limits { max_bulk: 512 << 20, authenticated: true };
        assert!(
            matches!(parse(request, &mut ranges, limits), Ok(Parsed::Command { consumed }) if consumed == request.len())
        );
        let mut buf = BytesMut::from(&request[..]);
        buf.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        let shared = buf.split_to(request.len()).freeze();
        for frame in [shared, Bytes::copy_from_slice(request)] {
            let mut argv = Vec::new();
            argv_of(frame, &ranges, &mut argv);
            assert_eq!(argv, [&b"SET"[..], b"k", b"value"]);
        }
        let mut argv = Vec::new();
        argv_of(Bytes::from_static(b"*0\r\n"), &[], &mut argv);
        assert!(argv.is_empty());
        assert_eq!(&buf[..], b"*1\r\n$4\r\nPING\r\n", "the next request stays in the buffer");
    }
}
