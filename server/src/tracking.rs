//! Client-side caching, as Redis 7.0's `CLIENT TRACKING`: the keys each tracking client read,
//! and the `invalidate` messages a write to them sends (RESP3 pushes, or over RESP2 a
//! `__redis__:invalidate` message to the client a tracking client redirects to).
//!
//! Two modes, as in Redis: by default the server remembers the keys a client's read-only
//! commands named, and a key's first write after that invalidates it once for each of
//! those clients; in BCAST mode a client names key prefixes and hears of every write to a
//! matching key. FLUSHDB and FLUSHALL invalidate everything (a null key list). Keys are
//! tracked per namespace. A server with no tracking client pays one atomic load per command.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rediskv::server::{Listeners, Listening};
use rediskv::{Protocol, Reply};

use crate::client_info::{ClientInfo, Peers, TrackingMode as Mode};
use crate::mailbox::Message;
use crate::sync::lock;

/// The server's tracking table.
#[derive(Default)]
pub struct Tracking {
    /// Clients with tracking on (0: nothing to do on any command).
    clients: AtomicUsize,
    /// Where the engines look for who needs their modified keys.
    listeners: Listeners,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// (namespace, key) → the clients that read it since its last invalidation.
    keys: HashMap<(Bytes, Bytes), BTreeSet<u64>>,
    /// Entries of `keys`, summed.
    items: usize,
    /// BCAST prefix → its clients.
    prefixes: BTreeMap<Bytes, BTreeSet<u64>>,
    /// While some client tracks: the engines record the keys commands modify.
    listening: Option<Listening>,
}

/// Where an invalidation goes: the writer's own connection (after its reply), or another
/// client's loop.
pub struct Delivery<'a> {
    /// The client that ran the command (`None`: the server itself, expiring keys).
    pub me: Option<&'a ClientInfo>,
    /// Bytes for `me` to append after its reply.
    pub own: &'a mut Vec<u8>,
}

const CHANNEL: &[u8] = b"__redis__:invalidate";

impl Tracking {
    /// An empty table; while a client tracks, it counts as one of `listeners`.
    pub fn new(listeners: Listeners) -> Self {
        Tracking { listeners, ..Tracking::default() }
    }

    /// Whether any client tracks keys.
    pub fn active(&self) -> bool {
        self.clients.load(Relaxed) > 0
    }

    /// `tracking_clients`, `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes` of INFO.
    pub fn counts(&self) -> [usize; 4] {
        let inner = lock(&self.inner);
        [self.clients.load(Relaxed), inner.keys.len(), inner.items, inner.prefixes.len()]
    }

    /// CLIENT TRACKING ON: `client` tracks in `mode` (replacing its previous options).
    pub fn enable(&self, client: &ClientInfo, mode: Mode) {
        let mut current = lock(&client.tracking);
        let mut inner = lock(&self.inner);
        if current.is_none() {
            // Before the client's next command takes its key locks: see `Listeners`.
            self.clients.fetch_add(1, Relaxed);
            inner.listening.get_or_insert_with(|| self.listeners.listen());
        }
        let mut prefixes = current.take().map(|m| m.prefixes).unwrap_or_default();
        if mode.bcast {
            let wanted = if mode.prefixes.is_empty() { vec![Bytes::new()] } else { mode.prefixes.clone() };
            for p in wanted {
                inner.prefixes.entry(p.clone()).or_default().insert(client.id);
                if !prefixes.contains(&p) {
                    prefixes.push(p);
                }
            }
            prefixes.sort();
        }
        *current = Some(Mode { prefixes, ..mode });
    }

    /// CLIENT TRACKING OFF, RESET, or the connection closed. Its remembered keys are dropped
    /// lazily, when they are next invalidated.
    pub fn disable(&self, client: &ClientInfo) {
        let Some(mode) = lock(&client.tracking).take() else { return };
        let mut inner = lock(&self.inner);
        // Under `inner`, as `enable` counts: the last one out stops the listening.
        if self.clients.fetch_sub(1, Relaxed) == 1 {
            inner.listening = None;
        }
        for p in &mode.prefixes {
            if let Some(ids) = inner.prefixes.get_mut(p) {
                ids.remove(&client.id);
                if ids.is_empty() {
                    inner.prefixes.remove(p);
                }
            }
        }
    }

