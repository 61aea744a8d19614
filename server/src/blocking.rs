//! Clients parked by a blocking command (BLPOP, BLMOVE, BZPOPMIN, WAIT…) and their wake-ups.
//!
//! The library says a command would block (`Session::take_block`); the client's session then
//! moves here, with the command and the keys it waits on, and its connection reads nothing
//! more. After every command that touched keys, the thread that ran it serves the parked
//! clients waiting on those keys, in the order they blocked (Redis' order), by re-running
//! each one's command with `Engine::retry`: served, the answer and the session go back to the
//! client's event loop through its mailbox; blocked again, the client keeps its place. What
//! a served command touches (BLMOVE's destination) wakes further clients.
//!
//! # No lost wake-up
//! Parking re-runs the command once under the registry's lock. A writer looks for waiters
//! under the same lock after its batch is in the store, so either the writer's push
//! happened before that re-run (which sees it), or the writer finds the client registered.
//! The lock is always taken before any key lock (a retry takes key locks inside it; no
//! command holds a key lock while it waits for the registry), so the order cannot deadlock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use bytes::Bytes;
use rediskv::server::{Listeners, Listening};
use rediskv::{Reply, Session};

use crate::client_info::ClientInfo;
use crate::mailbox::{Loops, Message};
use crate::pubsub::protocol;
use crate::store::SharedEngine;
use crate::sync::lock;

/// Which key of which database of which namespace.
type WaitKey = (Vec<u8>, usize, Bytes);

/// A parked client.
pub struct Parked {
    /// Who, and where its connection lives.
    pub info: Arc<ClientInfo>,
    /// The engine of its namespace.
    pub engine: Arc<SharedEngine>,
    /// Its session, until it is served.
    pub session: Session,
    /// The command that blocked.
    pub argv: Vec<Bytes>,
    /// What it waits on.
    keys: Vec<WaitKey>,
    /// Its answer if the deadline passes first.
    timeout_reply: Reply,
    /// Counted among the engines' listeners while parked.
    _listening: Listening,
}

#[derive(Default)]
struct Registry {
    waiting: HashMap<WaitKey, VecDeque<u64>>,
    parked: HashMap<u64, Parked>,
}

/// Every parked client.
#[derive(Default)]
pub struct Blocked {
    registry: Mutex<Registry>,
    /// How many are parked, or being parked: writers skip the lock when nobody waits.
    count: AtomicUsize,
    /// Where the engines look for who needs their modified keys.
    listeners: Listeners,
}

/// What the server does around the commands the registry re-runs: implemented by the
/// server's shared state, so the registry needs none of it.
pub trait Host {
    /// After a re-run: publishes the keyspace events of `session`'s last command.
    fn retried(&self, session: &Session);
    /// A parked client was served with `reply` after `usec` µs of running: the slow log,
    /// INFO's counters, client tracking's invalidations, then its answer and its session
    /// back to its event loop.
    fn served(&self, parked: Parked, reply: Reply, usec: u64);
    /// Runs a parked command `argv` again through `run`, unless this node may not run it
    /// now (a cluster node whose slot moved): then answers why (to the ports of a client
    /// connected over TLS or not, `tls`).
    fn rerun(&self, argv: &[Bytes], tls: bool, run: &mut dyn FnMut() -> Reply) -> Reply;
}

/// What became of a command that would block.
pub enum Parking {
    /// Served at once (a write landed between its first run and its parking).
    Served(Box<Session>, Reply),
    /// Parked until this deadline (`None`: forever).
    Parked(Option<Instant>),
}

impl Blocked {
    /// No parked clients; each one parked counts as one of `listeners` while it waits.
    pub fn new(listeners: Listeners) -> Self {
        Blocked { listeners, ..Blocked::default() }
    }

    /// Parks a client whose command would block on `block`.
    pub fn park(
        &self,
        host: &impl Host,
        info: &Arc<ClientInfo>,
        engine: &Arc<SharedEngine>,
        mut session: Session,
        argv: Vec<Bytes>,
        block: rediskv::server::Block,
    ) -> Parking {
        let argv = block.retry_argv().map_or(argv, <[Bytes]>::to_vec);
        let mut registry = lock(&self.registry);
        // Counted before the re-run takes its key locks: a writer after it records its keys
        // and looks for waiters (see the module docs).
        let listening = self.listeners.listen();
        self.count.store(registry.parked.len() + 1, Relaxed);
        // The re-run that closes the race with a writer (see the module docs).
        let reply = engine.retry(&mut session, &argv);
        host.retried(&session);
        let Some(again) = session.take_block() else {
            self.count.store(registry.parked.len(), Relaxed);
            drop(registry);
            self.wake(host, engine, &session);
            return Parking::Served(Box::new(session), reply);
        };
        let ns = engine.layout().namespace().to_vec();
        let keys: Vec<WaitKey> = block.keys.iter().map(|k| (ns.clone(), block.db, k.clone())).collect();
        for key in &keys {
            registry.waiting.entry(key.clone()).or_default().push_back(info.id);
        }
        let timeout_reply = again.timeout_reply();
        registry.parked.insert(
            info.id,
            Parked {
                info: info.clone(),
                engine: engine.clone(),
                session,
                argv,
                keys,
                timeout_reply,
                _listening: listening,
            },
        );
        self.count.store(registry.parked.len(), Relaxed);
        Parking::Parked(block.timeout.map(|t| Instant::now() + t))
    }

