//! FAILOVER (Redis 7.0): a primary hands its role to a replica without losing a write. It
//! pauses writes, waits until a replica (the one named, or any) acknowledged the whole
//! stream, then becomes that replica's replica, asking `PSYNC <replid> <offset> FAILOVER`:
//! the replica, whose replication id is this server's, promotes itself and answers
//! `+CONTINUE`, and the writes resume. `FAILOVER ABORT`, a timeout (without `FORCE`), or a
//! target that refuses the PSYNC end it, this server a primary again.

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::args::parse_i64;

use crate::failover_plan::{Phase, Plan};
use crate::state::{Pause, State};
use crate::sync::lock;

/// `FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]`, with Redis 7.0's checks in its order.
pub fn command(argv: &[Bytes], state: &State) -> Reply {
    let err = |text: &str| Reply::Error(format!("ERR {text}"));
    if state.config().get("cluster-enabled") == "yes" {
        return err("FAILOVER not allowed in cluster mode. Use CLUSTER FAILOVER command instead.");
    }
    if argv.len() == 2 && argv[1].eq_ignore_ascii_case(b"abort") {
        if state.failover.phase() == Phase::None {
            return err("No failover in progress.");
        }
        abort(state, "Failover manually aborted");
        return Reply::OK;
    }
    let not_integer = || err("value is not an integer or out of range");
    let (mut timeout_ms, mut force, mut target) = (0i64, false, None);
    let mut j = 1;
    while j < argv.len() {
        let word = argv[j].to_ascii_lowercase();
        if word == b"timeout" && j + 1 < argv.len() && timeout_ms == 0 {
            let Some(ms) = parse_i64(&argv[j + 1]) else { return not_integer() };
            if ms <= 0 {
                return err("FAILOVER timeout must be greater than 0");
            }
            timeout_ms = ms;
            j += 2;
        } else if word == b"to" && j + 2 < argv.len() && target.is_none() {
            let Some(port) = parse_i64(&argv[j + 2]) else { return not_integer() };
            target = Some((String::from_utf8_lossy(&argv[j + 1]).into_owned(), port));
            j += 3;
        } else if word == b"force" && !force {
            force = true;
            j += 1;
        } else {
            return err("syntax error");
        }
    }
    if state.failover.phase() != Phase::None {
        return err("FAILOVER already in progress.");
    }
    if state.link.is_replica() {
        return err("FAILOVER is not valid when server is a replica.");
    }
    if !state.replication.has_replicas() {
        return err("FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return err("FAILOVER with force option requires both a timeout and target HOST and IP.");
    }
    let target = match target {
        Some((host, port)) => {
            let port = u16::try_from(port).ok().filter(|p| state.replication.has_replica(&host, *p));
            let Some(port) = port else { return err("FAILOVER target HOST and PORT is not a replica.") };
            crate::log::notice!("FAILOVER requested to {host}:{port}.");
            Some((host, port))
        }
        None => {
            crate::log::notice!("FAILOVER requested to any replica.");
            None
        }
    };
    *lock(&state.failover.plan) = Plan {
        phase: Phase::WaitForSync,
        target,
        deadline: (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms as u64)),
        force,
    };
    pause_writes(state, true);
    Reply::OK
}

/// The replication cron's step: once the target (or any replica) acknowledged the whole
/// stream, or at the deadline with FORCE, this server becomes the target's replica; at the
/// deadline without FORCE the failover ends.
pub fn cron(state: &State) {
    let mut plan = lock(&state.failover.plan);
    if plan.phase != Phase::WaitForSync {
        return;
    }
    let (_, offset) = state.replication.id_and_offset();
    if plan.deadline.is_some_and(|d| d <= Instant::now()) {
        if !plan.force {
            drop(plan);
            abort(state, "Replica never caught up before timeout");
            return;
        }
    } else {
        let caught_up = match &plan.target {
            Some((host, port)) => state.replication.acked_by(host, *port).is_some_and(|ack| ack == offset),
            None => match state.replication.replica_acked(offset) {
                Some(found) => {
                    plan.target = Some(found);
                    true
                }
                None => false,
            },
        };
        if !caught_up {
            return;
        }
    }
    let Some((host, port)) = plan.target.clone() else { return };
    plan.phase = Phase::InProgress;
    drop(plan);
    crate::log::notice!("Failover target {host}:{port} is synced, failing over.");
    crate::role::become_replica(state, &host, port);
}

/// The target answered the PSYNC: the failover is done, the writes resume.
pub fn finish(state: &State) {
    *lock(&state.failover.plan) = Plan::default();
    pause_writes(state, false);
}

/// Ends a failover under way (`why` logged): a server that was becoming a replica is a
/// primary again, and the writes resume.
pub fn abort(state: &State, why: &str) {
    let phase = state.failover.phase();
    if phase == Phase::None {
        return;
    }
    match &lock(&state.failover.plan).target {
        Some((host, port)) => crate::log::notice!("FAILOVER to {host}:{port} aborted: {why}"),
        None => crate::log::notice!("FAILOVER to any replica aborted: {why}"),
    }
    if phase == Phase::InProgress {
        crate::role::stop_replicating(state);
    }
    finish(state);
}

/// Pauses the writes of every client (as CLIENT PAUSE WRITE, until the failover ends), or
/// lets them go.
fn pause_writes(state: &State, on: bool) {
    *lock(&state.pause) =
        on.then(|| Pause { until: Instant::now() + Duration::from_secs(365 * 86400), writes_only: true });
    state.pause_active.store(on, Relaxed);
    state.hold_expiry();
    if !on {
        state.loops.kick();
    }
}
