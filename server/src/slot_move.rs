//! Moving a slot between nodes that keep their data (fjall, RocksDB), after Kvrocks' slot
//! migrator ([`crate::cluster::moves`] holds a node's moves). `CLUSTERX MIGRATE slot node-id`, sent to the slot's owner, starts it on a thread
//! of its own; CLUSTER INFO shows its progress and final counts. The owner (the source):
//!
//! 1. asks the target to import the slot (`CLUSTERX IMPORT slot START`: it drops any keys of
//!    the slot it had) over a RESP connection ([`Link`]: to its TLS port over TLS with
//!    `tls-cluster yes`, authenticated with `masteruser`/`masterauth` when set, as a
//!    replica to its primary; made before CLUSTERX MIGRATE answers, so that a target it
//!    cannot reach or that refuses it fails the command);
//! 2. takes a snapshot of its store while no command runs, and from that instant captures the
//!    replication stream's units that touch the slot ([`Moves`] stands in front of the
//!    replication stream);
//! 3. sends each key of the slot in the snapshot as `RESTORE key ttl payload REPLACE`, 256
//!    to a transaction (`ASKING`, which lets a connection use a slot its node imports,
//!    `MULTI`, …, `EXEC`: one commit on the target), while clients go on reading and writing
//!    the slot on the source;
//! 4. forwards the captured units' commands (in transactions of 256 commands: the target
//!    replays them faster than the source's clients wrote them), round after round, until a
//!    round is short (or ten rounds passed);
//! 5. closes the slot: writes routed to it wait (the event loops hold them back, as for
//!    CLIENT PAUSE), and a commit already routed that comes after is refused by the store
//!    ([`crate::store::ClosedSlot`], answered `-TRYAGAIN`); once the keyspace lock shows
//!    no commit runs, it forwards the last units;
//! 6. gives the slot to the target in etcd's slot table, in a `Txn` compared on the table's
//!    revision and only while the table still names the source (a lost or unknown answer is
//!    read back), takes that table itself, tells the target (`CLUSTERX IMPORT slot END`: it
//!    reads the table) and opens the slot: the writes that waited are answered `-MOVED`;
//! 7. deletes its own copy of the slot's keys.
//!
//! Once the table names the target, the move counts as done: a failure after that (the
//! target's confirmation lost, the deletion failed) is reported in `migrating_error`, and
//! the target keeps its copy.
//!
//! Every write acknowledged on the source before the close is in the snapshot or in a
//! forwarded unit, exactly once (a unit is captured under its commit's key locks, after the
//! snapshot's instant); none is acknowledged between the close and the switch. A move that
//! fails before the switch reopens the slot on the source and drops the target's copy
//! (`CLUSTERX IMPORT slot FAIL`).

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{OnceLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rediskv::KvBackend;
use rediskv::SLOT_COUNT;
use rediskv::server::Propagated;
use rediskv::{Engine, Reply, Session};

use crate::cluster::moves::{Moves, Outgoing};
use crate::cluster::{Cluster, Node, Topology};
use crate::state::State;
use crate::sync::lock;
use crate::tls::Dialed;

/// Commands per transaction sent to the target (keys per round trip of RESTOREs).
const BATCH: usize = 256;
/// A round of captured units this short ends the forwarding before the slot is closed.
const SHORT_ROUND: usize = 64;
/// Rounds of forwarding at most before the slot is closed anyway, as Kvrocks' (a write load
/// as fast as the forwarding never leaves a short round).
const MAX_ROUNDS: usize = 10;

/// The server the moves run in, set at start: a move runs on a thread of its own.
static SERVER: OnceLock<Weak<State>> = OnceLock::new();

/// Gives the moves their server.
pub fn set_server(state: Weak<State>) {
    let _ = SERVER.set(state);
}

/// CLUSTERX MIGRATE and IMPORT.
pub fn clusterx(argv: &[Bytes], state: &State) -> Reply {
    let Some(cluster) = state.cluster.get() else {
        return Reply::Error("ERR This instance has cluster support disabled".into());
    };
    let Some(moves) = cluster.moves.get() else {
        return Reply::Error(
            "ERR slots move with their data only between nodes over fjall or rocksdb with --cluster-etcd"
                .into(),
        );
    };
    let text =
        |i: usize| argv.get(i).map(|a| String::from_utf8_lossy(a).to_ascii_lowercase()).unwrap_or_default();
    let slot = match argv.get(2).and_then(|a| rediskv::server::args::parse_i64(a)) {
        Some(slot) if (0..i64::from(SLOT_COUNT)).contains(&slot) => slot as u16,
        _ if argv.len() == 4 => return Reply::Error("ERR Invalid slot".into()),
        _ => return Reply::Error("ERR wrong number of arguments for 'clusterx' command".into()),
    };
    match (text(1).as_str(), argv.len()) {
        ("migrate", 4) => start_move(cluster, moves, slot, &String::from_utf8_lossy(&argv[3])),
        ("import", 4) => import(state, cluster, moves, slot, &text(3)),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. CLUSTERX takes MIGRATE slot node-id and IMPORT slot START|END|FAIL",
            text(1)
        )),
    }
}

