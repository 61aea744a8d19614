//! How other threads reach an event loop: its inbox of [`Message`]s, and the inboxes of
//! every loop ([`Loops`]).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use mio::Waker;

use crate::sync::lock;

/// What another thread asks of an event loop.
pub enum Message {
    /// A new connection to serve: over TLS with that configuration when it came to
    /// `tls-port`.
    Accept(std::net::TcpStream, SocketAddr, Option<Arc<rustls::ServerConfig>>),
    /// Bytes to append to a client's output: a pub/sub message.
    Deliver {
        /// The connection's token in that loop.
        token: usize,
        /// The client id, so a message for a closed connection whose token was reused is
        /// dropped.
        client: u64,
        /// RESP bytes.
        bytes: Vec<u8>,
    },
    /// A replica's full sync payload: appended to its output like [`Message::Deliver`]'s
    /// bytes, but not counted in `client-output-buffer-limit` nor in `omem` (Redis sends
    /// the RDB file outside the replica's output buffer).
    Payload {
        /// The connection's token in that loop.
        token: usize,
        /// The client id (a reused token's new client is not the addressee).
        client: u64,
        /// The `$len` line and the RDB file.
        bytes: Vec<u8>,
    },
    /// A parked client's answer, with its session back.
    Resume {
        /// The connection's token in that loop.
        token: usize,
        /// The client id (a reused token's new client is not the addressee).
        client: u64,
        /// The session the blocked command ran with.
        session: Box<rediskv::Session>,
        /// The answer, RESP bytes.
        bytes: Vec<u8>,
    },
    /// Shard channels a client was subscribed to whose slot left the node: it forgets them
    /// and is sent a `sunsubscribe` message for each.
    ShardsLost {
        /// The connection's token in that loop.
        token: usize,
        /// The client id (a reused token's new client is not the addressee).
        client: u64,
        /// The channels, in the order of the messages.
        channels: Vec<bytes::Bytes>,
    },
    /// Look at every connection now (CLIENT KILL, CLIENT UNPAUSE).
    Kick,
    /// The store's writer thread persisted the loop's rounds up to this one
    /// ([`crate::store::Store::persist_async`]).
    Persisted(u64),
}

/// An event loop's inbox.
pub struct Mailbox {
    queue: Mutex<Vec<Message>>,
    waker: Waker,
}

impl Mailbox {
    /// An empty inbox whose loop `waker` wakes.
    pub fn new(waker: Waker) -> Mailbox {
        Mailbox { queue: Mutex::new(Vec::new()), waker }
    }

    /// The messages queued so far, oldest first; the queue is left empty.
    pub fn take(&self) -> Vec<Message> {
        std::mem::take(&mut *lock(&self.queue))
    }

    /// Queues `message` and wakes the loop (once per batch of messages).
    pub fn send(&self, message: Message) {
        let mut queue = lock(&self.queue);
        let was_empty = queue.is_empty();
        queue.push(message);
        drop(queue);
        if was_empty {
            let _ = self.waker.wake();
        }
    }
}

/// Every event loop's inbox, by loop index (set once, when the loops start).
#[derive(Default)]
pub struct Loops(OnceLock<Vec<Arc<Mailbox>>>);

impl Loops {
    /// Records the loops' inboxes (once; later calls change nothing).
    pub fn set(&self, mailboxes: Vec<Arc<Mailbox>>) {
        let _ = self.0.set(mailboxes);
    }

    /// Event loop `index`'s inbox (`None` before the loops start).
    pub fn mailbox(&self, index: usize) -> Option<Arc<Mailbox>> {
        self.0.get()?.get(index).cloned()
    }

    /// How many event loops run (0 before they start).
    pub fn len(&self) -> usize {
        self.0.get().map_or(0, Vec::len)
    }

    /// Sends `message` to event loop `index` (ignored before the loops start).
    pub fn send(&self, index: usize, message: Message) {
        if let Some(mailbox) = self.0.get().and_then(|l| l.get(index)) {
            mailbox.send(message);
        }
    }

    /// Asks every event loop to look at its connections now (CLIENT KILL, end of a pause).
    pub fn kick(&self) {
        for mailbox in self.0.get().into_iter().flatten() {
            mailbox.send(Message::Kick);
        }
    }
}
