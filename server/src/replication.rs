//! Redis' replication protocol. This module is the primary's side: the replication stream
//! and its backlog, the replicas fed from it, and the answers to PSYNC, SYNC, REPLCONF,
//! WAIT and ROLE, and what a replica's link reports ([`LinkStatus`]); `replica.rs` runs
//! the replica's side (REPLICAOF).
//!
//! The stream is fed by the engine ([`rediskv::server::Propagation`]): each commit's
//! effects arrive while the commit's key locks are held, and are appended under the
//! backlog's lock, so two commits on one key are in the stream in their commit order, and
//! an EXEC or a script is one MULTI/EXEC unit. Nothing is kept before the first replica
//! asks for a sync, as Redis creates its backlog then.
//!
//! A full sync takes the keyspace-wide lock: the offset it announces and the snapshot it
//! sends are the same instant, and the replica is fed every byte after it. A replica is an
//! ordinary connection of an event loop: the stream reaches it through the loop's mailbox,
//! so its socket is handled where every other client's is.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::{Propagated, Propagation};

use crate::client_info::ClientInfo;
use crate::mailbox::{Mailbox, Message};
use crate::sync::lock;

/// The error of a write refused for want of good replicas, as Redis words it.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";

/// The replication state of this server: its id and offset, the backlog, its replicas.
pub struct Replication {
    /// Whether the stream is kept (the backlog exists).
    active: AtomicBool,
    /// A replica's stream is its primary's, proxied: its own commands add nothing.
    proxying: AtomicBool,
    /// `min-replicas-to-write` and `min-replicas-max-lag`.
    min_replicas: std::sync::atomic::AtomicU64,
    min_replicas_lag: std::sync::atomic::AtomicU64,
    /// INFO stats' `sync_full`, `sync_partial_ok`, `sync_partial_err`.
    syncs: [std::sync::atomic::AtomicU64; 3],
    inner: Mutex<Inner>,
}

struct Inner {
    replid: String,
    /// The previous replication id, valid up to `second_offset` (after a promotion).
    replid2: String,
    second_offset: i64,
    /// `master_repl_offset`: the offset of the last byte of the stream.
    offset: u64,
    /// The last bytes of the stream, up to `backlog_size`; its first is at
    /// `offset - backlog.len() + 1`.
    backlog: VecDeque<u8>,
    backlog_size: usize,
    /// The database the stream selected last (`None`: the next command selects its own).
    selected: Option<usize>,
    /// `client-output-buffer-limit replica`, for the stream held during a full sync.
    limit: crate::config::OutputLimit,
    replicas: Vec<Replica>,
    waiters: Vec<Waiter>,
}

/// A connected replica, fed the stream.
struct Replica {
    client: Arc<ClientInfo>,
    mailbox: Arc<Mailbox>,
    /// Its announced address (REPLCONF ip-address / listening-port).
    ip: String,
    port: u16,
    /// The offset it last acknowledged, and when.
    ack: u64,
    ack_at: Instant,
    /// It acknowledged since it registered: it holds the stream up to `ack` (a replica in
    /// a full sync holds nothing until it has loaded the payload and acknowledges).
    acked: bool,
    /// While its full sync's payload is being written: the stream since the snapshot, sent
    /// after the payload.
    held: Option<Vec<u8>>,
    /// Since when `held` is past the soft output limit.
    over_soft_since: Option<Instant>,
}

/// A client in WAIT: answered when `wanted` replicas acknowledged `target`.
struct Waiter {
    client: Arc<ClientInfo>,
    target: u64,
    wanted: usize,
}

/// Where a replica stands in its primary's stream: the replication id, the offset of the
/// last byte applied, and the database the stream selected last. A disk store keeps it in
/// the batch of every write the stream makes ([`crate::store::Store::stamp_writes`]), so a
/// restarted replica asks to continue from exactly what its data holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamPosition {
    /// The primary's replication id.
    pub replid: String,
    /// The offset of the last byte applied.
    pub offset: u64,
    /// The database the stream selected last.
    pub db: usize,
    /// The transaction ending here changes the files beside the data as well as keys.
    pub file_changes: Option<FileChanges>,
}

/// What a transaction of the stream (`MULTI … EXEC`) changes in the files a replica keeps
/// beside the data (SWAPDB's mapping, the function libraries), with what they held before
/// it. Its position carries them in the batch of the transaction's keys: a replica stopped
/// after that batch and before the files are written puts the files back as they were and
/// runs these commands again ([`crate::replica::settle_file_changes`]), so the transaction
/// is whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChanges {
    /// The transaction's SWAPDB and FUNCTION commands, in order.
    pub commands: Vec<Vec<Bytes>>,
    /// The database → namespace slot mapping before them.
    pub db_slots: Vec<usize>,
    /// The function libraries' code before them.
    pub functions: Vec<String>,
}