/// Starts the move of `slot` to node `to` for CLUSTER SETSLOT MIGRATING (the moves' start
/// hook, [`Moves::set_start`]).
pub fn start(state: &State, slot: u16, to: &str) -> Reply {
    match state.cluster.get().and_then(|c| Some((c, c.moves.get()?))) {
        Some((cluster, moves)) => start_move(cluster, moves, slot, to),
        None => Reply::Error("ERR This instance has cluster support disabled".into()),
    }
}

/// CLUSTERX MIGRATE: checks and starts the move of `slot` to node `to`.
fn start_move(cluster: &Cluster, moves: &Moves, slot: u16, to: &str) -> Reply {
    if cluster.topology().owner(slot).is_none_or(|n| n.id != cluster.myself.id) {
        return Reply::Error("ERR Can't migrate slot which doesn't belong to me".into());
    }
    if to == cluster.myself.id {
        return Reply::Error("ERR Can't migrate slot to myself".into());
    }
    let Some(target) = cluster.members().into_iter().find(|n| n.id == to) else {
        return Reply::Error(format!("ERR Unknown node {to}"));
    };
    let Some(server) = SERVER.get().and_then(Weak::upgrade) else {
        return Reply::Error("ERR the server is shutting down".into());
    };
    if moves.running.swap(true, SeqCst) {
        return Reply::Error("ERR There is already a migrating job".into());
    }
    let link = match Link::connect(&server, &target) {
        Ok(link) => link,
        Err(e) => {
            moves.running.store(false, SeqCst);
            return Reply::Error(format!("ERR Can't migrate slot {slot} to {to}: {e}"));
        }
    };
    let state = server;
    lock(&moves.report).out =
        Some(Outgoing { slot, to: target.id.clone(), state: "start", ..Outgoing::default() });
    let spawned = std::thread::Builder::new().name("slot-move".into()).spawn(move || {
        let Some(cluster) = state.cluster.get() else { return };
        let Some(moves) = cluster.moves.get() else { return };
        let started = Instant::now();
        crate::log::notice!("Moving slot {slot} to {} ({}:{})", target.id, target.host, target.port);
        match hand_over(&state, cluster, moves, slot, &target, link) {
            Ok((link, closed_at)) => {
                // The slot is the target's: what fails from here on is only reported.
                let after = finish(&state, moves, slot, &target, link, closed_at);
                let total_ms = started.elapsed().as_millis() as u64;
                moves.progress(|o| (o.state, o.total_ms) = ("success", total_ms));
                let report = lock(&moves.report).out.clone().unwrap_or_default();
                crate::log::notice!(
                    "Slot {slot} moved to {}: {} keys copied, {} writes forwarded, {} ms in all, closed to writes {} ms",
                    target.id,
                    report.keys,
                    report.writes,
                    total_ms,
                    report.closed_ms
                );
                if let Err(e) = after {
                    crate::log::warning!("After moving slot {slot}: {e}");
                    moves.progress(|o| o.error = e);
                }
            }
            Err(e) => {
                moves.stop_capture();
                moves.closed.set(None);
                let _ = Link::connect(&state, &target)
                    .and_then(|mut link| link.send(&[import_command(slot, "FAIL")]));
                crate::log::warning!("Moving slot {slot} to {} failed: {e}", target.id);
                let total_ms = started.elapsed().as_millis() as u64;
                moves.progress(|o| (o.state, o.total_ms, o.error) = ("fail", total_ms, e));
            }
        }
        moves.running.store(false, SeqCst);
    });
    if spawned.is_err() {
        moves.running.store(false, SeqCst);
        return Reply::Error("ERR cannot start the move's thread".into());
    }
    Reply::OK
}