    /// Takes a client out (its deadline passed, it disconnected, CLIENT UNBLOCK): its session
    /// and timeout answer, `None` if it was not parked (already served).
    pub fn cancel(&self, client: u64) -> Option<(Session, Reply)> {
        let mut registry = lock(&self.registry);
        let parked = remove(&mut registry, client)?;
        self.count.store(registry.parked.len(), Relaxed);
        Some((parked.session, parked.timeout_reply))
    }

    /// Whether any client is parked.
    pub fn any(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    /// Serves the clients waiting on what `session`'s last command touched (run it after
    /// every command, on the engine it ran on).
    pub fn wake(&self, host: &impl Host, engine: &SharedEngine, session: &Session) {
        let swapped = session.swapped_dbs();
        if self.count.load(Relaxed) == 0 || (session.touched().is_empty() && swapped.is_empty()) {
            return;
        }
        let ns = engine.layout().namespace().to_vec();
        let ready: VecDeque<WaitKey> = ready_keys(engine, &ns, session);
        let registry = lock(&self.registry);
        self.serve(host, registry, ready, |n, db| {
            n == ns.as_slice() && swapped.iter().any(|(a, b)| *a == db || *b == db)
        });
    }

    /// Retries every client parked in database `db` (`None`: every database) of `engine`'s
    /// namespace, after FLUSHDB or FLUSHALL: an XREADGROUP whose stream is gone answers an
    /// error, as in Redis; the others stay parked.
    pub fn wake_flushed(&self, host: &impl Host, engine: &SharedEngine, db: Option<usize>) {
        if self.count.load(Relaxed) > 0 {
            let ns = engine.layout().namespace().to_vec();
            let flushed = |n: &[u8], d: usize| n == ns.as_slice() && db.is_none_or(|db| db == d);
            self.serve(host, lock(&self.registry), VecDeque::new(), flushed);
        }
    }

    /// Serves the clients waiting on key `key` of database `db` of `engine`'s namespace,
    /// which another server node wrote (the store's change feed).
    #[cfg(feature = "etcd")]
    pub fn wake_key(&self, host: &impl Host, engine: &SharedEngine, db: usize, key: Bytes) {
        if self.count.load(Relaxed) == 0 {
            return;
        }
        let ready = VecDeque::from([(engine.layout().namespace().to_vec(), db, key)]);
        self.serve(host, lock(&self.registry), ready, |_, _| false);
    }

    /// Retries every parked client (after FLUSHALL of every namespace, or a gap in the etcd
    /// change feed, when other nodes' writes may have gone unheard): a client whose keys are
    /// still empty stays parked.
    pub fn wake_all(&self, host: &impl Host) {
        if self.count.load(Relaxed) > 0 {
            self.serve(host, lock(&self.registry), VecDeque::new(), |_, _| true);
        }
    }

    /// Serves the waiters of `ready` keys, and of every key of a database `swapped` names
    /// (SWAPDB: all of them may be servable now), in blocking order, then of what the
    /// served commands touched.
    fn serve(
        &self,
        host: &impl Host,
        mut registry: std::sync::MutexGuard<'_, Registry>,
        mut ready: VecDeque<WaitKey>,
        swapped: impl Fn(&[u8], usize) -> bool,
    ) {
        ready.extend(registry.waiting.keys().filter(|(n, db, _)| swapped(n, *db)).cloned());
        while let Some(key) = ready.pop_front() {
            let mut index = 0;
            while let Some(&client) = registry.waiting.get(&key).and_then(|q| q.get(index)) {
                let Some(parked) = registry.parked.get_mut(&client) else { break };
                let started = Instant::now();
                let tls = parked.info.tls.load(Relaxed);
                let reply = host
                    .rerun(&parked.argv, tls, &mut || parked.engine.retry(&mut parked.session, &parked.argv));
                let usec = started.elapsed().as_micros() as u64;
                host.retried(&parked.session);
                if parked.session.take_block().is_some() {
                    // Still blocked (the key holds another type, or was emptied by an
                    // earlier waiter): the next waiter may still be servable.
                    index += 1;
                    continue;
                }
                let Some(parked) = remove(&mut registry, client) else { break };
                ready.extend(ready_keys(&parked.engine, parked.engine.layout().namespace(), &parked.session));
                host.served(parked, reply, usec);
            }
        }
        self.count.store(registry.parked.len(), Relaxed);
    }
}

/// The wait keys `session`'s last command touched.
fn ready_keys(engine: &SharedEngine, ns: &[u8], session: &Session) -> VecDeque<WaitKey> {
    session
        .touched()
        .iter()
        .filter_map(|t| engine.touched_key(t))
        .map(|(db, key)| (ns.to_vec(), db, key))
        .collect()
}

/// Unregisters a parked client everywhere.
fn remove(registry: &mut Registry, client: u64) -> Option<Parked> {
    let parked = registry.parked.remove(&client)?;
    for key in &parked.keys {
        if let Some(queue) = registry.waiting.get_mut(key) {
            queue.retain(|c| *c != client);
            if queue.is_empty() {
                registry.waiting.remove(key);
            }
        }
    }
    Some(parked)
}

/// Sends a served (or timed out, or unblocked) client its answer, the pushes that follow it,
/// and its session.
pub fn send_answer(loops: &Loops, info: &ClientInfo, session: Session, reply: &Reply, pushes: &[u8]) {
    let mut bytes = Vec::new();
    reply.write(protocol(info), &mut bytes);
    bytes.extend_from_slice(pushes);
    loops.send(
        info.loop_index,
        Message::Resume { token: info.token, client: info.id, session: Box::new(session), bytes },
    );
}
