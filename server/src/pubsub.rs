//! Pub/sub: who listens to which channel, pattern or shard channel, and delivery.
//!
//! The registry is shared by every event loop. PUBLISH (from any loop, or a keyspace
//! notification) collects the receivers under the registry's lock, then hands each one its
//! message, encoded in the receiver's protocol (an array in RESP2, a push in RESP3), through
//! the mailbox of the loop that owns it. Patterns are Redis globs, matched with the
//! library's bounded matcher, so a hostile pattern costs at most pattern × channel steps.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use rediskv::key_slot;
use rediskv::server::args::Glob;
use rediskv::{Protocol, Reply};

use crate::client_info::ClientInfo;
use crate::mailbox::Loops;
use crate::mailbox::Message;
use crate::sync::lock;

/// The three namespaces of subscriptions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// SUBSCRIBE / PUBLISH.
    Channel,
    /// PSUBSCRIBE: globs over PUBLISH channels.
    Pattern,
    /// SSUBSCRIBE / SPUBLISH (in a non-cluster server, one shard holds them all).
    Shard,
}

impl Kind {
    fn index(self) -> usize {
        self as usize
    }
}

type Subscribers = BTreeMap<u64, Arc<ClientInfo>>;

/// Every subscription of every client.
#[derive(Default)]
pub struct PubSub {
    maps: Mutex<[HashMap<Bytes, Subscribers>; 3]>,
    /// Subscriptions of all kinds: PUBLISH skips the lock when nobody listens.
    total: AtomicUsize,
}

impl PubSub {
    /// Adds `client` to `name`; false when it was already there.
    pub fn subscribe(&self, kind: Kind, name: &Bytes, client: &Arc<ClientInfo>) -> bool {
        let mut maps = lock(&self.maps);
        let added =
            maps[kind.index()].entry(name.clone()).or_default().insert(client.id, client.clone()).is_none();
        if added {
            self.total.fetch_add(1, Relaxed);
        }
        added
    }

    /// Removes `client` from `name`; false when it was not there.
    pub fn unsubscribe(&self, kind: Kind, name: &[u8], client: u64) -> bool {
        let mut maps = lock(&self.maps);
        let map = &mut maps[kind.index()];
        let Some(subs) = map.get_mut(name) else { return false };
        let removed = subs.remove(&client).is_some();
        if subs.is_empty() {
            map.remove(name);
        }
        if removed {
            self.total.fetch_sub(1, Relaxed);
        }
        removed
    }

    /// PUBLISH / SPUBLISH: delivers `message` to every subscriber of `channel` (and, for
    /// PUBLISH, of every matching pattern); returns how many received it.
    pub fn publish(&self, loops: &Loops, channel: &[u8], message: &[u8], shard: bool) -> usize {
        if self.total.load(Relaxed) == 0 {
            return 0;
        }
        let mut deliveries: Vec<(Arc<ClientInfo>, Option<Bytes>)> = Vec::new();
        {
            let maps = lock(&self.maps);
            let kind = if shard { Kind::Shard } else { Kind::Channel };
            if let Some(subs) = maps[kind.index()].get(channel) {
                deliveries.extend(subs.values().map(|c| (c.clone(), None)));
            }
            if !shard {
                for (pattern, subs) in &maps[Kind::Pattern.index()] {
                    if Glob::new(pattern).matches(channel) {
                        deliveries.extend(subs.values().map(|c| (c.clone(), Some(pattern.clone()))));
                    }
                }
            }
        }
        let channel = Bytes::copy_from_slice(channel);
        let message = Bytes::copy_from_slice(message);
        for (client, pattern) in &deliveries {
            let mut items = Vec::with_capacity(4);
            items.push(Reply::bulk(match (pattern, shard) {
                (Some(_), _) => &b"pmessage"[..],
                (None, true) => b"smessage",
                (None, false) => b"message",
            }));
            if let Some(p) = pattern {
                items.push(Reply::Bulk(p.clone()));
            }
            items.push(Reply::Bulk(channel.clone()));
            items.push(Reply::Bulk(message.clone()));
            let mut bytes = Vec::new();
            Reply::Push(items).write(protocol(client), &mut bytes);
            loops.send(client.loop_index, Message::Deliver { token: client.token, client: client.id, bytes });
        }
        deliveries.len()
    }