fn import_command(slot: u16, step: &str) -> Vec<Bytes> {
    ["CLUSTERX", "IMPORT", &slot.to_string(), step]
        .iter()
        .map(|a| Bytes::copy_from_slice(a.as_bytes()))
        .collect()
}

/// Steps 1 to 6 of the module's description, up to the switch in etcd: answers the link to
/// the target and when the slot was closed (the table names the target now).
fn hand_over(
    state: &State,
    cluster: &Cluster,
    moves: &Moves,
    slot: u16,
    target: &Node,
    mut link: Link,
) -> Result<(Link, Instant), String> {
    link.send(&[import_command(slot, "START")])?;
    let (snapshot, ()) = crate::rdb::snapshot_at(state, || moves.capture(slot))?;
    let engine = snapshot.engine()?;
    let mut session = Session::new(0);
    let mut batch: Vec<Vec<Bytes>> = Vec::new();
    let mut copied = 0u64;
    for_keys_in_slot(&engine, slot, &mut |key| {
        let payload = match engine.execute(&mut session, &[Bytes::from_static(b"DUMP"), key.clone()]) {
            Reply::Bulk(payload) => payload,
            _ => return Ok(()), // expired since
        };
        let ttl = match engine.execute(&mut session, &[Bytes::from_static(b"PTTL"), key.clone()]) {
            Reply::Integer(ms) if ms > 0 => ms,
            _ => 0,
        };
        batch.push(vec![
            Bytes::from_static(b"RESTORE"),
            key,
            Bytes::from(ttl.to_string()),
            payload,
            Bytes::from_static(b"REPLACE"),
        ]);
        if batch.len() >= BATCH {
            copied += batch.len() as u64;
            link.send(&transactions(std::mem::take(&mut batch)))?;
            moves.progress(|o| o.keys = copied);
        }
        Ok(())
    })?;
    copied += batch.len() as u64;
    link.send(&transactions(batch))?;
    moves.progress(|o| o.keys = copied);
    drop(snapshot);
    let mut forwarded = 0;
    let mut forward = |link: &mut Link, units: Vec<Vec<Propagated>>| -> Result<(), String> {
        forwarded += units.len() as u64;
        link.send(&transactions(units.into_iter().flatten().map(|c| c.argv).collect()))?;
        moves.progress(|o| o.writes = forwarded);
        Ok(())
    };
    for _ in 0..MAX_ROUNDS {
        let units = moves.take();
        let short = units.len() < SHORT_ROUND;
        forward(&mut link, units)?;
        if short {
            break;
        }
    }
    let closed_at = Instant::now();
    moves.closed.set(Some(slot));
    // A commit routed before the close and holding its locks ends first; any later one of
    // the slot is refused by the store.
    drop(state.engine.locks().lock(true, std::iter::empty()));
    forward(&mut link, moves.stop_capture())?;
    let table = give(cluster, slot, target)?;
    // This node's own view first: the slot is never open here under the old table.
    cluster.set_topology(table);
    Ok((link, closed_at))
}

/// The end of step 6 and step 7, once the table names the target: tells it, opens the slot
/// (its waiting writes are redirected) and deletes this node's copy.
fn finish(
    state: &State,
    moves: &Moves,
    slot: u16,
    target: &Node,
    mut link: Link,
    closed_at: Instant,
) -> Result<(), String> {
    let told = link.send(&[import_command(slot, "END")]);
    moves.closed.set(None);
    moves.progress(|o| o.closed_ms = closed_at.elapsed().as_millis() as u64);
    let deleted = delete_slot(&state.engine, slot);
    if let Ok(deleted) = deleted {
        moves.progress(|o| o.deleted = deleted);
    }
    told.map_err(|e| format!("{} did not confirm it took the slot: {e}", target.id))?;
    deleted.map(|_| ()).map_err(|e| format!("this node's copy of the slot was not deleted: {e}"))
}

