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
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::Node;
use crate::sync::lock;

/// Messages queued for one peer at most; more are dropped (a peer that stalls).
const QUEUE_LIMIT: usize = 100_000;

/// The links to the other nodes, made on the first message for each.
#[derive(Default)]
pub struct Relay {
    peers: Mutex<HashMap<String, Peer>>,
    /// `masteruser` and `masterauth` the links authenticate with, when set.
    auth: Mutex<Option<(String, String)>>,
}

/// One peer's queue (its thread ends when the queue is dropped).
struct Peer {
    address: (String, u16),
    queue: Sender<(Bytes, Bytes)>,
    queued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Relay {
    /// Sets the credentials the links authenticate with (`None`: no AUTH).
    pub fn set_auth(&self, auth: Option<(String, String)>) {
        *lock(&self.auth) = auth;
    }

    /// Queues `message` on `channel` for each of `nodes`; links to nodes no longer listed are
    /// closed.
    pub fn publish(&self, nodes: &[Node], channel: &[u8], message: &[u8]) {
        use std::sync::atomic::Ordering::Relaxed;
        let (channel, message) = (Bytes::copy_from_slice(channel), Bytes::copy_from_slice(message));
        let mut peers = lock(&self.peers);
        peers
            .retain(|id, peer| nodes.iter().any(|n| n.id == *id && (n.host.clone(), n.port) == peer.address));
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
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let address = (node.host.clone(), node.port);
        let (to, count, auth) = (address.clone(), queued.clone(), lock(&self.auth).clone());
        let _ = std::thread::Builder::new()
            .name("pubsub-relay".into())
            .spawn(move || relay(&to, auth.as_ref(), &messages, &count));
        Peer { address, queue, queued }
    }
}

/// A peer's thread: sends each batch of queued messages in one write and reads their
/// replies; a broken or refused connection drops the batch.
fn relay(
    to: &(String, u16),
    auth: Option<&(String, String)>,
    messages: &Receiver<(Bytes, Bytes)>,
    queued: &std::sync::atomic::AtomicUsize,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let mut link: Option<(TcpStream, BufReader<TcpStream>)> = None;
    let mut warned: Option<Instant> = None;
    while let Ok(first) = messages.recv() {
        let mut batch = vec![first];
        batch.extend(messages.try_iter().take(1024));
        queued.fetch_sub(batch.len(), Relaxed);
        if link.is_none() {
            link = connect(to, auth)
                .map_err(|e| {
                    if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                        crate::log::warning!("Cannot relay PUBLISH to {}:{}: {e}", to.0, to.1);
                        warned = Some(Instant::now());
                    }
                })
                .ok();
        }
        let Some((out, input)) = link.as_mut() else { continue };
        let mut bytes = Vec::new();
        for (channel, message) in &batch {
            crate::replication::encode(
                &mut bytes,
                [&b"CLUSTERX"[..], b"DELIVER", &channel[..], &message[..]],
            );
        }
        let mut refused = None;
        let sent = out.write_all(&bytes).is_ok()
            && (0..batch.len()).all(|_| match read_line(input) {
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
            crate::log::warning!("{}:{} refused a relayed PUBLISH: {}", to.0, to.1, error.trim_end());
            warned = Some(Instant::now());
        }
    }
}

fn connect(
    to: &(String, u16),
    auth: Option<&(String, String)>,
) -> Result<(TcpStream, BufReader<TcpStream>), String> {
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(to.0.as_str(), to.1))
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let mut out = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    out.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let _ = out.set_nodelay(true);
    let mut input = BufReader::new(out.try_clone().map_err(|e| e.to_string())?);
    if let Some((user, password)) = auth {
        let mut argv = vec![&b"AUTH"[..]];
        if !user.is_empty() {
            argv.push(user.as_bytes());
        }
        argv.push(password.as_bytes());
        let mut bytes = Vec::new();
        crate::replication::encode(&mut bytes, argv);
        out.write_all(&bytes).map_err(|e| e.to_string())?;
        match read_line(&mut input) {
            Some(line) if line.starts_with('+') => {}
            other => return Err(format!("AUTH answered {other:?}")),
        }
    }
    Ok((out, input))
}

/// One reply line (the relay's replies are integers, errors or OK).
fn read_line(input: &mut BufReader<TcpStream>) -> Option<String> {
    let mut line = String::new();
    (input.read_line(&mut line).ok()? > 0).then_some(line)
}
