//! A replica's commands to this server (PSYNC, SYNC, REPLCONF), WAIT, which waits for the
//! replicas' acknowledgements (see [`crate::replication`]), ROLE, REPLICAOF and FAILOVER.

use bytes::Bytes;
use rediskv::server::args::parse_i64;
use rediskv::server::table::CommandInfo;
use std::sync::Arc;

use rediskv::RdbReplication;
use rediskv::Reply;

use super::{Client, Next, ReplyMode};
use crate::client_info::ClientInfo;
use crate::mailbox::Message;
use crate::rdb;
use crate::replication::{ReplicaHello, Satisfied};
use crate::role::{become_replica, stop_replicating};
use crate::state::State;

pub(super) fn role(_: &mut Client, _: &'static CommandInfo, _: &[Bytes], state: &State) -> (Reply, Next) {
    let reply = if state.link.is_replica() {
        state.link.role(state.replication.id_and_offset().1)
    } else {
        state.replication.role()
    };
    (reply, Next::Continue)
}

/// FAILOVER: hands the primary's role to a replica ([`crate::failover`]).
pub(super) fn failover(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    (crate::failover::command(argv, state), Next::Continue)
}

/// WAIT outside MULTI waits for the replicas; inside, the engine queues it.
pub(super) fn wait(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    if c.session.in_multi() {
        return c.run_in_engine(info, argv, state);
    }
    c.wait(info, argv, state)
}

impl Client {
    /// PSYNC replid offset, or SYNC: a partial sync from the backlog when it holds the
    /// offset, else a full sync (`+FULLRESYNC replid offset` and an RDB payload of the
    /// store at that offset); then the stream.
    pub(super) fn sync(&mut self, name: &str, argv: &[Bytes], state: &State) -> (Reply, Next) {
        // `PSYNC <replid> <offset> FAILOVER`: the primary hands this replica its role.
        if name == "psync" && argv.get(3).is_some_and(|a| a.eq_ignore_ascii_case(b"failover")) {
            crate::log::warning!(
                "Failover request received for replid {}.",
                String::from_utf8_lossy(&argv[1])
            );
            if !state.link.is_replica() {
                return (
                    Reply::Error("ERR PSYNC FAILOVER can't be sent to a master.".into()),
                    Next::Continue,
                );
            }
            if argv[1] != state.replication.id_and_offset().0.as_bytes() {
                return (
                    Reply::Error("ERR PSYNC FAILOVER replid must match my replid.".into()),
                    Next::Continue,
                );
            }
            stop_replicating(state);
            crate::log::notice!("MASTER MODE enabled (failover request from {})", self.info.addr);
        }
        if state.failover.phase() != crate::failover_plan::Phase::None {
            return (Reply::Error("NOMASTERLINK Can't SYNC while failing over".into()), Next::Continue);
        }
        if state.link.is_replica() && !state.link.is_up() {
            return (
                Reply::Error("NOMASTERLINK Can't SYNC while not connected with my master".into()),
                Next::Continue,
            );
        }
        let Some(mailbox) = state.loops.mailbox(self.info.loop_index) else {
            return (Reply::Error("ERR no event loop to serve a replica from".into()), Next::Continue);
        };
        let hello = self.replica_hello.clone();
        if name == "psync" {
            let offset = parse_i64(&argv[2]).filter(|o| *o >= 0).map(|o| o as u64);
            let partial = offset.and_then(|offset| {
                state.replication.try_partial_sync(&argv[1], offset, &self.info, mailbox.clone(), &hello)
            });
            if let Some((line, bytes)) = partial {
                crate::log::notice!(
                    "Partial resync of replica {} from offset {}",
                    self.info.addr,
                    offset.unwrap_or(0)
                );
                self.pushes.extend_from_slice(&bytes);
                return (Reply::Status(line.into()), Next::Continue);
            }
        }
        let (replid, offset) = match start_full_sync(state, &self.info, mailbox, &hello) {
            Ok(at) => at,
            Err(e) => {
                state.replication.remove(self.info.id);
                return (Reply::Error(format!("ERR cannot take a snapshot: {e}")), Next::Continue);
            }
        };
        if name == "sync" {
            // SYNC answers with the payload alone.
            self.reply = ReplyMode::Skip;
            return (Reply::OK, Next::Continue);
        }
        (Reply::Status(format!("FULLRESYNC {replid} {offset}").into()), Next::Continue)
    }

    /// REPLCONF option value…: what a replica says of itself, and its ACKs (answered with
    /// nothing, as Redis).
    pub(super) fn replconf(&mut self, argv: &[Bytes], state: &State) -> Reply {
        if argv.len().is_multiple_of(2) {
            return Reply::Error("ERR syntax error".into());
        }
        for pair in argv[1..].chunks(2) {
            let value = String::from_utf8_lossy(&pair[1]);
            match pair[0].to_ascii_lowercase().as_slice() {
                b"listening-port" => match value.parse::<u16>() {
                    Ok(port) => self.replica_hello.port = port,
                    Err(_) => return Reply::Error("ERR value is not an integer or out of range".into()),
                },
                b"ip-address" => self.replica_hello.ip = Some(value.into_owned()),
                b"capa" => self.replica_hello.psync2 |= value.eq_ignore_ascii_case("psync2"),
                b"ack" | b"getack" => {
                    if pair[0].eq_ignore_ascii_case(b"ack")
                        && self.info.replica.load(std::sync::atomic::Ordering::Relaxed)
                        && let Ok(offset) = value.parse::<u64>()
                    {
                        resume_waiters(state, state.replication.ack(self.info.id, offset));
                    }
                    self.reply = ReplyMode::Skip;
                    return Reply::OK;
                }
                b"rdb-only" | b"rdb-filter-only" => {}
                _ => {
                    return Reply::Error(format!(
                        "ERR Unrecognized REPLCONF option: {}",
                        String::from_utf8_lossy(&pair[0])
                    ));
                }
            }
        }
        Reply::OK
    }

