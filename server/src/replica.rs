//! The replica's side of Redis' replication: REPLICAOF (and the `replicaof` config line)
//! starts a link thread that connects to the primary, does Redis 7.0's handshake (PING,
//! AUTH with `masteruser`/`masterauth`, REPLCONF listening-port and capa, PSYNC), loads a
//! full sync's RDB payload into the emptied store or continues from its offset, then
//! applies the primary's stream through a client flagged as the master (no replies),
//! answering REPLCONF GETACK and sending REPLCONF ACK every second. The stream's bytes are
//! also this server's stream, for its own replicas. A broken link reconnects every second
//! and asks to continue from the offset it applied; a disk store keeps that position in
//! the batch of each write the stream makes, so a restarted replica continues too.
//!
//! The primary's socket is opened and read in [`PrimarySocket`] only: plain, or a TLS
//! session with `tls-replication yes`.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::client::{Client, Next};
use crate::replication::{FileChanges, StreamPosition, Sync, encode};
use crate::resp::{Limits, Parsed};
use crate::state::State;
use crate::tls::Dialed;

/// Starts the link thread of REPLICAOF's `generation` (see [`crate::replication::LinkStatus`]).
pub fn spawn(state: Arc<State>, generation: u64) {
    // The primary's stream may run scripts here.
    let thread = std::thread::Builder::new().name("replica-link".into());
    let spawned = thread.stack_size(crate::scripting::STACK_SIZE).spawn(move || run(&state, generation));
    if let Err(e) = spawned {
        crate::log::warning!("Cannot start the replication link: {e}");
    }
}

/// The primary's periodic work: a PING in the stream every `repl-ping-replica-period`
/// seconds while replicas are connected (so they see the link alive), as Redis'
/// `replicationCron`.
pub fn spawn_cron(state: Arc<State>) {
    let run = move || {
        let mut last_ping = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let period = Duration::from_secs(state.config().number("repl-ping-replica-period").max(1) as u64);
            crate::failover::cron(&state);
            // No PING while a failover holds the stream still for a replica to catch up.
            let failing_over = state.failover.phase() != crate::failover_plan::Phase::None;
            if last_ping.elapsed() >= period && !failing_over {
                last_ping = Instant::now();
                if state.replication.has_replicas() {
                    // Redis' shared `ping` object: the keepalive is sent in lower case.
                    state.replication.feed_raw(&[b"ping"]);
                }
            }
        }
    };
    if let Err(e) = std::thread::Builder::new().name("replication-cron".into()).spawn(run) {
        crate::log::warning!("Cannot start the replication cron: {e}");
    }
}

/// The link thread: a session with the primary, again after each failure, until another
/// REPLICAOF replaces this one.
fn run(state: &State, generation: u64) {
    while state.link.current(generation) {
        if let Err(e) = session(state, generation) {
            crate::log::notice!("Replication link: {e}");
            // A failover's target that cannot be reached or refuses: a primary again.
            if state.failover.phase() == crate::failover_plan::Phase::InProgress {
                crate::failover::abort(state, &e);
            }
        }
        if !state.link.current(generation) {
            break;
        }
        state.link.update(|i| i.state = "connect");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The primary's socket: opened, read and written here only.
struct PrimarySocket {
    stream: Dialed,
    buf: Vec<u8>,
}

impl PrimarySocket {
    /// Dials the primary; over TLS (the `tls-*` client configuration) when `tls` gives one.
    fn connect(
        host: &str,
        port: u16,
        timeout: Duration,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Self, String> {
        Ok(PrimarySocket { stream: Dialed::dial(host, port, timeout, tls)?, buf: Vec::new() })
    }

    fn send(&mut self, argv: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        encode(&mut out, argv.iter().copied());
        self.stream.write_all(&out).map_err(|e| format!("write to the primary: {e}"))
    }

    /// Reads more bytes into `buf`: `Ok(false)` when the read timed out.
    fn fill(&mut self) -> Result<bool, String> {
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err("the primary closed the connection".into()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(true)
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                Ok(false)
            }
            Err(e) => Err(format!("read from the primary: {e}")),
        }
    }

    /// One line (without CRLF), waiting for it; the bare newlines a primary sends to keep
    /// the link alive while it prepares a sync are skipped.
    fn line(&mut self) -> Result<String, String> {
        loop {
            let keepalives = self.buf.iter().take_while(|&&b| b == b'\n').count();
            self.buf.drain(..keepalives);
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 2);
                return Ok(line);
            }
            if !self.fill()? {
                return Err("timeout waiting for the primary".into());
            }
        }
    }

    /// A command and its one-line reply.
    fn call(&mut self, argv: &[&[u8]]) -> Result<String, String> {
        self.send(argv)?;
        self.line()
    }

    fn set_timeout(&self, timeout: Duration) {
        let _ = self.stream.tcp().set_read_timeout(Some(timeout));
    }
}

