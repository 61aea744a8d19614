//! The server's own administration and introspection commands: TIME, LASTSAVE, SAVE, BGSAVE,
//! SHUTDOWN, FSCK, COMPACT, CONFIG, NAMESPACE, MODULE, LOLWUT, SLOWLOG, LATENCY, MEMORY's
//! server-wide subcommands, MONITOR, INFO, and the cluster commands. Their bodies that need
//! no client are in [`crate::admin`] and [`crate::info`].

use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::table::CommandInfo;

use super::{Client, Next, arity};
use crate::admin as ops;
use crate::info as report;
use crate::state::State;

fn done(reply: Reply) -> (Reply, Next) {
    (reply, Next::Continue)
}

pub(super) fn time(_: &mut Client, _: &'static CommandInfo, argv: &[Bytes], _: &State) -> (Reply, Next) {
    done(arity(argv, 1, crate::clock::time_reply))
}

pub(super) fn lastsave(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(arity(argv, 1, || Reply::Integer(state.rdb.last_save.load(Relaxed) as i64)))
}

pub(super) fn background_save(
    _: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(ops::background_save(info.container(), argv, state))
}

pub(super) fn save(_: &mut Client, _: &'static CommandInfo, argv: &[Bytes], state: &State) -> (Reply, Next) {
    done(arity(argv, 1, || match crate::rdb::save(state) {
        Ok(_) => Reply::OK,
        Err(e) => Reply::Error(format!("ERR {e}")),
    }))
}

/// SHUTDOWN: every write is in the store already; saves it as asked (SAVE, or the `save`
/// points of the memory store, unless NOSAVE), makes it durable, then stops. Redis answers
/// nothing when it goes down.
pub(super) fn shutdown(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    if let Some(refusal) = ops::shutdown_refusal(&argv[1..]) {
        return done(Reply::Error(refusal.into()));
    }
    let flag = |word: &[u8]| argv[1..].iter().any(|a| a.eq_ignore_ascii_case(word));
    let save = !flag(b"nosave") && (flag(b"save") || crate::rdb::saves_on_shutdown(state));
    let saved = if save { crate::rdb::save(state).map(|_| ()) } else { Ok(()) };
    if let Err(e) = saved.and_then(|()| state.store.sync()) {
        return done(Reply::Error(format!("ERR Errors trying to SHUTDOWN. Check logs. ({e})")));
    }
    crate::log::warning!("User requested shutdown...");
    crate::log::warning!("rediskv is now ready to exit, bye bye...");
    std::process::exit(0);
}

pub(super) fn fsck(_: &mut Client, _: &'static CommandInfo, argv: &[Bytes], state: &State) -> (Reply, Next) {
    done(arity(argv, 1, || ops::fsck(state)))
}

pub(super) fn compact(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(arity(argv, 1, || ops::compact(state)))
}

pub(super) fn lolwut(_: &mut Client, _: &'static CommandInfo, argv: &[Bytes], _: &State) -> (Reply, Next) {
    done(ops::lolwut(argv))
}

pub(super) fn module(_: &mut Client, _: &'static CommandInfo, argv: &[Bytes], _: &State) -> (Reply, Next) {
    done(ops::module(argv))
}

pub(super) fn namespace(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(ops::namespace(argv, state))
}

pub(super) fn config(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(ops::config(argv, state))
}

pub(super) fn slowlog(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(state.slowlog.command(argv))
}

pub(super) fn latency(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    let slower_than = state.config().number("slowlog-log-slower-than");
    done(state.latency.command(argv, &state.stats.commands, slower_than, crate::clock::unix_secs()))
}

/// MEMORY STATS, DOCTOR, MALLOC-STATS and PURGE describe the server; the engine answers the
/// rest (USAGE, HELP, errors).
pub(super) fn memory(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    let server_wide = argv.get(1).is_some_and(|s| {
        [&b"stats"[..], b"doctor", b"malloc-stats", b"purge"].iter().any(|n| s.eq_ignore_ascii_case(n))
    });
    if !server_wide {
        return c.run_in_engine(info, argv, state);
    }
    done(report::memory(argv, state, c.engine.layout().namespace()))
}

pub(super) fn monitor(
    c: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(arity(argv, 1, || {
        state.monitors.add(&c.info);
        Reply::OK
    }))
}