impl StreamPosition {
    /// The position without its file changes: what the files beside the data record.
    pub fn plain(&self) -> StreamPosition {
        StreamPosition { file_changes: None, ..self.clone() }
    }
}

impl std::fmt::Display for StreamPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.replid, self.offset, self.db)?;
        if let Some(changes) = &self.file_changes {
            // RESP arrays (the mapping, the libraries, then the commands), in hex: one word.
            let mut out = Vec::new();
            let slots: Vec<String> = changes.db_slots.iter().map(usize::to_string).collect();
            encode(&mut out, std::iter::once(&b"slots"[..]).chain(slots.iter().map(|s| s.as_bytes())));
            encode(
                &mut out,
                std::iter::once(&b"functions"[..]).chain(changes.functions.iter().map(|c| c.as_bytes())),
            );
            for command in &changes.commands {
                encode(&mut out, command.iter().map(|a| &a[..]));
            }
            write!(f, " ")?;
            for b in out {
                write!(f, "{b:02x}")?;
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for StreamPosition {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let mut words = s.split(' ');
        let replid = words.next().filter(|id| id.len() == 40).ok_or(())?.to_string();
        let offset = words.next().and_then(|o| o.parse().ok()).ok_or(())?;
        let db = words.next().and_then(|d| d.parse().ok()).ok_or(())?;
        let file_changes = match words.next() {
            Some(hex) => Some(parse_file_changes(hex).ok_or(())?),
            None => None,
        };
        Ok(StreamPosition { replid, offset, db, file_changes })
    }
}

/// [`FileChanges`] as [`StreamPosition`]'s text carries them.
fn parse_file_changes(hex: &str) -> Option<FileChanges> {
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect::<Option<_>>()?;
    let mut arrays = Vec::new();
    let (mut used, mut args) = (0, Vec::new());
    while used < bytes.len() {
        match crate::resp::parse(&bytes[used..], &mut args, crate::resp::Limits::default()).ok()? {
            crate::resp::Parsed::Command { consumed } => {
                arrays.push(
                    args.iter()
                        .map(|r| Bytes::copy_from_slice(&bytes[used + r.start..used + r.end]))
                        .collect(),
                );
                used += consumed;
            }
            _ => return None,
        }
    }
    let mut arrays = arrays.into_iter();
    let slots: Vec<Bytes> = arrays.next().filter(|a: &Vec<Bytes>| a.first().is_some_and(|n| n == "slots"))?;
    let functions = arrays.next().filter(|a| a.first().is_some_and(|n| n == "functions"))?;
    Some(FileChanges {
        db_slots: slots[1..]
            .iter()
            .map(|s| std::str::from_utf8(s).ok()?.parse().ok())
            .collect::<Option<_>>()?,
        functions: functions[1..]
            .iter()
            .map(|c| String::from_utf8(c.to_vec()).ok())
            .collect::<Option<_>>()?,
        commands: arrays.collect(),
    })
}

/// How [`Replication::follow`] takes a stream over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// A full sync from the primary.
    Full,
    /// A partial sync from the primary.
    Continue,
    /// This replica became a primary.
    Promoted,
}

/// What a replica says of itself before PSYNC (REPLCONF listening-port, ip-address, capa).
#[derive(Debug, Default, Clone)]
pub struct ReplicaHello {
    /// REPLCONF listening-port.
    pub port: u16,
    /// REPLCONF ip-address.
    pub ip: Option<String>,
    /// REPLCONF capa psync2: it understands `+CONTINUE <replid>`.
    pub psync2: bool,
}

/// A WAIT that is satisfied: the client to resume and its answer.
pub struct Satisfied {
    /// The waiting client.
    pub client: Arc<ClientInfo>,
    /// How many replicas acknowledged its offset.
    pub count: usize,
}

impl Replication {
    /// No stream kept yet, a fresh replication id.
    pub fn new() -> Self {
        Replication {
            active: AtomicBool::new(false),
            proxying: AtomicBool::new(false),
            min_replicas: Default::default(),
            min_replicas_lag: Default::default(),
            syncs: Default::default(),
            inner: Mutex::new(Inner {
                replid: new_replid(),
                replid2: "0".repeat(40),
                second_offset: -1,
                offset: 0,
                backlog: VecDeque::new(),
                backlog_size: 1 << 20,
                selected: None,
                limit: Default::default(),
                replicas: Vec::new(),
                waiters: Vec::new(),
            }),
        }
    }