    /// Remembers that `client` read `keys` of namespace `ns`; past `max_keys` keys in the
    /// table, the oldest-looking ones are invalidated to make room (as Redis'
    /// `tracking-table-max-keys`).
    pub fn remember(
        &self,
        peers: Peers<'_>,
        ns: &[u8],
        keys: &[Bytes],
        client: u64,
        max_keys: usize,
        to: &mut Delivery<'_>,
    ) {
        {
            let mut inner = lock(&self.inner);
            let ns = Bytes::copy_from_slice(ns);
            for key in keys {
                if inner.keys.entry((ns.clone(), key.clone())).or_default().insert(client) {
                    inner.items += 1;
                }
            }
        }
        self.limit(peers, max_keys, to);
    }

    /// Invalidates the oldest-looking keys until the table holds at most `max_keys` (0: no
    /// limit): after each remembered read, and when CONFIG SET lowers the limit.
    pub fn limit(&self, peers: Peers<'_>, max_keys: usize, to: &mut Delivery<'_>) {
        let mut evicted = Vec::new();
        {
            let mut inner = lock(&self.inner);
            while max_keys > 0 && inner.keys.len() > max_keys {
                let Some(victim) = inner.keys.keys().next().cloned() else { break };
                let ids = inner.keys.remove(&victim).unwrap_or_default();
                inner.items -= ids.len();
                evicted.push((victim.1, ids));
            }
        }
        for (key, ids) in evicted {
            self.send_each(peers, &key, &ids, None, to);
        }
    }

    /// Invalidates `keys` of namespace `ns`, written by the command `to.me` ran.
    pub fn invalidate(&self, peers: Peers<'_>, ns: &[u8], keys: &[Bytes], to: &mut Delivery<'_>) {
        let writer = to.me.map(|m| m.id);
        self.invalidate_by(peers, ns, keys, writer, to);
    }

    /// Invalidates `keys` the server itself changed (eviction): no client wrote them, so
    /// NOLOOP spares nobody, and `to.me`'s own invalidations go to `to.own` at once.
    pub fn invalidate_evicted(&self, peers: Peers<'_>, ns: &[u8], keys: &[Bytes], to: &mut Delivery<'_>) {
        self.invalidate_by(peers, ns, keys, None, to);
    }

    fn invalidate_by(
        &self,
        peers: Peers<'_>,
        ns: &[u8],
        keys: &[Bytes],
        writer: Option<u64>,
        to: &mut Delivery<'_>,
    ) {
        let (per_key, bcast) = {
            let mut inner = lock(&self.inner);
            let mut per_key = Vec::new();
            for key in keys {
                if let Some(ids) = inner.keys.remove(&(Bytes::copy_from_slice(ns), key.clone())) {
                    inner.items -= ids.len();
                    per_key.push((key.clone(), ids));
                }
            }
            // BCAST: per client and prefix, the written keys under that prefix.
            let mut bcast: BTreeMap<(u64, Bytes), Vec<Bytes>> = BTreeMap::new();
            for (prefix, ids) in &inner.prefixes {
                for key in keys.iter().filter(|k| k.starts_with(prefix)) {
                    for id in ids {
                        bcast.entry((*id, prefix.clone())).or_default().push(key.clone());
                    }
                }
            }
            (per_key, bcast)
        };
        for (key, ids) in per_key {
            self.send_each(peers, &key, &ids, writer, to);
        }
        for ((id, _), keys) in bcast {
            let Some(target) = find(peers, id) else { continue };
            let noloop = lock(&target.tracking).as_ref().is_some_and(|m| m.noloop);
            if noloop && Some(id) == writer {
                continue;
            }
            let keys = Reply::Array(keys.into_iter().map(Reply::Bulk).collect());
            send(peers, &target, keys, to);
        }
    }