/// One connection to the primary: handshake, sync, stream.
fn session(state: &State, generation: u64) -> Result<(), String> {
    let target = state.link.info();
    let timeout = Duration::from_secs(state.config().number("repl-timeout").max(1) as u64);
    state.link.update(|i| i.state = "connecting");
    let tls = match state.config().get("tls-replication") == "yes" {
        true => Some(state.tls.client().ok_or("tls-replication is yes, but TLS is not configured")?),
        false => None,
    };
    let mut primary = PrimarySocket::connect(&target.host, target.port, timeout, tls)?;
    state.link.update(|i| i.state = "handshake");
    let pong = primary.call(&[b"PING"])?;
    // An answer that asks for AUTH still proves the primary is there (as Redis takes it).
    if !(pong.starts_with('+') || pong.starts_with("-NOAUTH") || pong.starts_with("-NOPERM")) {
        return Err(format!("the primary answered PING with {pong}"));
    }
    let auth = state.config().link_auth();
    if let Some(auth) = auth {
        let reply = primary.call(&auth.iter().map(String::as_bytes).collect::<Vec<_>>())?;
        if !reply.starts_with('+') {
            return Err(format!("unable to AUTH to MASTER: {reply}"));
        }
    }
    let port = state.config().get("replica-announce-port").to_string();
    let port = if port == "0" || port.is_empty() { state.config().get("port").to_string() } else { port };
    let reply = primary.call(&[b"REPLCONF", b"listening-port", port.as_bytes()])?;
    if !reply.starts_with('+') {
        crate::log::warning!("(non critical) the primary refused REPLCONF listening-port: {reply}");
    }
    let reply = primary.call(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    if !reply.starts_with('+') {
        crate::log::warning!("(non critical) the primary refused REPLCONF capa: {reply}");
    }
    // Continue from what was applied: the primary's stream, or this server's own (a primary
    // turned replica continues if its new primary was its replica, which knows its id).
    let (replid, offset) =
        if state.replication.keeps_stream() { state.replication.id_and_offset() } else { (String::new(), 0) };
    let psync_offset = (offset + 1).to_string();
    let (replid_arg, offset_arg) =
        if replid.is_empty() { ("?", "-1") } else { (replid.as_str(), psync_offset.as_str()) };
    // A failover asks its target to take the primary's role with this PSYNC.
    let failover = state.failover.phase() == crate::failover_plan::Phase::InProgress;
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid_arg.as_bytes(), offset_arg.as_bytes()];
    if failover {
        psync.push(b"FAILOVER");
    }
    let reply = primary.call(&psync)?;
    if failover && (reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE")) {
        crate::failover::finish(state);
    }
    let (replid, offset) = if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut words = rest.split_whitespace();
        let (Some(id), Some(off)) = (words.next(), words.next().and_then(|o| o.parse::<u64>().ok())) else {
            return Err(format!("bad FULLRESYNC reply: {reply}"));
        };
        crate::log::notice!("Full resync from the primary: replication id {id}, offset {off}");
        // The data is emptied and loaded: no longer the primary's stream until it ends.
        state.link.set_synced(false);
        state.link.update(|i| {
            i.state = "sync";
            i.sync_read = 0;
            i.sync_size = None;
        });
        // The stored position goes before the data it stood for does.
        state.store.set_position(None)?;
        load_payload(state, &mut primary, generation)?;
        state.replication.follow(id, off, Sync::Full);
        state.link.set_stream_db(0);
        let position = StreamPosition { replid: id.to_string(), offset: off, db: 0, file_changes: None };
        state.store.set_position(Some(&position))?;
        (id.to_string(), off)
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        let id = if id.is_empty() { replid } else { id.to_string() };
        crate::log::notice!("Partial resync from the primary at offset {offset}");
        state.replication.follow(&id, offset, Sync::Continue);
        (id, offset)
    } else {
        return Err(format!("the primary refused PSYNC: {reply}"));
    };
    state.link.update(|i| {
        i.state = "connected";
        i.replid = replid.clone();
        i.last_io = Instant::now();
    });
    if let Some(_applying) = state.link.applying(generation) {
        state.link.set_synced(true);
    }
    let at = StreamPosition { replid, offset, db: state.link.stream_db(), file_changes: None };
    stream(state, generation, primary, at)
}