    /// Whether the stream is kept (the backlog exists).
    pub fn keeps_stream(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// While on, the server's own commands are not propagated: its stream is its
    /// primary's ([`Replication::feed_from_primary`]).
    pub fn set_proxying(&self, on: bool) {
        self.proxying.store(on, Relaxed);
    }

    /// Takes `repl-backlog-size` (the backlog drops its oldest bytes past it),
    /// `client-output-buffer-limit replica`, `min-replicas-to-write` and
    /// `min-replicas-max-lag`.
    pub fn configure(&self, config: &crate::config::Config) {
        let mut inner = lock(&self.inner);
        inner.backlog_size = config.number("repl-backlog-size").max(1) as usize;
        inner.limit = config.output_limit("replica");
        inner.trim();
        drop(inner);
        self.min_replicas.store(config.number("min-replicas-to-write").max(0) as u64, Relaxed);
        self.min_replicas_lag.store(config.number("min-replicas-max-lag").max(0) as u64, Relaxed);
    }

    /// Whether a write must be refused for want of good replicas (`min-replicas-to-write`
    /// replicas that acknowledged within `min-replicas-max-lag` seconds).
    pub fn too_few_replicas(&self) -> bool {
        let wanted = self.min_replicas.load(Relaxed);
        wanted > 0 && (self.good_replicas(self.min_replicas_lag.load(Relaxed)) as u64) < wanted
    }

    /// Appends raw stream bytes that select no database (PING, REPLCONF GETACK), if the
    /// stream is kept.
    pub fn feed_raw(&self, argv: &[&[u8]]) {
        if !self.active() {
            return;
        }
        let mut bytes = Vec::new();
        encode(&mut bytes, argv.iter().copied());
        lock(&self.inner).feed(bytes);
    }

    /// Propagates a command the server runs outside the engine (FLUSHALL, FUNCTION,
    /// PUBLISH…) in database `db`; call it under the locks that order it, if any.
    pub fn propagate_command(&self, db: usize, argv: &[Bytes]) {
        if self.active() {
            self.propagate(vec![Propagated { db, argv: argv.to_vec() }]);
        }
    }

    /// A full sync for a new replica: call it holding the keyspace-wide lock of every
    /// engine. Keeps the stream from now on (a new replication id the first time, as
    /// Redis creates its backlog), registers the replica (every byte after this instant is
    /// held for it until [`Replication::send_payload`]) and returns the id and offset the
    /// snapshot stands for.
    pub fn start_full_sync(
        &self,
        client: &Arc<ClientInfo>,
        mailbox: Arc<Mailbox>,
        hello: &ReplicaHello,
    ) -> (String, u64) {
        let mut inner = lock(&self.inner);
        if !self.active.load(Relaxed) {
            inner.replid = new_replid();
            inner.replid2 = "0".repeat(40);
            inner.second_offset = -1;
            self.active.store(true, Relaxed);
        }
        // The replica's stream starts with a SELECT (it loads the snapshot in database 0).
        inner.selected = None;
        self.syncs[0].fetch_add(1, Relaxed);
        inner.register(client, mailbox, hello, Some(Vec::new()));
        (inner.replid.clone(), inner.offset)
    }

    /// A partial sync (`PSYNC replid offset`): the stream from `offset` if the backlog still
    /// holds it and `replid` is this stream's (or the previous one's, up to where it ended).
    /// Registers the replica and returns its answer line and the bytes that follow; `None`:
    /// a full sync is needed.
    pub fn try_partial_sync(
        &self,
        replid: &[u8],
        offset: u64,
        client: &Arc<ClientInfo>,
        mailbox: Arc<Mailbox>,
        hello: &ReplicaHello,
    ) -> Option<(String, Vec<u8>)> {
        let mut inner = lock(&self.inner);
        if !self.active.load(Relaxed) {
            self.syncs[2].fetch_add(1, Relaxed);
            return None;
        }
        let ours = replid == inner.replid.as_bytes();
        let previous = replid == inner.replid2.as_bytes() && offset as i64 <= inner.second_offset;
        let first = inner.offset + 1 - inner.backlog.len() as u64;
        if !(ours || previous) || offset < first || offset > inner.offset + 1 {
            self.syncs[2].fetch_add(1, Relaxed);
            return None;
        }
        self.syncs[1].fetch_add(1, Relaxed);
        let skip = (offset - first) as usize;
        let bytes: Vec<u8> = inner.backlog.iter().skip(skip).copied().collect();
        inner.register(client, mailbox, hello, None);
        let line = if hello.psync2 { format!("CONTINUE {}", inner.replid) } else { "CONTINUE".to_string() };
        Some((line, bytes))
    }

    /// Sends replica `client` its full sync's `payload`, then the stream held for it since
    /// the snapshot; from now on it is fed as the stream comes. Nothing if it is gone.
    pub fn send_payload(&self, client: u64, payload: Vec<u8>) {
        let mut inner = lock(&self.inner);
        let Some(r) = inner.replicas.iter_mut().find(|r| r.client.id == client) else { return };
        let token = r.client.token;
        r.mailbox.send(Message::Payload { token, client, bytes: payload });
        let held = r.held.take().unwrap_or_default();
        r.client.held.store(0, Relaxed);
        r.mailbox.send(Message::Deliver { token, client, bytes: held });
    }

    /// A newline for replica `client` while its payload is being written (Redis' keepalive
    /// before a payload, which a replica skips); whether it is still waiting for one.
    pub fn keep_alive(&self, client: u64) -> bool {
        let inner = lock(&self.inner);
        let Some(r) = inner.replicas.iter().find(|r| r.client.id == client && r.held.is_some()) else {
            return false;
        };
        r.mailbox.send(Message::Deliver { token: r.client.token, client, bytes: b"\n".to_vec() });
        true
    }

    /// Drops replica `client`, whose payload could not be written: its connection closes.
    pub fn fail_full_sync(&self, client: u64) {
        let mut inner = lock(&self.inner);
        if let Some(at) = inner.replicas.iter().position(|r| r.client.id == client) {
            let r = inner.replicas.remove(at);
            r.client.killed.store(true, Relaxed);
            r.mailbox.send(Message::Kick);
        }
    }

    /// How many full syncs, partial syncs and refused partial syncs replicas had.
    pub fn sync_counts(&self) -> [u64; 3] {
        self.syncs.each_ref().map(|n| n.load(Relaxed))
    }

    /// REPLCONF ACK from replica `client`: its acknowledged offset. Returns the WAITs it
    /// satisfies (their clients are no longer waiting).
    pub fn ack(&self, client: u64, offset: u64) -> Vec<Satisfied> {
        let mut inner = lock(&self.inner);
        if let Some(r) = inner.replicas.iter_mut().find(|r| r.client.id == client) {
            r.ack = r.ack.max(offset);
            r.ack_at = Instant::now();
            r.acked = true;
        }
        let mut satisfied = Vec::new();
        let mut i = 0;
        while i < inner.waiters.len() {
            let count = inner.acked(inner.waiters[i].target);
            if count >= inner.waiters[i].wanted {
                let w = inner.waiters.remove(i);
                satisfied.push(Satisfied { client: w.client, count });
            } else {
                i += 1;
            }
        }
        satisfied
    }

    /// WAIT: how many replicas acknowledged the stream up to now, and the offset now.
    pub fn acked_now(&self) -> (usize, u64) {
        let inner = lock(&self.inner);
        (inner.acked(inner.offset), inner.offset)
    }

    /// Registers a WAIT until `wanted` replicas acknowledged `target`, and asks the
    /// replicas for their offsets.
    pub fn add_waiter(&self, client: Arc<ClientInfo>, target: u64, wanted: usize) {
        lock(&self.inner).waiters.push(Waiter { client, target, wanted });
        self.feed_raw(&[b"REPLCONF", b"GETACK", b"*"]);
    }

    /// A WAIT that timed out: how many replicas acknowledged its offset (`None`: `client`
    /// was not in WAIT).
    pub fn end_wait(&self, client: u64) -> Option<usize> {
        let mut inner = lock(&self.inner);
        let at = inner.waiters.iter().position(|w| w.client.id == client)?;
        let w = inner.waiters.remove(at);
        Some(inner.acked(w.target))
    }

    /// The bytes of the backlog, and those of the replicas' output (INFO memory).
    pub fn memory(&self) -> (u64, u64) {
        let inner = lock(&self.inner);
        let replicas = inner.replicas.iter().map(|r| r.client.output_bytes() as u64).sum();
        (inner.backlog.len() as u64, replicas)
    }

    /// Forgets a client that closed (a replica, or a client in WAIT).
    pub fn remove(&self, client: u64) {
        let mut inner = lock(&self.inner);
        inner.replicas.retain(|r| r.client.id != client);
        inner.waiters.retain(|w| w.client.id != client);
    }

    /// How many replicas acknowledged within `max_lag` seconds (`min-replicas-max-lag`).
    pub fn good_replicas(&self, max_lag: u64) -> usize {
        let inner = lock(&self.inner);
        inner.replicas.iter().filter(|r| r.ack_at.elapsed().as_secs() <= max_lag).count()
    }

    /// Whether a replica announced as `host:port` is connected.
    pub fn has_replica(&self, host: &str, port: u16) -> bool {
        let inner = lock(&self.inner);
        inner.replicas.iter().any(|r| r.ip.eq_ignore_ascii_case(host) && r.port == port)
    }

    /// The offset the replica announced as `host:port` acknowledged, if it is connected and
    /// acknowledged since.
    pub fn acked_by(&self, host: &str, port: u16) -> Option<u64> {
        let inner = lock(&self.inner);
        inner
            .replicas
            .iter()
            .find(|r| r.acked && r.ip.eq_ignore_ascii_case(host) && r.port == port)
            .map(|r| r.ack)
    }

    /// The address of a replica that acknowledged `offset`, if any.
    pub fn replica_acked(&self, offset: u64) -> Option<(String, u16)> {
        let inner = lock(&self.inner);
        inner.replicas.iter().find(|r| r.acked && r.ack == offset).map(|r| (r.ip.clone(), r.port))
    }

    /// Whether any replica is connected.
    pub fn has_replicas(&self) -> bool {
        !lock(&self.inner).replicas.is_empty()
    }

    /// The replication id and offset (`master_replid`, `master_repl_offset`).
    pub fn id_and_offset(&self) -> (String, u64) {
        let inner = lock(&self.inner);
        (inner.replid.clone(), inner.offset)
    }

    /// Takes over the stream of the primary this server replicates (`Sync::Full`,
    /// `Sync::Continue`), or keeps its own after a promotion (`Sync::Promoted`, REPLICAOF NO
    /// ONE): `replid` at `offset`. When the id changes on a continue or a promotion, the old
    /// one stays valid up to `offset` (`master_replid2`, `second_repl_offset`), so replicas
    /// that followed it can continue from here.
    pub fn follow(&self, replid: &str, offset: u64, how: Sync) {
        let mut inner = lock(&self.inner);
        let previous = |inner: &mut Inner, new: String| {
            inner.replid2 = std::mem::replace(&mut inner.replid, new);
            inner.second_offset = offset as i64 + 1;
        };
        match how {
            Sync::Full => {
                inner.replid = replid.to_string();
                inner.replid2 = "0".repeat(40);
                inner.second_offset = -1;
                inner.backlog.clear();
            }
            Sync::Continue if inner.replid != replid => previous(&mut inner, replid.to_string()),
            Sync::Continue => {}
            Sync::Promoted => previous(&mut inner, new_replid()),
        }
        inner.offset = offset;
        inner.selected = None;
        self.proxying.store(how != Sync::Promoted, Relaxed);
        self.active.store(true, Relaxed);
    }

    /// Appends bytes a primary sent (this server as a replica): they are this server's
    /// stream too, for its own replicas, with the primary's offsets.
    pub fn feed_from_primary(&self, bytes: &[u8]) {
        let mut inner = lock(&self.inner);
        // The primary's SELECTs are in the bytes: the next own command selects again.
        inner.selected = None;
        inner.feed(bytes.to_vec());
    }

    /// INFO replication's fields after `role`, for a primary (or a replica's own
    /// replicas and backlog).
    pub fn info_fields(&self, backlog_size: &str, failover: &str) -> Vec<(String, String)> {
        let inner = lock(&self.inner);
        let mut out = vec![("connected_slaves".to_string(), inner.replicas.len().to_string())];
        for (i, r) in inner.replicas.iter().enumerate() {
            out.push((
                format!("slave{i}"),
                format!(
                    "ip={},port={},state={},offset={},lag={}",
                    r.ip,
                    r.port,
                    if r.held.is_some() { "wait_bgsave" } else { "online" },
                    r.ack,
                    r.ack_at.elapsed().as_secs()
                ),
            ));
        }
        let active = self.active.load(Relaxed);
        let histlen = inner.backlog.len() as u64;
        let first = if active { inner.offset + 1 - histlen } else { 0 };
        out.extend(
            [
                ("master_failover_state", failover.to_string()),
                ("master_replid", inner.replid.clone()),
                ("master_replid2", inner.replid2.clone()),
                ("master_repl_offset", inner.offset.to_string()),
                ("second_repl_offset", inner.second_offset.to_string()),
                ("repl_backlog_active", u8::from(active).to_string()),
                ("repl_backlog_size", backlog_size.to_string()),
                ("repl_backlog_first_byte_offset", first.to_string()),
                ("repl_backlog_histlen", histlen.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
        );
        out
    }

    /// ROLE's answer for a primary: its offset and each replica's address and offset.
    pub fn role(&self) -> Reply {
        let inner = lock(&self.inner);
        let replicas = inner
            .replicas
            .iter()
            .map(|r| {
                Reply::Array(vec![
                    Reply::Bulk(Bytes::from(r.ip.clone())),
                    Reply::Bulk(Bytes::from(r.port.to_string())),
                    Reply::Bulk(Bytes::from(r.ack.to_string())),
                ])
            })
            .collect();
        Reply::Array(vec![
            Reply::bulk(b"master"),
            Reply::Integer(inner.offset as i64),
            Reply::Array(replicas),
        ])
    }

    /// Closes every replica's connection (a primary turned replica: they sync again).
    pub fn drop_replicas(&self) {
        let replicas = std::mem::take(&mut lock(&self.inner).replicas);
        for r in replicas {
            r.client.killed.store(true, Relaxed);
            r.mailbox.send(Message::Kick);
        }
    }
}

impl Default for Replication {
    fn default() -> Self {
        Self::new()
    }
}

impl Propagation for Replication {
    fn active(&self) -> bool {
        self.active.load(Relaxed) && !self.proxying.load(Relaxed)
    }

    fn propagate(&self, unit: Vec<Propagated>) {
        let mut bytes = Vec::new();
        let mut inner = lock(&self.inner);
        let mut select = |bytes: &mut Vec<u8>, db: usize| {
            if inner.selected != Some(db) {
                encode(bytes, [&b"SELECT"[..], db.to_string().as_bytes()]);
                inner.selected = Some(db);
            }
        };
        let transaction = unit.len() > 1;
        if transaction {
            // In the first command's database, as Redis propagates MULTI.
            select(&mut bytes, unit[0].db);
            encode(&mut bytes, [&b"MULTI"[..]]);
        }
        for command in &unit {
            select(&mut bytes, command.db);
            encode(&mut bytes, command.argv.iter().map(|a| a.as_ref()));
        }
        if transaction {
            encode(&mut bytes, [&b"EXEC"[..]]);
        }
        inner.feed(bytes);
    }
}

impl Inner {
    /// Appends stream bytes: to the backlog and to every replica. A replica whose full
    /// sync holds more than `client-output-buffer-limit replica` allows is dropped (it
    /// connects again and syncs anew), as its connection is when its output grows so.
    fn feed(&mut self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        self.offset += bytes.len() as u64;
        self.backlog.extend(&bytes);
        self.trim();
        let limit = self.limit;
        self.replicas.retain_mut(|r| {
            let Some(held) = &mut r.held else {
                let (token, client) = (r.client.token, r.client.id);
                r.mailbox.send(Message::Deliver { token, client, bytes: bytes.clone() });
                return true;
            };
            held.extend_from_slice(&bytes);
            r.client.held.store(held.len(), Relaxed);
            if !limit.reached(held.len() as u64, &mut r.over_soft_since) {
                return true;
            }
            r.client.log_output_limit();
            r.client.held.store(0, Relaxed);
            r.client.killed.store(true, Relaxed);
            r.mailbox.send(Message::Kick);
            false
        });
    }

    fn trim(&mut self) {
        let excess = self.backlog.len().saturating_sub(self.backlog_size);
        self.backlog.drain(..excess);
    }

    fn register(
        &mut self,
        client: &Arc<ClientInfo>,
        mailbox: Arc<Mailbox>,
        hello: &ReplicaHello,
        held: Option<Vec<u8>>,
    ) {
        self.replicas.retain(|r| r.client.id != client.id);
        let ip = hello.ip.clone().unwrap_or_else(|| {
            client.addr.rsplit_once(':').map_or(client.addr.clone(), |(ip, _)| ip.to_string())
        });
        client.replica.store(true, Relaxed);
        self.replicas.push(Replica {
            client: client.clone(),
            mailbox,
            ip,
            port: hello.port,
            ack: 0,
            ack_at: Instant::now(),
            acked: false,
            held,
            over_soft_since: None,
        });
    }

    /// How many replicas acknowledged `target`.
    fn acked(&self, target: u64) -> usize {
        self.replicas.iter().filter(|r| r.acked && r.ack >= target).count()
    }
}

/// Appends `argv` as a RESP array of bulk strings.
pub fn encode<'a>(out: &mut Vec<u8>, argv: impl IntoIterator<Item = &'a [u8]> + Clone) {
    let n = argv.clone().into_iter().count();
    out.extend_from_slice(format!("*{n}\r\n").as_bytes());
    for a in argv {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// A new replication id: 40 hex digits.
fn new_replid() -> String {
    crate::clock::random_id()
}

/// The replica's side, as the rest of the server sees it: whether this server replicates a
/// primary, and how its link stands (INFO replication, ROLE, the read-only gate).
#[derive(Default)]
pub struct LinkStatus {
    /// REPLICAOF host port is in force.
    replica: AtomicBool,
    /// The link is synced and streaming.
    up: AtomicBool,
    /// The data holds the stream of the primary of this REPLICAOF up to an offset: a sync
    /// with it ended, and no full sync has emptied the data since.
    synced: AtomicBool,
    /// Bumped by every REPLICAOF: a link thread of an older one stops.
    generation: std::sync::atomic::AtomicU64,
    /// Held by the link thread while it applies a command of the stream, and to bump
    /// `generation`: once REPLICAOF returns, no command of the link it ended is applied.
    applying: Mutex<()>,
    /// The database the primary's stream selected last: a link that continues the stream
    /// starts its commands there, as Redis keeps its cached master client's.
    stream_db: std::sync::atomic::AtomicUsize,
    info: Mutex<LinkInfo>,
    /// Starts a link thread for a generation (set once by `main`).
    runner: std::sync::OnceLock<Runner>,
}

/// What starts a replica's link thread, given its generation.
pub type Runner = Box<dyn Fn(u64) + Send + std::marker::Sync>;

/// Where a replica's link stands.
#[derive(Debug, Clone)]
pub struct LinkInfo {
    /// The primary's address.
    pub host: String,
    /// See `host`.
    pub port: u16,
    /// Redis' link state: `connect`, `connecting`, `handshake`, `sync` or `connected`.
    pub state: &'static str,
    /// When the link went down (`None`: up, or never connected).
    pub down_since: Option<Instant>,
    /// When the primary last sent something.
    pub last_io: Instant,
    /// The primary's replication id (empty before a sync).
    pub replid: String,
    /// Bytes of the full sync's payload received so far, and its size when known.
    pub sync_read: u64,
    /// See `sync_read`.
    pub sync_size: Option<u64>,
}

impl Default for LinkInfo {
    fn default() -> Self {
        LinkInfo {
            host: String::new(),
            port: 0,
            state: "connect",
            down_since: None,
            last_io: Instant::now(),
            replid: String::new(),
            sync_read: 0,
            sync_size: None,
        }
    }
}

impl LinkStatus {
    /// Whether this server is a replica.
    pub fn is_replica(&self) -> bool {
        self.replica.load(Relaxed)
    }

    /// Whether the link to the primary is synced and streaming.
    pub fn is_up(&self) -> bool {
        self.up.load(Relaxed)
    }

    /// Whether the data holds the primary's stream up to an offset (its link may be down
    /// since): not before the first sync with it ends, nor while a full sync loads.
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn is_synced(&self) -> bool {
        self.synced.load(Relaxed)
    }

    /// Records whether the data holds the primary's stream ([`LinkStatus::is_synced`]).
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Relaxed);
    }

    /// The database the primary's stream selected last.
    pub fn stream_db(&self) -> usize {
        self.stream_db.load(Relaxed)
    }

    /// Records the database the stream selected (0 after a full sync).
    pub fn set_stream_db(&self, db: usize) {
        self.stream_db.store(db, Relaxed);
    }

    /// Sets what starts a link thread (once; later calls change nothing).
    pub fn set_runner(&self, runner: Runner) {
        let _ = self.runner.set(runner);
    }

    /// Becomes a replica of `host:port` and starts its link thread. The replication id and
    /// offset it had stay, for a partial sync.
    pub fn start(&self, host: &str, port: u16) {
        let generation = self.begin(host, port);
        if let Some(runner) = self.runner.get() {
            runner(generation);
        }
    }

    /// The state change of [`LinkStatus::start`]; returns the link's generation.
    fn begin(&self, host: &str, port: u16) -> u64 {
        let _applying = lock(&self.applying);
        let mut info = lock(&self.info);
        info.host = host.to_string();
        info.port = port;
        info.state = "connect";
        info.down_since = info.down_since.or(Some(Instant::now()));
        self.up.store(false, Relaxed);
        self.synced.store(false, Relaxed);
        self.replica.store(true, Relaxed);
        self.generation.fetch_add(1, Relaxed) + 1
    }

    /// Stops replicating (REPLICAOF NO ONE): the link thread stops.
    pub fn stop(&self) {
        let _applying = lock(&self.applying);
        self.generation.fetch_add(1, Relaxed);
        self.replica.store(false, Relaxed);
        self.up.store(false, Relaxed);
    }

    /// Whether a link thread of `generation` should go on.
    pub fn current(&self, generation: u64) -> bool {
        self.generation.load(Relaxed) == generation
    }

    /// For the link thread of `generation` to apply a command of its stream while it holds
    /// the guard; `None` once another REPLICAOF ended that link.
    pub fn applying(&self, generation: u64) -> Option<std::sync::MutexGuard<'_, ()>> {
        let guard = lock(&self.applying);
        self.current(generation).then_some(guard)
    }

    /// A copy of where the link stands.
    pub fn info(&self) -> LinkInfo {
        lock(&self.info).clone()
    }

    /// Changes where the link stands (from its thread).
    pub fn update(&self, change: impl FnOnce(&mut LinkInfo)) {
        let mut info = lock(&self.info);
        change(&mut info);
        let up = info.state == "connected";
        if up {
            info.down_since = None;
        } else if info.down_since.is_none() {
            info.down_since = Some(Instant::now());
        }
        self.up.store(up, Relaxed);
    }
}

impl LinkStatus {
    /// INFO replication's fields of a replica after `role:slave` (its own replicas'
    /// follow), with the offset applied (the stream's, [`Replication::id_and_offset`]),
    /// `replica-priority`, `replica-read-only` and `replica-announced`.
    pub fn info_fields(
        &self,
        offset: u64,
        priority: &str,
        read_only: bool,
        announced: bool,
    ) -> Vec<(String, String)> {
        let link = self.info();
        let up = self.is_up();
        let mut out: Vec<(String, String)> = vec![
            ("master_host".into(), link.host.clone()),
            ("master_port".into(), link.port.to_string()),
            ("master_link_status".into(), if up { "up" } else { "down" }.into()),
            (
                "master_last_io_seconds_ago".into(),
                if up { link.last_io.elapsed().as_secs().to_string() } else { "-1".into() },
            ),
            ("master_sync_in_progress".into(), u8::from(link.state == "sync").to_string()),
            ("slave_read_repl_offset".into(), offset.to_string()),
            ("slave_repl_offset".into(), offset.to_string()),
        ];
        if link.state == "sync" {
            let total = link.sync_size.map_or(-1, |n| n as i64);
            let left = link.sync_size.map_or(-1, |n| n as i64 - link.sync_read as i64);
            let perc = match link.sync_size {
                Some(n) if n > 0 => link.sync_read as f64 * 100.0 / n as f64,
                _ => 0.0,
            };
            out.extend([
                ("master_sync_total_bytes".into(), total.to_string()),
                ("master_sync_read_bytes".into(), link.sync_read.to_string()),
                ("master_sync_left_bytes".into(), left.to_string()),
                ("master_sync_perc".into(), format!("{perc:.2}")),
                ("master_sync_last_io_seconds_ago".into(), link.last_io.elapsed().as_secs().to_string()),
            ]);
        }
        if !up {
            let since = link.down_since.map_or(-1, |d| d.elapsed().as_secs() as i64);
            out.push(("master_link_down_since_seconds".into(), since.to_string()));
        }
        out.extend([
            ("slave_priority".into(), priority.to_string()),
            ("slave_read_only".into(), u8::from(read_only).to_string()),
            ("replica_announced".into(), u8::from(announced).to_string()),
        ]);
        out
    }

