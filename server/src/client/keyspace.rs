//! A cluster node's own keyspace over a store the nodes share (the etcd engine): DBSIZE,
//! KEYS, SCAN, RANDOMKEY, FLUSHDB and FLUSHALL see only the keys of the slots the node
//! serves ([`crate::cluster::Cluster::holds`]), as each Redis Cluster node holds only its
//! own slots' keys. Where the layout writes each key's slot (Kvrocks' cluster form), they
//! read only the node's slot ranges of the store
//! ([`rediskv::Session::set_key_slots`]). Elsewhere (or inside MULTI) they run in
//! the engine.

use bytes::Bytes;
use rediskv::Reply;
use rediskv::key_slot;
use rediskv::server::table::{self, CommandInfo};

use super::{Client, Next};
use crate::cluster::Cluster;
use crate::state::State;

/// RANDOMKEY's draws from the whole store before it picks among this node's keys.
const RANDOM_DRAWS: usize = 16;

/// DBSIZE, KEYS, SCAN, RANDOMKEY and FLUSHDB: this node's keys only, over a shared store.
pub(super) fn command(
    c: &mut Client,
    info: &'static CommandInfo,
    argv: &[Bytes],
    state: &State,
) -> (Reply, Next) {
    match state.cluster.get().filter(|cluster| cluster.shares_store()) {
        Some(cluster) if !c.session.in_multi() => {
            // Where the layout writes each key's slot, the engine reads only these slots'
            // ranges of the store; `held` still checks each key (a slot being given away).
            let topology = cluster.topology();
            let mine = topology.ranges.iter().filter(|r| r.2.id == cluster.myself.id);
            c.session.set_key_slots(Some(mine.map(|r| (r.0, r.1)).collect()));
            let reply = c.own_keyspace(cluster, info, argv, state);
            c.session.set_key_slots(None);
            (reply, Next::Continue)
        }
        _ => c.run_in_engine(info, argv, state),
    }
}

/// Keeps the keys in this node's keyspace.
fn held(cluster: &Cluster, keys: Vec<Reply>) -> Vec<Reply> {
    let topology = cluster.topology();
    keys.into_iter()
        .filter(|k| matches!(k, Reply::Bulk(key) if cluster.holds(&topology, key_slot(key))))
        .collect()
}

fn command_of(words: &[&'static [u8]]) -> Vec<Bytes> {
    words.iter().map(|w| Bytes::from_static(w)).collect()
}

impl Client {
    fn own_keyspace(
        &mut self,
        cluster: &Cluster,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> Reply {
        match info.container() {
            "keys" => match self.run_in_engine(info, argv, state).0 {
                Reply::Array(keys) => Reply::Array(held(cluster, keys)),
                other => other,
            },
            "scan" => match self.run_in_engine(info, argv, state).0 {
                Reply::Array(mut page) if page.len() == 2 => {
                    if let Reply::Array(keys) = page.pop().unwrap_or(Reply::Nil) {
                        page.push(Reply::Array(held(cluster, keys)));
                    }
                    Reply::Array(page)
                }
                other => other,
            },
            "dbsize" if argv.len() == 1 => {
                Reply::Integer(self.own_keys(cluster).map_or(0, |k| k.len()) as i64)
            }
            "randomkey" if argv.len() == 1 => {
                for _ in 0..RANDOM_DRAWS {
                    match self.run_in_engine(info, argv, state).0 {
                        Reply::Bulk(key) if cluster.holds(&cluster.topology(), key_slot(&key)) => {
                            return Reply::Bulk(key);
                        }
                        Reply::Bulk(_) => {}
                        other => return other,
                    }
                }
                // The store holds mostly other nodes' keys: pick among this node's.
                match self.own_keys(cluster) {
                    Ok(keys) if keys.is_empty() => Reply::Nil,
                    Ok(mut keys) => {
                        let at = crate::clock::unix_micros() as usize % keys.len();
                        keys.swap_remove(at)
                    }
                    Err(e) => e,
                }
            }
            "flushdb" | "flushall" if argv.len() <= 2 => self.flush_own_keys(cluster, info, argv, state),
            _ => self.run_in_engine(info, argv, state).0,
        }
    }

    /// Every key of this node's keyspace in database 0: one read of its slots' ranges of the
    /// store where the layout writes slots into its keys, else one walk of the store's keys.
    fn own_keys(&mut self, cluster: &Cluster) -> Result<Vec<Reply>, Reply> {
        match self.engine.execute(&mut self.session, &command_of(&[b"KEYS", b"*"])) {
            Reply::Array(keys) => Ok(held(cluster, keys)),
            other => Err(other),
        }
    }

    /// FLUSHDB and FLUSHALL over a shared store: deletes the keys of the slots this node
    /// serves, in one DEL fenced by the table it read them by (when the table moved
    /// meanwhile, it reads them again).
    fn flush_own_keys(
        &mut self,
        cluster: &Cluster,
        info: &'static CommandInfo,
        argv: &[Bytes],
        state: &State,
    ) -> Reply {
        if let Some(mode) = argv.get(1)
            && !(mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync"))
        {
            return self.run_in_engine(info, argv, state).0;
        }
        let Ok(del) = table::find(&command_of(&[b"DEL"])) else { return Reply::Error("ERR no DEL".into()) };
        for _ in 0..5 {
            let topology = cluster.topology();
            let keys = match self.own_keys(cluster) {
                Ok(keys) => keys,
                Err(e) => return e,
            };
            let mut argv = command_of(&[b"DEL"]);
            argv.extend(keys.into_iter().filter_map(|k| if let Reply::Bulk(k) = k { Some(k) } else { None }));
            let Some(first) = argv.get(1).map(|k| key_slot(k)) else { return Reply::OK };
            cluster.fence(&state.store, Some(first), topology.revision);
            let reply = self.run_in_engine(del, &argv, state).0;
            cluster.fence(&state.store, None, 0);
            if crate::cluster::fenced(&reply) {
                // The table moved: read it again and take this node's keys by it.
                cluster.after_fence(
                    &state.store,
                    first,
                    self.info.tls.load(std::sync::atomic::Ordering::Relaxed),
                );
                continue;
            }
            return if reply.is_error() { reply } else { Reply::OK };
        }
        Reply::Error("TRYAGAIN the slot table kept changing during the flush".into())
    }
}