    /// WAIT numreplicas timeout: the number of replicas that acknowledged this client's
    /// writes (the stream up to now), once `numreplicas` did or at the timeout.
    pub(super) fn wait(
        &mut self,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> (Reply, Next) {
        if state.link.is_replica() {
            return (
                Reply::Error("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.".into()),
                Next::Continue,
            );
        }
        // The engine checks the arguments and gives the deadline.
        let reply = self.engine.execute_row(&mut self.session, info, argv);
        let block = self.session.take_block();
        if reply.is_error() {
            return (reply, Next::Continue);
        }
        let wanted = parse_i64(&argv[1]).unwrap_or(0).max(0) as usize;
        let (count, offset) = state.replication.acked_now();
        // Without replicas too it waits out its timeout, as Redis.
        let Some(block) = block.filter(|_| count < wanted) else {
            return (Reply::Integer(count as i64), Next::Continue);
        };
        let parked = self.park(argv, block, state);
        state.replication.add_waiter(self.info.clone(), offset, wanted);
        // An ACK between the count and the registration: look again.
        resume_waiters(state, state.replication.ack(0, 0));
        parked
    }
}

/// A full sync for replica `info`: registers it at the stream's offset at the instant of the
/// store's snapshot (no commit, nor its propagation, between the two: [`rdb::snapshot_at`]),
/// then writes the snapshot as an RDB file with the replication fields on a thread of its
/// own, as Redis' BGSAVE: the replica gets a newline every second meanwhile (which it skips),
/// then the file, then the stream since the snapshot. Returns the replication id and the
/// offset.
fn start_full_sync(
    state: &State,
    info: &Arc<ClientInfo>,
    mailbox: Arc<crate::mailbox::Mailbox>,
    hello: &ReplicaHello,
) -> Result<(String, u64), String> {
    let (mut snapshot, (replid, offset)) =
        rdb::snapshot_at(state, || state.replication.start_full_sync(info, mailbox, hello))?;
    snapshot.replication = Some(RdbReplication { stream_db: 0, id: replid.clone(), offset });
    let replication = state.replication.clone();
    let (client, addr) = (info.id, info.addr.clone());
    let write = move || {
        let (done, wait) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut rdb = Vec::new();
                let written = rdb::write_rdb(&snapshot, &mut rdb).map(|_| rdb);
                let _ = done.send(written);
            });
            let written = loop {
                match wait.recv_timeout(std::time::Duration::from_secs(1)) {
                    Ok(written) => break written,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        replication.keep_alive(client);
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        break Err("the payload's writer stopped".to_string());
                    }
                }
            };
            match written {
                Ok(rdb) => {
                    crate::log::notice!(
                        "Full resync of replica {addr}: {} bytes of RDB at offset {offset}",
                        rdb.len()
                    );
                    let mut payload = format!("${}\r\n", rdb.len()).into_bytes();
                    payload.extend_from_slice(&rdb);
                    replication.send_payload(client, payload);
                }
                Err(e) => {
                    crate::log::warning!("Full resync of replica {addr} failed: {e}");
                    replication.fail_full_sync(client);
                }
            }
        });
    };
    std::thread::Builder::new().name("full-sync".into()).spawn(write).map_err(|e| e.to_string())?;
    Ok((replid, offset))
}

/// REPLICAOF host port | NO ONE (and SLAVEOF).
pub(super) fn replicaof(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    (follow(argv, state), Next::Continue)
}

fn follow(argv: &[Bytes], state: &State) -> Reply {
    if state.failover.phase() != crate::failover_plan::Phase::None {
        return Reply::Error("ERR REPLICAOF not allowed while failing over.".into());
    }
    if argv[1].eq_ignore_ascii_case(b"no") && argv[2].eq_ignore_ascii_case(b"one") {
        stop_replicating(state);
        return Reply::OK;
    }
    let port = match std::str::from_utf8(&argv[2]).ok().and_then(|p| p.parse::<i64>().ok()) {
        Some(port) if (0..=65535).contains(&port) => port as u16,
        _ => return Reply::Error("ERR Invalid master port".into()),
    };
    let host = String::from_utf8_lossy(&argv[1]).into_owned();
    if state.link.is_replica() {
        let info = state.link.info();
        if info.host.eq_ignore_ascii_case(&host) && info.port == port {
            return Reply::Status("OK Already connected to specified master".into());
        }
    }
    become_replica(state, &host, port);
    Reply::OK
}

/// Answers the WAITs the replicas' acknowledgements satisfied.
fn resume_waiters(state: &State, satisfied: Vec<Satisfied>) {
    for Satisfied { client, count } in satisfied {
        if let Some((session, _)) = state.blocked.cancel(client.id) {
            let mut bytes = Vec::new();
            Reply::Integer(count as i64).write(crate::pubsub::protocol(&client), &mut bytes);
            let session = Box::new(session);
            state.loops.send(
                client.loop_index,
                Message::Resume { token: client.token, client: client.id, session, bytes },
            );
        }
    }
}