    /// FLUSHDB / FLUSHALL: every tracking client hears that everything is invalid (a null
    /// key list), and the table is emptied.
    pub fn flush(&self, peers: Peers<'_>, to: &mut Delivery<'_>) {
        {
            let mut inner = lock(&self.inner);
            inner.keys.clear();
            inner.items = 0;
        }
        let clients: Vec<Arc<ClientInfo>> = lock(peers.clients).values().cloned().collect();
        for c in clients {
            if lock(&c.tracking).is_some() {
                send(peers, &c, Reply::Nil, to);
            }
        }
    }

    /// Sends one key's invalidation to each of `ids` still tracking in default mode,
    /// except the writer when it asked for NOLOOP.
    fn send_each(
        &self,
        peers: Peers<'_>,
        key: &Bytes,
        ids: &BTreeSet<u64>,
        writer: Option<u64>,
        to: &mut Delivery<'_>,
    ) {
        for &id in ids {
            let Some(target) = find(peers, id) else { continue };
            let default_mode = match lock(&target.tracking).as_ref() {
                Some(m) => !(m.bcast || (m.noloop && Some(id) == writer)),
                None => false,
            };
            if default_mode {
                send(peers, &target, Reply::Array(vec![Reply::Bulk(key.clone())]), to);
            }
        }
    }
}

/// The connected client `id`.
fn find(peers: Peers<'_>, id: u64) -> Option<Arc<ClientInfo>> {
    lock(peers.clients).get(&id).cloned()
}

/// Sends `keys` (an array of keys, or nil for everything) to where `client`'s invalidations
/// go: itself over RESP3, or its REDIRECT client (a RESP3 push, or over RESP2 a message on
/// `__redis__:invalidate` if it is subscribed). A redirect client that is gone marks the
/// redirection broken and, over RESP3, tells the tracking client.
fn send(peers: Peers<'_>, client: &Arc<ClientInfo>, keys: Reply, to: &mut Delivery<'_>) {
    let redirect = lock(&client.tracking).as_ref().map_or(0, |m| m.redirect);
    let mut target = client.clone();
    if redirect != 0 {
        match lock(peers.clients).get(&redirect).cloned() {
            Some(r) => target = r,
            None => {
                if let Some(m) = lock(&client.tracking).as_mut() {
                    m.broken_redirect = true;
                }
                if client.resp.load(Relaxed) == 3 {
                    let push = Reply::Push(vec![
                        Reply::bulk(b"tracking-redir-broken"),
                        Reply::Integer(redirect as i64),
                    ]);
                    deliver(peers, client, push, to);
                }
                return;
            }
        }
    }
    let subscribed = target.subscriptions.iter().any(|n| n.load(Relaxed) > 0);
    let message = if target.resp.load(Relaxed) == 3 {
        Reply::Push(vec![Reply::bulk(b"invalidate"), keys])
    } else if redirect != 0 && subscribed {
        Reply::Push(vec![Reply::bulk(b"message"), Reply::bulk(CHANNEL), keys])
    } else {
        return;
    };
    deliver(peers, &target, message, to);
}

fn deliver(peers: Peers<'_>, target: &ClientInfo, message: Reply, to: &mut Delivery<'_>) {
    let protocol = if target.resp.load(Relaxed) == 3 { Protocol::Resp3 } else { Protocol::Resp2 };
    if Some(target.id) == to.me.map(|m| m.id) {
        message.write(protocol, to.own);
        return;
    }
    let mut bytes = Vec::new();
    message.write(protocol, &mut bytes);
    peers.loops.send(target.loop_index, Message::Deliver { token: target.token, client: target.id, bytes });
}