/// Reads the full sync's RDB payload (`$len` or an EOF-marked diskless one) into the
/// emptied store, with the primary's function libraries.
fn load_payload(state: &State, primary: &mut PrimarySocket, generation: u64) -> Result<(), String> {
    let header = primary.line()?;
    let (left, mark) = match header.strip_prefix("$EOF:") {
        Some(mark) if mark.len() == 40 => (None, Some(mark.as_bytes().to_vec())),
        Some(_) => return Err(format!("bad payload header: {header}")),
        None => match header.strip_prefix('$').and_then(|n| n.parse::<u64>().ok()) {
            Some(len) => (Some(len), None),
            None => return Err(format!("bad payload header: {header}")),
        },
    };
    state.link.update(|i| i.sync_size = left);
    let mut payload =
        Payload { state, generation, primary, left, mark, held: Vec::new(), ready: Vec::new(), ended: false };
    let stats = crate::rdb::load_rdb(state, &mut payload)?;
    // What follows the file: an EOF-marked payload's mark.
    std::io::copy(&mut payload, &mut std::io::sink()).map_err(|e| e.to_string())?;
    crate::log::notice!("MASTER <-> REPLICA sync: loaded {} keys", stats.keys);
    Ok(())
}

/// A full sync's payload as a reader: the bytes up to its length, or up to its end mark.
struct Payload<'a> {
    state: &'a State,
    generation: u64,
    primary: &'a mut PrimarySocket,
    /// Bytes still to come of a `$len` payload.
    left: Option<u64>,
    /// The end mark of an EOF-marked one, and its last bytes, held back until they are known
    /// not to be the mark.
    mark: Option<Vec<u8>>,
    held: Vec<u8>,
    /// Payload bytes not read yet.
    ready: Vec<u8>,
    ended: bool,
}

impl Payload<'_> {
    /// Moves the next bytes the primary sent into `ready`.
    fn next_chunk(&mut self) -> Result<(), String> {
        if !self.state.link.current(self.generation) {
            return Err("REPLICAOF changed during the sync".into());
        }
        if self.primary.buf.is_empty() && !self.primary.fill()? {
            return Err("timeout reading the primary's RDB payload".into());
        }
        let mut chunk = std::mem::take(&mut self.primary.buf);
        match (&mut self.left, &self.mark) {
            (Some(n), _) => {
                let take = chunk.len().min(*n as usize);
                self.primary.buf = chunk.split_off(take);
                *n -= take as u64;
                self.ended = *n == 0;
            }
            (None, Some(mark)) => {
                self.held.append(&mut chunk);
                self.ended = self.held.ends_with(mark);
                let tail = if self.ended { mark.len() } else { mark.len().min(self.held.len()) };
                chunk = self.held.drain(..self.held.len() - tail).collect();
                if self.ended {
                    self.held.clear();
                }
            }
            (None, None) => unreachable!("a payload has a length or an end mark"),
        }
        self.state.link.update(|i| {
            i.sync_read += chunk.len() as u64;
            i.last_io = Instant::now();
        });
        self.ready = chunk;
        Ok(())
    }
}

impl Read for Payload<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.ready.is_empty() {
            if self.ended {
                return Ok(0);
            }
            self.next_chunk().map_err(std::io::Error::other)?;
        }
        let n = out.len().min(self.ready.len());
        out[..n].copy_from_slice(&self.ready[..n]);
        self.ready.drain(..n);
        Ok(n)
    }
}

