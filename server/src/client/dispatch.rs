//! The one place a command's row leads to the server's code: [`handler`] maps the rows the
//! server answers itself to their handlers, as the library's `commands::dispatch` does for
//! the engine's; every other row runs in the engine ([`Client::run_in_engine`]).
//! [`script_handler`] maps those of them a script may run (`redis.call`) to their handlers
//! without a client.

use bytes::Bytes;
use rediskv::Reply;
use rediskv::server::table::CommandInfo;

use super::{Client, Next, flush, keyspace, replicas, scripts, server, subscribe};
use crate::scripting;
use crate::state::State;

/// A server command's handler: the client, the command's row, its whole argv (`argv[0]` is
/// the name) and the server; the reply and what the connection does next.
pub(super) type Handler = fn(&mut Client, &'static CommandInfo, &[Bytes], &State) -> (Reply, Next);

/// A server command's handler when a script runs it: the server, the command's row and its
/// whole argv, its arity, ACL and flags checked by the script's bridge; the reply.
pub(crate) type ScriptHandler = fn(&State, &'static CommandInfo, &[Bytes]) -> Reply;

/// The handler of `info`'s row when the server answers it, `None` when the engine does.
/// Some handlers give a command back to the engine in the cases the server leaves to it
/// (FLUSHALL of a tenant, MEMORY USAGE, PING outside subscribed mode, WAIT inside MULTI).
pub(super) fn handler(info: &CommandInfo) -> Option<Handler> {
    let run: Handler = match info.container() {
        "quit" => |_, _, _, _| (Reply::OK, Next::Close),
        "auth" => |c, _, argv, state| (c.auth(argv, state), Next::Continue),
        "hello" => |c, _, argv, state| (c.hello(argv, state), Next::Continue),
        "client" => |c, _, argv, state| c.client(argv, state),
        "acl" => |c, _, argv, state| (c.acl(argv, state), Next::Continue),
        "reset" => |c, _, argv, state| (c.reset(argv, state), Next::Continue),
        _ if scripting::runs_script(info) => Client::eval,
        "script" => scripts::script_command,
        "function" => scripts::function,
        "time" => server::time,
        "lastsave" => server::lastsave,
        "bgsave" | "bgrewriteaof" => server::background_save,
        "save" => server::save,
        "shutdown" => server::shutdown,
        "fsck" => server::fsck,
        "compact" => server::compact,
        "lolwut" => server::lolwut,
        "module" => server::module,
        "debug" => |c, _, argv, state| (c.debug(argv, state), Next::Continue),
        "namespace" => server::namespace,
        "config" => server::config,
        "slowlog" => server::slowlog,
        "latency" => server::latency,
        "memory" => server::memory,
        "monitor" => server::monitor,
        "info" => server::info,
        "cluster" | "asking" | "readonly" | "readwrite" => server::cluster,
        "clusterx" => server::clusterx,
        "migrate" => server::migrate,
        "role" => replicas::role,
        "psync" | "sync" => |c, info, argv, state| c.sync(info.name, argv, state),
        "replconf" => |c, _, argv, state| (c.replconf(argv, state), Next::Continue),
        "replicaof" | "slaveof" => replicas::replicaof,
        "failover" => replicas::failover,
        "wait" => replicas::wait,
        "subscribe" | "psubscribe" | "ssubscribe" | "unsubscribe" | "punsubscribe" | "sunsubscribe" => {
            subscribe::subscriptions
        }
        "publish" | "spublish" => subscribe::publish,
        "pubsub" => subscribe::pubsub,
        "ping" => subscribe::ping,
        "flushall" => flush::flushall,
        "dbsize" | "keys" | "scan" | "randomkey" | "flushdb" => keyspace::command,
        _ => return None,
    };
    Some(run)
}

/// The handler of `info`'s row when a script runs it and the server answers it ([`handler`]),
/// `None` for the server's commands scripts may not run. INFO from a script reports the
/// default namespace.
pub(crate) fn script_handler(info: &CommandInfo) -> Option<ScriptHandler> {
    let run: ScriptHandler = match info.container() {
        "time" => |_, _, _| crate::clock::time_reply(),
        "info" => |state, _, argv| crate::info::info(argv, state, state.engine.layout().namespace()),
        "publish" | "spublish" => subscribe::publish_from_script,
        _ => return None,
    };
    Some(run)
}