    /// ROLE of a replica: `slave`, the primary's host and port, the link's state, the
    /// offset applied (-1 before a sync).
    pub fn role(&self, offset: u64) -> Reply {
        let link = self.info();
        let offset = if link.replid.is_empty() { -1 } else { offset as i64 };
        Reply::Array(vec![
            Reply::bulk(b"slave"),
            Reply::Bulk(Bytes::from(link.host)),
            Reply::Integer(i64::from(link.port)),
            Reply::bulk(link.state.as_bytes()),
            Reply::Integer(offset),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica whose full sync holds more of the stream than `client-output-buffer-limit
    /// replica` allows is dropped: its connection is kicked, and the stream no longer waits
    /// for it; below the limit the held bytes are its output (CLIENT LIST's `omem`).
    #[test]
    fn a_full_sync_holds_the_stream_up_to_the_replica_limit() {
        let mut config = crate::config::Config::new();
        config.set_one("repl-backlog-size", "1024", true).expect("set");
        config.set_one("client-output-buffer-limit", "replica 4096 0 0", true).expect("set");
        let replication = Replication::new();
        replication.configure(&config);
        let poll = mio::Poll::new().expect("poll");
        let waker = mio::Waker::new(poll.registry(), mio::Token(0)).expect("waker");
        let mailbox = Arc::new(Mailbox::new(waker));
        let lanes = Arc::new(crate::counters::LaneSum::with_lanes(1));
        let client = Arc::new(ClientInfo::new(7, "127.0.0.1:1".into(), String::new(), 0, 0, 0, lanes));
        replication.start_full_sync(&client, mailbox.clone(), &ReplicaHello::default());
        let value = vec![b'v'; 1000];
        replication.feed_raw(&[b"SET", b"k", &value]);
        let held = client.held.load(Relaxed);
        assert!(held > 1000, "{held}");
        assert!(client.line().contains(&format!(" omem={held} ")), "{}", client.line());
        assert_eq!(replication.memory().1, held as u64);
        assert!(!client.killed.load(Relaxed));
        for _ in 0..3 {
            replication.feed_raw(&[b"SET", b"k", &value]);
        }
        assert!(client.killed.load(Relaxed), "dropped past the hard limit");
        assert!(matches!(mailbox.take().as_slice(), [Message::Kick]));
        assert_eq!(replication.memory(), (1024, 0));
        assert!(!replication.keep_alive(7), "no longer a replica waiting for its payload");
    }

    /// The soft limit drops a replica only once it stayed over it for its seconds.
    #[test]
    fn the_soft_limit_waits_its_seconds() {
        let limit = crate::config::OutputLimit { hard: 0, soft: 100, soft_seconds: 0 };
        let mut since = None;
        assert!(!limit.reached(99, &mut since));
        assert!(!limit.reached(100, &mut since), "the first time over it starts the clock");
        since = since.map(|at: Instant| at - std::time::Duration::from_secs(1));
        assert!(limit.reached(100, &mut since));
        assert!(!limit.reached(10, &mut since));
        assert_eq!(since, None);
    }
}