/// Applies the primary's stream from `at` (its database selected) until the link breaks or
/// REPLICAOF changes. A disk store records, in the batch of each command's writes, the
/// position after that command ([`StreamPosition`]).
fn stream(
    state: &State,
    generation: u64,
    mut primary: PrimarySocket,
    at: StreamPosition,
) -> Result<(), String> {
    let repl_timeout = Duration::from_secs(state.config().number("repl-timeout").max(1) as u64);
    primary.set_timeout(Duration::from_millis(100));
    let mut master = MasterClient::new(state, &primary);
    if at.db != 0 {
        // Not applied: the link has ended, which the loop below sees first.
        let select = [Bytes::from_static(b"SELECT"), Bytes::from(at.db.to_string())];
        master.execute(&select, state, generation, None);
    }
    let keeps_position = state.store.keeps_position();
    let StreamPosition { replid, mut offset, .. } = at;
    let result = (|| {
        let mut last_ack: Option<Instant> = None;
        let mut last_io = Instant::now();
        let mut args = Vec::new();
        let mut transaction = Transaction::default();
        loop {
            if !state.link.current(generation) {
                return Ok(());
            }
            if master.client.info.killed.load(Relaxed) {
                return Err("the master client was killed".to_string());
            }
            if last_ack.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                primary.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])?;
                last_ack = Some(Instant::now());
            }
            if primary.fill()? {
                last_io = Instant::now();
            } else if last_io.elapsed() > repl_timeout {
                return Err("timeout: no data from the primary".into());
            }
            let mut used = 0;
            while used < primary.buf.len() {
                let parsed = crate::resp::parse(&primary.buf[used..], &mut args, Limits::default())
                    .map_err(|e| format!("the primary's stream: {}", e.text()))?;
                let (consumed, argv): (usize, Vec<Bytes>) = match parsed {
                    Parsed::Incomplete => break,
                    Parsed::Command { consumed } => (
                        consumed,
                        args.iter()
                            .map(|r| Bytes::copy_from_slice(&primary.buf[used + r.start..used + r.end]))
                            .collect(),
                    ),
                    Parsed::Inline { consumed, args } => {
                        (consumed, args.into_iter().map(Bytes::from).collect())
                    }
                };
                if master.client.info.killed.load(Relaxed) {
                    // CLIENT KILL TYPE master: this command is not applied, the next link
                    // asks for it again.
                    return Err("the master client was killed".to_string());
                }
                if is_getack(&argv) {
                    // The acknowledged offset does not count the GETACK itself, as Redis'.
                    primary.send(&[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])?;
                    last_ack = Some(Instant::now());
                } else if !argv.is_empty() {
                    // A SELECT in a MULTI takes effect with its EXEC, which is the unit's
                    // only write: the database after the last SELECT is right for both.
                    let selected = selected_db(&argv);
                    let file_changes = transaction.take(&argv, state);
                    let after = keeps_position.then(|| {
                        let db = selected.unwrap_or_else(|| state.link.stream_db());
                        let offset = offset + consumed as u64;
                        StreamPosition { replid: replid.clone(), offset, db, file_changes }
                    });
                    if !master.execute(&argv, state, generation, after.as_ref()) {
                        // Another REPLICAOF (a promotion) ended this link: nothing more of
                        // its stream is applied.
                        break;
                    }
                    if let Some(db) = selected {
                        state.link.set_stream_db(db);
                    }
                }
                state.replication.feed_from_primary(&primary.buf[used..used + consumed]);
                offset += consumed as u64;
                used += consumed;
            }
            primary.buf.drain(..used);
            if used > 0 {
                // What the next ACK acknowledges reaches the disk first, as a reply would.
                state.store.persist_written()?;
            }
            if used > 0 || last_io.elapsed() < Duration::from_millis(200) {
                state.link.update(|i| i.last_io = last_io);
            }
        }
    })();
    master.close(state);
    if !state.link.is_replica() {
        // Promoted: its own writes are not the primary's stream (REPLICAOF NO ONE forgot
        // the position; a command applied meanwhile may have stored it again).
        state.store.stamp_writes(None);
        if let Err(e) = state.store.set_position(None) {
            crate::log::warning!("Cannot forget the replication position: {e}");
        }
    }
    result
}

/// The SWAPDB and FUNCTION commands of the stream's open `MULTI`: their changes are kept in
/// files beside the data, written after the batch of the transaction's keys.
#[derive(Default)]
struct Transaction {
    open: bool,
    file_commands: Vec<Vec<Bytes>>,
}

impl Transaction {
    /// Follows the stream's next command; at the `EXEC` of a transaction that changes the
    /// files, what they hold now and the commands that change them.
    fn take(&mut self, argv: &[Bytes], state: &State) -> Option<FileChanges> {
        let name = argv[0].to_ascii_lowercase();
        match name.as_slice() {
            b"multi" => {
                self.open = true;
                self.file_commands.clear();
            }
            b"swapdb" | b"function" if self.open => self.file_commands.push(argv.to_vec()),
            b"exec" | b"discard" => {
                let commands = std::mem::take(&mut self.file_commands);
                let exec = name == b"exec" && std::mem::take(&mut self.open);
                self.open = false;
                return (exec && !commands.is_empty()).then(|| FileChanges {
                    commands,
                    db_slots: state.engine.db_slots(),
                    functions: state.scripts.dump_codes(),
                });
            }
            _ => {}
        }
        None
    }
}