/// `commands` as transactions of up to [`BATCH`] commands, each `ASKING`, `MULTI`, the
/// commands, `EXEC` (ASKING holds until EXEC): the target applies each as one commit, in
/// order.
fn transactions(commands: Vec<Vec<Bytes>>) -> Vec<Vec<Bytes>> {
    let word = |w: &'static [u8]| vec![Bytes::from_static(w)];
    let mut out = Vec::with_capacity(commands.len() + 3 * commands.len().div_ceil(BATCH));
    let mut commands = commands.into_iter().peekable();
    while commands.peek().is_some() {
        out.extend([word(b"ASKING"), word(b"MULTI")]);
        out.extend(commands.by_ref().take(BATCH));
        out.push(word(b"EXEC"));
    }
    out
}

/// Gives `slot` to `target` in etcd's table, while the table names this node its owner;
/// answers the table that does. An answer lost on the way is read back from the table.
fn give(cluster: &Cluster, slot: u16, target: &Node) -> Result<Topology, String> {
    let etcd = cluster.etcd.get().ok_or("no etcd to keep the slot table")?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let records = match etcd.cluster_records() {
            Ok(records) => records,
            Err(e) if Instant::now() < deadline => {
                crate::log::warning!(
                    "Cannot read the slot table to give slot {slot} away ({e}): trying again"
                );
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            Err(e) => return Err(e.to_string()),
        };
        let current = Topology::decode(records.table.as_deref().unwrap_or_default(), records.table_revision);
        match current.owner(slot) {
            Some(owner) if owner.id == target.id => return Ok(current),
            Some(owner) if owner.id == cluster.myself.id => {}
            _ => return Err(format!("slot {slot} is no longer this node's in the slot table")),
        }
        let next = current.with_owner(slot, target);
        match etcd.cluster_swap_table(current.revision, &next.encode()) {
            Ok(true) => return Ok(next),
            Ok(false) => {}
            Err(e) => crate::log::warning!("Giving slot {slot} away: {e}; reading the table again"),
        }
    }
}

/// CLUSTERX IMPORT slot START|END|FAIL, on the target.
fn import(state: &State, cluster: &Cluster, moves: &Moves, slot: u16, step: &str) -> Reply {
    let mine = cluster.topology().owner(slot).is_some_and(|n| n.id == cluster.myself.id);
    match step {
        "start" if mine => Reply::Error(format!("ERR slot {slot} is this node's already")),
        "start" | "fail" => {
            // Keys of the slot left by a move that did not end go first.
            if let Err(e) = delete_slot(&state.engine, slot) {
                return Reply::Error(format!("ERR {e}"));
            }
            let start = step == "start";
            *lock(&moves.importing) = start.then_some(slot);
            lock(&moves.report).import = Some((slot, if start { "start" } else { "fail" }));
            Reply::OK
        }
        "end" => {
            if let Some(etcd) = cluster.etcd.get()
                && let Err(e) = crate::cluster::membership::follow(cluster, etcd)
            {
                return Reply::Error(format!("ERR cannot read the slot table: {e}"));
            }
            *lock(&moves.importing) = None;
            lock(&moves.report).import = Some((slot, "success"));
            Reply::OK
        }
        _ => Reply::Error("ERR CLUSTERX IMPORT takes START, END or FAIL".into()),
    }
}

/// Calls `each` with every live key of database 0 in `slot`: a scan of the slot's own range
/// when the layout writes slots into its keys (a cluster node on Kvrocks' layout), else a walk
/// of every key.
fn for_keys_in_slot<B: KvBackend>(
    engine: &Engine<B>,
    slot: u16,
    each: &mut dyn FnMut(Bytes) -> Result<(), String>,
) -> Result<(), String> {
    let mut outcome = Ok(());
    engine
        .db(&Session::new(0))
        .walk_slot(slot, |key| {
            outcome = each(Bytes::copy_from_slice(key));
            outcome.is_ok()
        })
        .map_err(|e| e.to_string())?;
    outcome
}

