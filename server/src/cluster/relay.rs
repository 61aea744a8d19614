//! PUBLISH across the nodes of a cluster kept in etcd: the node a message is published on
//! delivers it to its own subscribers and relays it to every other registered node (the
//! membership's addresses, replicas included) over a RESP connection of its own to each, as
//! `CLUSTERX DELIVER channel message`; the receiving node delivers it to its subscribers
//! only. No gossip and no write to etcd: one more hop on an open connection per message.
//!
//! Each peer has a thread owning its connection and a queue: messages from one node reach
//! each peer in the order they were published. Delivery is at most once, as on Redis
//! Cluster's bus: a peer that cannot be reached (or whose connection breaks) loses the
//! messages queued meanwhile; the next message connects again.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::Node;
use crate::sync::lock;
use crate::tls::Dialed;

/// Messages queued for one peer at most; more are dropped (a peer that stalls).
const QUEUE_LIMIT: usize = 100_000;

/// The links to the other nodes, made on the first message for each.
#[derive(Default)]
pub struct Relay {
    peers: Mutex<HashMap<String, Peer>>,
    /// How links are made, read at each (re)connection.
    setup: Arc<Mutex<Setup>>,
}

/// How a link is made: the AUTH it sends (`masteruser`/`masterauth`) and, under
/// `tls-cluster yes`, the TLS client configuration (to the peer's TLS port).
#[derive(Default, Clone)]
pub struct Setup {
    /// `AUTH [user] password`, when set.
    pub auth: Option<Vec<String>>,
    /// TLS to the peers' TLS ports; `None`: plain TCP to their plaintext ports.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// One peer's queue (its thread ends when the queue is dropped).
struct Peer {
    node: Node,
    queue: Sender<(Bytes, Bytes)>,
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl Relay {
    /// Sets how the links are made from now on (links open now keep theirs until they break).
    pub fn set_setup(&self, setup: Setup) {
        *lock(&self.setup) = setup;
    }

    /// Queues `message` on `channel` for each of `nodes`; links to nodes no longer listed are
    /// closed.
    pub fn publish(&self, nodes: &[Node], channel: &[u8], message: &[u8]) {
        use std::sync::atomic::Ordering::Relaxed;
        let (channel, message) = (Bytes::copy_from_slice(channel), Bytes::copy_from_slice(message));
        let mut peers = lock(&self.peers);
        peers.retain(|id, peer| nodes.iter().any(|n| n.id == *id && *n == peer.node));
        for node in nodes {
            let peer = peers.entry(node.id.clone()).or_insert_with(|| self.link(node));
            if peer.queued.load(Relaxed) < QUEUE_LIMIT {
                peer.queued.fetch_add(1, Relaxed);
                let _ = peer.queue.send((channel.clone(), message.clone()));
            }
        }
    }

    fn link(&self, node: &Node) -> Peer {
        let (queue, messages) = channel();
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (to, count, setup) = (node.clone(), queued.clone(), self.setup.clone());
        let _ = std::thread::Builder::new()
            .name("pubsub-relay".into())
            .spawn(move || relay(&to, &setup, &messages, &count));
        Peer { node: node.clone(), queue, queued }
    }
}

/// A peer's thread: sends each batch of queued messages in one write and reads their
/// replies; a broken or refused connection drops the batch.
fn relay(
    to: &Node,
    setup: &Mutex<Setup>,
    messages: &Receiver<(Bytes, Bytes)>,
    queued: &std::sync::atomic::AtomicUsize,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut link: Option<BufReader<Dialed>> = None;
    let mut warned: Option<Instant> = None;
    while let Ok(first) = messages.recv() {
        let mut batch = vec![first];
        batch.extend(messages.try_iter().take(1024));
        queued.fetch_sub(batch.len(), Relaxed);
        if link.is_none() {
            let setup = lock(setup).clone();
            link = connect(to, &setup)
                .map_err(|e| {
                    if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                        crate::log::warning!("Cannot relay PUBLISH to {}:{}: {e}", to.host, to.port);
                        warned = Some(Instant::now());
                    }
                })
                .ok();
        }
        let Some(stream) = link.as_mut() else { continue };
        let mut bytes = Vec::new();
        for (channel, message) in &batch {
            crate::replication::encode(
                &mut bytes,
                [&b"CLUSTERX"[..], b"DELIVER", &channel[..], &message[..]],
            );
        }
        let mut refused = None;
        let sent = stream.get_mut().write_all(&bytes).is_ok()
            && (0..batch.len()).all(|_| match read_line(stream) {
                Some(line) => {
                    if line.starts_with('-') {
                        refused.get_or_insert(line);
                    }
                    true
                }
                None => false,
            });
        if !sent {
            link = None;
        }
        if let Some(error) = refused
            && warned.is_none_or(|at| at.elapsed() > Duration::from_secs(10))
        {
            // NOAUTH, NOPERM: the peer wants credentials (masteruser, masterauth).
            crate::log::warning!("{}:{} refused a relayed PUBLISH: {}", to.host, to.port, error.trim_end());
            warned = Some(Instant::now());
        }
    }
}

/// Dials `to` as `setup` says and authenticates.
fn connect(to: &Node, setup: &Setup) -> Result<BufReader<Dialed>, String> {
    let port = if setup.tls.is_some() { to.tls_port } else { to.port };
    if port == 0 {
        return Err(format!(
            "{} has no {} port",
            to.id,
            if setup.tls.is_some() { "TLS" } else { "plaintext" }
        ));
    }
    let dialed = Dialed::dial(&to.host, port, Duration::from_secs(2), setup.tls.clone())?;
    let _ = dialed.tcp().set_read_timeout(Some(Duration::from_secs(10)));
    let _ = dialed.tcp().set_nodelay(true);
    let mut stream = BufReader::new(dialed);
    if let Some(auth) = &setup.auth {
        let mut bytes = Vec::new();
        crate::replication::encode(&mut bytes, auth.iter().map(String::as_bytes));
        stream.get_mut().write_all(&bytes).map_err(|e| e.to_string())?;
        match read_line(&mut stream) {
            Some(line) if line.starts_with('+') => {}
            other => return Err(format!("AUTH answered {other:?}")),
        }
    }
    Ok(stream)
}

/// One reply line (the relay's replies are integers, errors or OK).
fn read_line(input: &mut BufReader<Dialed>) -> Option<String> {
    let mut line = String::new();
    (input.read_line(&mut line).ok()? > 0).then_some(line)
}