pub(super) fn info(c: &mut Client, _: &'static CommandInfo, argv: &[Bytes], state: &State) -> (Reply, Next) {
    done(report::info(argv, state, c.engine.layout().namespace()))
}

/// CLUSTER, ASKING, READONLY, READWRITE: the cluster's, or Redis' answer when
/// cluster-enabled is no.
pub(super) fn cluster(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    done(match state.cluster.get() {
        Some(cluster) if info.container() == "cluster" => cluster_subcommand(c, cluster, argv, state),
        Some(_) => {
            c.asking.set(info.container() == "asking");
            Reply::OK
        }
        None => Reply::Error("ERR This instance has cluster support disabled".into()),
    })
}

/// CLUSTER's subcommands: SETSLOT moves slots (over etcd), the others the topology's.
fn cluster_subcommand(c: &Client, cluster: &crate::cluster::Cluster, argv: &[Bytes], state: &State) -> Reply {
    #[cfg(feature = "etcd")]
    {
        use crate::cluster::setslot;
        if argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"setslot")) {
            return setslot::setslot(cluster, argv);
        }
        if let Some(refusal) = setslot::before_keys_in_slot(cluster, argv) {
            return refusal;
        }
    }
    let _ = state;
    let tls = c.info.tls.load(Relaxed);
    cluster.command(argv, tls, &|slot, count| crate::cluster::keys_in_slot(cluster, &c.engine, slot, count))
}

/// CLUSTERX MIGRATE: moves a slot with its data to another node (a cluster over a disk engine).
#[cfg(feature = "etcd")]
pub(super) fn clusterx(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    if argv.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"deliver")) {
        // A PUBLISH relayed by another node: for this node's subscribers only.
        return done(match (state.cluster.get(), argv) {
            (Some(_), [_, _, channel, message]) => {
                Reply::Integer(state.pubsub.publish(&state.loops, channel, message, false) as i64)
            }
            (Some(_), _) => {
                Reply::Error("ERR wrong number of arguments for 'clusterx|deliver' command".into())
            }
            (None, _) => Reply::Error("ERR This instance has cluster support disabled".into()),
        });
    }
    done(crate::slot_move::clusterx(argv, state))
}

#[cfg(not(feature = "etcd"))]
pub(super) fn clusterx(_: &mut Client, _: &'static CommandInfo, _: &[Bytes], _: &State) -> (Reply, Next) {
    done(Reply::Error("ERR CLUSTERX needs a build with the etcd feature".into()))
}

/// MIGRATE ([`crate::migrate`]).
pub(super) fn migrate(
    c: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    let request = match crate::migrate::parse(argv) {
        Ok(request) => request,
        Err(refusal) => return done(refusal),
    };
    let mut dumped = Vec::new();
    for key in &request.keys {
        let payload = match c.engine.execute(&mut c.session, &[Bytes::from_static(b"DUMP"), key.clone()]) {
            Reply::Bulk(payload) => payload,
            Reply::Error(e) => return done(Reply::Error(e)),
            _ => continue,
        };
        let ttl = match c.engine.execute(&mut c.session, &[Bytes::from_static(b"PTTL"), key.clone()]) {
            Reply::Integer(ms) if ms > 0 => ms,
            _ => 0,
        };
        dumped.push(crate::migrate::Dumped { key: key.clone(), payload, ttl });
    }
    if dumped.is_empty() {
        return done(Reply::Status("NOKEY".into()));
    }
    let cluster = state.cluster.get();
    if cluster.is_some_and(|cluster| cluster.shares_store() && cluster.serves_at(&request.host, request.port))
    {
        // The target reads this very store: the keys are there already.
        return done(Reply::OK);
    }
    let tls = (state.config().get("tls-cluster") == "yes").then(|| state.tls.client()).flatten();
    let (reply, moved) = match crate::migrate::send(&request, &dumped, cluster.is_some(), tls) {
        Ok(moved) => (Reply::OK, moved),
        Err(failed) => failed,
    };
    if !request.copy && !moved.is_empty() {
        let mut del = vec![Bytes::from_static(b"DEL")];
        del.extend(moved);
        if let Ok(info) = rediskv::server::table::find(&del) {
            let deleted = c.run_in_engine(info, &del, state).0;
            if deleted.is_error() {
                return done(deleted);
            }
        }
    }
    done(reply)
}
