//! The pub/sub commands: (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, (S)PUBLISH, PUBSUB, and PING in
//! RESP2 subscribed mode (see [`crate::pubsub`]).

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::table::CommandInfo;

use super::{Client, Next, arity};
use crate::pubsub::{Kind, pubsub_command};
use crate::state::State;

/// (P|S)SUBSCRIBE and (P|S)UNSUBSCRIBE: one confirmation per name, all but the first kept
/// in `more`.
pub(super) fn subscriptions(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    let name = info.container();
    let kind = match name {
        "psubscribe" | "punsubscribe" => Kind::Pattern,
        "ssubscribe" | "sunsubscribe" => Kind::Shard,
        _ => Kind::Channel,
    };
    let on = !name.contains("unsub");
    if on && argv.len() < 2 {
        return (Reply::Error(format!("ERR wrong number of arguments for '{name}' command")), Next::Continue);
    }
    let mut replies = if on {
        c.subs.subscribe(&state.pubsub, &c.info, kind, &argv[1..])
    } else {
        c.subs.unsubscribe(&state.pubsub, &c.info, kind, &argv[1..])
    };
    let first = replies.remove(0);
    c.more = replies;
    (first, Next::Continue)
}

/// PUBLISH and SPUBLISH: delivered here, and propagated to the replicas; in a cluster kept
/// in etcd PUBLISH goes to every other node instead (replicas included), as Redis Cluster's
/// bus. The reply counts this node's receivers.
pub(super) fn publish(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    let reply = arity(argv, 3, || {
        let (receivers, relayed) = deliver(info, argv, state);
        if !relayed {
            state.replication.propagate_command(c.session.db(), argv);
        }
        receivers
    });
    (reply, Next::Continue)
}

/// PUBLISH and SPUBLISH from a script: delivered as a client's, not propagated on their own.
pub(crate) fn publish_from_script(state: &State, info: &'static CommandInfo, argv: &[Bytes]) -> Reply {
    deliver(info, argv, state).0
}

/// Delivers `argv`'s message here, and in a cluster kept in etcd a PUBLISH to the other
/// nodes: the reply counting this node's receivers, and whether it was relayed.
fn deliver(info: &CommandInfo, argv: &[Bytes], state: &State) -> (Reply, bool) {
    let shard = info.container() == "spublish";
    let relayed =
        !shard && state.cluster.get().is_some_and(|cluster| cluster.relay_publish(&argv[1], &argv[2]));
    (Reply::Integer(state.pubsub.publish(&state.loops, &argv[1], &argv[2], shard) as i64), relayed)
}

pub(super) fn pubsub(
    _: &mut Client,
    _: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    (pubsub_command(argv, &state.pubsub), Next::Continue)
}

/// PING: in RESP2 subscribed mode a two-element array; otherwise the engine answers.
pub(super) fn ping(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    if c.subs.any() && c.session.resp() == 2 && argv.len() <= 2 {
        let reply =
            Reply::Array(vec![Reply::bulk(b"pong"), Reply::Bulk(argv.get(1).cloned().unwrap_or_default())]);
        return (reply, Next::Continue);
    }
    c.run_in_engine(info, argv, state)
}

impl Client {
    /// Shard channels this client listened to left the node with their slot
    /// ([`crate::pubsub::PubSub::drop_shards`]): answers the RESP of Redis' `sunsubscribe`
    /// message for each it still had.
    pub fn lose_shards(&mut self, channels: &[Bytes]) -> Vec<u8> {
        let mut out = Vec::new();
        let protocol = crate::pubsub::protocol(&self.info);
        for reply in self.subs.lose_shards(&self.info, channels) {
            reply.write(protocol, &mut out);
        }
        out
    }
}