/// A restarted replica whose store's last batch is a transaction's that also changes the
/// files beside the data ([`FileChanges`]), with no file written after it: the process may
/// have stopped between that batch and the files. Puts SWAPDB's mapping and the function
/// libraries back as they were before the transaction, runs its SWAPDB and FUNCTION
/// commands again and saves the files at its position: the data then holds the whole
/// transaction, and the stream continues after it.
///
/// # Errors
/// A file could not be saved, or the stored state does not load.
pub fn settle_file_changes(state: &State) -> Result<(), String> {
    let Some(at) = state.store.unsettled_position() else { return Ok(()) };
    let Some(changes) = &at.file_changes else { return Ok(()) };
    let engine = &state.engine;
    if !engine.restore_db_slots(&changes.db_slots) {
        return Err("the SWAPDB mapping stored with the transaction is corrupt".into());
    }
    state.scripts.replace_codes(&changes.functions)?;
    let mut session = engine.session();
    for command in &changes.commands {
        let reply = if command[0].eq_ignore_ascii_case(b"function") {
            crate::scripting::function_command(command, &state.scripts, &|_| {})
        } else {
            engine.execute(&mut session, command)
        };
        if let rediskv::Reply::Error(e) = reply {
            crate::log::warning!("A command of the stored transaction fails again: {e}");
        }
    }
    // The files at the transaction's position, then that position without the changes: a
    // stop between the two settles again, to the same files.
    state.store.stamp_writes(Some(&at.plain()));
    let ns = String::from_utf8_lossy(engine.layout().namespace()).into_owned();
    state
        .store
        .save_db_slots(&ns, &engine.db_slots())
        .and_then(|()| state.store.save_functions(&state.scripts.dump_codes()))
        .map_err(|e| format!("cannot save the transaction's files: {e}"))?;
    state.store.store_position(Some(&at.plain()))?;
    state.store.stamp_writes(None);
    Ok(())
}

/// The database `SELECT db` selects.
fn selected_db(argv: &[Bytes]) -> Option<usize> {
    match argv {
        [name, db] if name.eq_ignore_ascii_case(b"select") => std::str::from_utf8(db).ok()?.parse().ok(),
        _ => None,
    }
}

fn is_getack(argv: &[Bytes]) -> bool {
    argv.len() >= 2 && argv[0].eq_ignore_ascii_case(b"replconf") && argv[1].eq_ignore_ascii_case(b"getack")
}

/// The client the primary's commands run as: flagged `M`, no replies, not subject to
/// the read-only gate or ACLs.
struct MasterClient {
    client: Client,
    out: Vec<u8>,
}

impl MasterClient {
    fn new(state: &State, primary: &PrimarySocket) -> Self {
        let addr = primary.stream.tcp().peer_addr().map(|a| a.to_string()).unwrap_or_default();
        let laddr = primary.stream.tcp().local_addr().map(|a| a.to_string()).unwrap_or_default();
        // Counted as a connection, so that closing it uncounts it.
        state.connections.fetch_add(1, Relaxed);
        let fd = {
            use std::os::fd::AsRawFd;
            i64::from(primary.stream.tcp().as_raw_fd())
        };
        // Its counters go in the lane of the threads that are no event loop.
        let info = state.connect(addr, laddr, fd, usize::MAX, usize::MAX);
        info.master.store(true, Relaxed);
        MasterClient { client: Client::master(info, state), out: Vec::new() }
    }

    /// Applies `argv` (its writes stamped with the stream position `after`, when the store
    /// keeps it) unless another REPLICAOF ended the link of `generation`: false then, and
    /// nothing is applied.
    fn execute(
        &mut self,
        argv: &[Bytes],
        state: &State,
        generation: u64,
        after: Option<&StreamPosition>,
    ) -> bool {
        loop {
            let next = {
                let Some(_applying) = state.link.applying(generation) else { return false };
                if after.is_some() {
                    state.store.stamp_writes(after);
                }
                self.client.execute(argv, state, &mut self.out)
            };
            self.out.clear();
            if next != Next::Wait {
                return true;
            }
            // A CLIENT PAUSE holds it: the stream waits, in order (REPLICAOF does not).
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn close(mut self, state: &State) {
        self.client.close(state);
        state.disconnect(self.client.info.id);
    }
}