/// Deletes every key of `slot`; answers how many.
fn delete_slot<B: KvBackend>(engine: &Engine<B>, slot: u16) -> Result<u64, String> {
    let mut keys = Vec::new();
    for_keys_in_slot(engine, slot, &mut |key| {
        keys.push(key);
        Ok(())
    })?;
    let mut session = Session::new(0);
    let mut deleted = 0;
    for chunk in keys.chunks(BATCH) {
        let mut argv = vec![Bytes::from_static(b"DEL")];
        argv.extend(chunk.iter().cloned());
        match engine.execute(&mut session, &argv) {
            Reply::Integer(n) => deleted += n as u64,
            other => return Err(format!("DEL answered {other:?}")),
        }
    }
    Ok(deleted)
}

/// A RESP connection to another node: over TLS to its TLS port with `tls-cluster yes`,
/// authenticated as a replica to its primary (`masteruser`/`masterauth`).
struct Link {
    stream: BufReader<Dialed>,
}

impl Link {
    /// Dials `node` and checks it takes commands (AUTH, then PING).
    fn connect(state: &State, node: &Node) -> Result<Link, String> {
        let (tls_cluster, auth) = {
            let config = state.config();
            (config.get("tls-cluster") == "yes", config.link_auth())
        };
        let (port, tls) = if tls_cluster {
            let tls = state.tls.client().ok_or("tls-cluster is yes, but TLS is not configured")?;
            (node.tls_port, Some(tls))
        } else {
            (node.port, None)
        };
        if port == 0 {
            let which = if tls_cluster { "TLS" } else { "plaintext" };
            return Err(format!("{} has no {which} port", node.id));
        }
        // Answers within seconds, or the command that asked (CLUSTERX MIGRATE) fails.
        let stream = Dialed::dial(&node.host, port, Duration::from_secs(5), tls)?;
        let mut link = Link { stream: BufReader::new(stream) };
        let word = |w: &str| Bytes::copy_from_slice(w.as_bytes());
        let mut hello: Vec<Vec<Bytes>> =
            auth.into_iter().map(|a| a.iter().map(|w| word(w)).collect()).collect();
        hello.push(vec![word("PING")]);
        link.send(&hello)?;
        // Over a round of RESTOREs the target may take a while: reads and writes wait for it.
        let tcp = link.stream.get_ref().tcp();
        let long = Some(Duration::from_secs(60));
        tcp.set_read_timeout(long).and_then(|()| tcp.set_write_timeout(long)).map_err(|e| e.to_string())?;
        Ok(link)
    }

    /// Sends `commands` in one write and reads their replies: the first error reply fails.
    fn send(&mut self, commands: &[Vec<Bytes>]) -> Result<(), String> {
        let mut bytes = Vec::new();
        for argv in commands {
            crate::replication::encode(&mut bytes, argv.iter().map(|a| a.as_ref()));
        }
        self.stream.get_mut().write_all(&bytes).map_err(|e| format!("cannot send to the target: {e}"))?;
        let mut failure = None;
        for argv in commands {
            if let Some(e) = self.read_reply()?
                && failure.is_none()
            {
                let name = String::from_utf8_lossy(argv.first().map_or(&[][..], |a| a));
                failure = Some(format!("the target answered {name} with {e}"));
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// Reads one reply: `Some(error)` for an error reply (or one inside an array).
    fn read_reply(&mut self) -> Result<Option<String>, String> {
        let lost = |e: std::io::Error| format!("lost the target's answer: {e}");
        let mut line = String::new();
        if self.stream.read_line(&mut line).map_err(lost)? == 0 {
            return Err("the target closed the connection".into());
        }
        let line = line.trim_end();
        let number = || line[1..].parse::<i64>().map_err(|_| format!("the target answered {line:?}"));
        match line.as_bytes().first() {
            Some(b'-') => Ok(Some(line[1..].to_string())),
            Some(b'$') => {
                let len = number()?;
                if len >= 0 {
                    let mut skip = vec![0; len as usize + 2];
                    self.stream.read_exact(&mut skip).map_err(lost)?;
                }
                Ok(None)
            }
            Some(b'*') => {
                let mut failure = None;
                for _ in 0..number()?.max(0) {
                    failure = failure.or(self.read_reply()?);
                }
                Ok(failure)
            }
            _ => Ok(None),
        }
    }
}
