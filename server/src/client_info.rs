//! What others may see of a connection: CLIENT LIST's facts, the flag CLIENT KILL sets, the
//! client's tracking options, and where its event loop delivers to it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;

use crate::counters::LaneSum;
use crate::mailbox::Loops;
use crate::sync::lock;

/// What others may see of a connection (CLIENT LIST) and the flag CLIENT KILL sets.
#[derive(Debug)]
pub struct ClientInfo {
    /// CLIENT ID.
    pub id: u64,
    /// The peer's `ip:port`.
    pub addr: String,
    /// The local `ip:port` the client connected to.
    pub laddr: String,
    /// The socket's file descriptor.
    pub fd: i64,
    /// When it connected.
    pub created: Instant,
    /// When it last ran a command, in unix µs. Atomics, not a lock: every command sets them.
    last_at: AtomicU64,
    /// Which command it last ran: its row in the command table (`usize::MAX`: none, or the
    /// name in `last_other`).
    last_cmd: AtomicUsize,
    /// The last command's name when the table has no row for it (rare: a mistyped name).
    last_other: Mutex<String>,
    /// CLIENT SETNAME.
    pub name: Mutex<Option<Bytes>>,
    /// The SELECTed database.
    pub db: AtomicUsize,
    /// Bytes waiting in its query buffer (set with [`ClientInfo::set_buffers`]).
    pub qbuf: AtomicUsize,
    /// The query buffer's room beyond them.
    pub qbuf_free: AtomicUsize,
    /// Bytes of replies not yet written (set with [`ClientInfo::set_buffers`]).
    pub omem: AtomicUsize,
    /// A replica waiting for its full sync's payload: the bytes of the stream held for it
    /// meanwhile (part of its output, as Redis counts it).
    pub held: AtomicUsize,
    /// The server's count of what the connections hold (`State::client_bytes`, shared by
    /// every entry; this entry adds in its loop's lane), this entry's buffers included:
    /// `maxmemory` reads it in O(1).
    buffered: Arc<LaneSum>,
    /// CLIENT NO-EVICT on.
    pub no_evict: AtomicBool,
    /// Connected to `tls-port` (set at accept): in a cluster with `tls-cluster yes` it is
    /// told the nodes' TLS ports.
    pub tls: AtomicBool,
    /// The RESP version it speaks (HELLO).
    pub resp: AtomicU8,
    /// A command of it waits for a CLIENT PAUSE to end (flag `b`, as Redis' postponed clients).
    pub blocked: AtomicBool,
    /// The Kvrocks namespace it authenticated into (`None`: the default one, admin).
    pub namespace: Mutex<Option<String>>,
    /// CLIENT KILL: close as soon as possible.
    pub killed: AtomicBool,
    /// A replica fed the replication stream (after its PSYNC or SYNC).
    pub replica: AtomicBool,
    /// The link to this server's primary (its commands are the replication stream).
    pub master: AtomicBool,
    /// The ACL user it is logged in as.
    pub user: Mutex<Vec<u8>>,
    /// CLIENT TRACKING's options, when on.
    pub tracking: Mutex<Option<TrackingMode>>,
    /// The event loop that owns the connection, and its token there (where messages go).
    pub loop_index: usize,
    /// See `loop_index`.
    pub token: usize,
    /// Channels, patterns and shard channels it subscribes to (CLIENT LIST sub/psub/ssub).
    pub subscriptions: [AtomicUsize; 3],
}