    /// Drops every shard channel of a slot `serves` refuses, with its subscribers: what a
    /// node does when it no longer serves the slot, as Redis 7.0's `removeChannelsInSlot`.
    /// Each subscriber's loop is told which channels it lost (in slot order, then by name), so
    /// that it forgets them and gets Redis' `sunsubscribe` message for each.
    pub fn drop_shards(&self, loops: &Loops, serves: impl Fn(u16) -> bool) {
        if self.total.load(Relaxed) == 0 {
            return;
        }
        let mut lost: Vec<(u16, Bytes, Subscribers)> = Vec::new();
        {
            let mut maps = lock(&self.maps);
            let shards = &mut maps[Kind::Shard.index()];
            shards.retain(|channel, subs| {
                let slot = key_slot(channel);
                if serves(slot) {
                    return true;
                }
                self.total.fetch_sub(subs.len(), Relaxed);
                lost.push((slot, channel.clone(), std::mem::take(subs)));
                false
            });
        }
        lost.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut by_client: BTreeMap<u64, (Arc<ClientInfo>, Vec<Bytes>)> = BTreeMap::new();
        for (_, channel, subs) in lost {
            for (id, client) in subs {
                by_client.entry(id).or_insert_with(|| (client, Vec::new())).1.push(channel.clone());
            }
        }
        for (client, channels) in by_client.into_values() {
            loops.send(
                client.loop_index,
                Message::ShardsLost { token: client.token, client: client.id, channels },
            );
        }
    }

    /// PUBSUB CHANNELS / SHARDCHANNELS: the active channels matching `pattern` (all without).
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let glob = pattern.map(Glob::new);
        let maps = lock(&self.maps);
        maps[kind.index()].keys().filter(|c| glob.as_ref().is_none_or(|g| g.matches(c))).cloned().collect()
    }

    /// PUBSUB NUMSUB / SHARDNUMSUB: subscribers of one channel.
    pub fn count(&self, kind: Kind, channel: &[u8]) -> usize {
        lock(&self.maps)[kind.index()].get(channel).map_or(0, BTreeMap::len)
    }

    /// PUBSUB NUMPAT: distinct patterns subscribed to.
    pub fn patterns(&self) -> usize {
        lock(&self.maps)[Kind::Pattern.index()].len()
    }
}

/// The protocol a client reads.
pub fn protocol(client: &ClientInfo) -> Protocol {
    if client.resp.load(Relaxed) == 3 { Protocol::Resp3 } else { Protocol::Resp2 }
}

/// One client's subscriptions (for its replies' counts and for unsubscribing all).
#[derive(Debug, Default)]
pub struct Subscriptions {
    sets: [Vec<Bytes>; 3],
}

impl Subscriptions {
    /// Whether the client listens to anything (RESP2 subscribed mode).
    pub fn any(&self) -> bool {
        self.sets.iter().any(|s| !s.is_empty())
    }