/// `CLIENT TRACKING on|off [REDIRECT id] [BCAST] [PREFIX p]… [OPTIN] [OPTOUT] [NOLOOP]`, with
/// Redis' checks and errors.
pub fn client_tracking(args: &[Bytes], client: &ClientInfo, tracking: &Tracking, peers: Peers<'_>) -> Reply {
    let err = |s: &str| Reply::Error(format!("ERR {s}"));
    let mut mode = Mode::default();
    let mut i = 1;
    while i < args.len() {
        let more = i + 1 < args.len();
        match args[i].to_ascii_lowercase().as_slice() {
            b"redirect" if more => {
                i += 1;
                if mode.redirect != 0 {
                    return err("A client can only redirect to a single other client");
                }
                let Some(id) = rediskv::server::args::parse_i64(&args[i]) else {
                    return err("value is not an integer or out of range");
                };
                if id <= 0 || !lock(peers.clients).contains_key(&(id as u64)) {
                    return err("The client ID you want redirect to does not exist");
                }
                mode.redirect = id as u64;
            }
            b"bcast" => mode.bcast = true,
            b"optin" => mode.optin = true,
            b"optout" => mode.optout = true,
            b"noloop" => mode.noloop = true,
            b"prefix" if more => {
                i += 1;
                mode.prefixes.push(args[i].clone());
            }
            _ => return err("syntax error"),
        }
        i += 1;
    }
    match args[0].to_ascii_lowercase().as_slice() {
        b"on" => {
            if !mode.bcast && !mode.prefixes.is_empty() {
                return err("PREFIX option requires BCAST mode to be enabled");
            }
            let current = lock(&client.tracking).clone();
            if let Some(cur) = &current
                && cur.bcast != mode.bcast
            {
                return err(
                    "You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
                );
            }
            if mode.bcast && (mode.optin || mode.optout) {
                return err("OPTIN and OPTOUT are not compatible with BCAST");
            }
            if mode.optin && mode.optout {
                return err("You can't specify both OPTIN mode and OPTOUT mode");
            }
            if let Some(cur) = &current
                && ((mode.optin && cur.optout) || (mode.optout && cur.optin))
            {
                return err(
                    "You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
                );
            }
            if mode.bcast {
                let existing = current.map(|c| c.prefixes).unwrap_or_default();
                let overlap = |a: &[u8], b: &[u8]| a[..a.len().min(b.len())] == b[..a.len().min(b.len())];
                for (n, p) in mode.prefixes.iter().enumerate() {
                    if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
                        return err(&format!(
                            "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                            String::from_utf8_lossy(p),
                            String::from_utf8_lossy(e)
                        ));
                    }
                    if let Some(q) = mode.prefixes[n + 1..].iter().find(|q| overlap(p, q)) {
                        return err(&format!(
                            "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                            String::from_utf8_lossy(p),
                            String::from_utf8_lossy(q)
                        ));
                    }
                }
            }
            tracking.enable(client, mode);
        }
        b"off" => tracking.disable(client),
        _ => return err("syntax error"),
    }
    Reply::OK
}

/// CLIENT TRACKINGINFO's map.
pub fn tracking_info(client: &ClientInfo, caching: bool) -> Reply {
    let mode = lock(&client.tracking).clone();
    let mut flags = vec![Reply::bulk(if mode.is_some() { b"on".as_slice() } else { b"off" })];
    let m = mode.clone().unwrap_or_default();
    for (on, flag) in [
        (m.bcast, "bcast"),
        (m.optin, "optin"),
        (m.optin && caching, "caching-yes"),
        (m.optout, "optout"),
        (m.optout && caching, "caching-no"),
        (m.noloop, "noloop"),
        (m.broken_redirect, "broken_redirect"),
    ] {
        if on {
            flags.push(Reply::bulk(flag.as_bytes()));
        }
    }
    let redirect = mode.as_ref().map_or(-1, |m| m.redirect as i64);
    Reply::Map(vec![
        (Reply::bulk(b"flags"), Reply::Set(flags)),
        (Reply::bulk(b"redirect"), Reply::Integer(redirect)),
        (Reply::bulk(b"prefixes"), Reply::Array(m.prefixes.into_iter().map(Reply::Bulk).collect())),
    ])
}