impl ClientInfo {
    /// A new client entry with the next id.
    pub fn new(
        id: u64,
        addr: String,
        laddr: String,
        fd: i64,
        loop_index: usize,
        token: usize,
        buffered: Arc<LaneSum>,
    ) -> ClientInfo {
        let now = Instant::now();
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created: now,
            last_at: AtomicU64::new(crate::clock::unix_micros()),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_other: Mutex::new("NULL".into()),
            name: Mutex::new(None),
            db: AtomicUsize::new(0),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            buffered,
            no_evict: AtomicBool::new(false),
            tls: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            resp: AtomicU8::new(2),
            namespace: Mutex::new(None),
            killed: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            master: AtomicBool::new(false),
            user: Mutex::new(b"default".to_vec()),
            tracking: Mutex::new(None),
            loop_index,
            token,
            subscriptions: Default::default(),
        }
    }

    /// Sets `qbuf` and `omem` (`None`: unchanged), keeping the sum of every client's. Only
    /// the event loop that owns the connection calls it (its reads and writes, its close).
    pub fn set_buffers(&self, qbuf: Option<usize>, omem: Option<usize>) {
        let mut delta = 0u64;
        for (counter, new) in [(&self.qbuf, qbuf), (&self.omem, omem)] {
            if let Some(new) = new {
                // One writer: a load and a store, no locked swap.
                delta = delta.wrapping_add((new as u64).wrapping_sub(counter.load(Relaxed) as u64));
                counter.store(new, Relaxed);
            }
        }
        if delta != 0 {
            self.buffered.add(self.loop_index, delta);
        }
    }

    /// Its output not yet written: replies, and the stream held for a replica.
    pub fn output_bytes(&self) -> usize {
        self.omem.load(Relaxed) + self.held.load(Relaxed)
    }

    /// Redis' warning for a client dropped for its output (`client-output-buffer-limit`).
    pub fn log_output_limit(&self) {
        crate::log::warning!(
            "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
            self.line()
        );
    }

    /// Seconds since its last command.
    pub fn idle(&self) -> u64 {
        crate::clock::unix_micros().saturating_sub(self.last_at.load(Relaxed)) / 1_000_000
    }

    /// Records that it runs (or ran until) `unix_us`, and, when `command` is given, which one.
    pub fn ran(&self, unix_us: u64, command: Option<&rediskv::server::table::CommandInfo>) {
        self.last_at.store(unix_us, Relaxed);
        if let Some(command) = command {
            match command.position() {
                Some(row) => self.last_cmd.store(row, Relaxed),
                None => {
                    self.last_cmd.store(usize::MAX, Relaxed);
                    command.name.clone_into(&mut lock(&self.last_other));
                }
            }
        }
    }

    /// The name of the command it last ran (`NULL` before any).
    fn last_command(&self) -> String {
        match rediskv::server::table::all().get(self.last_cmd.load(Relaxed)) {
            Some(info) => info.name.to_string(),
            None => lock(&self.last_other).clone(),
        }
    }

    /// One CLIENT LIST line (without the newline), fields as Redis 7.0 prints them.
    pub fn line(&self) -> String {
        let name = lock(&self.name).as_deref().map(String::from_utf8_lossy).unwrap_or_default().into_owned();
        let cmd = self.last_command();
        let [sub, psub, ssub] = self.subscriptions.each_ref().map(|n| n.load(Relaxed));
        let tracking = lock(&self.tracking).clone();
        let mut flags = String::new();
        for (on, flag) in [
            (self.replica.load(Relaxed), 'S'),
            (self.master.load(Relaxed), 'M'),
            (sub + psub + ssub > 0, 'P'),
            (self.blocked.load(Relaxed), 'b'),
            (tracking.is_some(), 't'),
            (tracking.as_ref().is_some_and(|m| m.broken_redirect), 'R'),
            (tracking.as_ref().is_some_and(|m| m.bcast), 'B'),
            (self.no_evict.load(Relaxed), 'e'),
        ] {
            if on {
                flags.push(flag);
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        let (qbuf, omem) = (self.qbuf.load(Relaxed), self.output_bytes());
        let qbuf_free = self.qbuf_free.load(Relaxed);
        format!(
            "id={} addr={} laddr={} fd={} name={name} age={} idle={} flags={flags} db={} sub={sub} psub={psub} ssub={ssub} \
             multi=-1 qbuf={qbuf} qbuf-free={qbuf_free} argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem={omem} \
             tot-mem={} events=r cmd={cmd} user={} redir={} resp={}",
            self.id,
            self.addr,
            self.laddr,
            self.fd,
            self.created.elapsed().as_secs(),
            self.idle(),
            self.db.load(Relaxed),
            qbuf + qbuf_free + omem,
            String::from_utf8_lossy(&lock(&self.user)),
            tracking.map_or(-1, |m| m.redirect as i64),
            self.resp.load(Relaxed),
        )
    }
}

/// One client's tracking options (CLIENT TRACKING ON …).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrackingMode {
    /// REDIRECT: the client that receives the invalidations (0: the client itself).
    pub redirect: u64,
    /// BCAST, with its prefixes (the empty prefix for all keys).
    pub bcast: bool,
    /// The BCAST prefixes.
    pub prefixes: Vec<Bytes>,
    /// OPTIN: only reads after CLIENT CACHING YES are tracked.
    pub optin: bool,
    /// OPTOUT: reads after CLIENT CACHING NO are not tracked.
    pub optout: bool,
    /// NOLOOP: no invalidation for the client's own writes.
    pub noloop: bool,
    /// The redirect client was gone when an invalidation was due.
    pub broken_redirect: bool,
}

/// Every connected client, by id (CLIENT LIST, CLIENT KILL, invalidation redirects).
pub type Clients = Mutex<BTreeMap<u64, Arc<ClientInfo>>>;

/// What a subsystem needs to reach other clients: who is connected, and the event loops
/// that deliver to them.
#[derive(Clone, Copy)]
pub struct Peers<'a> {
    /// The connected clients.
    pub clients: &'a Clients,
    /// Their event loops' inboxes.
    pub loops: &'a Loops,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_summed_across_clients() {
        let total = Arc::new(LaneSum::with_lanes(3));
        // Two clients of loop 0 and one of loop 1.
        let entry = |id, lane| ClientInfo::new(id, String::new(), String::new(), 0, lane, 0, total.clone());
        let (a, b, c) = (entry(1, 0), entry(2, 0), entry(3, 1));
        a.set_buffers(Some(100), Some(7));
        b.set_buffers(Some(50), None);
        c.set_buffers(Some(1000), None);
        assert_eq!(total.sum(), 1157);
        a.set_buffers(Some(10), None);
        b.set_buffers(None, Some(3));
        c.set_buffers(Some(0), None);
        assert_eq!(total.sum(), 70);
        a.set_buffers(Some(0), Some(0));
        assert_eq!((total.sum(), b.qbuf.load(Relaxed), b.omem.load(Relaxed)), (53, 50, 3));
    }
}