    /// The count Redis puts in (P)SUBSCRIBE/(P)UNSUBSCRIBE replies: channels plus patterns;
    /// for shard commands, shard channels only.
    fn count(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => self.sets[Kind::Shard.index()].len() as i64,
            _ => (self.sets[0].len() + self.sets[1].len()) as i64,
        }
    }

    /// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE: one confirmation per name.
    pub fn subscribe(
        &mut self,
        pubsub: &PubSub,
        client: &Arc<ClientInfo>,
        kind: Kind,
        names: &[Bytes],
    ) -> Vec<Reply> {
        let mut replies = Vec::with_capacity(names.len());
        for name in names {
            if pubsub.subscribe(kind, name, client) {
                self.sets[kind.index()].push(name.clone());
            }
            replies.push(confirmation(kind, true, Some(name), self.count(kind)));
        }
        self.publish_counts(client);
        replies
    }

    /// UNSUBSCRIBE, PUNSUBSCRIBE, SUNSUBSCRIBE: the names given, or every one of the kind;
    /// with none at all, one confirmation with a nil name.
    pub fn unsubscribe(
        &mut self,
        pubsub: &PubSub,
        client: &Arc<ClientInfo>,
        kind: Kind,
        names: &[Bytes],
    ) -> Vec<Reply> {
        let names: Vec<Bytes> =
            if names.is_empty() { self.sets[kind.index()].clone() } else { names.to_vec() };
        let mut replies = Vec::with_capacity(names.len().max(1));
        for name in &names {
            pubsub.unsubscribe(kind, name, client.id);
            self.sets[kind.index()].retain(|n| n != name);
            replies.push(confirmation(kind, false, Some(name), self.count(kind)));
        }
        if names.is_empty() {
            replies.push(confirmation(kind, false, None, self.count(kind)));
        }
        self.publish_counts(client);
        replies
    }

    /// Forgets the shard channels of `lost` the client still had (the registry dropped them:
    /// [`PubSub::drop_shards`]), with a `sunsubscribe` message for each, as Redis.
    pub fn lose_shards(&mut self, client: &ClientInfo, lost: &[Bytes]) -> Vec<Reply> {
        let mut replies = Vec::new();
        for channel in lost {
            let shards = &mut self.sets[Kind::Shard.index()];
            if let Some(at) = shards.iter().position(|n| n == channel) {
                shards.remove(at);
                replies.push(confirmation(Kind::Shard, false, Some(channel), self.count(Kind::Shard)));
            }
        }
        self.publish_counts(client);
        replies
    }

    /// Leaves everything (the connection closes, or RESET).
    pub fn clear(&mut self, pubsub: &PubSub, client: &Arc<ClientInfo>) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in std::mem::take(&mut self.sets[kind.index()]) {
                pubsub.unsubscribe(kind, &name, client.id);
            }
        }
        self.publish_counts(client);
    }

    /// CLIENT LIST's `sub`, `psub` and `ssub`.
    fn publish_counts(&self, client: &ClientInfo) {
        for (i, count) in client.subscriptions.iter().enumerate() {
            count.store(self.sets[i].len(), Relaxed);
        }
    }
}

/// `[subscribe|unsubscribe|…, name, count]`, a push in RESP3.
fn confirmation(kind: Kind, on: bool, name: Option<&Bytes>, count: i64) -> Reply {
    let word: &[u8] = match (kind, on) {
        (Kind::Channel, true) => b"subscribe",
        (Kind::Channel, false) => b"unsubscribe",
        (Kind::Pattern, true) => b"psubscribe",
        (Kind::Pattern, false) => b"punsubscribe",
        (Kind::Shard, true) => b"ssubscribe",
        (Kind::Shard, false) => b"sunsubscribe",
    };
    Reply::Push(vec![
        Reply::bulk(word),
        name.map_or(Reply::Nil, |n| Reply::Bulk(n.clone())),
        Reply::Integer(count),
    ])
}

/// PUBSUB subcommands.
pub fn pubsub_command(argv: &[Bytes], pubsub: &PubSub) -> Reply {
    let sub = argv.get(1).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    let counts = |kind: Kind| {
        let mut items = Vec::new();
        for ch in &argv[2..] {
            items.push(Reply::Bulk(ch.clone()));
            items.push(Reply::Integer(pubsub.count(kind, ch) as i64));
        }
        Reply::Array(items)
    };
    let list = |kind: Kind| {
        Reply::Array(
            pubsub.channels(kind, argv.get(2).map(|p| &p[..])).into_iter().map(Reply::Bulk).collect(),
        )
    };
    match (sub.as_slice(), argv.len()) {
        (b"channels", 2 | 3) => list(Kind::Channel),
        (b"shardchannels", 2 | 3) => list(Kind::Shard),
        (b"numsub", _) => counts(Kind::Channel),
        (b"shardnumsub", _) => counts(Kind::Shard),
        (b"numpat", 2) => Reply::Integer(pubsub.patterns() as i64),
        (b"help", 2) => Reply::Array(HELP.iter().map(|l| Reply::status(l)).collect()),
        (b"channels" | b"shardchannels" | b"numpat" | b"help", _) => Reply::Error(format!(
            "ERR wrong number of arguments for 'pubsub|{}' command",
            String::from_utf8_lossy(&sub)
        )),
        _ => Reply::Error(format!(
            "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(argv.get(1).map_or(&[][..], |s| s))
        )),
    }
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];
